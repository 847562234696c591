// zipccl: stream-ordered compression on the GPU.
//
//   using codec = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
//   std::size_t temp_bytes = 0;
//   zipccl::cuda::compress<codec>(nullptr, temp_bytes, in, n, out, cap, out_bytes_dev, stream);  // size query
//   ... allocate temp_bytes ...
//   zipccl::cuda::compress<codec>(temp, temp_bytes, in, n, out, cap, out_bytes_dev, stream);
//
// Nothing is allocated and nothing synchronises: the work is one cudaMemsetAsync and two kernel
// launches on `stream`, so the call can be captured into a CUDA graph. The stream is the same
// bytes the host executor writes with the same chunk size (Tuning::chunk_elems), so either side
// decodes it. out_capacity must be at least max_compressed_size<Codec, Tuning>(n).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../codec/codec.hpp"
#include "../error.hpp"
#include "../format/stream.hpp"
#include "detail/encode_kernel.cuh"
#include "detail/nvtx.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

struct compress_options {
  bool checksum = false;  // hash every chunk's whole body (docs/FORMAT.md)
};

template <class Codec, class Tuning = default_tuning>
constexpr std::uint64_t max_compressed_size(std::uint64_t n) {
  return format::max_compressed_size(n, Codec::element_size, Tuning::chunk_elems);
}

namespace detail {
inline std::size_t compress_temp_bytes(std::uint64_t chunks) { return 2 * 8 * (chunks ? chunks : 1); }
}  // namespace detail

// Two-phase temp storage: with temp == nullptr, writes the bytes needed to temp_bytes and returns.
// The stream's size is written to *out_bytes_dev (device memory) and, when out_bytes_host is not
// null, copied there on the same stream (read it after synchronising the stream).
template <class Codec, class Tuning = default_tuning>
status compress(void* temp, std::size_t& temp_bytes, const void* in, std::uint64_t n, void* out,
                std::uint64_t out_capacity, std::uint64_t* out_bytes_dev, cudaStream_t stream,
                const compress_options& opt = {}, const typename Codec::codebook_type& cb = {},
                std::uint64_t* out_bytes_host = nullptr) {
  using E = typename Codec::element_type;
  const std::uint64_t chunks = format::chunk_count(n, Tuning::chunk_elems);
  if (chunks > 0x7FFFFFFFu) return status::invalid_argument;
  const std::size_t need = detail::compress_temp_bytes(chunks);
  if (temp == nullptr) {
    temp_bytes = need;
    return status::success;
  }
  if (temp_bytes < need) return status::invalid_argument;
  if (out == nullptr || out_bytes_dev == nullptr || (in == nullptr && n != 0)) return status::invalid_argument;
  if (out_capacity < max_compressed_size<Codec, Tuning>(n)) return status::buffer_too_small;
  if constexpr (Codec::codebook_type::stat == codebook::statistic::none)
    if (!codebook::valid_table<E>(cb.entries)) return status::invalid_argument;
  detail::nvtx_range range("zipccl::cuda::compress");

  auto* words = static_cast<unsigned long long*>(temp);
  detail::encode_params p;
  p.in = static_cast<const std::uint8_t*>(in);
  p.n = n;
  p.out = static_cast<std::uint8_t*>(out);
  p.chunks = chunks;
  p.checksum = opt.checksum;
  p.lookback = detail::chunk_lookback{words};
  p.chunk_sizes = reinterpret_cast<std::uint64_t*>(words + (chunks ? chunks : 1));
  if (cudaMemsetAsync(words, 0, 8 * (chunks ? chunks : 1), stream) != cudaSuccess) return status::cuda_error;
  if (chunks) {
    detail::encode_kernel<E, typename Codec::codebook_type, Tuning>
        <<<static_cast<unsigned>(chunks), Tuning::threads, 0, stream>>>(p, cb);
    if (cudaGetLastError() != cudaSuccess) return status::cuda_error;
  }
  format::stream_header h;
  h.type = E::id;
  h.codebook = Codec::codebook_type::kind;
  h.flags = opt.checksum ? format::flag_checksum : 0u;
  h.chunk_elems = Tuning::chunk_elems;
  h.count = n;
  h.chunks = static_cast<std::uint32_t>(chunks);
  detail::finish_kernel<256><<<1, 256, 0, stream>>>(p.out, h, p.chunk_sizes, out_bytes_dev);
  if (cudaGetLastError() != cudaSuccess) return status::cuda_error;
  if (out_bytes_host &&
      cudaMemcpyAsync(out_bytes_host, out_bytes_dev, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream) !=
          cudaSuccess)
    return status::cuda_error;
  return status::success;
}

// A stream-ordered allocator: cudaMallocAsync / cudaFreeAsync on the call's stream (graph
// capturable). Any type with the same two members can be passed instead.
struct async_allocator {
  void* allocate(std::size_t bytes, cudaStream_t stream) const {
    void* p = nullptr;
    return cudaMallocAsync(&p, bytes, stream) == cudaSuccess ? p : nullptr;
  }
  void deallocate(void* p, std::size_t, cudaStream_t stream) const { cudaFreeAsync(p, stream); }
};

// Convenience overload: temp storage from `alloc`, freed on the stream after the work.
template <class Codec, class Tuning = default_tuning, class Allocator = async_allocator>
status compress(const Allocator& alloc, const void* in, std::uint64_t n, void* out, std::uint64_t out_capacity,
                std::uint64_t* out_bytes_dev, cudaStream_t stream, const compress_options& opt = {},
                const typename Codec::codebook_type& cb = {}, std::uint64_t* out_bytes_host = nullptr) {
  std::size_t bytes = 0;
  compress<Codec, Tuning>(nullptr, bytes, in, n, out, out_capacity, out_bytes_dev, stream, opt, cb);
  void* temp = alloc.allocate(bytes, stream);
  if (temp == nullptr) return status::cuda_error;
  const status s =
      compress<Codec, Tuning>(temp, bytes, in, n, out, out_capacity, out_bytes_dev, stream, opt, cb, out_bytes_host);
  alloc.deallocate(temp, bytes, stream);
  return s;
}

}  // namespace zipccl::cuda
