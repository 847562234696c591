// zipccl: decoupled look-back over chunk sizes, so that every block learns where its chunk starts
// in the compacted output without a second pass or a host round trip.
//
// Each chunk has one 64-bit status word: the top two bits say invalid (0), aggregate (1: this
// chunk's own size) or inclusive (2: the size of all chunks up to and including it); the low 62
// bits hold the value. A block publishes its aggregate, walks back over its predecessors adding
// aggregates until it meets an inclusive prefix, then publishes its own inclusive prefix. Blocks
// are assigned chunks in launch order (blockIdx.x), as CUB's single-pass scans do.
#pragma once

#include <cuda/atomic>

#include <cstdint>

namespace zipccl::cuda::detail {

struct chunk_lookback {
  unsigned long long* words;  // one per chunk, zeroed before the launch (cudaMemsetAsync)

  static constexpr unsigned long long flag_aggregate = 1ull << 62;
  static constexpr unsigned long long flag_inclusive = 2ull << 62;
  static constexpr unsigned long long value_mask = (1ull << 62) - 1;

  __device__ void publish(std::uint64_t c, unsigned long long word) const {
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> a(words[c]);
    a.store(word, ::cuda::memory_order_release);
  }

  // Called by one thread of the block coding chunk c; returns the sum of the sizes of chunks 0..c-1.
  __device__ std::uint64_t exclusive_prefix(std::uint64_t c, std::uint64_t size) const {
    if (c == 0) {
      publish(0, flag_inclusive | size);
      return 0;
    }
    publish(c, flag_aggregate | size);
    std::uint64_t prefix = 0;
    for (std::uint64_t p = c; p-- > 0;) {
      ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> a(words[p]);
      unsigned long long w;
      while (((w = a.load(::cuda::memory_order_acquire)) >> 62) == 0) {
        __nanosleep(32);
      }
      prefix += w & value_mask;
      if ((w >> 62) == 2) break;
    }
    publish(c, flag_inclusive | (prefix + size));
    return prefix;
  }
};

}  // namespace zipccl::cuda::detail
