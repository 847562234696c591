// zipccl: the PCA optimum of a projection without anchor, the ceiling the learned projector is
// measured against: the A in St(d, r) that minimises ||X - X A A^T||^2 spans the top r
// eigenvectors of X^T X (no centring: the codec does not centre either). Cyclic Jacobi rotations
// on the d x d Gram matrix, in double; d up to a few thousand.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

#include "../error.hpp"
#include "detail/blas.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

// Eigenvalues (descending) and eigenvectors (columns of vectors, same order) of a symmetric n x n
// matrix s (row-major, double).
inline void symmetric_eigen(std::vector<double> s, std::size_t n, std::vector<double>* values,
                            std::vector<double>* vectors) {
  std::vector<double> v(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, diag = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) (i == j ? diag : off) += s[i * n + j] * s[i * n + j];
    if (off <= 1e-30 * (diag > 0 ? diag : 1.0)) break;
    for (std::size_t p = 0; p + 1 < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        const double apq = s[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (s[q * n + q] - s[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), sn = t * c;
        for (std::size_t k = 0; k < n; ++k) {  // rows p, q
          const double a = s[p * n + k], b = s[q * n + k];
          s[p * n + k] = c * a - sn * b;
          s[q * n + k] = sn * a + c * b;
        }
        for (std::size_t k = 0; k < n; ++k) {  // columns p, q
          const double a = s[k * n + p], b = s[k * n + q];
          s[k * n + p] = c * a - sn * b;
          s[k * n + q] = sn * a + c * b;
        }
        for (std::size_t k = 0; k < n; ++k) {
          const double a = v[k * n + p], b = v[k * n + q];
          v[k * n + p] = c * a - sn * b;
          v[k * n + q] = sn * a + c * b;
        }
      }
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s[a * n + a] > s[b * n + b]; });
  values->assign(n, 0.0);
  vectors->assign(n * n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    (*values)[j] = s[order[j] * n + order[j]];
    for (std::size_t k = 0; k < n; ++k) (*vectors)[k * n + j] = v[k * n + order[j]];
  }
}

// The top-r principal directions of the rows of x (n x d), uncentred, as a d x r matrix with
// orthonormal columns; *retained (optional) gets the fraction of ||x||^2 they keep.
template <class T>
status pca_basis(const matrix<T>& x, std::size_t r, matrix<T>* a, double* retained = nullptr) {
  const std::size_t d = x.cols;
  if (a == nullptr || r == 0 || r > d) return status::invalid_argument;
  matrix<double> xd(x.rows, d);
  for (std::size_t i = 0; i < x.v.size(); ++i) xd.v[i] = static_cast<double>(x.v[i]);
  std::vector<double> gram(d * d, 0.0);
  detail::gemm<double>(true, false, d, d, x.rows, 1.0, xd.data(), d, xd.data(), d, 0.0, gram.data(), d);
  std::vector<double> values, vectors;
  symmetric_eigen(gram, d, &values, &vectors);
  *a = matrix<T>(d, r);
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < r; ++j) (*a)(i, j) = static_cast<T>(vectors[i * d + j]);
  if (retained != nullptr) {
    double top = 0, all = 0;
    for (std::size_t j = 0; j < d; ++j) {
      all += values[j];
      if (j < r) top += values[j];
    }
    *retained = all > 0 ? top / all : 0.0;
  }
  return status::success;
}

}  // namespace zipccl::subspace
