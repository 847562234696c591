// zipccl: compile-time tuning of the device codec.
//
// A tuning is a type; the kernels are instantiated for it, so tuning experiments are a matter of
// naming another type:
//
//   using t = zipccl::cuda::tuning<512, 32>;   // 512 threads, 32 elements each: 16,384-element chunks
//   zipccl::cuda::compress<codec, t>(...);
//
// Each thread handles `items_per_thread` elements as runs of 8 consecutive elements (one 16-byte
// vector for bf16 and fp16, two for fp32); a block codes one chunk of threads * items_per_thread
// elements. The chunk size is written into the stream, so a stream from any tuning decodes with
// any other tuning and on the host.
#pragma once

#include <cstdint>

#include "../format/stream.hpp"

namespace zipccl::cuda {

inline constexpr int vector_elems = 8;  // elements per run (16 bytes of bf16 / fp16)

// RansWarps (cuda::decompress only): 0, the default, has cuda::block_decode decode rANS chunks,
// one decoding warp in a block of Threads per chunk (rANS only where block_decode_takes_rans
// holds; unsupported_mode elsewhere). Above 0, a second kernel decodes them, one chunk per warp in
// blocks of RansWarps warps (detail/warp_rans.cuh), for any Threads and type. That decoder has
// been compiled for sm_80 and sm_90 but has not yet run on a GPU: it becomes the default once
// scripts/gpu-check.sh has tested and measured it.
template <int Threads = 256, int ItemsPerThread = 32, int RansWarps = 0>
struct tuning {
  static_assert(Threads % 32 == 0 && Threads >= 64 && Threads <= 1024,
                "tuning: Threads must be a multiple of 32 between 64 and 1024");
  static_assert(ItemsPerThread % vector_elems == 0 && ItemsPerThread >= 8 && ItemsPerThread <= 64,
                "tuning: ItemsPerThread must be a multiple of 8 between 8 and 64");
  static_assert(RansWarps >= 0 && RansWarps <= 8,
                "tuning: RansWarps must be between 0 and 8 (each warp takes 5 KiB of static shared memory)");
  static constexpr int threads = Threads;
  static constexpr int rans_warps = RansWarps;
  static constexpr int items_per_thread = ItemsPerThread;
  static constexpr int runs_per_thread = ItemsPerThread / vector_elems;
  static constexpr std::uint32_t chunk_elems = static_cast<std::uint32_t>(Threads) * ItemsPerThread;
  static_assert(format::valid_chunk_elems(chunk_elems), "tuning: the chunk must be a valid stream chunk size");
};

// The default: 256 threads x 32 elements = 8,192-element chunks (16 KiB of bf16 per block). It has
// not yet been tuned on hardware; docs/design.md ("Kernel resources") says what the kernels use.
using default_tuning = tuning<256, 32>;

}  // namespace zipccl::cuda
