// zipccl: cuda::send and cuda::recv, point to point on device buffers over a device transport
// (the shared rules: common.cuh).
//
//   std::uint64_t bytes = zipccl::cuda::send_recv_workspace<C>(count);
//   zipccl::cuda::send<C>(buf, count, peer, t, ws, bytes, status_dev, stream);   // on one rank
//   zipccl::cuda::recv<C>(buf, count, peer, t, ws, bytes, status_dev, stream);   // on the peer
//
// Both ends swap {signature, role} first (24-byte messages), so a mismatch is size_mismatch on
// both at once; then the segments (on pipelined lanes one by one: a segment goes out as soon as
// it is coded, and is decoded as soon as it is in); then, compressed, the outcome both ways.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace zipccl::cuda {

namespace collective_detail {
template <class Codec, class Tuning>
layout p2p_layout(std::uint64_t count, const collective_options& opt, bool packed) {
  layout_shape shape;
  shape.packed = packed;
  shape.in_wires = 0;  // (one wire: the one being sent or received)
  return make_layout<Codec, Tuning>(count, opt, shape);
}
}  // namespace collective_detail

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(collective_detail::p2p_layout<Codec, Tuning>(count, opt, packed).total);
  });
}

namespace collective_detail {

enum class role { sender, receiver };

template <class Codec, class Strategy, class Tuning, class Transport>
status p2p_run(role me, void* buf, std::uint64_t count, int peer, args<Codec, Transport> a) {
  const collective_options& opt = a.opt;
  const bool sending = me == role::sender;
  const bool packed = zipccl::collective::detail::takes_compressed<Strategy>(
      [&] { return opt.model.send_recv(count * Codec::element_size).compress; });
  const layout l = p2p_layout<Codec, Tuning>(count, opt, packed);
  if ((buf == nullptr && count != 0) || peer < 0 || peer >= a.t.size() || peer == a.t.rank() ||
      !align_workspace(a.workspace, a.workspace_bytes, l.total) || a.status_dev == nullptr || !options_ok(opt) ||
      !lanes_ok(a.t, a.on, 1)) {
    return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
  }
  auto* ws = static_cast<std::uint8_t*>(a.workspace);
  auto c = make_call(a, ws, l.ctrl);
  // the two ends' words differ only in the role, folded into the signature: lo != hi unless one
  // end sends and the other receives the same call
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(call_kind::send_recv, packed, count,
                                                                                device_settings<Tuning>(opt));
  const std::uint64_t mine = sending ? sig : ~sig;
  if (const status g = agree_first(a.t, mine, peer, a.on.stream); g != status::success) return g;
  status s = c.to_xfer();
  if (s == status::success) s = c.open_words(mine);
  if (s == status::success) s = c.swap_words(peer);
  if (s == status::success)
    s = cuda::detail::launch("cuda collective: p2p check", dim3(1), dim3(32), c.xfer, detail::p2p_check_kernel<>,
                             c.words, c.key, error_word(a.t));
  if (s == status::success) s = c.to_codec();
  const auto g = geometry<Codec, Tuning>(count, opt);
  const auto blocks = coder<Codec, Tuning>(c.stream, g, opt, a.cb, c.key, ws + l.stage_a,
                                           reinterpret_cast<std::uint64_t*>(ws + l.spans));
  auto* bytes = static_cast<std::uint8_t*>(buf);
  std::uint8_t* wire = ws + l.wire_a;
  const batching bt(g.segments, a.on.pipelined());
  if (s == status::success && !packed) {
    s = sending ? a.t.send(peer, bytes, count * Codec::element_size, c.xfer)
                : a.t.recv(peer, bytes, count * Codec::element_size, c.xfer);
  } else {
    for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
      const segments sg{bt.first(b), bt.last(b)};
      if (sending) {
        s = blocks.encode(bytes, wire, 1, sg);
        if (s == status::success) s = c.ready(b);
        if (s == status::success) s = c.await_ready(b);
        for (std::uint64_t seg = sg.first; seg < sg.last && s == status::success; ++seg)
          s = a.t.send(peer, wire + g.seg_offset(seg), g.seg_bytes(seg), c.xfer);
      } else {
        for (std::uint64_t seg = sg.first; seg < sg.last && s == status::success; ++seg)
          s = a.t.recv(peer, wire + g.seg_offset(seg), g.seg_bytes(seg), c.xfer);
        if (s == status::success) s = c.to_codec();
        if (s == status::success) s = blocks.unpack(wire, 2, sg);
        if (s == status::success) s = blocks.template decode<detail::decode_mode::store>(bytes, nullptr, nullptr, 2, sg);
      }
    }
  }
  if (s == status::success && packed) {  // the outcome, both ways
    s = c.to_xfer();
    if (s == status::success) s = c.close_words();
    if (s == status::success) s = c.swap_words(peer);
    if (s == status::success) s = c.round_kernel();
  }
  if (s == status::success) s = c.finish(ending::own_outcome);
  return c.end(s);
}

}  // namespace collective_detail

// Sends count elements to `peer`, which calls recv with the same Codec, Strategy, count and options.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, status* status_dev, const lanes& on, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::send: Transport must model the device transport");
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(
      collective_detail::role::sender, const_cast<void*>(sendbuff), count, peer,
      collective_detail::args<Codec, Transport>{t, workspace, workspace_bytes, status_dev, on, opt, cb});
}

// Receives count elements from `peer`'s send.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            status* status_dev, const lanes& on, const collective_options& opt = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::recv: Transport must model the device transport");
  const typename Codec::codebook_type cb{};
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(
      collective_detail::role::receiver, recvbuff, count, peer,
      collective_detail::args<Codec, Transport>{t, workspace, workspace_bytes, status_dev, on, opt, cb});
}

}  // namespace zipccl::cuda
