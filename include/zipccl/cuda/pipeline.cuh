// zipccl: where a device collective runs. cuda::lanes names the streams of one call; a
// cuda::pipeline owns what a pipelined call needs beyond the caller's stream.
//
//   zipccl::cuda::pipeline p(zipccl::cuda::pipeline_slots(count, opt));   // once, outside any capture
//   zipccl::cuda::all_gather<C>(send, recv, count, t, ws, bytes, status_dev, p.on(stream), opt);
//
// A plain cudaStream_t converts to lanes: the call runs on that one stream, the codec kernels and
// the transport's operations one after another. With a pipeline the transport's operations run
// on the pipeline's transfer stream and the codec kernels on the caller's, joined by events
// segment by segment, so that the kernels of one segment overlap the transfer of another (the
// segments are collective_options::pipeline.segment_elems elements, as on the wire). The call
// still starts after the work enqueued on the caller's stream before it, and the work enqueued
// there after it waits for the whole call (the transfer stream forks from the caller's stream
// and joins it again, so a pipelined call can be captured in a CUDA graph as one piece).
//
// Events: two for the joins and `slots` for the segments that wait for a kernel before they go
// out (a reduce_scatter's re-encoded segments: one slot per segment of a block; an all_to_all's
// blocks coded ahead: up to pipeline.depth). pipeline_slots() says how many a block size needs;
// a pipelined call with too few is refused (invalid_argument), as a workspace too small is.
// A pipeline serves one call at a time (its events are reused from call to call in stream order).
//
// transport::cuda_local: every rank's transfer stream must have a hardware queue of its own, as
// its rank stream does, so a pipelined world of n ranks on one GPU wants
// CUDA_DEVICE_MAX_CONNECTIONS >= 2 n (create the pipelines right after the world).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "../collective/common.hpp"
#include "../collective/detail/fixed_wire.hpp"
#include "../collective/schedule.hpp"
#include "../error.hpp"
#include "runtime.cuh"

namespace zipccl::cuda {

// The streams (and events) of one call.
struct lanes {
  cudaStream_t stream = nullptr;       // the caller's: the codec kernels; the call is ordered here
  cudaStream_t transfer = nullptr;     // the transport's operations; null: `stream` (no overlap)
  const cudaEvent_t* events = nullptr; // 2 + slots events (cudaEventDisableTiming)
  std::uint32_t slots = 0;

  lanes() = default;
  lanes(cudaStream_t s) : stream(s) {}  // NOLINT: a stream is the one-stream executor
  lanes(cudaStream_t s, cudaStream_t x, const cudaEvent_t* ev, std::uint32_t n)
      : stream(s), transfer(x), events(ev), slots(n) {}
  bool pipelined() const { return transfer != nullptr && transfer != stream; }
};

// The segment slots a pipelined call on blocks of up to `block_count` elements needs: one per
// segment of a block (reduce_scatter, all_reduce with block_count = ceil(count / ranks)), at
// least one (all_gather, send, recv and all_to_all run with any number: all_to_all codes up to
// min(slots, pipeline.depth) blocks ahead).
inline std::uint32_t pipeline_slots(std::uint64_t block_count, const collective_options& opt = {}) {
  const collective::segmentation seg(block_count, collective::detail::device_chunk_elems,
                                     collective::detail::device_segment_elems(opt.pipeline.segment_elems));
  const std::uint64_t n = seg.segments > 1 ? seg.segments : 1;
  return n > 0xFFFFFFu ? 0xFFFFFFu : static_cast<std::uint32_t>(n);
}

// Owns a transfer stream (non-blocking) and the events; on() lends them to one call at a time.
class pipeline {
 public:
  // Throws zipccl::error (cuda_error) when CUDA refuses the stream or the events.
  explicit pipeline(std::uint32_t slots = 1) {
    if (cudaStreamCreateWithFlags(&transfer_, cudaStreamNonBlocking) != cudaSuccess) {
      transfer_ = nullptr;
      throw error(status::cuda_error, "cuda::pipeline: cudaStreamCreateWithFlags");
    }
    if (reserve(slots) != status::success) {
      release();
      throw error(status::cuda_error, "cuda::pipeline: cudaEventCreateWithFlags");
    }
  }
  ~pipeline() { release(); }
  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  // Grows the event ring to `slots` (host only: not inside a call; fine between captures).
  status reserve(std::uint32_t slots) {
    const std::size_t want = static_cast<std::size_t>(slots) + 2;
    if (events_.capacity() < want) events_.reserve(want);
    while (events_.size() < want) {
      cudaEvent_t e = nullptr;
      if (const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); err != cudaSuccess)
        return detail::fail(err, "cuda::pipeline: cudaEventCreateWithFlags");
      events_.push_back(e);
    }
    return status::success;
  }
  std::uint32_t slots() const { return events_.size() < 2 ? 0 : static_cast<std::uint32_t>(events_.size() - 2); }
  cudaStream_t transfer_stream() const { return transfer_; }
  lanes on(cudaStream_t stream) const { return lanes(stream, transfer_, events_.data(), slots()); }

 private:
  void release() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    events_.clear();
    if (transfer_) (void)cudaStreamDestroy(transfer_);  // (released once its work is done)
    transfer_ = nullptr;
  }
  cudaStream_t transfer_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

}  // namespace zipccl::cuda
