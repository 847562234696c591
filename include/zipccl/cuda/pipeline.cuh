// zipccl: where a device collective runs. cuda::lanes names the streams of one call; a
// cuda::pipeline owns (or borrows) what a pipelined call needs beyond the caller's stream.
//
//   auto p = zipccl::cuda::make_pipeline(transport, zipccl::cuda::pipeline_slots(count, opt));  // once
//   if (!p) ...  // the transport cannot take pipelined calls: pass the stream alone
//   zipccl::cuda::all_gather<C>(send, recv, count, transport, ws, bytes, status_dev, p->on(stream), opt);
//
// A plain cudaStream_t (or anything that converts to one) converts to lanes: the call runs on that
// one stream, the codec kernels and the transport's operations one after another. With a
// pipeline the transport's operations run on the pipeline's transfer stream and the codec kernels
// on the caller's, joined by events segment by segment, so that the kernels of one segment
// overlap the transfer of another (segments of collective_options::pipeline.segment_elems
// elements; a segment is one message on both executors, so ranks may mix them). The call still
// starts after the work enqueued on the caller's stream before it, and the work enqueued there
// after it waits for the whole call (the transfer stream forks from the caller's stream and joins
// it again, also on errors, so a pipelined call can be captured in a CUDA graph as one piece).
//
// Rules: one pipeline per rank and transport (calls through one pipeline share its transfer
// stream, so two ranks, or two communicators enqueued in different orders, would wait on each
// other in it); one call at a time (its events are reused from call to call in host enqueue
// order); lanes from on() hold a pointer to the events: take them again after reserve(). A
// transport with transfer_stream() takes pipelined lanes on that stream only (so a pipeline shared
// by ranks, or one of the caller's own, is refused there). The pipeline itself cannot be copied or
// moved; hold it by pointer (make_pipeline does, on the transport's stream or GPU: below).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "../collective/common.hpp"
#include "../collective/detail/fixed_wire.hpp"
#include "../collective/schedule.hpp"
#include "../error.hpp"
#include "../transport/device.hpp"
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

// The streams (and events) of one call.
struct lanes {
  cudaStream_t stream = nullptr;       // the caller's: the codec kernels; the call is ordered here
  cudaStream_t transfer = nullptr;     // the transport's operations; null: `stream` (no overlap)
  const cudaEvent_t* events = nullptr; // 2 + slots events (cudaEventDisableTiming)
  std::uint32_t slots = 0;

  lanes() = default;
  // A stream (0, nullptr, or a class that converts to one, such as a framework's stream wrapper)
  // is the one-stream executor.
  lanes(cudaStream_t s) : stream(s) {}  // NOLINT: implicit on purpose
  template <class S, std::enable_if_t<std::is_class_v<S> && !std::is_same_v<S, lanes> &&
                                          std::is_convertible_v<S&, cudaStream_t>,
                                      int> = 0>
  lanes(S& s) : stream(static_cast<cudaStream_t>(s)) {}  // NOLINT
  template <class S, std::enable_if_t<std::is_class_v<S> && !std::is_same_v<S, lanes> &&
                                          std::is_convertible_v<const S&, cudaStream_t>,
                                      int> = 0>
  lanes(const S& s) : stream(static_cast<cudaStream_t>(s)) {}  // NOLINT
  lanes(cudaStream_t s, cudaStream_t x, const cudaEvent_t* ev, std::uint32_t n)
      : stream(s), transfer(x), events(ev), slots(n) {}
  bool pipelined() const { return transfer != nullptr && transfer != stream; }
};

// The segment slots a pipelined call on blocks of up to `block_count` elements needs: one per
// segment of a block (reduce_scatter, all_reduce with block_count = ceil(count / ranks)), at
// least one (all_gather, send, recv and all_to_all run with any number: all_to_all codes up to
// min(slots, pipeline.depth) blocks ahead).
template <class Tuning = default_tuning>
std::uint32_t pipeline_slots(std::uint64_t block_count, const collective_options& opt = {}) {
  const collective::segmentation seg(block_count, Tuning::chunk_elems,
                                     collective::detail::device_segment_elems(opt.pipeline.segment_elems));
  const std::uint64_t n = seg.segments > 1 ? seg.segments : 1;
  return n > 0xFFFFFFu ? 0xFFFFFFu : static_cast<std::uint32_t>(n);
}

// A transfer stream (its own, non-blocking, or borrowed) and the events; on() lends them to one
// call at a time.
// Events: two for the joins and `slots` for the segments that wait for a kernel before they go
// out (a reduce_scatter's re-encoded segments: one slot per segment of a block; an all_to_all's
// blocks coded ahead: up to pipeline.depth). pipeline_slots() says how many a block size needs;
// a pipelined call with too few is refused (invalid_argument), as a workspace too small is.
class pipeline {
 public:
  // Throws zipccl::error (cuda_error) when CUDA refuses the stream or the events.
  explicit pipeline(std::uint32_t slots = 1) : owned_(true) {
    if (cudaStreamCreateWithFlags(&transfer_, cudaStreamNonBlocking) != cudaSuccess) {
      transfer_ = nullptr;
      throw error(status::cuda_error, "cuda::pipeline: cudaStreamCreateWithFlags");
    }
    if (reserve(slots) != status::success) {
      release();
      throw error(status::cuda_error, "cuda::pipeline: cudaEventCreateWithFlags");
    }
  }
  // On a transfer stream of the caller's (not destroyed with the pipeline).
  pipeline(cudaStream_t transfer, std::uint32_t slots) : transfer_(transfer), owned_(false) {
    if (transfer == nullptr) throw error(status::invalid_argument, "cuda::pipeline: a null transfer stream");
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
    if (transfer_ && owned_) (void)cudaStreamDestroy(transfer_);  // (released once its work is done)
    transfer_ = nullptr;
  }
  cudaStream_t transfer_ = nullptr;
  bool owned_ = true;
  std::vector<cudaEvent_t> events_;
};

// A pipeline for one rank of a device transport: on the transport's transfer_stream() where it
// has that member (nullptr when that is null: the transport cannot take pipelined calls), else on
// a stream of its own, on the transport's device() where it has one (transport::cuda_local's rank
// GPU, transport::nccl's ncclCommCuDevice), else on the current device. Throws zipccl::error
// (cuda_error) as pipeline's constructors do.
namespace pipeline_detail {
// The rank's GPU current while its events are made (an event records only on its own GPU's streams).
struct on_device {
  int prev = -1;
  explicit on_device(int d) {
    if (d >= 0 && cudaGetDevice(&prev) == cudaSuccess && prev != d) (void)cudaSetDevice(d);
    else prev = -1;
  }
  ~on_device() {
    if (prev >= 0) (void)cudaSetDevice(prev);
  }
  on_device(const on_device&) = delete;
  on_device& operator=(const on_device&) = delete;
};
}  // namespace pipeline_detail

template <class Transport>
std::unique_ptr<pipeline> make_pipeline(const Transport& t, std::uint32_t slots = 1) {
  transport::check_optional_members<Transport>();
  int device = -1;
  if constexpr (transport::has_device_v<Transport>) device = t.device();
  const pipeline_detail::on_device scope(device);
  if constexpr (transport::has_transfer_stream_v<Transport>) {
    const cudaStream_t x = t.transfer_stream();
    if (x == nullptr) return nullptr;
    return std::make_unique<pipeline>(x, slots);
  } else {
    return std::make_unique<pipeline>(slots);
  }
}

}  // namespace zipccl::cuda
