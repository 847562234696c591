// zipccl: cuda::all_gather on device buffers over a device transport (the shared rules: common.cuh).
//
//   std::uint64_t bytes = zipccl::cuda::all_gather_workspace<C>(count, t.size());
//   zipccl::cuda::all_gather<C>(send, recv, count, t, ws, bytes, status_dev, stream);
//
// Ring all_gather: every rank contributes `count` elements, recvbuff receives size() * count,
// rank r's at r * count. Compressed, each rank's block is coded once and forwarded as it arrived,
// so every hop moves its compressed size and the result is bit-identical to the plain path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace zipccl::cuda {

// The in wires of a compressed all_gather: every hop's on pipelined lanes, two on one stream.
inline std::uint64_t gather_wires(int ranks, bool pipelined) {
  const std::uint64_t hops = ranks > 1 ? static_cast<std::uint64_t>(ranks - 1) : 0;
  return pipelined || hops < 2 ? hops : 2;
}

namespace collective_detail {
template <class Codec, class Tuning>
layout gather_layout(std::uint64_t count, const collective_options& opt, bool packed, int ranks, bool pipelined) {
  layout_shape shape;
  shape.packed = packed;
  shape.in_wires = gather_wires(ranks, pipelined);
  return make_layout<Codec, Tuning>(count, opt, shape);
}
}  // namespace collective_detail

// pipelined: the size for pipelined lanes (the default, enough for both), or for one stream.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_gather_workspace(std::uint64_t count, int ranks, const collective_options& opt = {},
                                   bool pipelined = true) {
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(
        collective_detail::gather_layout<Codec, Tuning>(count, opt, packed, ranks, pipelined).total);
  });
}

namespace collective_detail {

template <class Codec, class Strategy, class Tuning, class Transport>
status all_gather_run(const void* sendbuff, void* recvbuff, std::uint64_t count, args<Codec, Transport> a, part p) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return a.opt.model.all_gather(count * Codec::element_size, a.t.size()).compress; },
        [&](auto path) { return all_gather_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, count, a, p); });
  } else {
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const collective_options& opt = a.opt;
    const int n = a.t.size(), r = a.t.rank();
    const std::uint64_t block = count * Codec::element_size;
    const layout l = gather_layout<Codec, Tuning>(count, opt, packed, n, a.on.pipelined());
    if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        !align_workspace(a.workspace, a.workspace_bytes, l.total) || a.status_dev == nullptr || !options_ok(opt) ||
        n < 1 || !lanes_ok(a.t, a.on, 0)) {
      return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
    }
    auto* ws = static_cast<std::uint8_t*>(a.workspace);
    auto c = make_call(a, ws, l.ctrl);
    auto* recv = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (p.opens) {
      const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(call_kind::all_gather, packed, count,
                                                                                  device_settings<Tuning>(opt));
      if (const status g = agree_first(a.t, sig, -1, a.on.stream); g != status::success) return g;  // (nothing enqueued)
      s = c.open(sig);
    }
    if (s == status::success) s = c.copy(recv + static_cast<std::uint64_t>(r) * block, sendbuff, block);
    const zipccl::collective::schedule sched = zipccl::collective::schedule::ring_all_gather(
        r, n, zipccl::collective::segmentation(count, Tuning::chunk_elems, segment_elems(opt)));
    const std::uint64_t S = sched.segments();
    if constexpr (!packed) {
      if (s == status::success) s = c.to_xfer();  // step 0 sends the copy
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);
        s = c.exchange(st.dst, recv + static_cast<std::uint64_t>(st.send_block) * block, block, st.src,
                       recv + static_cast<std::uint64_t>(st.recv_block) * block, block);
      }
    } else {
      // On pipelined lanes every hop's block lands in a wire of its own and leaves from it again,
      // so the transfers never wait for a kernel after the first encoding (on one stream two
      // wires take turns); each batch of segments is decoded once it is in.
      const auto g = geometry<Codec, Tuning>(count, opt);
      const auto blocks = coder<Codec, Tuning>(c.stream, g, opt, a.cb, c.key, ws + l.stage_a,
                                           reinterpret_cast<std::uint64_t*>(ws + l.spans));
      std::uint8_t* own = ws + l.wire_a;
      const std::uint64_t turns = a.on.pipelined() ? ~std::uint64_t{0} : 2;
      const auto in_wire = [&](std::uint64_t k) { return ws + l.wire_b + (k % turns) * l.wire_stride; };
      if (s == status::success && sched.items() != 0)
        s = blocks.encode(static_cast<const std::uint8_t*>(sendbuff), own, p.stage0 + 1);
      if (s == status::success) s = c.to_xfer();
      const batching bt(S, a.on.pipelined());
      for (std::uint64_t k = 0; n > 1 && k < static_cast<std::uint64_t>(n - 1) && s == status::success; ++k) {
        for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
          const segments sg{bt.first(b), bt.last(b)};
          const zipccl::collective::step st = sched.at(k * S + sg.first);
          const std::uint8_t* from = k == 0 ? own : in_wire(k - 1);  // forwards what arrived in the step before
          const std::uint64_t stage = p.stage0 + 2 + k;
          s = exchange_segments(c, g, sg, st.dst, from, st.src, in_wire(k));
          if (s == status::success) s = c.to_codec();
          if (s == status::success) s = blocks.unpack(in_wire(k), stage, sg);
          if (s == status::success)
            s = blocks.template decode<detail::decode_mode::store>(
                recv + static_cast<std::uint64_t>(st.recv_block) * block, nullptr, nullptr, stage, sg);
        }
      }
    }
    if (s == status::success)
      s = c.finish(!p.closes ? ending::mid_call : packed && n > 1 ? ending::agreed : ending::own_outcome);
    return c.end(s);
  }
}

}  // namespace collective_detail

// Every rank contributes `count` elements; recvbuff receives size() * count, rank r's at r * count.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_gather: Transport must model the device transport");
  return collective_detail::all_gather_run<Codec, Strategy, Tuning>(
      sendbuff, recvbuff, count, collective_detail::args<Codec, Transport>{t, workspace, workspace_bytes, status_dev, on, opt, cb},
      collective_detail::part::whole());
}

}  // namespace zipccl::cuda
