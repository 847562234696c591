// zipccl: what every device call shares with the CUDA runtime.
//
//   - The error behind a status::cuda_error. A device call folds every runtime or cuBLAS failure
//     into status::cuda_error; the failing code and the step that saw it stay retrievable on the
//     calling thread until the next failure:
//
//       if (zipccl::cuda::compress<codec>(...) == zipccl::status::cuda_error)
//         std::fprintf(stderr, "%s\n", zipccl::cuda::last_error_string().c_str());
//
//   - Kernel launches that report their own launch error (cudaLaunchKernelEx's return value):
//     the runtime's sticky "last error" of the thread is neither read nor cleared, so an earlier
//     error of the caller's is never taken for zipccl's, nor hidden from the caller.
//
//   - Temp storage at any address: a caller may carve it from a pool at an odd offset. Every size
//     query asks for temp_align - 1 bytes of slack, and the calls align the pointer themselves,
//     as CUB's temp storage does.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "../error.hpp"

namespace zipccl::cuda {

// A runtime or library failure behind a status::cuda_error.
struct failure {
  cudaError_t cuda = cudaSuccess;  // the runtime's code; cudaSuccess when a library call failed
  int library = 0;  // a cublasStatus_t (cuBLAS), an ncclResult_t (transport::nccl), else 0; for a
                    // transport that refused part way through a device collective without a
                    // failure of its own, the zipccl status it returned
  const char* step = "";           // the zipccl call and step, e.g. "cuda::compress: encode launch"
};

namespace detail {

inline failure& failure_slot() {
  static thread_local failure f;
  return f;
}

// How many failures this thread has recorded: a call that compares it before and after a step
// knows whether the step recorded its own.
inline std::uint64_t& failures_recorded() {
  static thread_local std::uint64_t n = 0;
  return n;
}

inline status fail(cudaError_t e, const char* step) {
  ++failures_recorded();
  failure& f = failure_slot();
  f.cuda = e;
  f.library = 0;
  f.step = step;
  return status::cuda_error;
}

inline status fail_library(int code, const char* step) {
  ++failures_recorded();
  failure& f = failure_slot();
  f.cuda = cudaSuccess;
  f.library = code;
  f.step = step;
  return status::cuda_error;
}

inline status check(cudaError_t e, const char* step) { return e == cudaSuccess ? status::success : fail(e, step); }

// Launches kernel<<<grid, block, 0, stream>>>(args...) and returns the launch's own error.
template <class... Params, class... Args>
status launch(const char* step, dim3 grid, dim3 block, cudaStream_t stream, void (*kernel)(Params...),
              Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = nullptr;
  cfg.numAttrs = 0;
  return check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), step);
}

}  // namespace detail

// The alignment the device calls give their temp storage (CUB's as well).
inline constexpr std::size_t temp_align = 256;

// The failure behind the most recent status::cuda_error returned on this thread.
inline failure last_error() { return detail::failure_slot(); }

inline void clear_last_error() { detail::failure_slot() = failure{}; }

// last_error() in words, e.g. "cuda::compress: encode launch: cudaErrorInvalidConfiguration
// (invalid configuration argument)"; "no error" when none was recorded.
inline std::string last_error_string() {
  const failure f = detail::failure_slot();
  if (f.cuda == cudaSuccess && f.library == 0) return "no error";
  std::string s = f.step;
  s += ": ";
  if (f.cuda != cudaSuccess) {
    s += cudaGetErrorName(f.cuda);
    s += " (";
    s += cudaGetErrorString(f.cuda);
    s += ")";
  } else {
    s += "library status " + std::to_string(f.library);
  }
  return s;
}

namespace detail {

// Where a caller's temp storage block starts once aligned to temp_align, and whether `bytes` of
// it (after the alignment) fit in the caller's temp_bytes.
struct aligned_temp {
  std::uint8_t* base = nullptr;
  bool fits = false;
};

inline aligned_temp align_temp(void* temp, std::size_t temp_bytes, std::size_t bytes) {
  const auto at = reinterpret_cast<std::uintptr_t>(temp);
  const std::uintptr_t up = (at + temp_align - 1) & ~static_cast<std::uintptr_t>(temp_align - 1);
  aligned_temp r;
  r.base = static_cast<std::uint8_t*>(temp) + (up - at);
  r.fits = temp_bytes >= up - at && temp_bytes - (up - at) >= bytes;
  return r;
}

// The size to ask a caller for: `bytes` at any alignment of the caller's pointer.
constexpr std::size_t with_align_slack(std::size_t bytes) { return bytes + temp_align - 1; }

}  // namespace detail
}  // namespace zipccl::cuda
