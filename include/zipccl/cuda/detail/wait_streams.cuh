// zipccl: a wait on CUDA streams with a deadline, for waits that must not hang.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <thread>

#include "../../error.hpp"
#include "../runtime.cuh"

namespace zipccl::cuda::detail {

// Waits for the work queued on each of `streams` (a range of cudaStream_t), polling one stream
// after another and sleeping `pause` between polls (none: a busy poll), until `until` (any
// steady_clock time point: one of double seconds may be infinite, a wait without end): success
// once all have finished; timed_out at the deadline, with work still queued; cuda_error (recorded
// under `step`, cuda::last_error) when a stream reports an error. The device tests wait on their
// ranks' streams with it, so that a stall fails a case instead of hanging it.
template <class Streams, class Duration>
status wait_streams(const Streams& streams, std::chrono::time_point<std::chrono::steady_clock, Duration> until,
                    std::chrono::microseconds pause, const char* step) {
  for (cudaStream_t s : streams) {
    cudaError_t e;
    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > until) return status::timed_out;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    if (e != cudaSuccess) return fail(e, step);
  }
  return status::success;
}

}  // namespace zipccl::cuda::detail
