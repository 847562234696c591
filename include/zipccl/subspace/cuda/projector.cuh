// zipccl: the subspace codec's forward and backward passes on the GPU, stream-ordered, the same
// maths as the host (projector.hpp) for one micro-batch of n tokens:
//
//   encode()           z     = (x - E[tok] P) A  = x A - E[tok] (P A)
//   decode()           x_hat = z A^T + E[tok] P
//   decode_backward()  dz    = d_xhat A;   da += d_xhat^T z;   de[tok] += d_xhat P^T
//   encode_backward()  dx    = dz A^T;     da += x^T dz - P^T (E[tok]^T dz);   de[tok] -= dz (P A)^T
//
// All pointers are device memory; matrices are row-major views; `tok` holds n int32 token ids.
// Two-phase temp storage as in CUB: with temp == nullptr a call only writes temp_bytes.
//
//   std::size_t bytes = 0;
//   zipccl::subspace::cuda::encode<float>(nullptr, bytes, x, tok, a, anchor, z, status_dev, blas, stream);
//   ... allocate bytes ...
//   zipccl::subspace::cuda::encode<float>(temp, bytes, x, tok, a, anchor, z, status_dev, blas, stream);
//
// The return value reports argument errors (shapes, null pointers) and launch/cuBLAS errors. What
// only the data can show, a token id outside [0, V), goes to *status_dev (device memory; the call
// clears it first): invalid_argument, with that token's anchor row taken as zero and its gradient
// row skipped, and no access outside the given buffers. The anchor's gradient rows are added with
// atomics, so their low bits may differ from run to run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "blas.cuh"
#include "detail/kernels.cuh"

