// zipccl: all_gather on a host transport.
//
//   all_gather<Codec, Strategy>(sendbuff, recvbuff, count, transport, workspace, workspace_bytes)
//
// Every rank contributes `count` elements; recvbuff receives size() * count elements, rank r's at
// offset r * count. The compressed path cuts the local shard into segments, compresses each once,
// and forwards the compressed segments around the ring (detail/wire.hpp: a fixed-size section, then
// the escapes, so no size message is ever sent); every rank decompresses the segments that reach it
// while the next ones are in flight (detail/pipeline.hpp). Results are bit-identical to the plain
// ring's. The workspace is the caller's: all_gather_workspace<Codec, Strategy>(count, ranks) bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../format/bytes.hpp"
#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "common.hpp"
#include "detail/pipeline.hpp"
#include "detail/wire.hpp"
#include "schedule.hpp"

namespace zipccl {

namespace collective::detail {
// The compressed all_gather's workspace: a slot per segment of every rank's shard, the tail sizes,
// one chunk of scratch.
template <class Codec>
struct gather_layout {
  segment_plan<Codec> plan;
  std::uint64_t blocks_bytes, tails_offset, scratch_offset, total;
  gather_layout(std::uint64_t count, int ranks, const collective_options& opt)
      : plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems) {
    const auto n = static_cast<std::uint64_t>(ranks);
    blocks_bytes = plan.slot * plan.segments * n;
    tails_offset = blocks_bytes;
    scratch_offset = tails_offset + format::align_up(8 * plan.segments * n, 16);
    total = scratch_offset + format::align_up(wire<Codec>::scratch_bytes(opt.codec.chunk_elems), 16);
  }
};
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always>
std::uint64_t all_gather_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  return collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    if constexpr (std::is_same_v<decltype(path), strategy::never>) {
      return 0;
    } else {
      if (!collective::detail::valid_options(opt) || ranks < 1) return 0;
      return collective::detail::gather_layout<Codec>(count, ranks, opt).total;
    }
  });
}

namespace collective::detail {
// The hooks (detail/pipeline.hpp) of the ring all_gather, on the steps of
// schedule::ring_all_gather: the plain ring forwards each segment as soon as it arrives, straight
// from and into the output.
template <class Codec>
struct ring_gather_plain : schedule_steps {
  std::uint8_t* recv;

  std::uint8_t* at(int block, std::uint64_t first) const {
    return recv + (static_cast<std::uint64_t>(block) * sched.blocks().count + first) * Codec::element_size;
  }
  status produce(std::uint64_t i, section* out) {
    const step st = sched.at(i);
    *out = {at(st.send_block, st.first), st.elems * Codec::element_size, nullptr, 0};
    return status::success;
  }
  landing incoming(std::uint64_t i) {
    const step st = sched.at(i);
    return {at(st.recv_block, st.first), st.elems * Codec::element_size};
  }
  status arrived(std::uint64_t, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    *tail_bytes = 0;
    *tail = nullptr;
    ++done;
    return status::success;
  }
  status consume(std::uint64_t) { return status::success; }
};

// The compressed ring: a rank encodes each segment of its own block once (step 0), forwards the
// compressed segments it receives unchanged, and decodes each into the output while the next
// ones are in flight. Every (block, segment) has its own slot in the workspace.
template <class Codec>
struct ring_gather_packed : schedule_steps {
  const segment_plan<Codec>& plan;
  const collective_options& opt;
  const typename Codec::codebook_type& cb;
  const void* send;
  std::uint8_t* recv;
  std::uint8_t* ws;
  std::uint64_t* tails;  // per block and segment
  std::uint8_t* scratch;

