// zipccl: stream-ordered compression on the GPU.
//
//   using codec = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
//   std::size_t temp_bytes = 0;
//   zipccl::cuda::compress<codec>(nullptr, temp_bytes, in, n, out, cap, out_bytes_dev, stream);  // size query
//   ... allocate temp_bytes ...
//   zipccl::cuda::compress<codec>(temp, temp_bytes, in, n, out, cap, out_bytes_dev, stream);
//
// Nothing is allocated and nothing synchronises: the work is one cudaMemsetAsync and two kernel
// launches on `stream` (three for a batch), so the call can be captured into a CUDA graph. Temp
// storage may start at any address (the size asked includes the slack to align it). A
// status::cuda_error keeps its CUDA error for cuda::last_error() (runtime.cuh). The stream is the same
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
#include "memory.cuh"
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

struct compress_options {
  bool checksum = false;    // hash every chunk's whole body (docs/format.md)
  bool zero_groups = true;  // leave all-zero 64-element groups out of a chunk where that pays
};

template <class Codec, class Tuning = default_tuning>
constexpr std::uint64_t max_compressed_size(std::uint64_t n) {
  return format::max_compressed_size(n, Codec::element_size, Tuning::chunk_elems);
}

namespace detail {
// The look-back words and the chunk sizes: two 8-byte words per chunk (at least one chunk).
inline std::size_t compress_temp_bytes(std::uint64_t chunks) { return 2 * 8 * (chunks ? chunks : 1); }

// The coding kernel over all chunks of the batch, then one finishing block per tensor.
template <class Codec, class Tuning>
status launch_encode(const encode_batch& b, std::uint64_t chunks, std::uint32_t tensors, const compress_options& opt,
                     const typename Codec::codebook_type& cb, cudaStream_t stream) {
  using E = typename Codec::element_type;
  if (chunks) {
    const status s = launch("cuda::compress: encode kernel", dim3(static_cast<unsigned>(chunks)), dim3(Tuning::threads),
                            stream, encode_kernel<E, typename Codec::codebook_type, Tuning>, b, cb);
    if (s != status::success) return s;
  }
  format::stream_header h;
  h.type = E::id;
  h.codebook = Codec::codebook_type::kind;
  h.flags = opt.checksum ? format::flag_checksum : 0u;
  h.chunk_elems = Tuning::chunk_elems;
  return launch("cuda::compress: finish kernel", dim3(tensors), dim3(256), stream, finish_kernel<256>, b, h);
}

// out_bytes_host must be memory the device can write during a stream-ordered (and capturable)
// copy: pinned host memory (cudaMallocHost, cudaHostRegister) or managed memory.
inline status check_host_size_target(const std::uint64_t* out_bytes_host) {
  if (out_bytes_host == nullptr) return status::success;
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, out_bytes_host);
  if (e != cudaSuccess) return fail(e, "cuda::compress: cudaPointerGetAttributes(out_bytes_host)");
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged ? status::success : status::invalid_argument;
}
}  // namespace detail

// Two-phase temp storage: with temp == nullptr, writes the bytes needed to temp_bytes and returns.
// The stream's size is written to *out_bytes_dev (device memory) and, when out_bytes_host is not
// null, copied there on the same stream (read it after synchronising the stream). out_bytes_host
// must be pinned or managed memory (pageable memory would make the copy synchronous and break
// graph capture): anything else is invalid_argument.
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
    temp_bytes = detail::with_align_slack(need);
    return status::success;
  }
  const detail::aligned_temp at = detail::align_temp(temp, temp_bytes, need);
  if (!at.fits) return status::invalid_argument;
  if (out == nullptr || out_bytes_dev == nullptr || (in == nullptr && n != 0)) return status::invalid_argument;
  if (out_capacity < max_compressed_size<Codec, Tuning>(n)) return status::buffer_too_small;
  if constexpr (Codec::codebook_type::stat == codebook::statistic::none)
    if (!codebook::valid_table<E>(cb.entries)) return status::invalid_argument;
  if (const status hs = detail::check_host_size_target(out_bytes_host); hs != status::success) return hs;
  detail::nvtx_range range("zipccl::cuda::compress");

  auto* words = reinterpret_cast<unsigned long long*>(at.base);
  detail::encode_batch b{};
  b.single.in = static_cast<const std::uint8_t*>(in);
  b.single.n = n;
  b.single.out = static_cast<std::uint8_t*>(out);
  b.single.out_bytes = out_bytes_dev;
  b.single.chunks = chunks;
  b.single.checksum = opt.checksum;
  b.single.zero_masks = opt.zero_groups;
  b.single.lookback = detail::chunk_lookback{words};
  b.single.chunk_sizes = reinterpret_cast<std::uint64_t*>(words + (chunks ? chunks : 1));
  status s = detail::check(cudaMemsetAsync(words, 0, 8 * (chunks ? chunks : 1), stream),
                           "cuda::compress: cudaMemsetAsync(look-back words)");
  if (s == status::success) s = detail::launch_encode<Codec, Tuning>(b, chunks, 1, opt, cb, stream);
  if (s == status::success && out_bytes_host)
    s = detail::check(
        cudaMemcpyAsync(out_bytes_host, out_bytes_dev, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream),
        "cuda::compress: cudaMemcpyAsync(out_bytes_host)");
  return s;
}

