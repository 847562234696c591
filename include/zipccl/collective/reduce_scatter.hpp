// zipccl: reduce_scatter and all_reduce on a host transport (ring algorithms).
//
//   reduce_scatter<Codec, Strategy>(sendbuff, recvbuff, recvcount, op, transport, workspace, bytes)
//
// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction (sum or
// average) of every rank's block r. Each ring hop reduces a received partial result with the local
// block as narrow(widen(received) + widen(local)) in float, whichever path carried it; the
// compressed path is lossless, so it gives bit-identical results to the plain one. Averages divide
// by size() once, at the end.
//
// The compressed path decompresses, reduces and recompresses at every hop, segment by segment
// (detail/pipeline.hpp), so one segment's transfer overlaps the coding of the next; each chunk is
// decoded into a chunk-sized buffer and reduced from there while it is still in cache. Segments
// travel as a fixed-size section and then the escapes (detail/wire.hpp): no size messages.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "all_gather.hpp"
#include "common.hpp"
#include "detail/arith.hpp"
#include "detail/pipeline.hpp"
#include "detail/wire.hpp"

namespace zipccl {

namespace collective::detail {
// The compressed reduce_scatter's workspace: an outgoing slot per segment, two incoming slots
// (item i lands in slot i % 2: the receive of item i + 1 is posted before item i is consumed),
// one chunk of coding scratch and one decoded chunk.
template <class Codec>
struct scatter_layout {
  segment_plan<Codec> plan;
  std::uint64_t in_offset, scratch_offset, chunk_offset, total;
  scatter_layout(std::uint64_t count, const collective_options& opt)
      : plan(count, opt.codec.chunk_elems, opt.pipeline.segment_elems) {
    in_offset = plan.slot * plan.segments;
    scratch_offset = in_offset + 2 * plan.slot;
    chunk_offset = scratch_offset + format::align_up(wire<Codec>::scratch_bytes(opt.codec.chunk_elems), 16);
    total = chunk_offset + format::align_up(std::uint64_t{opt.codec.chunk_elems} * Codec::element_size, 16);
  }
};
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always>
std::uint64_t reduce_scatter_workspace(std::uint64_t recvcount, const collective_options& opt = {}) {
  if constexpr (std::is_same_v<Strategy, strategy::never>) {
    // an outgoing copy of the partial sums and two incoming segments
    if (!collective::detail::valid_options(opt)) return 0;
    const collective::detail::segment_plan<Codec> plan(recvcount, opt.codec.chunk_elems, opt.pipeline.segment_elems);
    return format::align_up(recvcount * Codec::element_size, 16) + 2 * format::align_up(plan.seg * Codec::element_size, 16);
  }
  else if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    const std::uint64_t a = reduce_scatter_workspace<Codec, strategy::always>(recvcount, opt);
    const std::uint64_t b = reduce_scatter_workspace<Codec, strategy::never>(recvcount, opt);
    return a > b ? a : b;
  } else {
    if (!collective::detail::valid_options(opt)) return 0;
    return collective::detail::scatter_layout<Codec>(recvcount, opt).total;
  }
}

namespace collective::detail {
// dst[i] = narrow(widen(a[i]) + widen(b[i])) for n elements at any alignment.
template <class E>
void accumulate(std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b, std::uint64_t n) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i) {
    const float x = widen<E>(format::load_le<bits>(a + i * sizeof(bits)));
    const float y = widen<E>(format::load_le<bits>(b + i * sizeof(bits)));
    format::store_le<bits>(dst + i * sizeof(bits), narrow<E>(x + y));
  }
}
template <class E>
void divide(std::uint8_t* dst, std::uint64_t n, int ranks) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i)
    format::store_le<bits>(dst + i * sizeof(bits),
                           narrow<E>(widen<E>(format::load_le<bits>(dst + i * sizeof(bits))) / static_cast<float>(ranks)));
}
}  // namespace collective::detail

