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
  detail::decode_params p;
  p.in = static_cast<const std::uint8_t*>(in);
  p.in_bytes = in_bytes;
  p.out = static_cast<std::uint8_t*>(out);
  p.out_capacity = out_capacity;
  p.result = status_dev;
  p.count = count_dev;
  p.state = static_cast<detail::decode_state*>(temp);
  detail::validate_kernel<E, 256><<<1, 256, 0, stream>>>(p);
  if (cudaGetLastError() != cudaSuccess) return status::cuda_error;
  // at most one block per chunk that could fit in in_bytes, at most a few waves per SM
  int device = 0, sms = 1;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return status::cuda_error;
  const std::uint64_t max_chunks = in_bytes / (format::directory_entry_bytes + format::chunk_header_bytes) + 1;
  const std::uint64_t blocks = max_chunks < 8ull * sms ? max_chunks : 8ull * sms;
  detail::decode_kernel<E, Tuning::threads><<<static_cast<unsigned>(blocks), Tuning::threads, 0, stream>>>(p);
  if (cudaGetLastError() != cudaSuccess) return status::cuda_error;
  return status::success;
}

}  // namespace zipccl::cuda
