// What the device benchmarks share: a device allocation that frees itself, and event timing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include <zipccl/error.hpp>

namespace zipccl::bench {

// cudaMalloc'd bytes (p stays null when the allocation fails; the benchmark then reports it).
struct device_mem {
  void* p = nullptr;
  explicit device_mem(std::size_t bytes) {
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) p = nullptr;
  }
  ~device_mem() { cudaFree(p); }
  device_mem(const device_mem&) = delete;
  device_mem& operator=(const device_mem&) = delete;
  float* f() const { return static_cast<float*>(p); }
};

// The first failed status among a benchmark's calls (launch and argument errors; errors found on
// the device land in its status word), reported instead of a figure.
struct first_error {
  zipccl::status first = zipccl::status::success;
  void operator()(zipccl::status s) {
    if (first == zipccl::status::success) first = s;
  }
  bool failed() const { return first != zipccl::status::success; }
};

// Milliseconds per call of f: CUDA events around `reps` calls after one warm-up call.
template <class F>
double time_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  f();
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

}  // namespace zipccl::bench
