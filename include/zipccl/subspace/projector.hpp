// zipccl: the subspace codec's forward and backward passes (host), for one micro-batch of n
// tokens (rows), x a token's d-dim activation, A in St(d, r), anchor[tok] = E[tok] P:
//
//   sender     z     = (x - anchor[tok]) A                 encode(), as x A - E[tok] (P A)
//   receiver   x_hat = z A^T + anchor[tok]                  decode()
//   receiver   dL/dz = (dL/dx_hat) A                        decode_backward(), which also adds
//              dL/dA += (dL/dx_hat)^T z,  dL/dE[tok] += (dL/dx_hat) P^T
//   sender     dL/dx = (dL/dz) A^T                          encode_backward(), which also adds
//              dL/dA += (x - anchor[tok])^T (dL/dz),  dL/dE[tok] -= (dL/dz) A^T P^T
//
// The sender's side never forms the n x d anchor: (x - E[tok] P) A = x A - E[tok] (P A), and the
// same r x r product P A serves both of its backward terms (the device executor does the same).
//
// Without an anchor (nullptr) the anchor terms are zero. The gradients of A and E accumulate
// (+=) into the caller's matrices, so a caller adds both sides' contributions and then steps the
// Stiefel optimizer. Every function checks shapes and token ids and returns invalid_argument
// rather than touching memory it was not given.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../error.hpp"
#include "anchor.hpp"
#include "detail/blas.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

namespace detail {
// Keeps T from being deduced from an argument (so nullptr can be passed for an optional one).
template <class T>
struct id {
  using type = T;
};
template <class T>
using anchor_ptr = const typename id<anchor_table<T>>::type*;
template <class T>
using out_ptr = typename id<matrix<T>>::type*;

// A is d x r with 0 < r <= d, and the anchor (if any) is for d-dim rows.
template <class T>
bool shapes_ok(std::size_t d, const matrix<T>& a, const anchor_table<T>* anc) {
  return a.rows == d && a.cols <= d && a.cols > 0 && (anc == nullptr || anc->dim() == d);
}
// The gradients a backward pass may accumulate into: dA d x r, dE V x r (either may be null).
template <class T>
bool gradients_ok(std::size_t d, std::size_t r, const anchor_table<T>* anc, const matrix<T>* da, const matrix<T>* de) {
  return (da == nullptr || (da->rows == d && da->cols == r)) &&
         (anc == nullptr || de == nullptr || (de->rows == anc->vocab() && de->cols == r));
}

// P A (r x r): the anchor basis seen through the projector, so that
// (x - E[tok] P) A = x A - E[tok] (P A) without an n x d anchor.
template <class T>
matrix<T> basis_times(const anchor_table<T>& anc, const matrix<T>& a) {
  const std::size_t r = anc.rank(), d = anc.dim();
  matrix<T> pa(r, a.cols);
  gemm<T>(false, false, r, a.cols, d, T(1), anc.basis().data(), d, a.data(), a.cols, T(0), pa.data(), a.cols);
  return pa;
}
}  // namespace detail

// z (n x r) = (x - anchor[tok]) A, computed as x A - E[tok] (P A).
template <class T>
status encode(const matrix<T>& x, const std::int32_t* tok, const matrix<T>& a, detail::anchor_ptr<T> anc,
              matrix<T>* z) {
  if (z == nullptr || x.cols != a.rows || !detail::shapes_ok(x.cols, a, anc)) return status::invalid_argument;
  matrix<T> rows;
  if (anc != nullptr) {
    const status s = anc->rows(tok, x.rows, &rows);
    if (s != status::success) return s;
  }
  const std::size_t n = x.rows, d = a.rows, r = a.cols;
  matrix<T> out(n, r);
  detail::gemm<T>(false, false, n, r, d, T(1), x.data(), d, a.data(), r, T(0), out.data(), r);
  if (anc != nullptr) {
    const matrix<T> pa = detail::basis_times(*anc, a);
    detail::gemm<T>(false, false, n, r, r, T(-1), rows.data(), r, pa.data(), r, T(1), out.data(), r);
  }
  *z = std::move(out);
  return status::success;
}

