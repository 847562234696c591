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
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return all_gather_workspace<Codec, strategy::always>(count, ranks, opt);
  } else if constexpr (std::is_same_v<Strategy, strategy::never>) {
    return 0;
  } else {
    if (!collective::detail::valid_options(opt) || ranks < 1) return 0;
    return collective::detail::gather_layout<Codec>(count, ranks, opt).total;
  }
}

namespace collective::detail {
// all_gather without (check == false) or with the opening agreement on the call (common.hpp).
template <class Codec, class Strategy, class Transport>
status all_gather_run(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt,
                      const typename Codec::codebook_type& cb, bool check) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return opt.model.all_gather(count * Codec::element_size, t.size()).compress
               ? all_gather_run<Codec, strategy::always>(sendbuff, recvbuff, count, t, workspace, workspace_bytes,
                                                         opt, cb, check)
               : all_gather_run<Codec, strategy::never>(sendbuff, recvbuff, count, t, workspace, workspace_bytes,
                                                        opt, cb, check);
  }
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
  constexpr bool native = std::is_same_v<Strategy, strategy::never> && transport::has_native_all_gather_v<Transport>;
  if (check) {  // also before a native all_gather: it compares sizes only, not the type or path
    const status s = agree(t, status::success,
                           call_signature<Codec>(call_kind::all_gather, !std::is_same_v<Strategy, strategy::never>, count,
                                                 settings_word(opt)));
    if (s != status::success) return s;
  }
  if (count) std::memmove(recv + static_cast<std::uint64_t>(r) * shard, sendbuff, shard);

  if constexpr (native) {
    // the transport's own all_gather (it only moves bytes: the same result as the ring); the own
    // shard is in place already
    const status s = t.all_gather_bytes(recv + static_cast<std::uint64_t>(r) * shard, recvbuff, shard);
    return s == status::success ? s : fail(t, s);
  } else if constexpr (std::is_same_v<Strategy, strategy::never>) {
    // the plain ring, pipelined by the same segments: a segment is forwarded as soon as it arrives
    const segment_plan<Codec> plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems);
    struct hooks {
      const segment_plan<Codec>& plan;
      int n, r;
      std::uint8_t* recv;
      std::uint64_t received = 0;
      std::uint64_t S() const { return plan.segments; }
      std::uint8_t* at(int k, std::uint64_t s) const {
        return recv + (static_cast<std::uint64_t>(ring_block(r, k, n)) * plan.count + plan.first(s)) * Codec::element_size;
      }
      std::uint64_t bytes(std::uint64_t s) const { return plan.elems(s) * Codec::element_size; }
      int dst(std::uint64_t) const { return ring_next(r, n); }
      int src(std::uint64_t) const { return ring_prev(r, n); }
      bool ready(std::uint64_t i) const { return i < S() || received > i - S(); }
      status produce(std::uint64_t i, section* out) {
        *out = {at(static_cast<int>(i / S()), i % S()), bytes(i % S()), nullptr, 0};
        return status::success;
      }
      landing incoming(std::uint64_t i) { return {at(static_cast<int>(i / S()) + 1, i % S()), bytes(i % S())}; }
      status arrived(std::uint64_t, std::uint64_t* tail_bytes, std::uint8_t** tail) {
        *tail_bytes = 0;
        *tail = nullptr;
        ++received;
        return status::success;
      }
      status consume(std::uint64_t) { return status::success; }
    } h{plan, n, r, recv};
    return run_pipeline(t, static_cast<std::uint64_t>(n - 1) * plan.segments, opt.pipeline.depth, 0, h);
  } else {
    const gather_layout<Codec> lay(count, n, opt);
    // item i = k * S + s: ring step k, segment s; it sends block (r - k) and receives block (r - k - 1)
    struct hooks {
      const segment_plan<Codec>& plan;
      const collective_options& opt;
      const typename Codec::codebook_type& cb;
      int n, r;
      const void* send;
      std::uint8_t* recv;
      std::uint8_t* ws;
      std::uint64_t* tails;  // per block and segment
      std::uint8_t* scratch;
      std::uint64_t received = 0;

      std::uint64_t S() const { return plan.segments; }
      int step(std::uint64_t i) const { return static_cast<int>(i / S()); }
      std::uint64_t index(int b, std::uint64_t s) const { return static_cast<std::uint64_t>(b) * S() + s; }
      std::uint8_t* slot(int b, std::uint64_t s) const { return ws + index(b, s) * plan.slot; }
      int dst(std::uint64_t) const { return ring_next(r, n); }
      int src(std::uint64_t) const { return ring_prev(r, n); }
      bool ready(std::uint64_t i) const { return i < S() || received > i - S(); }
      status produce(std::uint64_t i, section* out) {
        const std::uint64_t s = i % S();
        const int b = ring_block(r, step(i), n);
        if (step(i) == 0) {
          *out = plan.encode(cb, send, s, opt.codec.checksum, slot(b, s));
          tails[index(b, s)] = out->tail_bytes;
        } else {
          *out = plan.stored(slot(b, s), s, tails[index(b, s)]);
        }
        return status::success;
      }
      landing incoming(std::uint64_t i) { return plan.head(slot(ring_block(r, step(i) + 1, n), i % S()), i % S()); }
      status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
        const std::uint64_t s = i % S();
        const int b = ring_block(r, step(i) + 1, n);
        const status st = plan.arrived(slot(b, s), s, tail_bytes, tail);
        tails[index(b, s)] = *tail_bytes;
        ++received;
        return st;
      }
      status consume(std::uint64_t i) {
        const std::uint64_t s = i % S();
        const int b = ring_block(r, step(i) + 1, n);
        return plan.decode_into(slot(b, s), s, tails[index(b, s)], opt.codec.checksum,
                                recv + static_cast<std::uint64_t>(b) * plan.count * Codec::element_size, scratch);
      }
    } h{lay.plan, opt, cb, n, r, sendbuff, recv, static_cast<std::uint8_t*>(workspace),
        reinterpret_cast<std::uint64_t*>(static_cast<std::uint8_t*>(workspace) + lay.tails_offset),
        static_cast<std::uint8_t*>(workspace) + lay.scratch_offset};
    const status s = run_pipeline(t, static_cast<std::uint64_t>(n - 1) * lay.plan.segments, opt.pipeline.depth, 0, h);
    if (s != status::success) return s;
    return agree(t, status::success);
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
