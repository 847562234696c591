// zipccl: reduce_scatter on a host transport (ring algorithm); all_reduce is in all_reduce.hpp.
//
//   reduce_scatter<Codec, Strategy>(sendbuff, recvbuff, recvcount, op, transport, workspace, bytes)
//
// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction (sum or
// average) of every rank's block r; with more than one rank, recvbuff must not overlap sendbuff
// (invalid_argument). Each ring hop reduces a received partial result with the local
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
#include "schedule.hpp"

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
  return collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    if (!collective::detail::valid_options(opt)) return 0;
    if constexpr (std::is_same_v<decltype(path), strategy::never>) {
      // an outgoing copy of the partial sums and two incoming segments
      const collective::segmentation seg(recvcount, opt.codec.chunk_elems, opt.pipeline.segment_elems);
      return format::align_up(recvcount * Codec::element_size, 16) + 2 * format::align_up(seg.seg * Codec::element_size, 16);
    } else {
      return collective::detail::scatter_layout<Codec>(recvcount, opt).total;
    }
  });
}

namespace collective::detail {
// dst[i] = narrow(widen(a[i]) + widen(b[i])) for n elements at any alignment.
template <class E>
void accumulate(std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b, std::uint64_t n) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i)
    format::store_le<bits>(dst + i * sizeof(bits),
                           add<E>(format::load_le<bits>(a + i * sizeof(bits)), format::load_le<bits>(b + i * sizeof(bits))));
}
template <class E>
void divide(std::uint8_t* dst, std::uint64_t n, int ranks) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i)
    format::store_le<bits>(dst + i * sizeof(bits), divide_by<E>(format::load_le<bits>(dst + i * sizeof(bits)), ranks));
}
}  // namespace collective::detail

namespace collective::detail {
// The hooks (detail/pipeline.hpp) of the ring reduce_scatter, on the steps of
// schedule::ring_reduce_scatter. Hop k sends the partial result of block (r - k - 1) (hop 0: the
// rank's own input block) and adds its own input to the partial result of block (r - k - 2) it
// receives, into `acc` (the caller's output: every hop reduces into the same block of recvcount
// elements). The plain ring sends partial sums from a copy, since the next hop's sum overwrites
// them while they may still be in flight; incoming segments alternate between two slots (the
// receive of item i + 1 is posted before item i is consumed).
template <class Codec>
struct ring_scatter_plain : schedule_steps {
  using E = typename Codec::element_type;
  const std::uint8_t* send;
  std::uint8_t *acc, *out_copy, *in_slots;
  std::uint64_t block, seg_bytes;

  std::uint8_t* in_slot(std::uint64_t i) const { return in_slots + (i % 2) * seg_bytes; }
  status produce(std::uint64_t i, section* out) {
    const step st = sched.at(i);
    const std::uint64_t at = st.first * Codec::element_size, bytes = st.elems * Codec::element_size;
    if (st.from_input) {
      *out = {send + static_cast<std::uint64_t>(st.send_block) * block + at, bytes, nullptr, 0};
    } else {
      std::memcpy(out_copy + at, acc + at, bytes);
      *out = {out_copy + at, bytes, nullptr, 0};
    }
    return status::success;
  }
  landing incoming(std::uint64_t i) { return {in_slot(i), sched.at(i).elems * Codec::element_size}; }
  status arrived(std::uint64_t, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    *tail_bytes = 0;
    *tail = nullptr;
    return status::success;
  }
  status consume(std::uint64_t i) {
    const step st = sched.at(i);
    const std::uint64_t at = st.first * Codec::element_size;
    accumulate<E>(acc + at, in_slot(i), send + static_cast<std::uint64_t>(st.recv_block) * block + at, st.elems);
    ++done;
    return status::success;
  }
};

// The compressed ring: every hop decodes, reduces and re-encodes each segment; each chunk is
// decoded into a chunk-sized buffer and reduced from there while it is still in cache.
template <class Codec>
struct ring_scatter_packed : schedule_steps {
  using E = typename Codec::element_type;
  const scatter_layout<Codec>& lay;
  const collective_options& opt;
  const typename Codec::codebook_type& cb;
  const std::uint8_t* send;
  std::uint8_t* acc;
  std::uint8_t* ws;
  std::uint64_t block;
  std::uint64_t tail_in = 0;  // of the item arrived last, which consume() takes next

