// zipccl: residual vector quantisation of the subspace codes on the GPU: the nearest-codeword
// search (encode) and the sum of codewords (decode), against codebooks laid out exactly as a host
// rvq_book's values() (groups x rounds x codewords words of dim / groups numbers). Both use the
// host's distance (rvq_shape.hpp: in double, the lowest index among equals), so the indices are
// the host's except where two codewords are equally near to rounding; decode adds the rounds in
// the host's order and gives the host's values.
//
// The codebooks are learned on the host (rvq_learner); a sender that keeps z on the device copies
// the mirror's values to the device after each sync (a few kilobytes) and searches there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../rvq_shape.hpp"
#include "blas.cuh"
#include "detail/kernels.cuh"

namespace zipccl::subspace::cuda {

// A codebook set in device memory: shape.words() x shape.sub() values.
template <class T>
struct rvq_book_view {
  const T* values = nullptr;
  rvq_shape shape;
};

// idx (n x groups x rounds, device) for z (n x dim, device). Temp storage: n x dim values (the
// residuals); with temp == nullptr only temp_bytes is written.
template <class T>
status rvq_encode(void* temp, std::size_t& temp_bytes, const rvq_book_view<T>& book, view<const T> z,
                  std::uint16_t* idx, cudaStream_t stream) {
  detail::carver c(temp);
  T* res = c.template take<T>(z.rows * book.shape.dim);
  if (temp == nullptr) {
    temp_bytes = c.bytes();
    return status::success;
  }
  if (temp_bytes < c.bytes() || !book.shape.valid() || book.values == nullptr || !z.ok() || z.cols != book.shape.dim ||
      (idx == nullptr && z.rows != 0))
    return status::invalid_argument;
  if (z.rows == 0) return status::success;
  const std::size_t warps = z.rows * book.shape.groups;
  return detail::launch("subspace::cuda::rvq_encode", dim3(detail::blocks_for(warps * 32)), dim3(detail::threads),
                        stream, detail::rvq_search<T>, book.values, book.shape, z.data, z.rows, res, idx);
}

// z (n x dim, device) from n tokens' indices; an index >= codewords writes invalid_argument to
// *status_dev (cleared first) and counts as zero.
template <class T>
status rvq_decode(const rvq_book_view<T>& book, const std::uint16_t* idx, std::size_t n, view<T> z, status* status_dev,
                  cudaStream_t stream) {
  if (!book.shape.valid() || book.values == nullptr || (idx == nullptr && n != 0) || !z.ok() || z.rows != n ||
      z.cols != book.shape.dim || status_dev == nullptr)
    return status::invalid_argument;
  status s = detail::check(cudaMemsetAsync(status_dev, 0, sizeof(status), stream), "subspace::cuda::rvq_decode");
  if (s != status::success || n == 0) return s;
  return detail::launch("subspace::cuda::rvq_decode", dim3(detail::blocks_for(n * book.shape.dim)),
                        dim3(detail::threads), stream, detail::rvq_sum<T>, book.values, book.shape, idx, n, z.data,
                        status_dev);
}

}  // namespace zipccl::subspace::cuda
