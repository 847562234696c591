// zipccl: stream-ordered decompression on the GPU, for streams from either executor.
//
//   std::size_t temp_bytes = 0;
//   zipccl::cuda::decompress<zipccl::bf16>(nullptr, temp_bytes, in, in_bytes, out, cap, status_dev, stream);
//   ... allocate temp_bytes ...
//   zipccl::cuda::decompress<zipccl::bf16>(temp, temp_bytes, in, in_bytes, out, cap, status_dev, stream);
//
// The input is untrusted. The call's outcome is written to *status_dev (device memory) on the
// stream: success, or the first error found (truncated, corrupt, checksum_mismatch, type_mismatch,
// buffer_too_small, ...); no access leaves the given buffers. The host-side return value reports
// only argument and launch errors.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../element.hpp"
#include "../error.hpp"
#include "detail/decode_kernel.cuh"
#include "detail/nvtx.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

namespace detail {
template <class E, class Tuning>
status launch_decode(const decode_batch& b, std::uint32_t count, std::uint64_t max_in_bytes, cudaStream_t stream) {
  validate_kernel<E, 256><<<dim3(1, count), 256, 0, stream>>>(b);
  if (cudaGetLastError() != cudaSuccess) return status::cuda_error;
  // per tensor: at most one block per chunk that could fit in its bytes, at most a few waves
  int device = 0, sms = 1;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return status::cuda_error;
  const std::uint64_t max_chunks = max_in_bytes / (format::directory_entry_bytes + format::chunk_header_bytes) + 1;
  const std::uint64_t wave = (8ull * sms + count - 1) / count;
  const std::uint64_t blocks = max_chunks < wave ? max_chunks : wave;
  decode_kernel<E, Tuning::threads><<<dim3(static_cast<unsigned>(blocks), count), Tuning::threads, 0, stream>>>(b);
  return cudaGetLastError() == cudaSuccess ? status::success : status::cuda_error;
}
}  // namespace detail

template <class E, class Tuning = default_tuning>
status decompress(void* temp, std::size_t& temp_bytes, const void* in, std::uint64_t in_bytes, void* out,
                  std::uint64_t out_capacity, status* status_dev, cudaStream_t stream,
                  std::uint64_t* count_dev = nullptr) {
  static_assert(is_element_v<E>, "zipccl::cuda::decompress: E must be zipccl::bf16, fp16 or fp32");
  const std::size_t need = sizeof(detail::decode_state);
  if (temp == nullptr) {
    temp_bytes = need;
    return status::success;
  }
  if (temp_bytes < need || status_dev == nullptr || (in == nullptr && in_bytes != 0)) return status::invalid_argument;
  detail::nvtx_range range("zipccl::cuda::decompress");
  detail::decode_batch b{};
  b.single.in = static_cast<const std::uint8_t*>(in);
  b.single.in_bytes = in_bytes;
  b.single.out = static_cast<std::uint8_t*>(out);
  b.single.out_capacity = out_capacity;
  b.single.result = status_dev;
  b.single.count = count_dev;
  b.single.state = static_cast<detail::decode_state*>(temp);
  return detail::launch_decode<E, Tuning>(b, 1, in_bytes, stream);
}

// Many tensors in one launch (a gradient bucket): items, statuses_dev and (optionally) counts_dev
// are arrays of `count` entries in device memory; tensor i's outcome goes to statuses_dev[i].
// max_in_bytes bounds every item's in_bytes (it sizes the grid). At most 65,535 tensors a call.
template <class E, class Tuning = default_tuning>
status decompress_batch(void* temp, std::size_t& temp_bytes, const decompress_item* items_dev, std::uint32_t count,
                        std::uint64_t max_in_bytes, status* statuses_dev, cudaStream_t stream,
                        std::uint64_t* counts_dev = nullptr) {
  static_assert(is_element_v<E>, "zipccl::cuda::decompress_batch: E must be zipccl::bf16, fp16 or fp32");
  const std::size_t need = sizeof(detail::decode_state) * (count ? count : 1);
  if (temp == nullptr) {
    temp_bytes = need;
    return status::success;
  }
  if (temp_bytes < need || count > 65535 || (count && (items_dev == nullptr || statuses_dev == nullptr)))
    return status::invalid_argument;
  if (count == 0) return status::success;
  detail::nvtx_range range("zipccl::cuda::decompress_batch");
  detail::decode_batch b{};
  b.items = items_dev;
  b.results = statuses_dev;
  b.counts = counts_dev;
  b.states = static_cast<detail::decode_state*>(temp);
  return detail::launch_decode<E, Tuning>(b, count, max_in_bytes, stream);
}

}  // namespace zipccl::cuda