// Many tensors in one launch (a gradient bucket of tensors of different sizes): each becomes its
// own stream at items[i].out, its size written to *items[i].out_bytes. The same `count` items are
// passed twice: items_host is read on the host (sizes, checks, the launch's shape) and items_dev,
// the same values in device memory, by the kernels, so the call stays stream-ordered and
// capturable. Every items[i].out_capacity must be at least max_compressed_size<Codec, Tuning>(n).
template <class Codec, class Tuning = default_tuning>
status compress_batch(void* temp, std::size_t& temp_bytes, const compress_item* items_host,
                      const compress_item* items_dev, std::uint32_t count, cudaStream_t stream,
                      const compress_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  using E = typename Codec::element_type;
  if (count != 0 && (items_host == nullptr || items_dev == nullptr)) return status::invalid_argument;
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < count && total <= 0x7FFFFFFFu; ++i) {
    const std::uint64_t c = format::chunk_count(items_host[i].n, Tuning::chunk_elems);
    total = c > 0x7FFFFFFFu ? c : total + c;  // each term is bounded before it is added: no wrap
  }
  if (total > 0x7FFFFFFFu) return status::invalid_argument;
  const std::size_t prefix_bytes = format::align_up(8ull * (count + 1), 16);
  const std::size_t need = prefix_bytes + detail::compress_temp_bytes(total);
  if (temp == nullptr) {
    temp_bytes = detail::with_align_slack(need);
    return status::success;
  }
  const detail::aligned_temp at = detail::align_temp(temp, temp_bytes, need);
  if (!at.fits) return status::invalid_argument;
  for (std::uint32_t i = 0; i < count; ++i) {
    const compress_item& it = items_host[i];
    if (it.out == nullptr || it.out_bytes == nullptr || (it.in == nullptr && it.n != 0)) return status::invalid_argument;
    if (it.out_capacity < max_compressed_size<Codec, Tuning>(it.n)) return status::buffer_too_small;
  }
  if constexpr (Codec::codebook_type::stat == codebook::statistic::none)
    if (!codebook::valid_table<E>(cb.entries)) return status::invalid_argument;
  if (count == 0) return status::success;
  detail::nvtx_range range("zipccl::cuda::compress_batch");
  std::uint8_t* base = at.base;
  detail::encode_batch b{};
  b.single.checksum = opt.checksum;
  b.single.zero_masks = opt.zero_groups;
  b.items = items_dev;
  b.count = count;
  auto* prefix = reinterpret_cast<std::uint64_t*>(base);
  b.chunk_prefix = prefix;
  b.words = reinterpret_cast<unsigned long long*>(base + prefix_bytes);
  b.sizes = reinterpret_cast<std::uint64_t*>(base + prefix_bytes) + (total ? total : 1);
  status s = detail::check(cudaMemsetAsync(b.words, 0, 8 * (total ? total : 1), stream),
                           "cuda::compress_batch: cudaMemsetAsync(look-back words)");
  if (s == status::success)
    s = detail::launch("cuda::compress_batch: prefix kernel", dim3(1), dim3(detail::prefix_threads), stream,
                       detail::prefix_kernel<detail::item_chunks<Tuning>>, detail::item_chunks<Tuning>{items_dev},
                       count, prefix);
  if (s != status::success) return s;
  return detail::launch_encode<Codec, Tuning>(b, total, count, opt, cb, stream);
}

// Convenience overload: temp storage from `alloc`, freed on the stream after the work.
template <class Codec, class Tuning = default_tuning, class Allocator = async_allocator>
status compress(const Allocator& alloc, const void* in, std::uint64_t n, void* out, std::uint64_t out_capacity,
                std::uint64_t* out_bytes_dev, cudaStream_t stream, const compress_options& opt = {},
                const typename Codec::codebook_type& cb = {}, std::uint64_t* out_bytes_host = nullptr) {
  std::size_t bytes = 0;
  const status q = compress<Codec, Tuning>(nullptr, bytes, in, n, out, out_capacity, out_bytes_dev, stream, opt, cb);
  if (q != status::success) return q;
  void* temp = alloc.allocate(bytes, stream);
  if (temp == nullptr) return detail::fail(cudaErrorMemoryAllocation, "cuda::compress: temp storage allocation");
  const status s =
      compress<Codec, Tuning>(temp, bytes, in, n, out, out_capacity, out_bytes_dev, stream, opt, cb, out_bytes_host);
  alloc.deallocate(temp, bytes, stream);
  return s;
}

}  // namespace zipccl::cuda
