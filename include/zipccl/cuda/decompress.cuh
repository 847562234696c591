// zipccl: stream-ordered decompression on the GPU, for streams from either executor.
//
//   std::size_t temp_bytes = 0;
//   zipccl::cuda::decompress<zipccl::bf16>(nullptr, temp_bytes, in, in_bytes, out, cap, status_dev, stream);
//   ... allocate temp_bytes ...
//   zipccl::cuda::decompress<zipccl::bf16>(temp, temp_bytes, in, in_bytes, out, cap, status_dev, stream);
//
// The input is untrusted. The call's outcome is written to *status_dev (device memory) on the
// stream: success, or the error host::decompress_as<E> reports for the same bytes (truncated,
// corrupt, checksum_mismatch, type_mismatch, buffer_too_small, ...: the same checks in the same
// order, and of the chunks the lowest failing one); no access leaves the given buffers. The
// host-side return value reports only argument and launch errors (cuda::last_error() has the
// CUDA error behind a status::cuda_error; after a cuda_error return, *status_dev and the count
// mean nothing: a launch that failed may leave the earlier ones enqueued). Three or four launches
// (validate, [prefix,] decode, and with Tuning::rans_warps > 0 the rANS chunks, one per warp),
// nothing allocated, nothing synchronised: graph capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../element.hpp"
#include "../error.hpp"
#include "detail/decode_kernel.cuh"
#include "detail/nvtx.cuh"
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

namespace detail {
// Temp storage: the per-tensor states, the batch's chunk prefix (count + 1 words) and the
// finishing counter.
struct decode_temp {
  decode_state* states;
  std::uint64_t* prefix;
  unsigned* blocks_done;
};

constexpr std::size_t decode_temp_bytes(std::uint32_t count) {
  return sizeof(decode_state) * (count ? count : 1) + 8 * (std::size_t(count) + 1) + 8;
}

inline decode_temp carve_decode_temp(std::uint8_t* base, std::uint32_t count) {
  decode_temp t;
  t.states = reinterpret_cast<decode_state*>(base);
  t.prefix = reinterpret_cast<std::uint64_t*>(base + sizeof(decode_state) * (count ? count : 1));
  t.blocks_done = reinterpret_cast<unsigned*>(t.prefix + count + 1);
  return t;
}

// Blocks for one wave of `kernel` on this device (the occupancy calculator's count: registers
// or shared memory, not a fixed number, bound it), at most `bound`.
template <class Kernel>
status wave_blocks(Kernel kernel, int threads, std::uint64_t bound, const char* call, std::uint64_t* blocks) {
  int device = 0, sms = 1, per_sm = 0;
  status s = check(cudaGetDevice(&device), call);
  if (s == status::success) s = check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), call);
  if (s == status::success) s = check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0), call);
  if (s != status::success) return s;
  const std::uint64_t wave = static_cast<std::uint64_t>(per_sm > 0 ? per_sm : 1) * static_cast<unsigned>(sms);
  *blocks = bound < wave ? bound : wave;
  return status::success;
}

// Validation, the flat chunk prefix (batches), then the decode grid: as many blocks as the
// inputs could hold chunks, at most one wave; with Tuning::rans_warps, then the rANS grid (as many
// warps as the inputs could hold chunks, at most one wave). The grids are asked for before
// anything is enqueued: a query that fails leaves nothing behind (no status written by a
// validation whose decode never ran, no partial graph under capture).
template <class E, class Tuning>
status launch_decode(decode_batch& b, std::uint64_t max_in_bytes, cudaStream_t stream, const char* call) {
  constexpr int W = Tuning::rans_warps;
  const auto decode = decode_kernel<E, Tuning::threads, (W > 0)>;
  // every chunk takes at least its directory entry and a chunk header
  const std::uint64_t per_tensor = max_in_bytes / (format::directory_entry_bytes + format::chunk_header_bytes) + 1;
  const std::uint64_t chunks_bound = per_tensor > ~0ull / b.count ? ~0ull : per_tensor * b.count;
  std::uint64_t blocks = 0, rans_blocks = 0;
  status s = wave_blocks(decode, Tuning::threads, chunks_bound, call, &blocks);
  if constexpr (W > 0)
    if (s == status::success) s = wave_blocks(rans_warps_kernel<E, W>, 32 * W, chunks_bound / W + (chunks_bound % W != 0), call,
                      &rans_blocks);  // (not / W + 1: a bound of 2^64 - 1 with W = 1 would wrap to 0 blocks)
  if (s != status::success) return s;
  s = launch(call, dim3(1, b.count), dim3(256), stream, validate_kernel<E, 256>, b);
  if (s != status::success) return s;
  if (b.items != nullptr) {
    s = launch(call, dim3(1), dim3(prefix_threads), stream, prefix_kernel<validated_chunks>,
               validated_chunks{b.results, b.states}, b.count, b.chunk_prefix);
    if (s != status::success) return s;
  }
  s = launch(call, dim3(static_cast<unsigned>(blocks)), dim3(Tuning::threads), stream, decode, b);
  if constexpr (W > 0)
    if (s == status::success)
      s = launch(call, dim3(static_cast<unsigned>(rans_blocks)), dim3(32 * W), stream, rans_warps_kernel<E, W>, b);
  return s;
}
}  // namespace detail

