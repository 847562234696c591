// zipccl: communicator<Codec, Strategy, Transport>, the owning layer over the collectives, in the
// manner of cuCollections' containers: it holds the transport, the options, the codebook policy,
// the cost model that strategy::adaptive consults, and a workspace grown on demand, so a call
// needs only its buffers:
//
//   zipccl::transport::local_world world(4);
//   world.run([&](zipccl::transport::local_transport& t) {
//     zipccl::communicator<zipccl::codec<zipccl::bf16>, zipccl::strategy::adaptive,
//                          zipccl::transport::local_transport> comm(t);
//     comm.calibrate(sample, n);                              // measures the links and the codec
//     comm.all_reduce(grad, grad, count, zipccl::op::avg);    // compressed when it pays
//   });
//
// This header has the host communicator (a host transport: transport.hpp). With a device
// transport (transport/device.hpp) the same name is the device communicator of
// cuda/communicator.cuh, whose calls take a stream. The raw calls (all_gather.hpp, ...) stay for
// users who manage their memory themselves. A communicator is used by one thread at a time, as
// its transport is; every rank's communicator must hold the same options and model (calibrate()
// sees to the model).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "collective/all_gather.hpp"
#include "collective/all_reduce.hpp"
#include "collective/all_to_all.hpp"
#include "collective/calibrate.hpp"
#include "collective/common.hpp"
#include "collective/reduce_scatter.hpp"
#include "collective/send_recv.hpp"
#include "transport/transport.hpp"

namespace zipccl {

template <class Codec, class Strategy, class Transport, class Enable = void>
class communicator;

template <class Codec, class Strategy, class Transport>
class communicator<Codec, Strategy, Transport, std::enable_if_t<transport::is_host_transport_v<Transport>>> {
  static_assert(collective::detail::is_strategy_v<Strategy>,
                "communicator: Strategy must be strategy::always, strategy::never or strategy::adaptive");

 public:
  using codec_type = Codec;
  using codebook_type = typename Codec::codebook_type;

  explicit communicator(Transport& t, const collective_options& opt = {}, const codebook_type& cb = {})
      : t_(t), opt_(opt), cb_(cb) {}

  Transport& transport() { return t_; }
  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }
  const collective_options& options() const { return opt_; }
  // Every rank must make the same change (the ranks check the settings that travel, not the model).
  collective_options& options() { return opt_; }
  const codebook_type& codebook() const { return cb_; }
  std::uint64_t workspace_bytes() const { return ws_.size(); }

  // Measures the transport and the codec on `sample` (collective: every rank calls it alike) and
  // keeps the resulting cost model in options().model.
  status calibrate(const void* sample, std::uint64_t n) {
    cost_model m = opt_.model;
    const status s = zipccl::calibrate<Codec>(&m, t_, sample, n, opt_, cb_);
    if (s == status::success) opt_.model = m;
    return s;
  }

  status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count) {
    return with(all_gather_workspace<Codec, Strategy>(count, t_.size(), opt_), [&](void* ws, std::uint64_t bytes) {
      return zipccl::all_gather<Codec, Strategy>(sendbuff, recvbuff, count, t_, ws, bytes, opt_, cb_);
    });
  }
  status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction) {
    return with(reduce_scatter_workspace<Codec, Strategy>(recvcount, opt_), [&](void* ws, std::uint64_t bytes) {
      return zipccl::reduce_scatter<Codec, Strategy>(sendbuff, recvbuff, recvcount, reduction, t_, ws, bytes, opt_, cb_);
    });
  }
  status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction) {
    return with(all_reduce_workspace<Codec, Strategy>(count, t_.size(), opt_), [&](void* ws, std::uint64_t bytes) {
      return zipccl::all_reduce<Codec, Strategy>(sendbuff, recvbuff, count, reduction, t_, ws, bytes, opt_, cb_);
    });
  }
  status all_to_all(const void* sendbuff, const std::uint64_t* sendcounts, const std::uint64_t* sdispls, void* recvbuff,
                    const std::uint64_t* recvcounts, const std::uint64_t* rdispls) {
    return with(all_to_all_workspace<Codec, Strategy>(sendcounts, recvcounts, t_.size(), opt_),
                [&](void* ws, std::uint64_t bytes) {
                  return zipccl::all_to_all<Codec, Strategy>(sendbuff, sendcounts, sdispls, recvbuff, recvcounts,
                                                             rdispls, t_, ws, bytes, opt_, cb_);
                });
  }
  status send(const void* sendbuff, std::uint64_t count, int peer) {
    return with(send_recv_workspace<Codec, Strategy>(count, opt_), [&](void* ws, std::uint64_t bytes) {
      return zipccl::send<Codec, Strategy>(sendbuff, count, peer, t_, ws, bytes, opt_, cb_);
    });
  }
  status recv(void* recvbuff, std::uint64_t count, int peer) {
    return with(send_recv_workspace<Codec, Strategy>(count, opt_), [&](void* ws, std::uint64_t bytes) {
      return zipccl::recv<Codec, Strategy>(recvbuff, count, peer, t_, ws, bytes, opt_);
    });
  }

 private:
  // Grows the workspace to `need` bytes (never shrinks it) and runs the call on it. Should the
  // allocation throw (std::bad_alloc), the transport is aborted first: the other ranks are
  // already in the collective and must not wait for this one.
  template <class F>
  status with(std::uint64_t need, F&& call) {
    if (need > ws_.size()) {
      const collective::detail::abort_on_unwind<Transport> guard(t_);
      ws_.resize(static_cast<std::size_t>(need));
    }
    return call(ws_.empty() ? nullptr : static_cast<void*>(ws_.data()), static_cast<std::uint64_t>(ws_.size()));
  }

  Transport& t_;
  collective_options opt_;
  codebook_type cb_;
  std::vector<std::uint8_t> ws_;
};

}  // namespace zipccl
