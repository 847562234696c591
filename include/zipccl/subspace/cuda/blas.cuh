// zipccl: what the device subspace codec shares: a view of a row-major matrix in device memory,
// the matrix products through cuBLAS (64-bit sizes, row-major on top of cuBLAS's column-major),
// and the carving of a caller's temp storage.
//
// Every device call of zipccl::subspace::cuda runs on the caller's stream through the caller's
// cuBLAS handle and leaves the handle as it found it:
//   - stream: a handle already bound to the call's stream is not rebound, so a workspace the
//     caller set on it (cublasSetWorkspace) stays in use. A handle bound to another stream is
//     bound to the call's stream for the call and rebound to its own afterwards; cuBLAS resets
//     the workspace whenever the stream changes and has no way to read it back, so pass the
//     workspace in a blas_context to have it set again afterwards.
//   - pointer mode: set to host for the call (alpha and beta live on the host stack) and
//     restored, so a handle in CUBLAS_POINTER_MODE_DEVICE (graph-captured code) works.
//   - math mode: the projections (encode, decode, their backward passes) follow the handle's
//     setting, so a caller's TF32 mode applies to them; the Stiefel optimizer's products run in
//     CUBLAS_DEFAULT_MATH (full fp32) whatever the handle says, because Newton-Schulz stalls near
//     1e-3 of orthonormality in TF32. The mode is restored afterwards.
// Nothing synchronises or allocates behind the caller's back. A status::cuda_error keeps the
// failing CUDA or cuBLAS code for zipccl::cuda::last_error() (cuda/runtime.cuh).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../cuda/runtime.cuh"
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

// The caller's cuBLAS handle, and the workspace it should keep (see the top of this file). Every
// call takes one; a plain cublasHandle_t converts to it.
struct blas_context {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;  // optional: set again on the handle after the call rebinds its stream
  std::size_t workspace_bytes = 0;
  blas_context() = default;
  blas_context(cublasHandle_t h) : handle(h) {}  // NOLINT: implicit on purpose
  blas_context(cublasHandle_t h, void* ws, std::size_t ws_bytes) : handle(h), workspace(ws), workspace_bytes(ws_bytes) {}
};

namespace detail {

using zipccl::cuda::detail::launch;

inline status check(cudaError_t e, const char* step) { return zipccl::cuda::detail::check(e, step); }
inline status check(cublasStatus_t e, const char* step) {
  return e == CUBLAS_STATUS_SUCCESS ? status::success : zipccl::cuda::detail::fail_library(static_cast<int>(e), step);
}

enum class blas_math { caller, full_fp32 };

// Binds a handle for one call (stream, pointer mode, math mode) and puts it back: finish() or,
// on an early return, the destructor.
class blas_scope {
 public:
  blas_scope(const blas_context& b, cudaStream_t stream, blas_math math, const char* call) : b_(b), call_(call) {
    cublasHandle_t h = b.handle;
    state_ = check(cublasGetStream(h, &old_stream_), call);
    if (state_ == status::success) state_ = check(cublasGetPointerMode(h, &old_pointer_), call);
    if (state_ == status::success) state_ = check(cublasGetMathMode(h, &old_math_), call);
    if (state_ != status::success) return;
    saved_ = true;
    if (old_stream_ != stream) {
      rebound_ = true;
      state_ = check(cublasSetStream(h, stream), call);
    }
    if (state_ == status::success) state_ = check(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), call);
    if (state_ == status::success && math == blas_math::full_fp32)
      state_ = check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), call);
  }
  ~blas_scope() { (void)restore(); }
  blas_scope(const blas_scope&) = delete;
  blas_scope& operator=(const blas_scope&) = delete;

  // success when the handle was bound; an error to return at once otherwise
  status state() const { return state_; }

  // Restores the handle; returns s, or the restore's error when s is success.
  status finish(status s) {
    if (s == status::success) return restore();
    const zipccl::cuda::failure cause = zipccl::cuda::last_error();  // the error being returned
    (void)restore();
    zipccl::cuda::detail::failure_slot() = cause;
    return s;
  }

 private:
  status restore() {
    if (!saved_) return status::success;
    saved_ = false;
    cublasHandle_t h = b_.handle;
    status r = check(cublasSetPointerMode(h, old_pointer_), call_);
    const status m = check(cublasSetMathMode(h, old_math_), call_);
    if (r == status::success) r = m;
    if (rebound_) {
      const status st = check(cublasSetStream(h, old_stream_), call_);
      if (r == status::success) r = st;
      if (b_.workspace != nullptr) {
        const status w = check(cublasSetWorkspace(h, b_.workspace, b_.workspace_bytes), call_);
        if (r == status::success) r = w;
      }
    }
    return r;
  }

  blas_context b_;
  const char* call_;
  status state_ = status::success;
  bool saved_ = false, rebound_ = false;
  cudaStream_t old_stream_ = nullptr;
  cublasPointerMode_t old_pointer_ = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t old_math_ = CUBLAS_DEFAULT_MATH;
};

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
                                static_cast<std::int64_t>(k), &alpha, b, ld(ldb), a, ld(lda), &beta, c, ld(ldc)),
                 "subspace::cuda: cublasSgemm_64");
  else
    return check(cublasDgemm_64(h, tb, ta, static_cast<std::int64_t>(n), static_cast<std::int64_t>(m),
                                static_cast<std::int64_t>(k), &alpha, b, ld(ldb), a, ld(lda), &beta, c, ld(ldc)),
                 "subspace::cuda: cublasDgemm_64");
}

// Hands out 256-byte-aligned pieces of a caller's temp storage, at whatever address it starts;
// with a null base it only counts (and asks for the slack that aligning the base may take).
class carver {
 public:
  explicit carver(void* base)
      : base_(base ? reinterpret_cast<unsigned char*>(
                         (reinterpret_cast<std::uintptr_t>(base) + 255) & ~static_cast<std::uintptr_t>(255))
                   : nullptr),
        slack_(base ? static_cast<std::size_t>(base_ - static_cast<unsigned char*>(base)) : 255) {}
  template <class T>
  T* take(std::size_t count) {
    const std::size_t at = (used_ + 255) / 256 * 256;
    used_ = at + count * sizeof(T);
    return base_ ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  // What the caller must provide: the pieces and the alignment slack (so never zero, which
  // would read as "ask again"). Against a real base, the slack is the one this base needed.
  std::size_t bytes() const { return used_ + slack_ + 1; }

 private:
  unsigned char* base_;
  std::size_t slack_;
  std::size_t used_ = 0;
};

}  // namespace detail
}  // namespace zipccl::subspace::cuda
