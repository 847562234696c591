// zipccl: the matrix products of the host subspace codec, through a CBLAS (OpenBLAS on Debian:
// libopenblas-dev; link BLAS::BLAS, or the zipccl::subspace CMake target). Row-major, float or
// double, with the transposes a GEMM takes.
#pragma once

#include <cblas.h>

#include <cstddef>
#include <type_traits>

namespace zipccl::subspace::detail {

// C (m x n) = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n; lda, ldb, ldc are the
// row strides of A, B and C as stored.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
          std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (m == 0 || n == 0) return;
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace zipccl::subspace::detail
