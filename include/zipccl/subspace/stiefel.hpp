// zipccl: optimisation on the Stiefel manifold St(d, r) = { A in R^{d x r} : A^T A = I }, for the
// learned subspace projector (host, through a CBLAS).
//
//   riemannian_gradient(A, G)   G - A sym(A^T G): the part of a Euclidean gradient G that keeps
//                               A^T A = I to first order (sym(M) = (M + M^T) / 2)
//   polar(X)                    the orthogonal polar factor U of X = U H, by Newton-Schulz
//                               iterations X <- X (3 I - X^T X) / 2
//   qr_retract(X)               the Q factor of X = Q R with diag(R) > 0 (Gram-Schmidt): the simple
//                               reference retraction
//   stiefel_optimizer           heavy-ball momentum on the Riemannian gradient; the step direction is
//                               the polar factor of the momentum, and A <- polar(A - lr D)
//                               (or qr_retract), so A stays on the manifold to rounding.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../error.hpp"
#include "detail/blas.hpp"
#include "stiefel_options.hpp"

namespace zipccl::subspace {

// A dense row-major matrix.
template <class T>
struct matrix {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "matrix: float or double");
  std::size_t rows = 0, cols = 0;
  std::vector<T> v;
  matrix() = default;
  matrix(std::size_t r, std::size_t c, T fill = T(0)) : rows(r), cols(c), v(r * c, fill) {}
  T* data() { return v.data(); }
  const T* data() const { return v.data(); }
  T& operator()(std::size_t i, std::size_t j) { return v[i * cols + j]; }
  T operator()(std::size_t i, std::size_t j) const { return v[i * cols + j]; }
};

// *c = op(a) op(b) + beta * (*c), op transposing where trans_a / trans_b say, through the
// subspace codec's BLAS. With beta == 0, *c is made op(a).rows x op(b).cols first; otherwise it
// must have that shape. An inner dimension of 0 gives beta * (*c) (zeros with beta == 0). beta
// takes any arithmetic value (1.0 for a float matrix). invalid_argument, with c untouched, for a
// null c, a c that is a or b, shapes that do not fit, or a dimension past the BLAS's int.
template <class T>
status multiply(const matrix<T>& a, bool trans_a, const matrix<T>& b, bool trans_b, matrix<T>* c,
                std::common_type_t<T> beta = T(0)) {
  const std::size_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols;
  const std::size_t kb = trans_b ? b.cols : b.rows, n = trans_b ? b.rows : b.cols;
  constexpr std::size_t most = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (c == nullptr || c == &a || c == &b || k != kb || m > most || n > most || k > most ||
      (beta != T(0) && (c->rows != m || c->cols != n)))
    return status::invalid_argument;
  if (beta == T(0)) *c = matrix<T>(m, n);
  if (m == 0 || n == 0) return status::success;
  if (k == 0) {  // (the BLAS refuses a leading dimension of 0)
    for (T& x : c->v) x *= beta;
    return status::success;
  }
  detail::gemm<T>(trans_a, trans_b, m, n, k, T(1), a.data(), a.cols, b.data(), b.cols, beta, c->data(), n);
  return status::success;
}

template <class T>
T frobenius(const matrix<T>& a) {
  double s = 0;
  for (T x : a.v) s += static_cast<double>(x) * x;
  return static_cast<T>(std::sqrt(s));
}

// ||A^T A - I||_F: how far A is from the manifold.
template <class T>
T orthogonality_error(const matrix<T>& a) {
  matrix<T> g(a.cols, a.cols);
  detail::gemm<T>(true, false, a.cols, a.cols, a.rows, T(1), a.data(), a.cols, a.data(), a.cols, T(0), g.data(),
                  a.cols);
  double s = 0;
  for (std::size_t i = 0; i < a.cols; ++i)
    for (std::size_t j = 0; j < a.cols; ++j) {
      const double e = g(i, j) - (i == j ? 1.0 : 0.0);
      s += e * e;
    }
  return static_cast<T>(std::sqrt(s));
}

// out = G - A sym(A^T G).
template <class T>
status riemannian_gradient(const matrix<T>& a, const matrix<T>& g, matrix<T>* out) {
  if (out == nullptr || g.rows != a.rows || g.cols != a.cols) return status::invalid_argument;
  const std::size_t r = a.cols;
  matrix<T> s(r, r);
  detail::gemm<T>(true, false, r, r, a.rows, T(1), a.data(), r, g.data(), r, T(0), s.data(), r);  // A^T G
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = i; j < r; ++j) {
      const T m = (s(i, j) + s(j, i)) / 2;
      s(i, j) = s(j, i) = m;
    }
  *out = g;
  detail::gemm<T>(false, false, a.rows, r, r, T(-1), a.data(), r, s.data(), r, T(1), out->data(), r);
  return status::success;
}