namespace collective::detail {
// reduce_scatter without (check == false) or with the opening agreement on the call (common.hpp).
template <class Codec, class Strategy, class Transport>
status reduce_scatter_run(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                          void* workspace, std::uint64_t workspace_bytes, const collective_options& opt,
                          const typename Codec::codebook_type& cb, bool check) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return opt.model.reduce_scatter(recvcount * Codec::element_size, t.size()).compress
               ? reduce_scatter_run<Codec, strategy::always>(sendbuff, recvbuff, recvcount, reduction, t, workspace,
                                                             workspace_bytes, opt, cb, check)
               : reduce_scatter_run<Codec, strategy::never>(sendbuff, recvbuff, recvcount, reduction, t, workspace,
                                                            workspace_bytes, opt, cb, check);
  }
  using E = typename Codec::element_type;
  const int n = t.size(), r = t.rank();
  const std::uint64_t block = recvcount * Codec::element_size;
  const auto* send = static_cast<const std::uint8_t*>(sendbuff);
  auto* acc = static_cast<std::uint8_t*>(recvbuff);
  const std::uint64_t need = reduce_scatter_workspace<Codec, Strategy>(recvcount, opt);
  if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || !valid_options(opt) ||
      workspace_bytes < need || (workspace == nullptr && need != 0))
    return fail(t, status::invalid_argument);
  if (n == 1) {
    if (block) std::memmove(acc, send, block);
    return status::success;
  }
  if (check) {
    const status s = agree(t, status::success,
                           call_signature<Codec>(call_kind::reduce_scatter, !std::is_same_v<Strategy, strategy::never>,
                                                 recvcount, settings_word(opt, static_cast<int>(reduction))));
    if (s != status::success) return s;
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  if constexpr (std::is_same_v<Strategy, strategy::never>) {
    // the plain ring, pipelined by the same segments; hop k sends block (r - k - 1) and receives
    // block (r - k - 2), both partial sums after hop 0. Partial sums go out from a copy, since the
    // next hop's sum overwrites them while they may still be in flight.
    const segment_plan<Codec> plan(recvcount, opt.codec.chunk_elems, opt.pipeline.segment_elems);
    const std::uint64_t seg_bytes = format::align_up(plan.seg * Codec::element_size, 16);
    struct hooks {
      const segment_plan<Codec>& plan;
      int n, r;
      const std::uint8_t* send;
      std::uint8_t *acc, *out_copy, *in_slots;
      std::uint64_t block, seg_bytes, consumed = 0;
      std::uint64_t S() const { return plan.segments; }
      std::uint64_t offset(std::uint64_t s) const { return plan.first(s) * Codec::element_size; }
      std::uint64_t bytes(std::uint64_t s) const { return plan.elems(s) * Codec::element_size; }
      std::uint8_t* in_slot(std::uint64_t i) const { return in_slots + (i % 2) * seg_bytes; }
      int dst(std::uint64_t) const { return ring_next(r, n); }
      int src(std::uint64_t) const { return ring_prev(r, n); }
      bool ready(std::uint64_t i) const { return i < S() || consumed > i - S(); }
      status produce(std::uint64_t i, section* out) {
        const std::uint64_t s = i % S();
        if (i < S()) {
          *out = {send + ring_block(r, 1, n) * block + offset(s), bytes(s), nullptr, 0};
        } else {
          std::memcpy(out_copy + offset(s), acc + offset(s), bytes(s));
          *out = {out_copy + offset(s), bytes(s), nullptr, 0};
        }
        return status::success;
      }
      landing incoming(std::uint64_t i) { return {in_slot(i), bytes(i % S())}; }
      status arrived(std::uint64_t, std::uint64_t* tail_bytes, std::uint8_t** tail) {
        *tail_bytes = 0;
        *tail = nullptr;
        return status::success;
      }
      status consume(std::uint64_t i) {
        const std::uint64_t s = i % S();
        const std::uint8_t* local = send + static_cast<std::uint64_t>(ring_block(r, static_cast<int>(i / S()) + 2, n)) * block;
        accumulate<E>(acc + offset(s), in_slot(i), local + offset(s), plan.elems(s));
        ++consumed;
        return status::success;
      }
    } h{plan, n, r, send, acc, ws, ws + format::align_up(block, 16), block, seg_bytes};
    const status s = run_pipeline(t, static_cast<std::uint64_t>(n - 1) * plan.segments, opt.pipeline.depth,
                                  plan.segments, h);
    if (s != status::success) return s;
    if (reduction == op::avg) divide<E>(acc, recvcount, n);
    return status::success;
  } else {
    const scatter_layout<Codec> lay(recvcount, opt);
    // item i = k * S + s: hop k, segment s; the same hops as the plain ring, segment by segment
    struct hooks {
      const scatter_layout<Codec>& lay;
      const collective_options& opt;
      const typename Codec::codebook_type& cb;
      int n, r;
      const std::uint8_t* send;
      std::uint8_t* acc;
      std::uint8_t* ws;
      std::uint64_t block, consumed = 0;

      std::uint64_t S() const { return lay.plan.segments; }
      int hop(std::uint64_t i) const { return static_cast<int>(i / S()); }
      std::uint8_t* out_slot(std::uint64_t s) const { return ws + s * lay.plan.slot; }
      std::uint8_t* in_slot(std::uint64_t i) const { return ws + lay.in_offset + (i % 2) * lay.plan.slot; }
      int dst(std::uint64_t) const { return ring_next(r, n); }
      int src(std::uint64_t) const { return ring_prev(r, n); }
      bool ready(std::uint64_t i) const { return i < S() || consumed > i - S(); }
      status produce(std::uint64_t i, section* out) {
        const std::uint64_t s = i % S();
        // hop 0 sends the local block (r - 1); later hops the partial sums in acc
        const std::uint8_t* message = hop(i) == 0 ? send + ring_block(r, 1, n) * block : acc;
        *out = lay.plan.encode(cb, message, s, opt.codec.checksum, out_slot(s));
        return status::success;
      }
      landing incoming(std::uint64_t i) { return lay.plan.head(in_slot(i), i % S()); }
      std::uint64_t tail_in = 0;  // of the item arrived last, which consume() takes next
      status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
        const status st = lay.plan.arrived(in_slot(i), i % S(), tail_bytes, tail);
        tail_in = *tail_bytes;
        return st;
      }
      status consume(std::uint64_t i) {
        const std::uint64_t s = i % S(), base = lay.plan.first(s);
        const std::uint8_t* local = send + static_cast<std::uint64_t>(ring_block(r, hop(i) + 2, n)) * block;
        std::uint8_t* decoded = ws + lay.chunk_offset;
        ++consumed;
        return lay.plan.decode(
            in_slot(i), s, tail_in, ws + lay.scratch_offset,
            [&](std::uint64_t first, std::uint64_t m, const std::uint8_t* chunk, std::uint64_t span) {
              const status d = host::detail::decode_chunk<E>(chunk, span, m, opt.codec.checksum, decoded);
              if (d != status::success) return d;
              const std::uint64_t at = (base + first) * Codec::element_size;
              accumulate<E>(acc + at, decoded, local + at, m);
              return status::success;
            });
      }
    } h{lay, opt, cb, n, r, send, acc, ws, block};
    const status s = run_pipeline(t, static_cast<std::uint64_t>(n - 1) * lay.plan.segments, opt.pipeline.depth,
                                  lay.plan.segments, h);
    if (s != status::success) return s;
    if (reduction == op::avg) divide<E>(acc, recvcount, n);
    return agree(t, status::success);
  }
}
}  // namespace collective::detail

