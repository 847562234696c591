// zipccl: what the device subspace codec shares: a view of a row-major matrix in device memory,
// the matrix products through cuBLAS (64-bit sizes, row-major on top of cuBLAS's column-major),
// and the carving of a caller's temp storage.
//
// Every device call of zipccl::subspace::cuda binds the caller's cuBLAS handle to the caller's
// stream (cublasSetStream) and runs on that stream; nothing synchronises or allocates behind the
// caller's back, and cuBLAS's default math mode is used (no TF32 unless the caller sets it on
// the handle).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../error.hpp"

namespace zipccl::subspace::cuda {

// A rows x cols row-major matrix in device memory (not owned). view<T> converts to view<const T>.
template <class T>
struct view {
  static_assert(std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, double>,
                "zipccl::subspace::cuda::view: float or double");
  T* data = nullptr;
  std::size_t rows = 0, cols = 0;
  std::size_t size() const { return rows * cols; }
  template <class U = T, std::enable_if_t<!std::is_const_v<U>, int> = 0>
  operator view<const U>() const {
    return {data, rows, cols};
  }
  // usable: a null pointer only for an empty matrix
  bool ok() const { return data != nullptr || size() == 0; }
};

namespace detail {

inline status check(cudaError_t e) { return e == cudaSuccess ? status::success : status::cuda_error; }
inline status check(cublasStatus_t e) { return e == CUBLAS_STATUS_SUCCESS ? status::success : status::cuda_error; }

// C (m x n) = alpha op(A) op(B) + beta C, row-major: lda, ldb, ldc are the row strides as stored.
// cuBLAS is column-major, so this computes C^T = op(B)^T op(A)^T.
template <class T>
status gemm(cublasHandle_t h, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
            const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (m == 0 || n == 0) return status::success;
  const auto ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto ld = [](std::size_t x) { return static_cast<std::int64_t>(x ? x : 1); };
  if constexpr (std::is_same_v<T, float>)
    return check(cublasSgemm_64(h, tb, ta, static_cast<std::int64_t>(n), static_cast<std::int64_t>(m),
                                static_cast<std::int64_t>(k), &alpha, b, ld(ldb), a, ld(lda), &beta, c, ld(ldc)));
  else
    return check(cublasDgemm_64(h, tb, ta, static_cast<std::int64_t>(n), static_cast<std::int64_t>(m),
                                static_cast<std::int64_t>(k), &alpha, b, ld(ldb), a, ld(lda), &beta, c, ld(ldc)));
}

// Hands out 256-byte-aligned pieces of a caller's temp storage; with a null base it only counts.
class carver {
 public:
  explicit carver(void* base) : base_(static_cast<unsigned char*>(base)) {}
  template <class T>
  T* take(std::size_t count) {
    const std::size_t at = (used_ + 255) / 256 * 256;
    used_ = at + count * sizeof(T);
    return base_ ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  // at least 16 bytes, so that a size of zero never reads as "ask again"
  std::size_t bytes() const { return used_ < 16 ? 16 : used_; }

 private:
  unsigned char* base_;
  std::size_t used_ = 0;
};

}  // namespace detail
}  // namespace zipccl::subspace::cuda