// Two-phase temp storage (any alignment). The outcome goes to *status_dev: the same status
// host::decompress_as<E> returns for the same bytes and capacity; *count_dev (optional) gets the
// element count once the whole stream decoded. The input must stay as it is until the stream has
// run the call's work (with Tuning::rans_warps, one kernel checks the rANS chunks' headers and
// tables and the next decodes them on the strength of those checks).
template <class E, class Tuning = default_tuning>
status decompress(void* temp, std::size_t& temp_bytes, const void* in, std::uint64_t in_bytes, void* out,
                  std::uint64_t out_capacity, status* status_dev, cudaStream_t stream,
                  std::uint64_t* count_dev = nullptr) {
  static_assert(is_element_v<E>, "zipccl::cuda::decompress: E must be zipccl::bf16, fp16 or fp32");
  const std::size_t need = detail::decode_temp_bytes(1);
  if (temp == nullptr) {
    temp_bytes = detail::with_align_slack(need);
    return status::success;
  }
  const detail::aligned_temp at = detail::align_temp(temp, temp_bytes, need);
  if (!at.fits || status_dev == nullptr || (in == nullptr && in_bytes != 0)) return status::invalid_argument;
  detail::nvtx_range range("zipccl::cuda::decompress");
  const detail::decode_temp tt = detail::carve_decode_temp(at.base, 1);
  detail::decode_batch b{};
  b.single.in = static_cast<const std::uint8_t*>(in);
  b.single.in_bytes = in_bytes;
  b.single.out = static_cast<std::uint8_t*>(out);
  b.single.out_capacity = out_capacity;
  b.single.result = status_dev;
  b.single.count = count_dev;
  b.single.state = tt.states;
  b.count = 1;
  b.blocks_done = tt.blocks_done;
  return detail::launch_decode<E, Tuning>(b, in_bytes, stream, "cuda::decompress");
}

// Many tensors in one launch (a gradient bucket): items, statuses_dev and (optionally) counts_dev
// are arrays of `count` entries in device memory; tensor i's outcome goes to statuses_dev[i].
// max_in_bytes bounds every item's in_bytes (it sizes the grid). The chunks of all tensors are
// spread over the whole grid, so one large tensor among many small ones still gets every block.
// At most 65,535 tensors a call.
template <class E, class Tuning = default_tuning>
status decompress_batch(void* temp, std::size_t& temp_bytes, const decompress_item* items_dev, std::uint32_t count,
                        std::uint64_t max_in_bytes, status* statuses_dev, cudaStream_t stream,
                        std::uint64_t* counts_dev = nullptr) {
  static_assert(is_element_v<E>, "zipccl::cuda::decompress_batch: E must be zipccl::bf16, fp16 or fp32");
  if (count > 65535) return status::invalid_argument;
  const std::size_t need = detail::decode_temp_bytes(count);
  if (temp == nullptr) {
    temp_bytes = detail::with_align_slack(need);
    return status::success;
  }
  const detail::aligned_temp at = detail::align_temp(temp, temp_bytes, need);
  if (!at.fits || (count && (items_dev == nullptr || statuses_dev == nullptr))) return status::invalid_argument;
  if (count == 0) return status::success;
  detail::nvtx_range range("zipccl::cuda::decompress_batch");
  const detail::decode_temp tt = detail::carve_decode_temp(at.base, count);
  detail::decode_batch b{};
  b.items = items_dev;
  b.results = statuses_dev;
  b.counts = counts_dev;
  b.states = tt.states;
  b.count = count;
  b.chunk_prefix = tt.prefix;
  b.blocks_done = tt.blocks_done;
  return detail::launch_decode<E, Tuning>(b, max_in_bytes, stream, "cuda::decompress_batch");
}

}  // namespace zipccl::cuda
