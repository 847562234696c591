// zipccl: cuda::codec_context, the owning convenience layer over the raw device calls (in the
// spirit of cuCollections' owning containers beside their device views).
//
//   zipccl::cuda::codec_context<codec> ctx(stream);          // owns its temp storage
//   ctx.compress(in, n, out, cap, out_bytes_dev);            // same operations, fewer arguments
//   ctx.decompress(out, cap, back, n * 2, status_dev);
//
// The context keeps one temp block and grows it on the stream-ordered allocator when a call needs
// more (the old block is freed in stream order); every call runs on the context's stream, so
// reusing the block between calls is safe. Nothing else changes from the raw calls: the same
// arguments checks and statuses, the same bytes, graph capturable once the block is large enough:
// reserve() or reserve_for() ahead of a capture; a call that would have to grow the block while
// the stream is captured returns invalid_argument. Not thread-safe: one context per stream and
// thread.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../error.hpp"
#include "compress.cuh"
#include "decompress.cuh"
#include "memory.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

template <class Codec, class Tuning = default_tuning, class Allocator = async_allocator>
class codec_context {
 public:
  using codec_type = Codec;
  using element_type = typename Codec::element_type;
  using codebook_type = typename Codec::codebook_type;

  explicit codec_context(cudaStream_t stream, Allocator alloc = Allocator{}) : temp_(stream, std::move(alloc)) {}

  cudaStream_t stream() const { return temp_.stream(); }
  std::size_t temp_bytes() const { return temp_.bytes(); }

  // Grows the temp block to at least `bytes` now (for example before a graph capture).
  status reserve(std::size_t bytes) { return temp_.reserve(bytes); }

  // Enough temp storage for compress() of up to n elements and decompress() of such a stream.
  status reserve_for(std::uint64_t n) {
    std::size_t c = 0, d = 0;
    std::uint64_t dummy = 0;
    status s = cuda::compress<Codec, Tuning>(nullptr, c, nullptr, n, &dummy, 0, &dummy, stream());
    if (s == status::success) s = cuda::decompress<element_type, Tuning>(nullptr, d, nullptr, 0, nullptr, 0, nullptr, stream());
    return s == status::success ? reserve(c > d ? c : d) : s;
  }

  static constexpr std::uint64_t max_compressed_size(std::uint64_t n) {
    return cuda::max_compressed_size<Codec, Tuning>(n);
  }

  status compress(const void* in, std::uint64_t n, void* out, std::uint64_t out_capacity, std::uint64_t* out_bytes_dev,
                  const compress_options& opt = {}, const codebook_type& cb = {},
                  std::uint64_t* out_bytes_host = nullptr) {
    std::size_t need = 0;
    status s = cuda::compress<Codec, Tuning>(nullptr, need, in, n, out, out_capacity, out_bytes_dev, stream(), opt, cb);
    if (s == status::success) s = reserve(need);
    if (s != status::success) return s;
    std::size_t have = temp_.bytes();
    return cuda::compress<Codec, Tuning>(temp_.data(), have, in, n, out, out_capacity, out_bytes_dev, stream(), opt, cb,
                                         out_bytes_host);
  }

  status decompress(const void* in, std::uint64_t in_bytes, void* out, std::uint64_t out_capacity, status* status_dev,
                    std::uint64_t* count_dev = nullptr) {
    std::size_t need = 0;
    status s = cuda::decompress<element_type, Tuning>(nullptr, need, in, in_bytes, out, out_capacity, status_dev, stream());
    if (s == status::success) s = reserve(need);
    if (s != status::success) return s;
    std::size_t have = temp_.bytes();
    return cuda::decompress<element_type, Tuning>(temp_.data(), have, in, in_bytes, out, out_capacity, status_dev,
                                                  stream(), count_dev);
  }

  status compress_batch(const compress_item* items_host, const compress_item* items_dev, std::uint32_t count,
                        const compress_options& opt = {}, const codebook_type& cb = {}) {
    std::size_t need = 0;
    status s = cuda::compress_batch<Codec, Tuning>(nullptr, need, items_host, items_dev, count, stream(), opt, cb);
    if (s == status::success) s = reserve(need);
    if (s != status::success) return s;
    std::size_t have = temp_.bytes();
    return cuda::compress_batch<Codec, Tuning>(temp_.data(), have, items_host, items_dev, count, stream(), opt, cb);
  }

  status decompress_batch(const decompress_item* items_dev, std::uint32_t count, std::uint64_t max_in_bytes,
                          status* statuses_dev, std::uint64_t* counts_dev = nullptr) {
    std::size_t need = 0;
    status s = cuda::decompress_batch<element_type, Tuning>(nullptr, need, items_dev, count, max_in_bytes, statuses_dev,
                                                            stream(), counts_dev);
    if (s == status::success) s = reserve(need);
    if (s != status::success) return s;
    std::size_t have = temp_.bytes();
    return cuda::decompress_batch<element_type, Tuning>(temp_.data(), have, items_dev, count, max_in_bytes,
                                                        statuses_dev, stream(), counts_dev);
  }

 private:
  device_buffer<unsigned char, Allocator> temp_;
};

}  // namespace zipccl::cuda
