// zipccl: decoupled look-back over chunk sizes, so that every block learns where its chunk starts
// in the compacted output without a second pass or a host round trip.
//
// Each chunk has one 64-bit status word: the top two bits say invalid (0), aggregate (1: this
// chunk's own size) or inclusive (2: the size of all chunks up to and including it); the low 62
// bits hold the value. A block publishes its aggregate, then one warp looks back over a window of
// 32 predecessors at a time (one load per lane, as CUB's TilePrefixCallbackOp does): once every
// lane's word is valid, the nearest inclusive prefix in the window ends the walk, otherwise the
// window's 32 aggregates are added and the window moves back. The block then publishes its own
// inclusive prefix. Blocks are assigned chunks in launch order (blockIdx.x), as CUB's
// single-pass scans are.
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

  // Called by all 32 lanes of one warp of the block coding chunk c; returns, in every lane, the
  // sum of the sizes of chunks 0 .. c-1.
  __device__ std::uint64_t exclusive_prefix(std::uint64_t c, std::uint64_t size) const {
    constexpr unsigned all = 0xFFFFFFFFu;
    const unsigned lane = threadIdx.x & 31u;
    if (c == 0) {
      if (lane == 0) publish(0, flag_inclusive | size);
      return 0;
    }
    if (lane == 0) publish(c, flag_aggregate | size);
    std::uint64_t prefix = 0;
    std::uint64_t end = c;  // the window is chunks end-32 .. end-1; lane k reads chunk end-1-k
    for (;;) {
      const bool real = end >= lane + 1;
      unsigned long long w = flag_inclusive;  // before chunk 0: an inclusive zero
      for (;;) {
        if (real) {
          ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> a(words[end - 1 - lane]);
          w = a.load(::cuda::memory_order_acquire);
        }
        if (!__any_sync(all, (w >> 62) == 0)) break;
        __nanosleep(32);
      }
      const unsigned inclusive = __ballot_sync(all, (w >> 62) == 2);
      const unsigned stop = inclusive ? static_cast<unsigned>(__ffs(inclusive)) - 1 : 31u;  // nearest inclusive
      std::uint64_t v = lane <= stop ? (w & value_mask) : 0;
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(all, v, d);
      prefix += v;
      if (inclusive) break;
      end -= 32;
    }
    if (lane == 0) publish(c, flag_inclusive | (prefix + size));
    return prefix;
  }
};

}  // namespace zipccl::cuda::detail
