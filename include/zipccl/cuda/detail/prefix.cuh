// zipccl: the flat chunk numbering of a batch of tensors. One block scans the tensors' chunk
// counts (cub::BlockScan, a tile of Threads tensors at a time) into prefix[0 .. count]; a
// kernel that walks the flat numbering finds a chunk's tensor by binary search.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace zipccl::cuda::detail {

inline constexpr int prefix_threads = 256;

// prefix[i] = sum of chunks(j) for j < i, for i = 0 .. count. ChunksOf: a device functor
// std::uint64_t(std::uint32_t tensor). Launch one block of prefix_threads threads.
template <class ChunksOf>
__global__ void __launch_bounds__(prefix_threads)
    prefix_kernel(ChunksOf chunks_of, std::uint32_t count, std::uint64_t* prefix) {
  using block_scan = cub::BlockScan<std::uint64_t, prefix_threads>;
  __shared__ typename block_scan::TempStorage tmp;
  std::uint64_t carry = 0;
  for (std::uint64_t base = 0; base < count; base += prefix_threads) {
    const std::uint64_t i = base + threadIdx.x;
    const std::uint64_t mine = i < count ? chunks_of(static_cast<std::uint32_t>(i)) : 0;
    std::uint64_t before = 0, tile = 0;
    block_scan(tmp).ExclusiveSum(mine, before, tile);
    if (i < count) prefix[i] = carry + before;
    carry += tile;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  if (threadIdx.x == 0) prefix[count] = carry;
}

// The last tensor i with prefix[i] <= g (so empty tensors are skipped); g < prefix[count].
__device__ __forceinline__ std::uint32_t owner_of(const std::uint64_t* prefix, std::uint32_t count, std::uint64_t g) {
  std::uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (prefix[mid] <= g) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace zipccl::cuda::detail
