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
// A call grows the workspace on its stream when it needs more (cudaMallocAsync; the old block is
// freed in stream order). Growing is refused while the stream is being captured
// (invalid_argument): run a call once, or reserve(), before capturing it. result() reads the
// outcome of the last call that wrote the communicator's own status word (calls given a status
// pointer of their own write there instead); read it once the stream has passed the call. Calls on
// different streams share the workspace: order those streams as for any shared buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../communicator.hpp"
#include "../transport/device.hpp"
#include "collective.cuh"
#include "memory.cuh"
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

  // Throws zipccl::error (cuda_error) when the status word cannot be allocated.
  explicit communicator(Transport& t, const collective_options& opt = {}, const codebook_type& cb = {})
      : t_(t), opt_(opt), cb_(cb), ws_(cudaStream_t{}) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, sizeof(status), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess)
      throw error(status::cuda_error, "zipccl::communicator: cudaHostAlloc of the status word");
    status_ = static_cast<status*>(p);
    *status_ = status::success;
  }
  ~communicator() {
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
  // Grows the workspace now, on `stream` (before capturing calls in a graph).
  status reserve(std::uint64_t bytes, cudaStream_t stream) { return grow(bytes, stream); }

  status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, cudaStream_t stream,
                    status* status_dev = nullptr) {
    const std::uint64_t need = cuda::all_gather_workspace<Codec, Strategy, tuning>(count, t_.size(), opt_);
    if (const status s = grow(need, stream); s != status::success) return refuse(s);
    return cuda::all_gather<Codec, Strategy, tuning>(sendbuff, recvbuff, count, t_, ws_.data(), ws_.bytes(),
                                                     out(status_dev), stream, opt_, cb_);
  }
  status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction,
                        cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::reduce_scatter_workspace<Codec, Strategy, tuning>(recvcount, opt_);
    if (const status s = grow(need, stream); s != status::success) return refuse(s);
    return cuda::reduce_scatter<Codec, Strategy, tuning>(sendbuff, recvbuff, recvcount, reduction, t_, ws_.data(),
                                                         ws_.bytes(), out(status_dev), stream, opt_, cb_);
  }
  status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, cudaStream_t stream,
                    status* status_dev = nullptr) {
    const std::uint64_t need = cuda::all_reduce_workspace<Codec, Strategy, tuning>(count, t_.size(), opt_);
    if (const status s = grow(need, stream); s != status::success) return refuse(s);
    return cuda::all_reduce<Codec, Strategy, tuning>(sendbuff, recvbuff, count, reduction, t_, ws_.data(), ws_.bytes(),
                                                     out(status_dev), stream, opt_, cb_);
  }
  status send(const void* sendbuff, std::uint64_t count, int peer, cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::send_recv_workspace<Codec, Strategy, tuning>(count, opt_);
    if (const status s = grow(need, stream); s != status::success) return refuse(s);
    return cuda::send<Codec, Strategy, tuning>(sendbuff, count, peer, t_, ws_.data(), ws_.bytes(), out(status_dev),
                                               stream, opt_, cb_);
  }
  status recv(void* recvbuff, std::uint64_t count, int peer, cudaStream_t stream, status* status_dev = nullptr) {
    const std::uint64_t need = cuda::send_recv_workspace<Codec, Strategy, tuning>(count, opt_);
    if (const status s = grow(need, stream); s != status::success) return refuse(s);
    return cuda::recv<Codec, Strategy, tuning>(recvbuff, count, peer, t_, ws_.data(), ws_.bytes(), out(status_dev),
                                               stream, opt_);
  }

 private:
  status grow(std::uint64_t bytes, cudaStream_t stream) {
    if (bytes <= ws_.bytes()) return status::success;
    cuda::device_buffer<std::uint8_t> bigger(stream);
    const status s = bigger.reserve(static_cast<std::size_t>(bytes));
    if (s != status::success) return s;
    ws_ = std::move(bigger);  // the old block is freed in order on its own stream
    return status::success;
  }
  // A call that cannot start: the other ranks may already be in it.
  status refuse(status s) {
    t_.abort(s);
    return s;
  }
  status* out(status* mine) { return mine ? mine : status_; }

  Transport& t_;
  collective_options opt_;
  codebook_type cb_;
  cuda::device_buffer<std::uint8_t> ws_;
  status* status_ = nullptr;
};

}  // namespace zipccl
