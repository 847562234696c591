// zipccl: the Stiefel optimizer on the GPU, the same steps as the host's stiefel_optimizer
// (stiefel.hpp), stream-ordered:
//
//   G_R  = G - A sym(A^T G)                  Riemannian gradient
//   M    = proj_A(momentum M + G_R)          heavy-ball momentum, carried to the tangent space at A
//   D    = polar(M / ||M||)                  direction_iters Newton-Schulz iterations
//   A    <- polar(A - lr D)                  retract_iters Newton-Schulz iterations (polar retraction)
//
// Newton-Schulz: X <- 1.5 X - 0.5 X (X^T X), two cuBLAS GEMMs. The device runs a fixed number of
// iterations (it never stops the stream to test convergence). Only the polar retraction is offered
// here (the host's QR retraction is its reference).
//
// The optimizer owns its momentum and scratch (allocated once, in the constructor, which throws
// zipccl::error on failure); step() allocates nothing. The constructor does no stream work: the
// momentum is zeroed on the stream of the first step() (or of reset()), so a first step on a
// non-blocking stream never reads it before it is zero. Before capturing step() into a graph, call
// reset() (or run one step) outside the capture: a first step under capture is invalid_argument. The products run in full fp32 (fp64 for
// double) whatever math mode the caller's handle is in (blas.cuh). A gradient with a NaN or infinity leaves A
// and the momentum unchanged and writes invalid_argument to *status_dev; a zero momentum leaves A
// unchanged, as on the host.
#pragma once

#include <cstddef>

#include "../stiefel_options.hpp"
#include "blas.cuh"
#include "detail/kernels.cuh"

namespace zipccl::subspace::cuda {

template <class T>
class stiefel_optimizer {
 public:
  stiefel_optimizer(std::size_t d, std::size_t r, stiefel_options o = {}) : opt_(o), d_(d), r_(r) {
    if (d == 0 || r == 0 || r > d) throw error(status::invalid_argument, "cuda::stiefel_optimizer: need 0 < r <= d");
    detail::carver c(nullptr);
    layout(c);
    if (cudaMalloc(&mem_, c.bytes()) != cudaSuccess) throw error(status::cuda_error, "cuda::stiefel_optimizer: cudaMalloc");
    detail::carver at(mem_);
    layout(at);
  }
  ~stiefel_optimizer() { cudaFree(mem_); }
  stiefel_optimizer(const stiefel_optimizer&) = delete;
  stiefel_optimizer& operator=(const stiefel_optimizer&) = delete;

  const stiefel_options& options() const { return opt_; }
  void set_lr(double lr) { opt_.lr = lr; }
  // The momentum buffer; its values are defined once a step() or reset() was enqueued.
  view<const T> momentum() const { return {m_, d_, r_}; }

  // Zeroes the momentum on `stream` (the next step starts from rest).
  status reset(cudaStream_t stream) {
    const status s = detail::check(cudaMemsetAsync(m_, 0, d_ * r_ * sizeof(T), stream), "cuda::stiefel_optimizer::reset");
    if (s == status::success) zeroed_ = true;
    return s;
  }

  // One step on A (d x r, device) from the Euclidean gradient G (d x r, device).
  status step(view<T> a, view<const T> g, status* status_dev, const blas_context& blas, cudaStream_t stream) {
    if (a.data == nullptr || g.data == nullptr || a.rows != d_ || a.cols != r_ || g.rows != d_ || g.cols != r_ ||
        status_dev == nullptr || blas.handle == nullptr || !(opt_.lr >= 0) ||
        !(opt_.momentum >= 0 && opt_.momentum < 1) || opt_.retract != retraction::polar || opt_.direction_iters < 0 ||
        opt_.retract_iters < 0)
      return status::invalid_argument;
    constexpr const char* call = "cuda::stiefel_optimizer::step";
    detail::blas_scope scope(blas, stream, detail::blas_math::full_fp32, call);
    if (scope.state() != status::success) return scope.state();
    return scope.finish(run_step(a, g, status_dev, blas.handle, stream, call));
  }

 private:
  static constexpr int bad_gradient = 1, no_direction = 2;