// x_hat (n x d) = z A^T + anchor[tok].
template <class T>
status decode(const matrix<T>& z, const std::int32_t* tok, const matrix<T>& a, detail::anchor_ptr<T> anc,
              matrix<T>* x_hat) {
  if (x_hat == nullptr || z.cols != a.cols || !detail::shapes_ok(a.rows, a, anc))
    return status::invalid_argument;
  matrix<T> out(z.rows, a.rows);
  if (anc != nullptr) {
    const status s = anc->gather(tok, z.rows, &out);
    if (s != status::success) return s;
  }
  detail::gemm<T>(false, true, z.rows, a.rows, a.cols, T(1), z.data(), a.cols, a.data(), a.cols, T(1), out.data(),
                  a.rows);
  *x_hat = std::move(out);
  return status::success;
}

// The receiver's backward pass: dz = d_xhat A; da += d_xhat^T z; de[tok] += d_xhat P^T.
// da and de may be null (not wanted).
template <class T>
status decode_backward(const matrix<T>& z, const std::int32_t* tok, const matrix<T>& a, detail::anchor_ptr<T> anc,
                       const matrix<T>& d_xhat, matrix<T>* dz, detail::out_ptr<T> da, detail::out_ptr<T> de) {
  const std::size_t n = z.rows, d = a.rows, r = a.cols;
  if (dz == nullptr || z.cols != r || d_xhat.rows != n || d_xhat.cols != d || !detail::shapes_ok(d, a, anc) ||
      !detail::gradients_ok<T>(d, r, anc, da, de))
    return status::invalid_argument;
  if (anc != nullptr && de != nullptr) {
    const status s = anc->scatter_gradient(tok, n, d_xhat, T(1), de);
    if (s != status::success) return s;
  }
  *dz = matrix<T>(n, r);
  detail::gemm<T>(false, false, n, r, d, T(1), d_xhat.data(), d, a.data(), r, T(0), dz->data(), r);
  if (da != nullptr) detail::gemm<T>(true, false, d, r, n, T(1), d_xhat.data(), d, z.data(), r, T(1), da->data(), r);
  return status::success;
}

// The sender's backward pass: dx = dz A^T; da += (x - anchor)^T dz = x^T dz - P^T (E[tok]^T dz);
// de[tok] -= dz A^T P^T = dz (P A)^T.
template <class T>
status encode_backward(const matrix<T>& x, const std::int32_t* tok, const matrix<T>& a, detail::anchor_ptr<T> anc,
                       const matrix<T>& dz, matrix<T>* dx, detail::out_ptr<T> da, detail::out_ptr<T> de) {
  const std::size_t n = x.rows, d = a.rows, r = a.cols;
  if (dx == nullptr || x.cols != d || dz.rows != n || dz.cols != r || !detail::shapes_ok(d, a, anc) ||
      !detail::gradients_ok<T>(d, r, anc, da, de))
    return status::invalid_argument;
  matrix<T> rows;  // E[tok], which also checks every id before anything is written
  if (anc != nullptr) {
    const status s = anc->rows(tok, n, &rows);
    if (s != status::success) return s;
  }
  matrix<T> out(n, d);
  detail::gemm<T>(false, true, n, d, r, T(1), dz.data(), r, a.data(), r, T(0), out.data(), d);
  const matrix<T> pa = anc != nullptr ? detail::basis_times(*anc, a) : matrix<T>();
  if (da != nullptr) {
    detail::gemm<T>(true, false, d, r, n, T(1), x.data(), d, dz.data(), r, T(1), da->data(), r);
    if (anc != nullptr) {
      matrix<T> w(r, r);  // E[tok]^T dz
      detail::gemm<T>(true, false, r, r, n, T(1), rows.data(), r, dz.data(), r, T(0), w.data(), r);
      detail::gemm<T>(true, false, d, r, r, T(-1), anc->basis().data(), d, w.data(), r, T(1), da->data(), r);
    }
  }
  if (anc != nullptr && de != nullptr) {
    matrix<T> g(n, r);  // dz (P A)^T
    detail::gemm<T>(false, true, n, r, r, T(1), dz.data(), r, pa.data(), r, T(0), g.data(), r);
    const status s = anc->scatter_rows(tok, n, g, T(-1), de);
    if (s != status::success) return s;
  }
  *dx = std::move(out);
  return status::success;
}

}  // namespace zipccl::subspace
