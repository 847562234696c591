// zipccl: loads and stores of one run (8 consecutive elements) at whatever alignment the caller's
// buffers allow: one or two 16-byte vectors when aligned, narrower accesses otherwise.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../element.hpp"
#include "../../format/bytes.hpp"

namespace zipccl::cuda::detail {

// The block-wide scans and reductions the chunk collectives share, and the shared memory they
// take in turns (never both at once).
template <int Threads>
struct block_ops {
  using scan = cub::BlockScan<std::uint32_t, Threads>;
  using reduce = cub::BlockReduce<std::uint64_t, Threads>;
  union storage {
    typename scan::TempStorage scan_storage;
    typename reduce::TempStorage reduce_storage;
  };
};

__device__ __forceinline__ bool aligned_to(const void* p, std::uintptr_t a) {
  return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}

// Loads the first `valid` (0..8) elements of a run at p; the others become 0.
template <class E>
__device__ __forceinline__ void load_run(const std::uint8_t* p, unsigned valid, typename E::bits_type (&v)[8]) {
  using bits = typename E::bits_type;
  if (valid == 8 && aligned_to(p, 16)) {
    if constexpr (sizeof(bits) == 2) {
      const uint4 q = *reinterpret_cast<const uint4*>(p);
      const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = static_cast<bits>(w[i] & 0xFFFFu);
        v[2 * i + 1] = static_cast<bits>(w[i] >> 16);
      }
    } else {
      const uint4 a = *reinterpret_cast<const uint4*>(p);
      const uint4 b = *reinterpret_cast<const uint4*>(p + 16);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    return;
  }
#pragma unroll
  for (unsigned i = 0; i < 8; ++i) v[i] = i < valid ? format::load_le<bits>(p + i * sizeof(bits)) : bits(0);
}

// Stores the first `valid` elements of a run at p.
template <class E>
__device__ __forceinline__ void store_run(std::uint8_t* p, unsigned valid, const typename E::bits_type (&v)[8]) {
  using bits = typename E::bits_type;
  if (valid == 8 && aligned_to(p, 16)) {
    if constexpr (sizeof(bits) == 2) {
      uint4 q;
      q.x = v[0] | (std::uint32_t(v[1]) << 16);
      q.y = v[2] | (std::uint32_t(v[3]) << 16);
      q.z = v[4] | (std::uint32_t(v[5]) << 16);
      q.w = v[6] | (std::uint32_t(v[7]) << 16);
      *reinterpret_cast<uint4*>(p) = q;
    } else {
      *reinterpret_cast<uint4*>(p) = make_uint4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<uint4*>(p + 16) = make_uint4(v[4], v[5], v[6], v[7]);
    }
    return;
  }
#pragma unroll
  for (unsigned i = 0; i < 8; ++i)
    if (i < valid) format::store_le<bits>(p + i * sizeof(bits), v[i]);
}

// Stores the first n (0..8) bytes of the little-endian word w at p, as wide as p's alignment allows.
__device__ __forceinline__ void store_bytes(std::uint8_t* p, std::uint64_t w, unsigned n) {
  if (n == 8 && aligned_to(p, 8)) {
    *reinterpret_cast<unsigned long long*>(p) = w;
  } else if (n == 8 && aligned_to(p, 4)) {
    reinterpret_cast<std::uint32_t*>(p)[0] = static_cast<std::uint32_t>(w);
    reinterpret_cast<std::uint32_t*>(p)[1] = static_cast<std::uint32_t>(w >> 32);
  } else {
    for (unsigned i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(w >> (8 * i));
  }
}

// Loads n (0..8) bytes at p as a little-endian word (missing bytes are 0).
__device__ __forceinline__ std::uint64_t load_bytes(const std::uint8_t* p, unsigned n) {
  if (n == 8 && aligned_to(p, 8)) return *reinterpret_cast<const unsigned long long*>(p);
  if (n == 8 && aligned_to(p, 4))
    return reinterpret_cast<const std::uint32_t*>(p)[0] |
           (std::uint64_t(reinterpret_cast<const std::uint32_t*>(p)[1]) << 32);
  std::uint64_t w = 0;
  for (unsigned i = 0; i < n; ++i) w |= std::uint64_t(p[i]) << (8 * i);
  return w;
}

}  // namespace zipccl::cuda::detail
