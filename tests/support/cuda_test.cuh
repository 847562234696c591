// Helpers for the gpu-labelled tests: a device buffer and a main() that skips without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <catch2/catch.hpp>

namespace zipccl::testing {

template <class T>
struct device_buffer {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) {
    REQUIRE(cudaMalloc(&p, count * sizeof(T) + 1) == cudaSuccess);
  }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  std::vector<T> get(std::size_t count) const {
    std::vector<T> v(count);
    if (count) REQUIRE(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
  void put(const T* src, std::size_t count) {
    // a pageable copy may return before its DMA ends: finish it before work on other streams
    if (count) REQUIRE(cudaMemcpy(p, src, count * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
};

// Runs the Catch2 session, or exits with 77 (ctest's skip code here) when there is no GPU. Asks
// for 32 hardware queues per GPU before the first CUDA call (unless the environment says
// otherwise), so that transport::cuda_local can hold up to 32 ranks on one GPU.
inline int run_gpu_tests(int argc, char** argv) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

}  // namespace zipccl::testing