  status run_step(view<T> a, view<const T> g, status* status_dev, cublasHandle_t h, cudaStream_t stream,
                  const char* call) {
    using namespace detail;
    const std::size_t n = d_ * r_;
    const dim3 grid(blocks_for(n)), block(threads);
    status s = status::success;
    if (!zeroed_) {  // a reset captured into a graph would zero the momentum at every replay
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      s = check(cudaStreamIsCapturing(stream, &capture), call);
      if (s == status::success && capture != cudaStreamCaptureStatusNone) return status::invalid_argument;
      if (s == status::success) s = reset(stream);
    }
    if (s == status::success) s = check(cudaMemsetAsync(status_dev, 0, sizeof(status), stream), call);
    if (s == status::success) s = check(cudaMemsetAsync(flags_, 0, sizeof(int), stream), call);
    if (s == status::success) s = check(cudaMemsetAsync(norm2_, 0, sizeof(double), stream), call);
    if (s == status::success) s = launch(call, grid, block, stream, flag_non_finite<T>, n, g.data, flags_, bad_gradient);
    // rg = G - A sym(A^T G), then next = momentum * M + rg, then work = next - A sym(A^T next)
    if (s == status::success) s = tangent(h, stream, a.data, g.data, rg_);
    if (s == status::success)
      s = launch(call, grid, block, stream, axpby<T>, n, static_cast<T>(opt_.momentum), m_, T(1), rg_, next_);
    if (s == status::success) s = tangent(h, stream, a.data, next_, work_);
    if (s == status::success) s = launch(call, grid, block, stream, copy_unless<T>, n, work_, m_, flags_, bad_gradient);
    // the direction: work / ||work||, then its polar factor
    if (s == status::success) s = launch(call, grid, block, stream, sum_squares<T>, n, work_, norm2_);
    if (s == status::success)
      s = launch(call, grid, block, stream, scale_to_unit<T>, n, work_, norm2_, flags_, no_direction);
    T* dir = nullptr;
    if (s == status::success) s = newton_schulz(h, stream, work_, next_, opt_.direction_iters, &dir);
    if (s != status::success) return s;
    // A - lr D into the free buffer, its polar factor, and back into A unless a flag says no
    T* x = dir == work_ ? next_ : work_;
    T* spare = rg_;
    s = launch(call, grid, block, stream, axpby<T>, n, T(1), a.data, static_cast<T>(-opt_.lr), dir, x);
    T* result = nullptr;
    if (s == status::success) s = newton_schulz(h, stream, x, spare, opt_.retract_iters, &result);
    if (s == status::success)
      s = launch(call, grid, block, stream, copy_unless<T>, n, result, a.data, flags_, bad_gradient | no_direction);
    if (s == status::success)
      s = launch(call, dim3(1), dim3(32), stream, detail::status_if<>, flags_, bad_gradient,
                 status_dev, status::invalid_argument);
    return s;
  }

  template <class C>
  void layout(C& c) {
    m_ = c.template take<T>(d_ * r_);
    rg_ = c.template take<T>(d_ * r_);
    next_ = c.template take<T>(d_ * r_);
    work_ = c.template take<T>(d_ * r_);
    s_ = c.template take<T>(r_ * r_);
    norm2_ = c.template take<double>(1);
    flags_ = c.template take<int>(1);
  }

  // out = x - A sym(A^T x)
  status tangent(cublasHandle_t h, cudaStream_t stream, const T* a, const T* x, T* out) {
    status s = detail::gemm<T>(h, true, false, r_, r_, d_, T(1), a, r_, x, r_, T(0), s_, r_);
    if (s != status::success) return s;
    s = detail::launch("cuda::stiefel_optimizer: symmetrize", dim3(detail::blocks_for(r_ * r_)), dim3(detail::threads),
                       stream, detail::symmetrize<T>, s_, r_);
    if (s == status::success)
      s = detail::check(cudaMemcpyAsync(out, x, d_ * r_ * sizeof(T), cudaMemcpyDeviceToDevice, stream),
                        "cuda::stiefel_optimizer: cudaMemcpyAsync");
    if (s != status::success) return s;
    return detail::gemm<T>(h, false, false, d_, r_, r_, T(-1), a, r_, s_, r_, T(1), out, r_);
  }

  // `iters` iterations X <- 1.5 X - 0.5 X (X^T X) between buffers x and y; *result says which holds
  // the last iterate.
  status newton_schulz(cublasHandle_t h, cudaStream_t stream, T* x, T* y, int iters, T** result) {
    for (int it = 0; it < iters; ++it) {
      status s = detail::gemm<T>(h, true, false, r_, r_, d_, T(1), x, r_, x, r_, T(0), s_, r_);
      if (s == status::success)
        s = detail::check(cudaMemcpyAsync(y, x, d_ * r_ * sizeof(T), cudaMemcpyDeviceToDevice, stream),
                          "cuda::stiefel_optimizer: cudaMemcpyAsync");
      if (s == status::success) s = detail::gemm<T>(h, false, false, d_, r_, r_, T(-0.5), x, r_, s_, r_, T(1.5), y, r_);
      if (s != status::success) return s;
      T* t = x;
      x = y;
      y = t;
    }
    *result = x;
    return status::success;
  }

 private:
  stiefel_options opt_;
  std::size_t d_, r_;
  void* mem_ = nullptr;
  bool zeroed_ = false;  // the momentum was zeroed on some step's (or reset's) stream
  T *m_ = nullptr, *rg_ = nullptr, *next_ = nullptr, *work_ = nullptr, *s_ = nullptr;
  double* norm2_ = nullptr;
  int* flags_ = nullptr;
};

}  // namespace zipccl::subspace::cuda