namespace zipccl::subspace::cuda {

// The anchor on the device: E (vocab x rank, trainable) and P (rank x dim, fixed by the seed), the
// same values as a host anchor_table's table() and basis(). A default-constructed one is "no anchor".
template <class T>
struct anchor_view {
  const T* table = nullptr;
  const T* basis = nullptr;
  std::size_t vocab = 0, dim = 0, rank = 0;
  bool empty() const { return table == nullptr; }
};

namespace detail {

template <class T>
bool anchor_ok(const anchor_view<T>& anc, std::size_t d, std::size_t r, const std::int32_t* tok, std::size_t n) {
  if (anc.empty()) return true;
  return anc.basis != nullptr && anc.vocab > 0 && anc.dim == d && anc.rank == r && (tok != nullptr || n == 0);
}

// A is d x r with 0 < r <= d.
template <class T>
bool projector_ok(view<const T> a) {
  return a.data != nullptr && a.cols > 0 && a.cols <= a.rows;
}

// The gradients a backward pass may accumulate into: da d x r (if da.data), de vocab x r (if wanted),
// and the call's common arguments.
template <class T>
bool backward_ok(std::size_t temp_bytes, std::size_t need, view<const T> a, const anchor_view<T>& anc,
                 const std::int32_t* tok, std::size_t n, view<T> da, view<T> de, bool want_de, status* status_dev,
                 const blas_context& blas) {
  const std::size_t d = a.rows, r = a.cols;
  return temp_bytes >= need && projector_ok(a) && (da.data == nullptr || (da.rows == d && da.cols == r)) &&
         (!want_de || (de.rows == anc.vocab && de.cols == r)) && status_dev != nullptr && blas.handle != nullptr &&
         anchor_ok(anc, d, r, tok, n);
}

inline status clear_status(status* status_dev, cudaStream_t stream, const char* call) {
  return check(cudaMemsetAsync(status_dev, 0, sizeof(status), stream), call);
}

// rows (n x r) = E[tok]
template <class T>
status gather(const anchor_view<T>& anc, const std::int32_t* tok, std::size_t n, T* rows, status* st,
              cudaStream_t stream) {
  return launch("subspace::cuda: gather_rows", dim3(blocks_for(n * anc.rank)), dim3(threads), stream, gather_rows<T>,
                tok, n, anc.table, anc.vocab, anc.rank, rows, st);
}

// de[tok] += scale * g (n x r)
template <class T>
status scatter_rows(const std::int32_t* tok, std::size_t n, const T* g, T scale, T* de, std::size_t vocab,
                    std::size_t r, status* st, cudaStream_t stream) {
  return launch("subspace::cuda: scatter_add_rows", dim3(blocks_for(n * r)), dim3(threads), stream,
                scatter_add_rows<T>, tok, n, g, scale, de, vocab, r, st);
}

// de[tok] += scale * g P^T (g: n x d), through gp (n x r) of temp storage
template <class T>
status scatter(const anchor_view<T>& anc, const std::int32_t* tok, std::size_t n, const T* g, T scale, T* gp, T* de,
               status* st, cublasHandle_t blas, cudaStream_t stream) {
  const std::size_t d = anc.dim, r = anc.rank;
  const status s = gemm<T>(blas, false, true, n, r, d, T(1), g, d, anc.basis, d, T(0), gp, r);
  if (s != status::success) return s;
  return scatter_rows(tok, n, gp, scale, de, anc.vocab, r, st, stream);
}

}  // namespace detail

// z (n x r) = (x - anchor[tok]) A; x: n x d, A: d x r.
template <class T>
status encode(void* temp, std::size_t& temp_bytes, view<const T> x, const std::int32_t* tok, view<const T> a,
              const anchor_view<T>& anc, view<T> z, status* status_dev, const blas_context& blas,
              cudaStream_t stream) {
  const std::size_t n = x.rows, d = a.rows, r = a.cols;
  detail::carver c(temp);
  T* pa = anc.empty() ? nullptr : c.template take<T>(r * r);
  T* rows = anc.empty() ? nullptr : c.template take<T>(n * r);
  if (temp == nullptr) {
    temp_bytes = c.bytes();
    return status::success;
  }
  if (temp_bytes < c.bytes() || !detail::projector_ok(a) || !x.ok() || !z.ok() || x.cols != d || z.rows != n ||
      z.cols != r || status_dev == nullptr || blas.handle == nullptr || !detail::anchor_ok(anc, d, r, tok, n))
    return status::invalid_argument;
  constexpr const char* call = "subspace::cuda::encode";
  detail::blas_scope scope(blas, stream, detail::blas_math::caller, call);
  if (scope.state() != status::success) return scope.state();
  cublasHandle_t h = blas.handle;
  status s = detail::clear_status(status_dev, stream, call);
  if (s == status::success) s = detail::gemm<T>(h, false, false, n, r, d, T(1), x.data, d, a.data, r, T(0), z.data, r);
  if (s == status::success && !anc.empty() && n != 0) {
    s = detail::gemm<T>(h, false, false, r, r, d, T(1), anc.basis, d, a.data, r, T(0), pa, r);  // P A
    if (s == status::success) s = detail::gather(anc, tok, n, rows, status_dev, stream);
    if (s == status::success) s = detail::gemm<T>(h, false, false, n, r, r, T(-1), rows, r, pa, r, T(1), z.data, r);
  }
  return scope.finish(s);
}

// x_hat (n x d) = z A^T + anchor[tok].
template <class T>
status decode(void* temp, std::size_t& temp_bytes, view<const T> z, const std::int32_t* tok, view<const T> a,
              const anchor_view<T>& anc, view<T> x_hat, status* status_dev, const blas_context& blas,
              cudaStream_t stream) {
  const std::size_t n = z.rows, d = a.rows, r = a.cols;
  detail::carver c(temp);
  T* rows = anc.empty() ? nullptr : c.template take<T>(n * r);
  if (temp == nullptr) {
    temp_bytes = c.bytes();
    return status::success;
  }
  if (temp_bytes < c.bytes() || !detail::projector_ok(a) || !z.ok() || !x_hat.ok() || z.cols != r ||
      x_hat.rows != n || x_hat.cols != d || status_dev == nullptr || blas.handle == nullptr ||
      !detail::anchor_ok(anc, d, r, tok, n))
    return status::invalid_argument;
  constexpr const char* call = "subspace::cuda::decode";
  detail::blas_scope scope(blas, stream, detail::blas_math::caller, call);
  if (scope.state() != status::success) return scope.state();
  cublasHandle_t h = blas.handle;
  status s = detail::clear_status(status_dev, stream, call);
  T beta = T(0);
  if (s == status::success && !anc.empty() && n != 0) {
    s = detail::gather(anc, tok, n, rows, status_dev, stream);
    if (s == status::success)
      s = detail::gemm<T>(h, false, false, n, d, r, T(1), rows, r, anc.basis, d, T(0), x_hat.data, d);
    beta = T(1);
  }
  if (s == status::success)
    s = detail::gemm<T>(h, false, true, n, d, r, T(1), z.data, r, a.data, r, beta, x_hat.data, d);
  return scope.finish(s);
}

// The receiver's backward pass: dz = d_xhat A; da += d_xhat^T z (if da.data); de[tok] += d_xhat P^T
// (if de and an anchor). da is d x r, de is vocab x r; both accumulate.
template <class T>
status decode_backward(void* temp, std::size_t& temp_bytes, view<const T> z, const std::int32_t* tok,
                       view<const T> a, const anchor_view<T>& anc, view<const T> d_xhat, view<T> dz, view<T> da,
                       view<T> de, status* status_dev, const blas_context& blas, cudaStream_t stream) {
  const std::size_t n = z.rows, d = a.rows, r = a.cols;
  const bool want_de = !anc.empty() && de.data != nullptr;
  detail::carver c(temp);
  T* gp = want_de ? c.template take<T>(n * r) : nullptr;
  if (temp == nullptr) {
    temp_bytes = c.bytes();
    return status::success;
  }
  if (!detail::backward_ok(temp_bytes, c.bytes(), a, anc, tok, n, da, de, want_de, status_dev, blas) || !z.ok() ||
      !d_xhat.ok() || !dz.ok() || z.cols != r || d_xhat.rows != n || d_xhat.cols != d || dz.rows != n || dz.cols != r)
    return status::invalid_argument;
  constexpr const char* call = "subspace::cuda::decode_backward";
  detail::blas_scope scope(blas, stream, detail::blas_math::caller, call);
  if (scope.state() != status::success) return scope.state();
  cublasHandle_t h = blas.handle;
  status s = detail::clear_status(status_dev, stream, call);
  if (s == status::success)
    s = detail::gemm<T>(h, false, false, n, r, d, T(1), d_xhat.data, d, a.data, r, T(0), dz.data, r);
  if (s == status::success && da.data != nullptr && n != 0)
    s = detail::gemm<T>(h, true, false, d, r, n, T(1), d_xhat.data, d, z.data, r, T(1), da.data, r);
  if (s == status::success && want_de && n != 0)
    s = detail::scatter(anc, tok, n, d_xhat.data, T(1), gp, de.data, status_dev, h, stream);
  return scope.finish(s);
}

// The sender's backward pass: dx = dz A^T; da += (x - anchor[tok])^T dz (if da.data);
// de[tok] -= dz (P A)^T = dx P^T (if de and an anchor).
template <class T>
status encode_backward(void* temp, std::size_t& temp_bytes, view<const T> x, const std::int32_t* tok,
                       view<const T> a, const anchor_view<T>& anc, view<const T> dz, view<T> dx, view<T> da,
                       view<T> de, status* status_dev, const blas_context& blas, cudaStream_t stream) {
  const std::size_t n = x.rows, d = a.rows, r = a.cols;
  const bool want_de = !anc.empty() && de.data != nullptr, want_da = da.data != nullptr;
  detail::carver c(temp);
  T* rows = !anc.empty() && want_da ? c.template take<T>(n * r) : nullptr;
  T* w = !anc.empty() && want_da ? c.template take<T>(r * r) : nullptr;
  T* pa = want_de ? c.template take<T>(r * r) : nullptr;
  T* g = want_de ? c.template take<T>(n * r) : nullptr;
  if (temp == nullptr) {
    temp_bytes = c.bytes();
    return status::success;
  }
  if (!detail::backward_ok(temp_bytes, c.bytes(), a, anc, tok, n, da, de, want_de, status_dev, blas) || !x.ok() ||
      !dz.ok() || !dx.ok() || x.cols != d || dz.rows != n || dz.cols != r || dx.rows != n || dx.cols != d)
    return status::invalid_argument;
  constexpr const char* call = "subspace::cuda::encode_backward";
  detail::blas_scope scope(blas, stream, detail::blas_math::caller, call);
  if (scope.state() != status::success) return scope.state();
  cublasHandle_t h = blas.handle;
  status s = detail::clear_status(status_dev, stream, call);
  if (s == status::success)
    s = detail::gemm<T>(h, false, true, n, d, r, T(1), dz.data, r, a.data, r, T(0), dx.data, d);
  if (s == status::success && want_da && n != 0) {
    s = detail::gemm<T>(h, true, false, d, r, n, T(1), x.data, d, dz.data, r, T(1), da.data, r);
    if (s == status::success && !anc.empty()) {
      s = detail::gather(anc, tok, n, rows, status_dev, stream);
      if (s == status::success)  // W = E[tok]^T dz (r x r), then da -= P^T W
        s = detail::gemm<T>(h, true, false, r, r, n, T(1), rows, r, dz.data, r, T(0), w, r);
      if (s == status::success)
        s = detail::gemm<T>(h, true, false, d, r, r, T(-1), anc.basis, d, w, r, T(1), da.data, r);
    }
  }
  if (s == status::success && want_de && n != 0) {  // g = dz (P A)^T (n x r), scattered into the token rows
    s = detail::gemm<T>(h, false, false, r, r, d, T(1), anc.basis, d, a.data, r, T(0), pa, r);
    if (s == status::success) s = detail::gemm<T>(h, false, true, n, r, r, T(1), dz.data, r, pa, r, T(0), g, r);
    if (s == status::success) s = detail::scatter_rows(tok, n, g, T(-1), de.data, anc.vocab, r, status_dev, stream);
  }
  return scope.finish(s);
}

}  // namespace zipccl::subspace::cuda
