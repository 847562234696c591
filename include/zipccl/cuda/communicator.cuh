// zipccl: communicator<Codec, Strategy, Transport> over a device transport (transport/device.hpp):
// the owning layer over the device collectives (cuda/collective.cuh). It holds the transport, the
// options, the codebook policy, a device workspace grown on demand (stream-ordered, through
// cuda::device_buffer) and a status word in mapped host memory:
//
//   zipccl::transport::nccl t(comm);
//   zipccl::communicator<zipccl::codec<zipccl::bf16>, zipccl::strategy::always, zipccl::transport::nccl> zc(t);
//   zc.all_reduce(grad, grad, count, zipccl::op::avg, stream);     // enqueues, returns at once
//   cudaStreamSynchronize(stream);
//   if (zc.result() != zipccl::status::success) ...                 // the call's outcome
//
// Calls are pipelined (cuda/pipeline.cuh): the communicator holds a cuda::pipeline (make_pipeline:
// the transport's transfer stream where it has one, else a stream of its own on the transport's
// GPU), so that the codec kernels of one segment overlap the transfer of another. It runs every
// call on its stream alone when constructed with pipelined = false, or when the transport cannot
// take pipelined calls (a transfer_stream() of nullptr).
//
// The workspace: a call grows it on its stream when it needs more (cudaMallocAsync), and the
// pipeline's event slots likewise. Every call that enqueued work marks its use of the workspace
// with an event on its stream (one event per stream the communicator has seen), and the old block
// is freed only after every stream that used it has passed that mark, so calls may come on
// different streams. Calls on different streams share the one workspace: order those streams as
// for any shared buffer.
// Warm-up: after reserve() (or one call) on each stream the calls will use, with the largest
// sizes, calls allocate nothing and create no events. Growing is refused while the stream is
// being captured, and once any call has been captured in a graph (the graph holds the block):
// invalid_argument, with nothing enqueued and the transport as it was. result() reads the outcome
// of the last call that wrote the communicator's own status word (calls given a status pointer of
// their own write there instead); read it once the stream has passed the call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "../communicator.hpp"
#include "../transport/device.hpp"
#include "collective.cuh"
#include "memory.cuh"
#include "pipeline.cuh"
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl {

template <class Codec, class Strategy, class Transport>
class communicator<Codec, Strategy, Transport, std::enable_if_t<transport::is_device_transport_v<Transport>>> {
  static_assert(collective::detail::is_strategy_v<Strategy>,
                "communicator: Strategy must be strategy::always, strategy::never or strategy::adaptive");
  using tuning = cuda::default_tuning;

 public:
  using codec_type = Codec;
  using codebook_type = typename Codec::codebook_type;

  // Throws zipccl::error (cuda_error) when the status word or the pipeline cannot be made.
  explicit communicator(Transport& t, const collective_options& opt = {}, const codebook_type& cb = {},
                        bool pipelined = true)
      : t_(t), opt_(opt), cb_(cb), ws_(cudaStream_t{}) {
    if (pipelined) pipe_ = cuda::make_pipeline(t, 1);
    void* p = nullptr;
    if (cudaHostAlloc(&p, sizeof(status), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess)
      throw error(status::cuda_error, "zipccl::communicator: cudaHostAlloc of the status word");
    status_ = static_cast<status*>(p);
    *status_ = status::success;
  }
  // Waits for the streams that used the workspace, then frees it.
  ~communicator() {
    for (const use& u : uses_) {
      (void)cudaEventSynchronize(u.done);
      (void)cudaEventDestroy(u.done);
    }
    if (status_) (void)cudaFreeHost(status_);
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  Transport& transport() { return t_; }
  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }
  const collective_options& options() const { return opt_; }
  collective_options& options() { return opt_; }  // every rank alike
  const codebook_type& codebook() const { return cb_; }
  std::uint64_t workspace_bytes() const { return ws_.bytes(); }
  // The outcome of the last call that wrote the communicator's status word (after its stream).
  status result() const { return *static_cast<const volatile status*>(status_); }
  bool pipelined() const { return pipe_ != nullptr; }
  // Grows the workspace now, on `stream`, and the pipeline to `slots` (cuda::pipeline_slots of
  // the largest block; all_to_all codes min(options().pipeline.depth, slots) blocks ahead), and
  // makes the stream's use event: the warm-up before capturing calls in a graph, or before calls
  // that must not allocate.
  status reserve(std::uint64_t bytes, cudaStream_t stream, std::uint32_t slots = 1) {
    const status s = prepare(bytes, slots, slots, stream);
    return s == status::success ? use_event(stream) : s;
  }

  status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, cudaStream_t stream,
                    status* status_dev = nullptr) {
    const std::uint64_t need = cuda::all_gather_workspace<Codec, Strategy, tuning>(count, t_.size(), opt_, pipelined());
    if (const status s = prepare(need, 1, 1, stream); s != status::success) return refuse(s);
    return used(stream, cuda::all_gather<Codec, Strategy, tuning>(sendbuff, recvbuff, count, t_, ws_.data(), ws_.bytes(),
                                                     out(status_dev), on(stream), opt_, cb_));
  }
  status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction,
                        cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::reduce_scatter_workspace<Codec, Strategy, tuning>(recvcount, opt_);
    const std::uint32_t slots = cuda::pipeline_slots<tuning>(recvcount, opt_);
    if (const status s = prepare(need, slots, slots, stream); s != status::success) return refuse(s);
    return used(stream, cuda::reduce_scatter<Codec, Strategy, tuning>(sendbuff, recvbuff, recvcount, reduction, t_, ws_.data(),
                                                         ws_.bytes(), out(status_dev), on(stream), opt_, cb_));
  }
  status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, cudaStream_t stream,
                    status* status_dev = nullptr) {
    const std::uint64_t need = cuda::all_reduce_workspace<Codec, Strategy, tuning>(count, t_.size(), opt_, pipelined());
    const std::uint64_t n = static_cast<std::uint64_t>(t_.size() > 0 ? t_.size() : 1);
    const std::uint32_t slots = cuda::pipeline_slots<tuning>((count + n - 1) / n, opt_);
    if (const status s = prepare(need, slots, slots, stream); s != status::success) return refuse(s);
    return used(stream, cuda::all_reduce<Codec, Strategy, tuning>(sendbuff, recvbuff, count, reduction, t_, ws_.data(), ws_.bytes(),
                                                     out(status_dev), on(stream), opt_, cb_));
  }
  // As cuda::all_to_all: the four arrays in host memory, size() entries each.
  status all_to_all(const void* sendbuff, const std::uint64_t* sendcounts, const std::uint64_t* sdispls,
                    void* recvbuff, const std::uint64_t* recvcounts, const std::uint64_t* rdispls, cudaStream_t stream,
                    status* status_dev = nullptr) {
    const std::uint64_t need = cuda::all_to_all_workspace<Codec, Strategy, tuning>(sendcounts, recvcounts, t_.size(), opt_);
    const std::uint32_t ahead = t_.size() > 2 ? static_cast<std::uint32_t>(t_.size() - 1) : 1;  // steps to code ahead
    if (const status s = prepare(need, opt_.pipeline.depth < ahead ? opt_.pipeline.depth : ahead, 1, stream);
        s != status::success)
      return refuse(s);
    return used(stream, cuda::all_to_all<Codec, Strategy, tuning>(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, t_,
                                                     ws_.data(), ws_.bytes(), out(status_dev), on(stream), opt_, cb_));
  }
  status send(const void* sendbuff, std::uint64_t count, int peer, cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::send_recv_workspace<Codec, Strategy, tuning>(count, opt_);
    if (const status s = prepare(need, 1, 1, stream); s != status::success) return refuse(s);
    return used(stream, cuda::send<Codec, Strategy, tuning>(sendbuff, count, peer, t_, ws_.data(), ws_.bytes(), out(status_dev),
                                               on(stream), opt_, cb_));
  }
  status recv(void* recvbuff, std::uint64_t count, int peer, cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::send_recv_workspace<Codec, Strategy, tuning>(count, opt_);
    if (const status s = prepare(need, 1, 1, stream); s != status::success) return refuse(s);
    return used(stream, cuda::recv<Codec, Strategy, tuning>(recvbuff, count, peer, t_, ws_.data(), ws_.bytes(), out(status_dev),
                                               on(stream), opt_));
  }

 private:
  // The workspace, and `want` slots where they can grow (not in a capture); `need` at least.
  status prepare(std::uint64_t bytes, std::uint32_t want, std::uint32_t need, cudaStream_t stream) {
    const status s = grow(bytes, stream);
    return s == status::success ? grow_slots(want, need, stream) : s;
  }
  status grow_slots(std::uint32_t want, std::uint32_t need, cudaStream_t stream) {
    if (!pipe_ || want <= pipe_->slots()) return status::success;
    if (capturing(stream)) return need <= pipe_->slots() ? status::success : status::invalid_argument;
    return pipe_->reserve(want);
  }
  // The call's outcome, after marking its use of the workspace on its stream: every call that
  // enqueued work, also one that returned an error part way. invalid_argument enqueued nothing
  // (the collectives' contract): no mark, and a refused call in a capture leaves the workspace
  // free to grow later.
  status used(cudaStream_t stream, status s) {
    if (s == status::invalid_argument) return s;
    const status m = use_event(stream);
    return s != status::success ? s : m;
  }
  // Records the stream's use event (made at its first use, on the transport's GPU); in a capture,
  // marks the workspace as held by a graph instead.
  status use_event(cudaStream_t stream) {
    if (capturing(stream)) {
      captured_ = true;
      return status::success;
    }
    use* u = nullptr;
    for (use& x : uses_)
      if (x.stream == stream) u = &x;
    if (u == nullptr) {
      cudaEvent_t e = nullptr;
      int dev = -1;
      if constexpr (transport::has_device_v<Transport>) dev = t_.device();
      const cuda::pipeline_detail::on_device scope(dev);
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
        return cuda::detail::fail(cudaGetLastError(), "zipccl::communicator: cudaEventCreateWithFlags");
      uses_.push_back(use{stream, e});
      u = &uses_.back();
    }
    return cuda::detail::check(cudaEventRecord(u->done, stream), "zipccl::communicator: cudaEventRecord");
  }
  static bool capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone;
  }
  cuda::lanes on(cudaStream_t stream) const { return pipe_ ? pipe_->on(stream) : cuda::lanes(stream); }
  // A bigger block, allocated on `stream`; the old one is freed there once every stream that
  // used it has passed its last use.
  status grow(std::uint64_t bytes, cudaStream_t stream) {
    if (bytes <= ws_.bytes()) return status::success;
    if (captured_ || capturing(stream)) return status::invalid_argument;
    for (const use& u : uses_)
      if (u.stream != stream)
        if (const status s = cuda::detail::check(cudaStreamWaitEvent(stream, u.done, 0),
                                                 "zipccl::communicator: cudaStreamWaitEvent");
            s != status::success)
          return s;
    ws_.set_stream(stream);
    return ws_.reserve(static_cast<std::size_t>(bytes));
  }
  // A call that cannot start has enqueued nothing: the transport is as it was.
  static status refuse(status s) { return s; }
  status* out(status* mine) { return mine ? mine : status_; }

  Transport& t_;
  collective_options opt_;
  codebook_type cb_;
  cuda::device_buffer<std::uint8_t> ws_;
  std::unique_ptr<cuda::pipeline> pipe_;
  status* status_ = nullptr;
  struct use {
    cudaStream_t stream;
    cudaEvent_t done;  // recorded after each call on that stream
  };
  std::vector<use> uses_;
  bool captured_ = false;  // a call was captured in a graph: the workspace stays where it is
};

}  // namespace zipccl