  std::uint64_t index(int b, std::uint64_t s) const { return static_cast<std::uint64_t>(b) * plan.segments + s; }
  std::uint8_t* slot(int b, std::uint64_t s) const { return ws + index(b, s) * plan.slot; }
  status produce(std::uint64_t i, section* out) {
    const step st = sched.at(i);
    if (st.from_input) {
      *out = plan.encode(cb, send, st.segment, opt.codec.checksum, slot(st.send_block, st.segment));
      tails[index(st.send_block, st.segment)] = out->tail_bytes;
    } else {
      *out = plan.stored(slot(st.send_block, st.segment), st.segment, tails[index(st.send_block, st.segment)]);
    }
    return status::success;
  }
  landing incoming(std::uint64_t i) {
    const step st = sched.at(i);
    return plan.head(slot(st.recv_block, st.segment), st.segment);
  }
  status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    const step st = sched.at(i);
    const status s = plan.arrived(slot(st.recv_block, st.segment), st.segment, tail_bytes, tail);
    tails[index(st.recv_block, st.segment)] = *tail_bytes;
    ++done;
    return s;
  }
  status consume(std::uint64_t i) {
    const step st = sched.at(i);
    return plan.decode_into(slot(st.recv_block, st.segment), st.segment, tails[index(st.recv_block, st.segment)],
                            opt.codec.checksum,
                            recv + static_cast<std::uint64_t>(st.recv_block) * plan.count * Codec::element_size, scratch);
  }
};
}  // namespace collective::detail

namespace collective::detail {
// all_gather without (check == false) or with the opening agreement on the call (common.hpp).
template <class Codec, class Strategy, class Transport>
status all_gather_run(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt,
                      const typename Codec::codebook_type& cb, bool check) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return on_path<Strategy>([&] { return opt.model.all_gather(count * Codec::element_size, t.size()).compress; },
                             [&](auto path) {
                               return all_gather_run<Codec, decltype(path)>(sendbuff, recvbuff, count, t, workspace,
                                                                            workspace_bytes, opt, cb, check);
                             });
  } else {
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t shard = count * Codec::element_size;
    auto* recv = static_cast<std::uint8_t*>(recvbuff);
    if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || !valid_options(opt) ||
        workspace_bytes < all_gather_workspace<Codec, Strategy>(count, n, opt) ||
        (workspace == nullptr && workspace_bytes != 0))
      return fail(t, status::invalid_argument);
    if (n == 1) {
      if (count) std::memmove(recv, sendbuff, shard);
      return status::success;
    }
    if (check) {  // also before a native all_gather: it compares sizes only, not the type or path
      const status s =
          agree(t, status::success, call_signature<Codec>(call_kind::all_gather, packed, count, settings_word(opt)));
      if (s != status::success) return s;
    }
    if (count) std::memmove(recv + static_cast<std::uint64_t>(r) * shard, sendbuff, shard);

    if constexpr (!packed && transport::has_native_all_gather_v<Transport>) {
      // the transport's own all_gather (it only moves bytes: the same result as the ring); the own
      // shard is in place already
      const status s = t.all_gather_bytes(recv + static_cast<std::uint64_t>(r) * shard, recvbuff, shard);
      return s == status::success ? s : fail(t, s);
    } else if constexpr (!packed) {
      const schedule sched = schedule::ring_all_gather(r, n, segmentation(count, opt.codec.chunk_elems,
                                                                          opt.pipeline.segment_elems));
      ring_gather_plain<Codec> h{{sched}, recv};
      return run_pipeline(t, sched.items(), opt.pipeline.depth, 0, h);
    } else {
      const gather_layout<Codec> lay(count, n, opt);
      const schedule sched = schedule::ring_all_gather(r, n, lay.plan);
      auto* ws = static_cast<std::uint8_t*>(workspace);
      ring_gather_packed<Codec> h{{sched}, lay.plan, opt, cb, sendbuff, recv, ws,
                                  reinterpret_cast<std::uint64_t*>(ws + lay.tails_offset), ws + lay.scratch_offset};
      const status s = run_pipeline(t, sched.items(), opt.pipeline.depth, 0, h);
      if (s != status::success) return s;
      return agree(t, status::success);
    }
  }
}
}  // namespace collective::detail

// Every rank passes the same count, Codec and Strategy (and, with strategy::adaptive, the same
// model): the ranks check this before any data moves, and every rank returns size_mismatch when
// one differs.
template <class Codec, class Strategy = strategy::always, class Transport>
status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, const collective_options& opt = {},
                  const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "all_gather: Transport must model the host transport concept");
  const collective::detail::abort_on_unwind<Transport> guard(t);
  return collective::detail::all_gather_run<Codec, Strategy>(sendbuff, recvbuff, count, t, workspace, workspace_bytes,
                                                             opt, cb, true);
}

}  // namespace zipccl