// Replaces X (d x r, d >= r, full rank) by its orthogonal polar factor. With `normalize` X is first
// scaled to unit Frobenius norm (any full-rank X converges then; a few more iterations for small
// singular values); without it X should be near the manifold already (a retraction). Stops when
// ||X^T X - I||_F <= tol or after max_iters; returns invalid_argument for a non-finite or zero X.
template <class T>
status polar(matrix<T>* x, int max_iters = 60, T tol = std::is_same_v<T, float> ? T(2e-6) : T(1e-12),
             bool normalize = false) {
  if (x == nullptr || x->rows < x->cols) return status::invalid_argument;
  const T norm = frobenius(*x);
  if (!std::isfinite(norm) || norm == T(0)) return status::invalid_argument;
  if (normalize)
    for (T& e : x->v) e /= norm;
  const std::size_t d = x->rows, r = x->cols;
  matrix<T> g(r, r), next(d, r);
  for (int it = 0; it < max_iters; ++it) {
    detail::gemm<T>(true, false, r, r, d, T(1), x->data(), r, x->data(), r, T(0), g.data(), r);  // X^T X
    double err = 0;
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < r; ++j) {
        const double e = g(i, j) - (i == j ? 1.0 : 0.0);
        err += e * e;
      }
    if (std::sqrt(err) <= tol) return status::success;
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < r; ++j) g(i, j) = (i == j ? T(3) : T(0)) - g(i, j);
    detail::gemm<T>(false, false, d, r, r, T(0.5), x->data(), r, g.data(), r, T(0), next.data(), r);
    std::swap(x->v, next.v);
  }
  return status::success;  // the caller checks orthogonality_error where it matters
}

// Replaces X by the Q of X = Q R with diag(R) > 0, by modified Gram-Schmidt (twice, for accuracy).
template <class T>
status qr_retract(matrix<T>* x) {
  if (x == nullptr || x->rows < x->cols) return status::invalid_argument;
  const std::size_t d = x->rows, r = x->cols;
  for (std::size_t j = 0; j < r; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::size_t i = 0; i < d; ++i) dot += static_cast<double>((*x)(i, k)) * (*x)(i, j);
        for (std::size_t i = 0; i < d; ++i) (*x)(i, j) -= static_cast<T>(dot) * (*x)(i, k);
      }
    double nrm = 0;
    for (std::size_t i = 0; i < d; ++i) nrm += static_cast<double>((*x)(i, j)) * (*x)(i, j);
    nrm = std::sqrt(nrm);
    if (!(nrm > 0) || !std::isfinite(nrm)) return status::invalid_argument;  // rank deficient
    for (std::size_t i = 0; i < d; ++i) (*x)(i, j) = static_cast<T>((*x)(i, j) / nrm);
  }
  return status::success;
}

// Heavy-ball momentum on St(d, r). step() takes the Euclidean gradient of the loss at A.
template <class T>
class stiefel_optimizer {
 public:
  stiefel_optimizer(std::size_t d, std::size_t r, stiefel_options o = {}) : opt_(o), m_(d, r) {}

  const stiefel_options& options() const { return opt_; }
  void set_lr(double lr) { opt_.lr = lr; }  // for a schedule
  const matrix<T>& momentum() const { return m_; }

  status step(matrix<T>* a, const matrix<T>& euclidean_grad) {
    if (a == nullptr || a->rows != m_.rows || a->cols != m_.cols || euclidean_grad.rows != m_.rows ||
        euclidean_grad.cols != m_.cols || !(opt_.lr >= 0) || !(opt_.momentum >= 0 && opt_.momentum < 1))
      return status::invalid_argument;
    for (T gv : euclidean_grad.v)
      if (!std::isfinite(gv)) return status::invalid_argument;
    matrix<T> rg;
    status s = riemannian_gradient(*a, euclidean_grad, &rg);
    if (s != status::success) return s;
    // carry the momentum to the tangent space at A, then add the new gradient
    for (std::size_t i = 0; i < m_.v.size(); ++i) m_.v[i] = static_cast<T>(opt_.momentum) * m_.v[i] + rg.v[i];
    s = riemannian_gradient(*a, matrix<T>(m_), &m_);
    if (s != status::success) return s;
    matrix<T> dir = m_;
    if (frobenius(dir) == T(0)) return status::success;  // nothing to do
    if (polar(&dir, opt_.direction_iters, T(0), true) != status::success) return status::success;
    for (std::size_t i = 0; i < a->v.size(); ++i) a->v[i] -= static_cast<T>(opt_.lr) * dir.v[i];
    return opt_.retract == retraction::polar ? polar(a) : qr_retract(a);
  }

 private:
  stiefel_options opt_;
  matrix<T> m_;
};

}  // namespace zipccl::subspace