// Every rank passes the same recvcount, Codec and Strategy (and, with strategy::adaptive, the
// same model): the ranks check this before any data moves, and every rank returns size_mismatch
// when one differs.
template <class Codec, class Strategy = strategy::always, class Transport>
status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                      void* workspace, std::uint64_t workspace_bytes, const collective_options& opt = {},
                      const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "reduce_scatter: Transport must model the host transport concept");
  const collective::detail::abort_on_unwind<Transport> guard(t);
  return collective::detail::reduce_scatter_run<Codec, Strategy>(sendbuff, recvbuff, recvcount, reduction, t,
                                                                 workspace, workspace_bytes, opt, cb, true);
}

// all_reduce = reduce_scatter + all_gather over size() blocks of ceil(count / size()) elements
// (the tail padded with zeros in the workspace). recvbuff receives count elements. Every rank
// passes the same count, Codec and Strategy: the ranks check this before any data moves, and
// every rank returns size_mismatch when one differs.
template <class Codec, class Strategy = strategy::always>
std::uint64_t all_reduce_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  const std::uint64_t per = (count + ranks - 1) / static_cast<std::uint64_t>(ranks);
  const std::uint64_t padded = format::align_up(per * static_cast<std::uint64_t>(ranks) * Codec::element_size, 16);
  const std::uint64_t rs = reduce_scatter_workspace<Codec, Strategy>(per, opt);
  const std::uint64_t ag = all_gather_workspace<Codec, Strategy>(per, ranks, opt);
  return 2 * padded + format::align_up(per * Codec::element_size, 16) + (rs > ag ? rs : ag);
}

