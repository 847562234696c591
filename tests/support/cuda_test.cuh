// Helpers for the gpu-labelled tests: a device buffer and a main() that skips without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <zipccl/cuda/runtime.cuh>
#include <zipccl/error.hpp>

namespace zipccl::testing {

// Whether the tests launch the rANS decoder by warps (cuda::tuning<..., RansWarps > 0>):
// ZIPCCL_TEST_RANS_WARPS=0 turns it off, and the tests that use it then decode with the same
// block size by blocks (which must give the same statuses and values) or skip that part.
// scripts/gpu-check.sh runs test_cuda_codec so first: a fault in that kernel, which has not yet
// run on a GPU, ends the process's CUDA context and would fail every test after it.
inline bool rans_warps_on() {
  const char* e = std::getenv("ZIPCCL_TEST_RANS_WARPS");
  return e == nullptr || std::string(e) != "0";
}
// Whether a test case about a tuning of `rans_warps` warps a chunk must skip itself (the decoder by
// warps off, and the case about it alone); says so in the test's output.
inline bool skips_rans_warps(int rans_warps) {
  if (rans_warps == 0 || rans_warps_on()) return false;
  WARN("rANS by warps off (ZIPCCL_TEST_RANS_WARPS=0): skipped");
  return true;
}

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

// Ends the process with a report when its scope lasts longer than `seconds`: a gpu test that
// stalls (a spinning wait never released, a host thread stuck in a CUDA call) then says what it
// was doing, instead of hanging until ctest kills it without a word. `what` names the case; `dump`
// (optional) adds what it can read of the device, in a thread of its own that gets 5 seconds,
// since it may block on the stalled context itself.
class watchdog {
 public:
  watchdog(double seconds, std::string what, std::function<std::string()> dump = {})
      : thread_([this, seconds, what = std::move(what), dump = std::move(dump)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
          std::fprintf(stderr, "watchdog: %s: not done after %.0f s\n", what.c_str(), seconds);
          std::fflush(stderr);
          if (dump) {
            std::thread([dump] {
              const std::string d = dump();
              std::fprintf(stderr, "watchdog: %s\n", d.c_str());
              std::fflush(nullptr);
              std::_Exit(70);
            }).detach();
            std::this_thread::sleep_for(std::chrono::seconds(5));
            std::fprintf(stderr, "watchdog: the device could not be read (the context is blocked)\n");
          }
          std::fflush(nullptr);  // (what Catch2 printed so far, too)
          std::_Exit(70);
        }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // (last: starts once the members above exist)
};

// Runs the Catch2 session, or exits with 77 (ctest's skip code here) when there is no GPU. The
// environment is left as the caller set it: gpu-check.sh runs the transport and collective tests
// under CUDA_MODULE_LOADING=LAZY, CUDA_DEVICE_MAX_CONNECTIONS=1 and CUDA_LAUNCH_BLOCKING=1 too.
inline int run_gpu_tests(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

}  // namespace zipccl::testing