  std::uint8_t* out_slot(std::uint64_t s) const { return ws + s * lay.plan.slot; }
  std::uint8_t* in_slot(std::uint64_t i) const { return ws + lay.in_offset + (i % 2) * lay.plan.slot; }
  status produce(std::uint64_t i, section* out) {
    const step st = sched.at(i);
    const std::uint8_t* message = st.from_input ? send + static_cast<std::uint64_t>(st.send_block) * block : acc;
    *out = lay.plan.encode(cb, message, st.segment, opt.codec.checksum, out_slot(st.segment));
    return status::success;
  }
  landing incoming(std::uint64_t i) {
    const std::uint64_t s = sched.at(i).segment;
    return lay.plan.head(in_slot(i), s);
  }
  status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    const status st = lay.plan.arrived(in_slot(i), sched.at(i).segment, tail_bytes, tail);
    tail_in = *tail_bytes;
    return st;
  }
  status consume(std::uint64_t i) {
    const step st = sched.at(i);
    const std::uint8_t* local = send + static_cast<std::uint64_t>(st.recv_block) * block;
    std::uint8_t* decoded = ws + lay.chunk_offset;
    ++done;
    return lay.plan.decode(in_slot(i), st.segment, tail_in, opt.codec.checksum, ws + lay.scratch_offset,
                           [&](std::uint64_t first, std::uint64_t m, const std::uint8_t* chunk, std::uint64_t span,
                               format::chunk_seal seal) {
                             const status d = host::detail::decode_chunk<E>(chunk, span, m, seal, decoded);
                             if (d != status::success) return d;
                             const std::uint64_t at = (st.first + first) * Codec::element_size;
                             accumulate<E>(acc + at, decoded, local + at, m);
                             return status::success;
                           });
  }
};

// reduce_scatter without (check == false) or with the opening agreement on the call (common.hpp).
template <class Codec, class Strategy, class Transport>
status reduce_scatter_run(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                          void* workspace, std::uint64_t workspace_bytes, const collective_options& opt,
                          const typename Codec::codebook_type& cb, bool check) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return on_path<Strategy>(
        [&] { return opt.model.reduce_scatter(recvcount * Codec::element_size, t.size()).compress; },
        [&](auto path) {
          return reduce_scatter_run<Codec, decltype(path)>(sendbuff, recvbuff, recvcount, reduction, t, workspace,
                                                           workspace_bytes, opt, cb, check);
        });
  } else {
    using E = typename Codec::element_type;
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t block = recvcount * Codec::element_size;
    const auto* send = static_cast<const std::uint8_t*>(sendbuff);
    auto* acc = static_cast<std::uint8_t*>(recvbuff);
    const std::uint64_t need = reduce_scatter_workspace<Codec, Strategy>(recvcount, opt);
    if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        reduce_overlaps(sendbuff, recvbuff, block, n) || !valid_options(opt) || workspace_bytes < need ||
        (workspace == nullptr && need != 0))
      return fail(t, status::invalid_argument);
    if (n == 1) {
      if (block) std::memmove(acc, send, block);
      return status::success;
    }
    if (check) {
      const status s = agree(t, status::success,
                             call_signature<Codec>(call_kind::reduce_scatter, packed, recvcount,
                                                   settings_word(opt, static_cast<int>(reduction))));
      if (s != status::success) return s;
    }
    auto* ws = static_cast<std::uint8_t*>(workspace);
    status s = status::success;
    if constexpr (!packed) {
      const schedule sched = schedule::ring_reduce_scatter(
          r, n, segmentation(recvcount, opt.codec.chunk_elems, opt.pipeline.segment_elems));
      const std::uint64_t seg_bytes = format::align_up(sched.blocks().seg * Codec::element_size, 16);
      ring_scatter_plain<Codec> h{{sched}, send, acc, ws, ws + format::align_up(block, 16), block, seg_bytes};
      s = run_pipeline(t, sched.items(), opt.pipeline.depth, sched.segments(), h);
    } else {
      const scatter_layout<Codec> lay(recvcount, opt);
      const schedule sched = schedule::ring_reduce_scatter(r, n, lay.plan);
      ring_scatter_packed<Codec> h{{sched}, lay, opt, cb, send, acc, ws, block};
      s = run_pipeline(t, sched.items(), opt.pipeline.depth, sched.segments(), h);
    }
    if (s != status::success) return s;
    if (reduction == op::avg) divide<E>(acc, recvcount, n);
    return packed ? agree(t, status::success) : status::success;
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

}  // namespace zipccl