template <class Codec, class Strategy = strategy::always, class Transport>
status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, Transport& t,
                  void* workspace, std::uint64_t workspace_bytes, const collective_options& opt = {},
                  const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "all_reduce: Transport must model the host transport concept");
  using namespace collective::detail;
  const abort_on_unwind<Transport> guard(t);
  const int n = t.size();
  const std::uint64_t elem = Codec::element_size;
  const std::uint64_t per = (count + n - 1) / static_cast<std::uint64_t>(n);
  const std::uint64_t padded = format::align_up(per * static_cast<std::uint64_t>(n) * elem, 16);
  const std::uint64_t need = all_reduce_workspace<Codec, Strategy>(count, n, opt);
  if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || workspace_bytes < need ||
      (workspace == nullptr && need != 0) || !valid_options(opt))
    return fail(t, status::invalid_argument);
  if (n > 1) {
    // the whole count, not only the blocks of ceil(count / n) that the two stages see, and the
    // path each stage takes
    const std::uint64_t block = per * elem;
    const bool rs = !std::is_same_v<Strategy, strategy::never> &&
                    (!std::is_same_v<Strategy, strategy::adaptive> || opt.model.reduce_scatter(block, n).compress);
    const bool ag = !std::is_same_v<Strategy, strategy::never> &&
                    (!std::is_same_v<Strategy, strategy::adaptive> || opt.model.all_gather(block, n).compress);
    const status s = agree(t, status::success,
                           call_signature<Codec>(call_kind::all_reduce, rs, count,
                                                 settings_word(opt, static_cast<int>(reduction)) ^ (ag ? 1 : 0)));
    if (s != status::success) return s;
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  std::uint8_t* in = ws;                 // the input, padded to n * per elements
  std::uint8_t* gathered = ws + padded;  // the all_gather's output
  std::uint8_t* mine = gathered + padded;
  std::uint8_t* rest = mine + format::align_up(per * elem, 16);
  const std::uint64_t rest_bytes = workspace_bytes - (rest - ws);
  if (padded) std::memset(in, 0, padded);
  if (count) std::memcpy(in, sendbuff, count * elem);
  status s = reduce_scatter_run<Codec, Strategy>(in, mine, per, reduction, t, rest, rest_bytes, opt, cb, false);
  if (s != status::success) return s;
  s = all_gather_run<Codec, Strategy>(mine, gathered, per, t, rest, rest_bytes, opt, cb, false);
  if (s != status::success) return s;
  if (count) std::memcpy(recvbuff, gathered, count * elem);
  return status::success;
}

}  // namespace zipccl
