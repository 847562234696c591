// zipccl: compressed point-to-point transfers, for pipeline-parallel stage boundaries.
//
//   send<Codec, Strategy>(sendbuff, count, peer, transport, workspace, workspace_bytes)
//   recv<Codec, Strategy>(recvbuff, count, peer, transport, workspace, workspace_bytes)
//
// Both sides name the same Codec, Strategy, count and options; they check this first, in one
// small exchange, and both return size_mismatch when they differ. So send() returns only once
// the receiver has entered recv(), as MPI_Ssend does: two ranks that both send to each other
// first get size_mismatch, and a ring of ranks that each send before they receive waits until
// the transport's timeout, so one end of every pair must receive first. Sending to oneself is
// invalid_argument. The compressed path cuts the tensor into
// segments and sends each as two messages (detail/wire.hpp: a fixed-size section with a preamble
// that names the count, then the escapes); with a transport that offers requests the sender keeps
// up to pipeline.depth segments in flight while it codes the next, and the receiver decodes one
// segment while the next arrives. A receiver that finds a bad stream, a wrong count or a transport
// error returns it and calls the transport's abort(), so the sender's later operations fail rather
// than wait. strategy::adaptive decides with the cost model of one hop, which both sides compute
// alike.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "common.hpp"
#include "detail/pipeline.hpp"
#include "schedule.hpp"

namespace zipccl {

template <class Codec, class Strategy = strategy::always>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  return collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    if constexpr (std::is_same_v<decltype(path), strategy::never>) {
      return 0;
    } else {
      if (!collective::detail::valid_options(opt)) return 0;
      const collective::detail::segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
      return plan.slot * plan.segments +
             format::align_up(collective::detail::wire<Codec>::scratch_bytes(opt.codec.chunk_elems), 16);
    }
  });
}

namespace collective::detail {
template <class Codec, class Strategy>
bool compress_hop(std::uint64_t count, const collective_options& opt) {
  return takes_compressed<Strategy>([&] { return opt.model.send_recv(count * Codec::element_size).compress; });
}

// The hooks (detail/pipeline.hpp) of a compressed send, on the steps of schedule::send: segment s
// is encoded into its own slot while the earlier ones are in flight.
template <class Codec>
struct p2p_sender : schedule_steps {
  const segment_plan<Codec>& plan;
  const collective_options& opt;
  const typename Codec::codebook_type& cb;
  const void* message;
  std::uint8_t* ws;

  status produce(std::uint64_t i, section* out) {
    *out = plan.encode(cb, message, i, opt.codec.checksum, ws + i * plan.slot);
    return status::success;
  }
  landing incoming(std::uint64_t) { return {}; }
  status arrived(std::uint64_t, std::uint64_t*, std::uint8_t**) { return status::success; }
  status consume(std::uint64_t) { return status::success; }
};

// ... and of the matching recv, on the steps of schedule::recv: segment s lands in its own slot
// and is decoded while segment s + 1 arrives.
template <class Codec>
struct p2p_receiver : schedule_steps {
  const segment_plan<Codec>& plan;
  const collective_options& opt;
  void* message;
  std::uint8_t* ws;
  std::uint8_t* scratch;
  std::uint64_t tail_in = 0;

  status produce(std::uint64_t, section*) { return status::success; }
  landing incoming(std::uint64_t i) { return plan.head(ws + i * plan.slot, i); }
  status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    const status s = plan.arrived(ws + i * plan.slot, i, tail_bytes, tail);
    tail_in = *tail_bytes;
    return s;
  }
  status consume(std::uint64_t i) {
    return plan.decode_into(ws + i * plan.slot, i, tail_in, opt.codec.checksum, message, scratch);
  }
};
// The arguments both ends check alike.
template <class Codec, class Strategy, class Transport>
bool p2p_arguments_ok(const void* buf, std::uint64_t count, int peer, const Transport& t, const void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt) {
  return (buf != nullptr || count == 0) && peer >= 0 && peer < t.size() && peer != t.rank() && valid_options(opt) &&
         workspace_bytes >= send_recv_workspace<Codec, Strategy>(count, opt) &&
         (workspace != nullptr || workspace_bytes == 0);
}
// Sender and receiver first swap their call signatures (count, element type, path, chunk and
// segment sizes, checksums) and their roles in one 9-byte exchange, so that a mismatch is an
// error on both ends at once, before any data moves: size_mismatch (also when both ends called
// send, or both recv). A failed exchange aborts the transport and returns its error.
template <class Codec, class Transport>
status p2p_handshake(Transport& t, int peer, bool sending, bool compressed, std::uint64_t count,
                     const collective_options& opt) {
  std::uint8_t mine[9], theirs[9] = {};
  format::store_le<std::uint64_t>(mine,
                                  call_signature<Codec>(call_kind::send_recv, compressed, count, settings_word(opt)));
  mine[8] = sending ? 1 : 2;
  const status s = t.sendrecv(peer, mine, sizeof mine, peer, theirs, sizeof theirs);
  if (s != status::success) return fail(t, s);
  return std::memcmp(mine, theirs, 8) == 0 && theirs[8] == (sending ? 2 : 1) ? status::success
                                                                             : status::size_mismatch;
}
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "send: Transport must model the host transport concept");
  using namespace collective::detail;
  const abort_on_unwind<Transport> guard(t);
  if (!p2p_arguments_ok<Codec, Strategy>(sendbuff, count, peer, t, workspace, workspace_bytes, opt))
    return fail(t, status::invalid_argument);
  const bool packed = compress_hop<Codec, Strategy>(count, opt);
  if (const status s = p2p_handshake<Codec>(t, peer, true, packed, count, opt); s != status::success) return s;
  if (!packed) {
    const status s = t.send(peer, sendbuff, count * Codec::element_size);
    return s == status::success ? s : fail(t, s);
  }
  const segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
  const collective::schedule sched = collective::schedule::send(t.rank(), t.size(), peer, plan);
  p2p_sender<Codec> h{{sched}, plan, opt, cb, sendbuff, static_cast<std::uint8_t*>(workspace)};
  return run_pipeline(t, sched.items(), opt.pipeline.depth, 0, h);
}

template <class Codec, class Strategy = strategy::always, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            const collective_options& opt = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "recv: Transport must model the host transport concept");
  using namespace collective::detail;
  const abort_on_unwind<Transport> guard(t);
  if (!p2p_arguments_ok<Codec, Strategy>(recvbuff, count, peer, t, workspace, workspace_bytes, opt))
    return fail(t, status::invalid_argument);
  const bool packed = compress_hop<Codec, Strategy>(count, opt);
  if (const status s = p2p_handshake<Codec>(t, peer, false, packed, count, opt); s != status::success) return s;
  if (!packed) {
    const status s = t.recv(peer, recvbuff, count * Codec::element_size);
    return s == status::success ? s : fail(t, s);
  }
  const segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
  const collective::schedule sched = collective::schedule::recv(t.rank(), t.size(), peer, plan);
  auto* ws = static_cast<std::uint8_t*>(workspace);
  p2p_receiver<Codec> h{{sched}, plan, opt, recvbuff, ws, ws + plan.slot * plan.segments};
  return run_pipeline(t, sched.items(), opt.pipeline.depth, 0, h);
}

}  // namespace zipccl
