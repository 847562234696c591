// zipccl: compressed point-to-point transfers, for pipeline-parallel stage boundaries.
//
//   send<Codec, Strategy>(sendbuff, count, peer, transport, workspace, workspace_bytes)
//   recv<Codec, Strategy>(recvbuff, count, peer, transport, workspace, workspace_bytes)
//
// Both sides name the same Codec, Strategy and count. The compressed path cuts the tensor into
// segments and sends each as two messages (detail/wire.hpp: a fixed-size section with a preamble
// that names the count, then the escapes); with a transport that offers requests the sender keeps
// up to pipeline.depth segments in flight while it codes the next, and the receiver decodes one
// segment while the next arrives. A receiver that finds a bad stream, a wrong count or a transport
// error returns it and calls the transport's abort(), so the sender's later operations fail rather
// than wait. strategy::adaptive decides with the cost model of one hop, which both sides compute
// alike.
#pragma once

#include <cstdint>
#include <deque>
#include <type_traits>
#include <utility>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "common.hpp"
#include "detail/pipeline.hpp"

namespace zipccl {

template <class Codec, class Strategy = strategy::always>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  if constexpr (std::is_same_v<Strategy, strategy::never>) {
    return 0;
  } else {
    if (!collective::detail::valid_options(opt)) return 0;
    const collective::detail::segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
    return plan.slot * plan.segments +
           format::align_up(collective::detail::wire<Codec>::scratch_bytes(opt.codec.chunk_elems), 16);
  }
}

namespace collective::detail {
template <class Codec, class Strategy>
bool compress_hop(std::uint64_t count, const collective_options& opt) {
  if constexpr (std::is_same_v<Strategy, strategy::never>) return false;
  else if constexpr (std::is_same_v<Strategy, strategy::always>) return true;
  else return opt.model.send_recv(count * Codec::element_size).compress;
}
// The arguments both ends check alike.
template <class Codec, class Strategy, class Transport>
bool p2p_arguments_ok(const void* buf, std::uint64_t count, int peer, const Transport& t, const void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt) {
  return (buf != nullptr || count == 0) && peer >= 0 && peer < t.size() && valid_options(opt) &&
         workspace_bytes >= send_recv_workspace<Codec, Strategy>(count, opt) &&
         (workspace != nullptr || workspace_bytes == 0);
}
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "send: Transport must model the host transport concept");
  using namespace collective::detail;
  if (!p2p_arguments_ok<Codec, Strategy>(sendbuff, count, peer, t, workspace, workspace_bytes, opt))
    return fail(t, status::invalid_argument);
  if (!compress_hop<Codec, Strategy>(count, opt)) {
    const status s = t.send(peer, sendbuff, count * Codec::element_size);
    return s == status::success ? s : fail(t, s);
  }
  const segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
  auto* ws = static_cast<std::uint8_t*>(workspace);
  if constexpr (transport::has_requests_v<Transport>) {
    using request = typename Transport::request;
    std::deque<std::pair<request, request>> flight;
    status err = status::success;
    auto retire = [&] {
      const status a = t.wait(flight.front().first), b = t.wait(flight.front().second);
      flight.pop_front();
      return a != status::success ? a : b;
    };
    for (std::uint64_t s = 0; s < plan.segments && err == status::success; ++s) {
      const section out = plan.encode(cb, sendbuff, s, opt.codec.checksum, ws + s * plan.slot);
      request head = t.isend(peer, out.fixed, out.fixed_bytes);  // in this order: the head goes first
      request body = t.isend(peer, out.tail, out.tail_bytes);
      flight.emplace_back(std::move(head), std::move(body));
      while (flight.size() > opt.pipeline.depth && err == status::success) err = retire();
    }
    if (err != status::success) t.abort(err);
    while (!flight.empty()) {
      const status w = retire();
      if (err == status::success && w != status::success) t.abort(err = w);
    }
    return err;
  } else {
    for (std::uint64_t s = 0; s < plan.segments; ++s) {
      const section out = plan.encode(cb, sendbuff, s, opt.codec.checksum, ws + s * plan.slot);
      status err = t.send(peer, out.fixed, out.fixed_bytes);
      if (err == status::success) err = t.send(peer, out.tail, out.tail_bytes);
      if (err != status::success) return fail(t, err);
    }
    return status::success;
  }
}

template <class Codec, class Strategy = strategy::always, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            const collective_options& opt = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "recv: Transport must model the host transport concept");
  using namespace collective::detail;
  if (!p2p_arguments_ok<Codec, Strategy>(recvbuff, count, peer, t, workspace, workspace_bytes, opt))
    return fail(t, status::invalid_argument);
  if (!compress_hop<Codec, Strategy>(count, opt)) {
    const status s = t.recv(peer, recvbuff, count * Codec::element_size);
    return s == status::success ? s : fail(t, s);
  }
  const segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
  auto* ws = static_cast<std::uint8_t*>(workspace);
  std::uint8_t* scratch = ws + plan.slot * plan.segments;
  std::uint64_t tail_bytes = 0;
  std::uint8_t* tail = nullptr;
  if constexpr (transport::has_requests_v<Transport>) {
    // segment s arrives while segment s - 1 is decoded
    using request = typename Transport::request;
    status err = status::success;
    request head;
    if (plan.segments) head = t.irecv(peer, ws, plan.head_bytes(0));
    for (std::uint64_t s = 0; s < plan.segments && err == status::success; ++s) {
      std::uint8_t* p = ws + s * plan.slot;
      err = t.wait(head);
      if (err == status::success) err = plan.arrived(p, s, &tail_bytes, &tail);
      if (err != status::success) break;
      request body = t.irecv(peer, tail, tail_bytes);
      err = t.wait(body);
      if (err != status::success) break;
      if (s + 1 < plan.segments) head = t.irecv(peer, p + plan.slot, plan.head_bytes(s + 1));
      err = plan.decode_into(p, s, tail_bytes, opt.codec.checksum, recvbuff, scratch);
      if (err != status::success && s + 1 < plan.segments) {
        t.abort(err);
        t.wait(head);
      }
    }
    return err == status::success ? err : fail(t, err);
  } else {
    for (std::uint64_t s = 0; s < plan.segments; ++s) {
      std::uint8_t* p = ws + s * plan.slot;
      status err = t.recv(peer, p, plan.head_bytes(s));
      if (err == status::success) err = plan.arrived(p, s, &tail_bytes, &tail);
      if (err == status::success) err = t.recv(peer, tail, tail_bytes);
      if (err == status::success) err = plan.decode_into(p, s, tail_bytes, opt.codec.checksum, recvbuff, scratch);
      if (err != status::success) return fail(t, err);
    }
    return status::success;
  }
}

}  // namespace zipccl
