// zipccl: cuda::reduce_scatter on device buffers over a device transport (the shared rules:
// common.cuh).
//
//   std::uint64_t bytes = zipccl::cuda::reduce_scatter_workspace<C>(recvcount);
//   zipccl::cuda::reduce_scatter<C>(send, recv, recvcount, zipccl::op::sum, t, ws, bytes, status_dev, stream);
//
// Ring reduce_scatter: sendbuff holds size() blocks of recvcount elements, rank r receives the
// reduction of block r. Compressed, each hop's segment is decoded, added to the local block and
// coded again by one fused kernel, in the host collectives' order and precision.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace zipccl::cuda {

namespace collective_detail {
template <class Codec, class Tuning>
layout reduce_layout(std::uint64_t recvcount, const collective_options& opt, bool packed) {
  layout_shape shape;
  shape.packed = packed;
  shape.second_stage = true;
  shape.plain_bytes = packed ? 0 : recvcount * Codec::element_size;
  return make_layout<Codec, Tuning>(recvcount, opt, shape);
}
}  // namespace collective_detail

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t reduce_scatter_workspace(std::uint64_t recvcount, const collective_options& opt = {}) {
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(collective_detail::reduce_layout<Codec, Tuning>(recvcount, opt, packed).total);
  });
}

namespace collective_detail {

template <class Codec, class Strategy, class Tuning, class Transport>
status reduce_scatter_run(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction,
                          args<Codec, Transport> a, part p) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return a.opt.model.reduce_scatter(recvcount * Codec::element_size, a.t.size()).compress; },
        [&](auto path) {
          return reduce_scatter_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, recvcount, reduction, a, p);
        });
  } else {
    using E = typename Codec::element_type;
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const collective_options& opt = a.opt;
    const int n = a.t.size(), r = a.t.rank();
    const std::uint64_t block = recvcount * Codec::element_size;
    const layout l = reduce_layout<Codec, Tuning>(recvcount, opt, packed);
    const zipccl::collective::schedule sched = zipccl::collective::schedule::ring_reduce_scatter(
        r, n, zipccl::collective::segmentation(recvcount, Tuning::chunk_elems, segment_elems(opt)));
    const std::uint64_t S = sched.segments();
    if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        zipccl::collective::detail::reduce_overlaps(sendbuff, recvbuff, block, n) ||
        !align_workspace(a.workspace, a.workspace_bytes, l.total) || a.status_dev == nullptr || !options_ok(opt) ||
        n < 1 || !lanes_ok(a.t, a.on, packed && n > 1 ? S : 0)) {
      return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
    }
    auto* ws = static_cast<std::uint8_t*>(a.workspace);
    auto c = make_call(a, ws, l.ctrl);
    const auto* send = static_cast<const std::uint8_t*>(sendbuff);
    auto* acc = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (p.opens) {
      const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
          call_kind::reduce_scatter, packed, recvcount, device_settings<Tuning>(opt, static_cast<int>(reduction)));
      if (const status g = agree_first(a.t, sig, -1, a.on.stream); g != status::success) return g;  // (nothing enqueued)
      s = c.open(sig);
    }
    if (n == 1 && s == status::success) s = c.copy(acc, send, block);
    const auto local = [&](int b) { return send + static_cast<std::uint64_t>(b) * block; };
    if constexpr (!packed) {
      std::uint8_t* in = ws + l.plain;
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);
        s = c.to_xfer();  // the previous hop's sum goes out, and `in` is free again
        if (s == status::success)
          s = c.exchange(st.dst, st.from_input ? local(st.send_block) : acc, block, st.src, in, block);
        if (s == status::success) s = c.to_codec();
        if (s == status::success && recvcount)
          s = cuda::detail::launch("cuda collective: add", dim3(grid_for(recvcount)), dim3(256), c.stream,
                                   detail::add_kernel<E>, acc, static_cast<const std::uint8_t*>(in),
                                   local(st.recv_block), recvcount);
      }
    } else {
      // Segment b of hop k arrives in `in`, is decoded, added to the local block and re-encoded
      // into `out` by one kernel, and goes out as segment b of hop k + 1 once that kernel is done
      // (slot i + S); the next arrival in `in` waits for that same kernel, as its group sends it.
      const auto g = geometry<Codec, Tuning>(recvcount, opt);
      const auto blocks = coder<Codec, Tuning>(c.stream, g, opt, a.cb, c.key, ws + l.stage_a,
                                               reinterpret_cast<std::uint64_t*>(ws + l.spans));
      std::uint8_t *out = ws + l.wire_a, *in = ws + l.wire_b;
      const std::uint64_t hops = sched.items() / (S ? S : 1);
      if (s == status::success && sched.items() != 0) s = blocks.encode(local(sched.at(0).send_block), out, p.stage0 + 1);
      if (s == status::success) s = c.to_xfer();
      const batching bt(S, a.on.pipelined());
      for (std::uint64_t k = 0; k < hops && s == status::success; ++k) {
        for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
          const segments sg{bt.first(b), bt.last(b)};
          const std::uint64_t i = k * S + sg.first;
          const zipccl::collective::step st = sched.at(i);
          const std::uint64_t stage = p.stage0 + 2 + k;
          if (k > 0) s = c.await_ready(i);
          if (s == status::success) s = exchange_segments(c, g, sg, st.dst, out, st.src, in);
          if (s == status::success) s = c.to_codec();
          if (s == status::success) s = blocks.unpack(in, stage, sg);
          if (s != status::success) break;
          if (k + 1 == hops) {
            s = blocks.template decode<detail::decode_mode::add_store>(acc, local(st.recv_block), nullptr, stage, sg);
          } else {
            // decode, add the local block and code the sum for the next hop, in one kernel
            s = blocks.template decode<detail::decode_mode::add_encode>(nullptr, local(st.recv_block), ws + l.stage_b,
                                                                        stage, sg);
            if (s == status::success) s = blocks.pack(ws + l.stage_b, out, stage, sg);
            if (s == status::success) s = c.ready(i + S);
          }
        }
      }
    }
    if (s == status::success && reduction == op::avg && n > 1 && recvcount)
      s = cuda::detail::launch("cuda collective: divide", dim3(grid_for(recvcount)), dim3(256), c.stream,
                               detail::divide_kernel<E>, acc, recvcount, n);
    if (s == status::success)
      s = c.finish(!p.closes ? ending::mid_call : packed && n > 1 ? ending::agreed : ending::own_outcome);
    return c.end(s);
  }
}

}  // namespace collective_detail

// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction of block r.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                      void* workspace, std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                      const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>,
                "cuda::reduce_scatter: Transport must model the device transport");
  return collective_detail::reduce_scatter_run<Codec, Strategy, Tuning>(
      sendbuff, recvbuff, recvcount, reduction,
      collective_detail::args<Codec, Transport>{t, workspace, workspace_bytes, status_dev, on, opt, cb},
      collective_detail::part::whole());
}

}  // namespace zipccl::cuda
