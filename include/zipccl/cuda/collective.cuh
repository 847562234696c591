// zipccl: the collectives on device buffers and the caller's stream, over a device transport
// (transport/device.hpp: transport::cuda_local, transport::nccl, or the user's own).
//
//   using C = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
//   std::uint64_t bytes = zipccl::cuda::all_reduce_workspace<C>(count, t.size());
//   ... cudaMalloc(&ws, bytes) once ...
//   zipccl::cuda::all_reduce<C>(grad, grad_out, count, zipccl::op::sum, t, ws, bytes, status_dev, stream);
//
// A call only enqueues work on its stream(s): kernels, the transport's sends and receives,
// cudaMemcpyAsync between device buffers and event records and waits. It never waits on the host,
// copies nothing to the host and allocates nothing, so a whole compressed all_reduce can be
// captured in a CUDA graph (with a transport whose work can be) and replayed. Every message size
// follows from the counts alone: compressed segments travel on the fixed-size wire
// (docs/FORMAT.md, "Fixed-size segments"), with room for
// collective_options::device_wire.spill_permille bytes per 1000 elements past each chunk's fixed
// part (the escapes of the 3-bit policies; codebook::entropy's rANS bodies).
//
// Streams (cuda/pipeline.cuh): the last argument but the options is a cuda::lanes, which a plain
// cudaStream_t converts to: the call then runs on that stream alone. With the lanes of a
// cuda::pipeline (pipeline.on(stream)) the transport's operations run on the pipeline's transfer
// stream and the codec kernels on `stream`, joined by events: a compressed segment
// (collective_options::pipeline.segment_elems elements) is decoded (reduce_scatter: decoded,
// reduced and re-encoded in one fused kernel) while the next one is in flight, and goes out as
// soon as its kernel is done. Compressed blocks travel as one message per segment on both
// executors (plain blocks and all_to_all's blocks as one message each), so ranks may mix them;
// the one-stream executor codes a whole block per kernel. Either way the call is ordered on
// `stream` as one piece. pipeline.depth bounds how far all_to_all codes ahead; the ring
// collectives are bounded by their data (a segment goes out once the kernel that writes it is done).
//
// The outcome is written to *status_dev (device, managed or mapped memory) in stream order: the
// rank's own first error (a corrupt or mismatched segment, a segment over its budget:
// wire_overflow), else peer_failed when another rank failed, else success, as the host
// collectives report it: the ranks agree on it at the end of the call (ceil(log2 n) rounds of
// 24-byte messages), and on the call itself at the start (collective, element type, path, count,
// sizes, checksums, reduction, budget): calls that differ give size_mismatch on every rank. Where
// they also differ in a message's size, transport::cuda_local sees it when the two halves meet and
// ends its world (every rank's call returns); transport::nccl cannot, and NCCL's behaviour is then
// undefined (in practice a hang): its checked mode agrees on the signature first (nccl.hpp).
//
// Errors. The host return value says whether the work was enqueued:
//   - invalid_argument for bad arguments (a null buffer, a workspace too small, lanes the
//     transport refuses): nothing was enqueued, and the transport is as it was;
//   - an error after the call began (cuda_error: cuda::last_error() says why; the transport's
//     error, e.g. peer_failed once it has ended): the call's transfers may be partly enqueued and
//     the peers may wait for the rest. *status_dev still receives the outcome where a kernel can
//     be launched. The transport is not touched: the caller ends it, as NCCL's model asks
//     (transport::nccl: async_error(), then abort(); transport::cuda_local: abort(), or
//     world.run(), which ends the world when a rank returns an error).
// The workspace may start at any address (the sizes include the slack to align it); a
// reduce_scatter's recvbuff must not overlap its sendbuff (more than one rank).
//
// The schedule is the host collectives' (collective/schedule.hpp): ring all_gather, ring
// reduce_scatter, all_reduce as the two, pairwise all_to_all, send / recv; results are
// bit-identical to the host collectives and to the plain device path (same reduction order and
// precision). Chunks are the Tuning's (8,192 elements by default; opt.codec.chunk_elems is the
// host's and is not used here). Workspace: a compressed all_gather on pipelined lanes keeps every
// block's wire (about the compressed size of the output; on one stream two suffice: the size
// functions take `pipelined`), reduce_scatter two wires of one block, all_to_all one wire per
// peer and direction.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../codec/codec.hpp"
#include "../collective/common.hpp"
#include "../collective/detail/fixed_wire.hpp"
#include "../collective/schedule.hpp"
#include "../error.hpp"
#include "../transport/device.hpp"
#include "detail/wire_kernels.cuh"
#include "pipeline.cuh"
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

namespace collective_detail {

using zipccl::collective::detail::call_kind;

// How a device call's workspace is cut: control words, the chunk spans, two staging areas, the
// out wire, `in_wires` in wires, and (plain reduce_scatter) one block for incoming data.
struct layout {
  std::uint64_t ctrl = 0, spans = 0, stage_a = 0, stage_b = 0, wire_a = 0, wire_b = 0, wire_stride = 0, plain = 0,
                total = 0;
};
inline std::uint64_t up(std::uint64_t v) { return (v + temp_align - 1) / temp_align * temp_align; }

static_assert(default_tuning::chunk_elems == zipccl::collective::detail::device_chunk_elems,
              "the fixed-size wire's helpers assume the default tuning's chunk");

inline std::uint64_t segment_elems(const collective_options& opt) {
  return zipccl::collective::detail::device_segment_elems(opt.pipeline.segment_elems);
}

template <class Codec, class Tuning>
detail::wire_geometry<Codec> geometry(std::uint64_t count, const collective_options& opt) {
  return detail::wire_geometry<Codec>(count, Tuning::chunk_elems, segment_elems(opt), opt.device_wire.spill_permille);
}

inline constexpr std::uint64_t control_bytes = sizeof(detail::agreement_words) + sizeof(unsigned long long);

// plain_bytes: the plain path's extra block; packed: whether the compressed path's areas are needed;
// second_stage: a second staging area (reduce_scatter's fused re-encoding).
template <class Codec, class Tuning>
layout make_layout(std::uint64_t count, const collective_options& opt, bool packed, bool second_stage,
                   std::uint64_t plain_bytes, std::uint64_t in_wires = 1) {
  layout l;
  std::uint64_t at = 0;
  l.ctrl = at;
  at += up(control_bytes);
  if (packed) {
    const auto g = geometry<Codec, Tuning>(count, opt);
    l.spans = at;
    at += up(g.chunks() * 8);
    l.stage_a = at;
    at += up(g.staging_bytes());
    l.stage_b = at;
    if (second_stage) at += up(g.staging_bytes());
    l.wire_a = at;
    at += up(g.total_bytes());
    l.wire_b = at;
    l.wire_stride = up(g.total_bytes());
    at += in_wires * l.wire_stride;
  }
  l.plain = at;
  at += up(plain_bytes);
  l.total = at;
  return l;
}

// The caller's workspace at any address: aligned to temp_align, as the size functions' slack allows.
inline bool align_workspace(void*& ws, std::uint64_t& bytes, std::uint64_t need) {
  if (ws == nullptr) return false;
  const detail::aligned_temp a = detail::align_temp(ws, static_cast<std::size_t>(bytes), static_cast<std::size_t>(need));
  if (!a.fits) return false;
  bytes -= static_cast<std::uint64_t>(a.base - static_cast<std::uint8_t*>(ws));
  ws = a.base;
  return true;
}

inline bool options_ok(const collective_options& opt) {
  return opt.pipeline.depth >= 1 && opt.device_wire.spill_permille <= 4000;
}

// Pipelined lanes need their events, `slots` of them for the segments that wait for a kernel, and
// a transport that takes them: where it has transfer_stream(), on that stream (null: it takes no
// pipelined calls), and streams its rules allow (accepts_stream, where it has that member).
template <class Transport>
bool lanes_ok(const Transport& t, const lanes& on, std::uint64_t slots) {
  transport::check_optional_members<Transport>();
  if (!on.pipelined()) return true;
  if (on.events == nullptr || on.slots < (slots ? slots : 1)) return false;
  if constexpr (transport::has_transfer_stream_v<Transport>)
    if (t.transfer_stream() == nullptr || on.transfer != t.transfer_stream()) return false;
  if constexpr (transport::has_accepts_stream_v<Transport>)
    if (!t.accepts_stream(on.stream) || !t.accepts_stream(on.transfer)) return false;
  return true;
}

// The settings both ends must share on the device path: the Tuning's chunk, the segment size,
// checksums, the reduction and the spill budget.
template <class Tuning>
std::uint64_t device_settings(const collective_options& opt, int reduction = -1) {
  collective_options o = opt;
  o.codec.chunk_elems = Tuning::chunk_elems;
  return zipccl::collective::detail::settings_word(o, reduction) ^
         zipccl::collective::detail::signature_mix(0xD1CEull + opt.device_wire.spill_permille);
}

// The transport's agreement on the call before anything is enqueued (device.hpp, agree), where
// it has one.
template <class Transport>
status agree_first(Transport& t, std::uint64_t signature, int peer, cudaStream_t stream) {
  if constexpr (transport::has_agree_v<Transport>) return t.agree(signature, peer, stream);
  else return (void)t, (void)signature, (void)peer, (void)stream, status::success;
}

template <class Transport>
int* error_word(Transport& t) {
  if constexpr (transport::has_device_error_word_v<Transport>) return t.device_error_word();
  else return nullptr;
}

// How a block's S segments are grouped for the kernels: one segment each on pipelined lanes, the
// whole block on one stream (every segment is a message of its own either way).
struct batching {
  std::uint64_t segments = 0, per = 1;
  batching(std::uint64_t S, bool pipelined) : segments(S), per(pipelined || S == 0 ? 1 : S) {}
  std::uint64_t count() const { return (segments + per - 1) / per; }
  std::uint64_t first(std::uint64_t b) const { return b * per; }
  std::uint64_t last(std::uint64_t b) const { return b * per + per < segments ? b * per + per : segments; }
};

// The state of one call on the device: its control words, its streams, its transport. The
// agreements and every transport operation run on the transfer stream (`xfer`, which is `stream`
// on one-stream lanes), the codec kernels and copies on `stream`.
template <class Transport>
struct call {
  Transport& t;
  lanes on;
  cudaStream_t stream, xfer;
  detail::agreement_words* words;
  unsigned long long* key;
  status* status_dev;

  static status record_wait(cudaEvent_t e, cudaStream_t from, cudaStream_t to) {
    if (from == to) return status::success;
    status s = cuda::detail::check(cudaEventRecord(e, from), "cuda collective: cudaEventRecord");
    if (s == status::success) s = cuda::detail::check(cudaStreamWaitEvent(to, e, 0), "cuda collective: cudaStreamWaitEvent");
    return s;
  }
  // The transfer stream after the work enqueued on `stream` so far, and the other way round.
  status to_xfer() { return record_wait(on.pipelined() ? on.events[1] : nullptr, stream, xfer); }
  status to_codec() { return record_wait(on.pipelined() ? on.events[0] : nullptr, xfer, stream); }
  // Segment slot i: marked on `stream` once the kernels that write item i's segment are enqueued,
  // awaited by the transfer stream before it sends it (a wait binds to the last mark before it is
  // enqueued, so a slot is reused only once its wait is enqueued: lanes_ok checks the count).
  status ready(std::uint64_t i) {
    if (!on.pipelined()) return status::success;
    return cuda::detail::check(cudaEventRecord(on.events[2 + i % on.slots], stream), "cuda collective: cudaEventRecord");
  }
  status await_ready(std::uint64_t i) {
    if (!on.pipelined()) return status::success;
    return cuda::detail::check(cudaStreamWaitEvent(xfer, on.events[2 + i % on.slots], 0),
                               "cuda collective: cudaStreamWaitEvent");
  }

  status launch_init(unsigned long long signature, bool opening) {
    return cuda::detail::launch("cuda collective: agree init", dim3(1), dim3(32), xfer, detail::agree_init_kernel<>,
                                words, key, signature, opening);
  }
  status round_kernel() {
    return cuda::detail::launch("cuda collective: agree round", dim3(1), dim3(32), xfer, detail::agree_round_kernel<>,
                                words);
  }
  // ceil(log2 n) rounds: send what this rank knows to r + d, hear from r - d.
  status rounds() {
    const int n = t.size(), r = t.rank();
    for (int d = 1; d < n; d *= 2) {
      status s = exchange((r + d) % n, words->mine, sizeof words->mine, (r - d + n) % n, words->in, sizeof words->in);
      if (s == status::success) s = round_kernel();
      if (s != status::success) return s;
    }
    return status::success;
  }
  // The opening agreement, then `stream` after it (the codec kernels record into the key it resets).
  status open(unsigned long long signature) {
    status s = to_xfer();
    if (s == status::success) s = launch_init(signature, true);
    if (s == status::success) s = rounds();
    if (s == status::success)
      s = cuda::detail::launch("cuda collective: agree open", dim3(1), dim3(32), xfer, detail::agree_open_kernel<>,
                               words, key, error_word(t));
    if (s == status::success) s = to_codec();
    return s;
  }
  // The end of a call (or of one stage of all_reduce, close = false): the transfer stream after
  // the last kernels, the closing agreement when `close` (exchange = false: the outcome from what
  // this rank knows, for paths with no data-dependent error) with the outcome to *status_dev, and
  // `stream` after the last transfer.
  status finish(bool close, bool exchange) {
    status s = to_xfer();
    if (s == status::success && close && exchange) s = launch_init(0, false);
    if (s == status::success && close && exchange) s = rounds();
    if (s == status::success && close)
      s = cuda::detail::launch("cuda collective: agree close", dim3(1), dim3(32), xfer, detail::agree_close_kernel<>,
                               static_cast<const detail::agreement_words*>(words),
                               static_cast<const unsigned long long*>(key), static_cast<const int*>(error_word(t)),
                               status_dev, status::success);
    if (s == status::success) s = to_codec();
    return s;
  }
  // A failure while enqueueing, after the call may have enqueued transfers: the outcome still goes
  // to *status_dev when the last kernel can be launched (this rank's own failure; where the
  // transport refused because it had ended, what ended it: size_mismatch, peer_failed), the
  // transfer stream joins `stream` first so that a capture stays whole, and the error is returned.
  // The transport is left to the caller, who must end it (its peers may wait for this rank's
  // messages): see "Errors" at the top of this header.
  status fail(status s) {
    status outcome = s;
    if (s == status::peer_failed) {
      const status why = t.async_error();
      if (why != status::success) outcome = why == status::size_mismatch ? why : status::peer_failed;
    }
    (void)to_codec();
    (void)cuda::detail::launch("cuda collective: agree close", dim3(1), dim3(32), stream, detail::agree_close_kernel<>,
                               static_cast<const detail::agreement_words*>(words),
                               static_cast<const unsigned long long*>(key), static_cast<const int*>(error_word(t)),
                               status_dev, outcome);
    return s;
  }
  status copy(void* dst, const void* src, std::uint64_t bytes) {
    if (bytes == 0 || dst == src) return status::success;
    return cuda::detail::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
                               "cuda collective: cudaMemcpyAsync");
  }
  // One step on the transfer stream: out_bytes to dst, in_bytes from src, in one group.
  status exchange(int dst, const void* out, std::uint64_t out_bytes, int src, void* in, std::uint64_t in_bytes) {
    if (status s = t.group_start(); s != status::success) return s;
    const status a = t.send(dst, out, out_bytes, xfer);
    const status b = t.recv(src, in, in_bytes, xfer);
    const status c = t.group_end();
    return a != status::success ? a : b != status::success ? b : c;
  }
};

template <class Transport>
call<Transport> make_call(Transport& t, void* workspace, std::uint64_t ctrl, status* status_dev, const lanes& on) {
  auto* base = static_cast<std::uint8_t*>(workspace) + ctrl;
  return {t,
          on,
          on.stream,
          on.pipelined() ? on.transfer : on.stream,
          reinterpret_cast<detail::agreement_words*>(base),
          reinterpret_cast<unsigned long long*>(base + sizeof(detail::agreement_words)),
          status_dev};
}

// The kernels on segments [s0, s1) of a block (all of it by default): their chunks, one block each.
struct chunk_range {
  std::uint64_t c0 = 0, c1 = 0;
  unsigned grid() const { return static_cast<unsigned>(c1 - c0); }
};
template <class Codec>
chunk_range chunks_of(const detail::wire_geometry<Codec>& g, std::uint64_t s0, std::uint64_t s1) {
  if (s1 > g.segments) s1 = g.segments;
  return s0 >= s1 ? chunk_range{} : chunk_range{g.chunk_begin(s0), g.chunk_end(s1)};
}
inline constexpr std::uint64_t all_segments = ~std::uint64_t{0};

// Segments [s0, s1) of a block's wire out to dst and in from src, one grouped message each.
template <class Transport, class Codec>
status exchange_segments(call<Transport>& c, const detail::wire_geometry<Codec>& g, std::uint64_t s0, std::uint64_t s1,
                         int dst, const std::uint8_t* out, int src, std::uint8_t* in) {
  status s = status::success;
  for (std::uint64_t seg = s0; seg < s1 && s == status::success; ++seg)
    s = c.exchange(dst, out + g.seg_offset(seg), g.seg_bytes(seg), src, in + g.seg_offset(seg), g.seg_bytes(seg));
  return s;
}

template <class Codec>
status pack_block(cudaStream_t stream, const std::uint8_t* staging, const detail::wire_geometry<Codec>& g,
                  std::uint8_t* wire, unsigned long long* key, std::uint64_t stage, std::uint64_t s0 = 0,
                  std::uint64_t s1 = all_segments) {
  const chunk_range cr = chunks_of(g, s0, s1);
  if (cr.grid() == 0) return status::success;
  return cuda::detail::launch("cuda collective: pack", dim3(cr.grid()), dim3(128), stream, detail::pack_kernel<Codec>,
                              staging, g, cr.c0, wire, key, stage);
}

template <class Codec, class Tuning>
status encode_block(cudaStream_t stream, const std::uint8_t* src, const detail::wire_geometry<Codec>& g,
                    std::uint8_t* staging, std::uint8_t* wire, bool checksum, const typename Codec::codebook_type& cb,
                    unsigned long long* key, std::uint64_t stage, std::uint64_t s0 = 0,
                    std::uint64_t s1 = all_segments) {
  const chunk_range cr = chunks_of(g, s0, s1);
  if (cr.grid() == 0) return status::success;
  const status s = cuda::detail::launch("cuda collective: encode", dim3(cr.grid()), dim3(Tuning::threads), stream,
                                        detail::encode_kernel<Codec, Tuning>, src, g, cr.c0, staging, checksum, cb);
  return s == status::success ? pack_block<Codec>(stream, staging, g, wire, key, stage, s0, s1) : s;
}

template <class Codec>
status unpack_block(cudaStream_t stream, const std::uint8_t* wire, const detail::wire_geometry<Codec>& g,
                    std::uint8_t* staging, std::uint64_t* spans, unsigned long long* key, std::uint64_t stage,
                    std::uint64_t s0 = 0, std::uint64_t s1 = all_segments) {
  const chunk_range cr = chunks_of(g, s0, s1);
  if (cr.grid() == 0) return status::success;
  return cuda::detail::launch("cuda collective: unpack", dim3(cr.grid()), dim3(128), stream,
                              detail::unpack_kernel<Codec>, wire, g, cr.c0, staging, spans, key, stage);
}

template <class Codec, class Tuning, detail::decode_mode Mode>
status decode_block(cudaStream_t stream, const std::uint8_t* staging, const std::uint64_t* spans,
                    const detail::wire_geometry<Codec>& g, bool checksum, std::uint8_t* out, const std::uint8_t* local,
                    std::uint8_t* next, const typename Codec::codebook_type& cb, unsigned long long* key,
                    std::uint64_t stage, std::uint64_t s0 = 0, std::uint64_t s1 = all_segments) {
  const chunk_range cr = chunks_of(g, s0, s1);
  if (cr.grid() == 0) return status::success;
  return cuda::detail::launch("cuda collective: decode", dim3(cr.grid()), dim3(Tuning::threads), stream,
                              detail::decode_kernel<Codec, Tuning, Mode>, staging, spans, g, cr.c0, checksum, out,
                              local, next, cb, key, stage);
}

inline unsigned grid_for(std::uint64_t n) {
  const std::uint64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

// all_to_all: whether the block between two ranks travels compressed (adaptive decides per pair,
// from the block's size alone, which both ends know), and the workspace: control words, spans
// and staging for the largest block, then the wires of the coded blocks (out, then in).
template <class Codec, class Strategy>
bool block_packed(std::uint64_t count, int ranks, const collective_options& opt) {
  return count != 0 && zipccl::collective::detail::takes_compressed<Strategy>(
                           [&] { return opt.model.all_to_all(count * Codec::element_size, ranks).compress; });
}
struct a2a_layout {
  std::uint64_t spans = 0, staging = 0, out = 0, in = 0, total = 0;
};
template <class Codec, class Strategy, class Tuning>
a2a_layout make_a2a_layout(const std::uint64_t* sendcounts, const std::uint64_t* recvcounts, int ranks,
                           const collective_options& opt) {
  std::uint64_t chunks = 0, staging = 0, out = 0, in = 0;
  for (int p = 0; p < ranks; ++p) {
    for (const std::uint64_t count : {sendcounts[p], recvcounts[p]}) {
      if (!block_packed<Codec, Strategy>(count, ranks, opt)) continue;
      const auto g = geometry<Codec, Tuning>(count, opt);
      chunks = g.chunks() > chunks ? g.chunks() : chunks;
      staging = g.staging_bytes() > staging ? g.staging_bytes() : staging;
    }
    if (block_packed<Codec, Strategy>(sendcounts[p], ranks, opt))
      out += up(geometry<Codec, Tuning>(sendcounts[p], opt).total_bytes());
    if (block_packed<Codec, Strategy>(recvcounts[p], ranks, opt))
      in += up(geometry<Codec, Tuning>(recvcounts[p], opt).total_bytes());
  }
  a2a_layout l;
  l.spans = up(control_bytes);
  l.staging = l.spans + up(chunks * 8);
  l.out = l.staging + up(staging);
  l.in = l.out + out;
  l.total = l.in + in;
  return l;
}

}  // namespace collective_detail

// ---- workspace sizes ------------------------------------------------------------------------

// The bytes one block of `count` elements takes on the fixed-size wire (every segment's preamble,
// fixed part and spill room): what a compressed ring step sends, against count * element_size plain.
template <class Codec, class Tuning = default_tuning>
std::uint64_t wire_bytes(std::uint64_t count, const collective_options& opt = {}) {
  return collective_detail::geometry<Codec, Tuning>(count, opt).total_bytes();
}

// The in wires of a compressed all_gather: every hop's on pipelined lanes, two on one stream.
inline std::uint64_t gather_wires(int ranks, bool pipelined) {
  const std::uint64_t hops = ranks > 1 ? static_cast<std::uint64_t>(ranks - 1) : 0;
  return pipelined || hops < 2 ? hops : 2;
}

// pipelined: the size for pipelined lanes (the default, enough for both), or for one stream.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_gather_workspace(std::uint64_t count, int ranks, const collective_options& opt = {},
                                   bool pipelined = true) {
  const std::uint64_t in_wires = gather_wires(ranks, pipelined);
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(
        collective_detail::make_layout<Codec, Tuning>(count, opt, packed, false, 0, in_wires).total);
  });
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t reduce_scatter_workspace(std::uint64_t recvcount, const collective_options& opt = {}) {
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(collective_detail::make_layout<Codec, Tuning>(
                                        recvcount, opt, packed, true, packed ? 0 : recvcount * Codec::element_size)
                                        .total);
  });
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_reduce_workspace(std::uint64_t count, int ranks, const collective_options& opt = {},
                                   bool pipelined = true) {
  if (ranks < 1) return 0;
  const std::uint64_t per = (count + static_cast<std::uint64_t>(ranks) - 1) / static_cast<std::uint64_t>(ranks);
  const std::uint64_t padded = collective_detail::up(per * static_cast<std::uint64_t>(ranks) * Codec::element_size);
  const std::uint64_t rs = reduce_scatter_workspace<Codec, Strategy, Tuning>(per, opt);
  const std::uint64_t ag = all_gather_workspace<Codec, Strategy, Tuning>(per, ranks, opt, pipelined);
  return detail::with_align_slack(2 * padded + collective_detail::up(per * Codec::element_size) + (rs > ag ? rs : ag));
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(collective_detail::make_layout<Codec, Tuning>(count, opt, packed, false, 0, 0).total);
  });
}

// sendcounts and recvcounts: `ranks` entries each, as all_to_all takes them (0 for null arrays).
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_to_all_workspace(const std::uint64_t* sendcounts, const std::uint64_t* recvcounts, int ranks,
                                   const collective_options& opt = {}) {
  if (sendcounts == nullptr || recvcounts == nullptr || ranks < 1) return 0;
  return detail::with_align_slack(
      collective_detail::make_a2a_layout<Codec, Strategy, Tuning>(sendcounts, recvcounts, ranks, opt).total);
}

namespace collective_detail {

template <class Codec, class Strategy, class Tuning, class Transport>
status all_gather_run(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt,
                      const typename Codec::codebook_type& cb, status* status_dev, const lanes& on, bool open,
                      bool close, std::uint64_t stage0 = 0) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return opt.model.all_gather(count * Codec::element_size, t.size()).compress; },
        [&](auto path) {
          return all_gather_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, count, t, workspace, workspace_bytes,
                                                               opt, cb, status_dev, on, open, close, stage0);
        });
  } else {
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t block = count * Codec::element_size;
    const layout l = make_layout<Codec, Tuning>(count, opt, packed, false, 0, gather_wires(n, on.pipelined()));
    if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt) || n < 1 ||
        !lanes_ok(t, on, 0)) {
      return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
    }
    auto* ws = static_cast<std::uint8_t*>(workspace);
    auto c = make_call(t, ws, l.ctrl, status_dev, on);
    auto* recv = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (open) {
      const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(call_kind::all_gather, packed, count,
                                                                                  device_settings<Tuning>(opt));
      if (const status a = agree_first(t, sig, -1, on.stream); a != status::success) return a;  // (nothing enqueued)
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
      std::uint8_t* own = ws + l.wire_a;
      const std::uint64_t turns = on.pipelined() ? ~std::uint64_t{0} : 2;
      const auto in_wire = [&](std::uint64_t k) { return ws + l.wire_b + (k % turns) * l.wire_stride; };
      auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
      if (s == status::success && sched.items() != 0)
        s = encode_block<Codec, Tuning>(c.stream, static_cast<const std::uint8_t*>(sendbuff), g, ws + l.stage_a, own,
                                        opt.codec.checksum, cb, c.key, stage0 + 1);
      if (s == status::success) s = c.to_xfer();
      const batching bt(S, on.pipelined());
      for (std::uint64_t k = 0; n > 1 && k < static_cast<std::uint64_t>(n - 1) && s == status::success; ++k) {
        for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
          const std::uint64_t s0 = bt.first(b), s1 = bt.last(b);
          const zipccl::collective::step st = sched.at(k * S + s0);
          const std::uint8_t* from = k == 0 ? own : in_wire(k - 1);  // forwards what arrived in the step before
          s = exchange_segments(c, g, s0, s1, st.dst, from, st.src, in_wire(k));
          if (s == status::success) s = c.to_codec();
          if (s == status::success)
            s = unpack_block<Codec>(c.stream, in_wire(k), g, ws + l.stage_a, spans, c.key, stage0 + 2 + k, s0, s1);
          if (s == status::success)
            s = decode_block<Codec, Tuning, detail::decode_mode::store>(
                c.stream, ws + l.stage_a, spans, g, opt.codec.checksum,
                recv + static_cast<std::uint64_t>(st.recv_block) * block, nullptr, nullptr, cb, c.key, stage0 + 2 + k,
                s0, s1);
        }
      }
    }
    if (s == status::success) s = c.finish(close, packed && n > 1);
    return s == status::success ? s : c.fail(s);
  }
}

template <class Codec, class Strategy, class Tuning, class Transport>
status reduce_scatter_run(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                          void* workspace, std::uint64_t workspace_bytes, const collective_options& opt,
                          const typename Codec::codebook_type& cb, status* status_dev, const lanes& on, bool open,
                          bool close, std::uint64_t stage0 = 0) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return opt.model.reduce_scatter(recvcount * Codec::element_size, t.size()).compress; },
        [&](auto path) {
          return reduce_scatter_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, recvcount, reduction, t,
                                                                   workspace, workspace_bytes, opt, cb, status_dev, on,
                                                                   open, close, stage0);
        });
  } else {
    using E = typename Codec::element_type;
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t block = recvcount * Codec::element_size;
    const layout l = make_layout<Codec, Tuning>(recvcount, opt, packed, true, packed ? 0 : block);
    const zipccl::collective::schedule sched = zipccl::collective::schedule::ring_reduce_scatter(
        r, n, zipccl::collective::segmentation(recvcount, Tuning::chunk_elems, segment_elems(opt)));
    const std::uint64_t S = sched.segments();
    if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        zipccl::collective::detail::reduce_overlaps(sendbuff, recvbuff, block, n) ||
        !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt) || n < 1 ||
        !lanes_ok(t, on, packed && n > 1 ? S : 0)) {
      return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
    }
    auto* ws = static_cast<std::uint8_t*>(workspace);
    auto c = make_call(t, ws, l.ctrl, status_dev, on);
    const auto* send = static_cast<const std::uint8_t*>(sendbuff);
    auto* acc = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (open) {
      const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
          call_kind::reduce_scatter, packed, recvcount, device_settings<Tuning>(opt, static_cast<int>(reduction)));
      if (const status a = agree_first(t, sig, -1, on.stream); a != status::success) return a;  // (nothing enqueued)
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
      auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
      std::uint8_t *out = ws + l.wire_a, *in = ws + l.wire_b;
      const std::uint64_t hops = sched.items() / (S ? S : 1);
      if (s == status::success && sched.items() != 0)
        s = encode_block<Codec, Tuning>(c.stream, local(sched.at(0).send_block), g, ws + l.stage_a, out,
                                        opt.codec.checksum, cb, c.key, stage0 + 1);
      if (s == status::success) s = c.to_xfer();
      const batching bt(S, on.pipelined());
      for (std::uint64_t k = 0; k < hops && s == status::success; ++k) {
        for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
          const std::uint64_t s0 = bt.first(b), s1 = bt.last(b), i = k * S + s0;
          const zipccl::collective::step st = sched.at(i);
          const std::uint64_t stage = stage0 + 2 + k;
          if (k > 0) s = c.await_ready(i);
          if (s == status::success) s = exchange_segments(c, g, s0, s1, st.dst, out, st.src, in);
          if (s == status::success) s = c.to_codec();
          if (s == status::success) s = unpack_block<Codec>(c.stream, in, g, ws + l.stage_a, spans, c.key, stage, s0, s1);
          if (s != status::success) break;
          if (k + 1 == hops) {
            s = decode_block<Codec, Tuning, detail::decode_mode::add_store>(c.stream, ws + l.stage_a, spans, g,
                                                                            opt.codec.checksum, acc,
                                                                            local(st.recv_block), nullptr, cb, c.key,
                                                                            stage, s0, s1);
          } else {
            // decode, add the local block and code the sum for the next hop, in one kernel
            s = decode_block<Codec, Tuning, detail::decode_mode::add_encode>(
                c.stream, ws + l.stage_a, spans, g, opt.codec.checksum, nullptr, local(st.recv_block), ws + l.stage_b,
                cb, c.key, stage, s0, s1);
            if (s == status::success) s = pack_block<Codec>(c.stream, ws + l.stage_b, g, out, c.key, stage, s0, s1);
            if (s == status::success) s = c.ready(i + S);
          }
        }
      }
    }
    if (s == status::success && reduction == op::avg && n > 1 && recvcount)
      s = cuda::detail::launch("cuda collective: divide", dim3(grid_for(recvcount)), dim3(256), c.stream,
                               detail::divide_kernel<E>, acc, recvcount, n);
    if (s == status::success) s = c.finish(close, packed && n > 1);
    return s == status::success ? s : c.fail(s);
  }
}

}  // namespace collective_detail

// ---- the collectives ------------------------------------------------------------------------

// Every rank contributes `count` elements; recvbuff receives size() * count, rank r's at r * count.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_gather: Transport must model the device transport");
  return collective_detail::all_gather_run<Codec, Strategy, Tuning>(sendbuff, recvbuff, count, t, workspace,
                                                                    workspace_bytes, opt, cb, status_dev, on, true,
                                                                    true);
}

// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction of block r.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                      void* workspace, std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                      const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>,
                "cuda::reduce_scatter: Transport must model the device transport");
  return collective_detail::reduce_scatter_run<Codec, Strategy, Tuning>(sendbuff, recvbuff, recvcount, reduction, t,
                                                                        workspace, workspace_bytes, opt, cb,
                                                                        status_dev, on, true, true);
}

// reduce_scatter + all_gather over size() blocks of ceil(count / size()) elements, the input
// padded with zeros in the workspace, as the host all_reduce. recvbuff receives count elements.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, Transport& t,
                  void* workspace, std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_reduce: Transport must model the device transport");
  using namespace collective_detail;
  const int n = t.size();
  const std::uint64_t elem = Codec::element_size;
  const std::uint64_t per = n > 0 ? (count + static_cast<std::uint64_t>(n) - 1) / static_cast<std::uint64_t>(n) : 0;
  const std::uint64_t padded = up(per * static_cast<std::uint64_t>(n) * elem);
  const std::uint64_t need = all_reduce_workspace<Codec, Strategy, Tuning>(count, n, opt, on.pipelined()) - (temp_align - 1);
  if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || n < 1 ||
      !align_workspace(workspace, workspace_bytes, need) || status_dev == nullptr || !options_ok(opt) ||
      !lanes_ok(t, on, std::is_same_v<Strategy, strategy::never> || n < 2
                           ? 0
                           : zipccl::collective::segmentation(per, Tuning::chunk_elems, segment_elems(opt)).segments)) {
    return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  std::uint8_t* in = ws;
  std::uint8_t* gathered = ws + padded;
  std::uint8_t* mine = gathered + padded;
  std::uint8_t* rest = mine + up(per * elem);
  const std::uint64_t rest_bytes = workspace_bytes - static_cast<std::uint64_t>(rest - ws);
  // the opening agreement on the whole call, in the control words of the stages' workspace
  const bool rs_packed = zipccl::collective::detail::takes_compressed<Strategy>(
      [&] { return opt.model.reduce_scatter(per * elem, n).compress; });
  const bool ag_packed =
      zipccl::collective::detail::takes_compressed<Strategy>([&] { return opt.model.all_gather(per * elem, n).compress; });
  auto c = make_call(t, rest, 0, status_dev, on);
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
      call_kind::all_reduce, rs_packed, count, device_settings<Tuning>(opt, static_cast<int>(reduction)) ^ (ag_packed ? 1 : 0));
  if (const status a = agree_first(t, sig, -1, on.stream); a != status::success) return a;  // (nothing enqueued)
  status s = c.open(sig);
  if (s == status::success && padded)
    s = cuda::detail::check(cudaMemsetAsync(in, 0, padded, c.stream), "cuda::all_reduce: cudaMemsetAsync");
  if (s == status::success) s = c.copy(in, sendbuff, count * elem);
  if (s != status::success) return c.fail(s);
  s = reduce_scatter_run<Codec, Strategy, Tuning>(in, mine, per, reduction, t, rest, rest_bytes, opt, cb, status_dev,
                                                  on, false, false);
  if (s != status::success) return s;
  // (the all_gather's errors rank after the reduce_scatter's: its stages follow the n - 1 hops)
  s = all_gather_run<Codec, Strategy, Tuning>(mine, gathered, per, t, rest, rest_bytes, opt, cb, status_dev, on, false,
                                              false, static_cast<std::uint64_t>(n) + 1);
  if (s != status::success) return s;
  s = c.copy(recvbuff, gathered, count * elem);
  if (s == status::success) s = c.finish(true, n > 1 && (rs_packed || ag_packed));
  return s == status::success ? s : c.fail(s);
}

// As MPI_Alltoallv, in elements (MoE dispatch and combine): rank r sends sendcounts[p] elements
// from sendbuff + sdispls[p] to rank p and receives recvcounts[p] elements from rank p at
// recvbuff + rdispls[p]. The four arrays are host memory with size() entries; rank p's
// sendcounts[r] must equal rank r's recvcounts[p]. The ranks exchange in n - 1 pairwise steps
// (step j: send to r + j, receive from r - j), each block as one message on the fixed-size wire
// (adaptive decides per pair from the block's size alone, which both ends know). On pipelined
// lanes the blocks are coded up to min(pipeline.depth, lanes.slots) steps ahead of the transfers
// and decoded as they arrive. A pair whose counts differ is caught by the pair (a message of
// another size: cuda_local ends its world; a preamble of another count: size_mismatch) and the
// closing agreement makes it an error on every rank; with transport::nccl, messages of different
// sizes are NCCL's undefined case (see nccl.hpp).
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_to_all(const void* sendbuff, const std::uint64_t* sendcounts, const std::uint64_t* sdispls, void* recvbuff,
                  const std::uint64_t* recvcounts, const std::uint64_t* rdispls, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, status* status_dev, const lanes& on,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_to_all: Transport must model the device transport");
  using namespace collective_detail;
  const int n = t.size(), r = t.rank();
  const std::uint64_t esize = Codec::element_size;
  const auto* send = static_cast<const std::uint8_t*>(sendbuff);
  auto* recv = static_cast<std::uint8_t*>(recvbuff);
  bool ok = n >= 1 && sendcounts != nullptr && sdispls != nullptr && recvcounts != nullptr && rdispls != nullptr &&
            status_dev != nullptr && options_ok(opt) && lanes_ok(t, on, 1);
  for (int p = 0; ok && p < n; ++p)
    ok = (sendcounts[p] == 0 || sendbuff != nullptr) && (recvcounts[p] == 0 || recvbuff != nullptr);
  ok = ok && sendcounts[r] == recvcounts[r];
  const a2a_layout l = ok ? make_a2a_layout<Codec, Strategy, Tuning>(sendcounts, recvcounts, n, opt) : a2a_layout{};
  if (!ok || !align_workspace(workspace, workspace_bytes, l.total)) {
    return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  auto c = make_call(t, ws, 0, status_dev, on);
  auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
  const auto packed = [&](std::uint64_t count) { return block_packed<Codec, Strategy>(count, n, opt); };
  const auto send_block = [&](int p) { return sendcounts[p] ? send + sdispls[p] * esize : nullptr; };
  const auto recv_block = [&](int p) { return recvcounts[p] ? recv + rdispls[p] * esize : nullptr; };
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
      call_kind::all_to_all, !std::is_same_v<Strategy, strategy::never>, 0, device_settings<Tuning>(opt));
  // (the pairs' counts are not in the signature: cuda_local checks them by the messages' sizes)
  if (const status a = agree_first(t, sig, -1, on.stream); a != status::success) return a;  // (nothing enqueued)
  status s = c.open(sig);
  if (s == status::success) s = c.copy(recv_block(r), send_block(r), sendcounts[r] * esize);
  const zipccl::collective::schedule sched = zipccl::collective::schedule::pairwise_all_to_all(r, n);
  const std::uint64_t items = sched.items();
  // the blocks are coded in step order into consecutive out wires, `ahead` steps before they go
  std::uint64_t ahead = items;
  if (on.pipelined()) ahead = opt.pipeline.depth < on.slots ? opt.pipeline.depth : on.slots;
  std::uint64_t coded_at = l.out;
  const auto encode_step = [&](std::uint64_t j) -> status {
    const int p = sched.at(j).dst;
    status e = status::success;
    if (packed(sendcounts[p])) {
      const auto g = geometry<Codec, Tuning>(sendcounts[p], opt);
      e = encode_block<Codec, Tuning>(c.stream, send_block(p), g, ws + l.staging, ws + coded_at,
                                      opt.codec.checksum, cb, c.key, 1 + 2 * j);
      coded_at += up(g.total_bytes());
    }
    return e == status::success ? c.ready(j) : e;
  };
  for (std::uint64_t j = 0; j < ahead && j < items && s == status::success; ++j) s = encode_step(j);
  std::uint64_t out_at = l.out, in_at = l.in;
  for (std::uint64_t j = 0; j < items && s == status::success; ++j) {
    const zipccl::collective::step st = sched.at(j);
    const std::uint64_t sc = sendcounts[st.dst], rc = recvcounts[st.src];
    const auto gs = geometry<Codec, Tuning>(sc, opt);
    const auto gr = geometry<Codec, Tuning>(rc, opt);
    const bool ps = packed(sc), pr = packed(rc);
    const void* out = ps ? ws + out_at : send_block(st.dst);
    void* in = pr ? ws + in_at : static_cast<void*>(recv_block(st.src));
    s = c.await_ready(j);
    if (s == status::success) s = c.exchange(st.dst, out, ps ? gs.total_bytes() : sc * esize, st.src, in,
                                             pr ? gr.total_bytes() : rc * esize);
    if (s == status::success) s = c.to_codec();
    if (s == status::success && pr) s = unpack_block<Codec>(c.stream, ws + in_at, gr, ws + l.staging, spans, c.key, 2 + 2 * j);
    if (s == status::success && pr)
      s = decode_block<Codec, Tuning, detail::decode_mode::store>(c.stream, ws + l.staging, spans, gr,
                                                                   opt.codec.checksum, recv_block(st.src),
                                                                   nullptr, nullptr, cb, c.key, 2 + 2 * j);
    if (s == status::success && j + ahead < items) s = encode_step(j + ahead);
    if (ps) out_at += up(gs.total_bytes());
    if (pr) in_at += up(gr.total_bytes());
  }
  if (s == status::success) s = c.finish(true, n > 1 && !std::is_same_v<Strategy, strategy::never>);
  return s == status::success ? s : c.fail(s);
}

namespace collective_detail {
// send and recv: both ends swap {signature, role} first (24-byte messages), so a mismatch is
// size_mismatch on both at once; then the segments (on pipelined lanes one by one: a segment goes
// out as soon as it is coded, and is decoded as soon as it is in); then the outcome, both ways.
template <class Codec, class Strategy, class Tuning, class Transport>
status p2p_run(bool sending, void* buf, std::uint64_t count, int peer, Transport& t, void* workspace,
               std::uint64_t workspace_bytes, const collective_options& opt, const typename Codec::codebook_type& cb,
               status* status_dev, const lanes& on) {
  const bool packed = zipccl::collective::detail::takes_compressed<Strategy>(
      [&] { return opt.model.send_recv(count * Codec::element_size).compress; });
  const layout l = make_layout<Codec, Tuning>(count, opt, packed, false, 0, 0);
  if ((buf == nullptr && count != 0) || peer < 0 || peer >= t.size() || peer == t.rank() ||
      !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt) ||
      !lanes_ok(t, on, 1)) {
    return status::invalid_argument;  // (nothing enqueued: the transport is as it was)
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  auto c = make_call(t, ws, l.ctrl, status_dev, on);
  // the two ends' words differ only in the role, folded into the signature: lo != hi unless one
  // end sends and the other receives the same call
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(call_kind::send_recv, packed, count,
                                                                                device_settings<Tuning>(opt));
  if (const status a = agree_first(t, sending ? sig : ~sig, peer, on.stream); a != status::success) return a;
  status s = c.to_xfer();
  if (s == status::success) s = c.launch_init(sending ? sig : ~sig, true);
  if (s == status::success)
    s = c.exchange(peer, c.words->mine, sizeof c.words->mine, peer, c.words->in, sizeof c.words->in);
  if (s == status::success)
    s = cuda::detail::launch("cuda collective: p2p check", dim3(1), dim3(32), c.xfer, detail::p2p_check_kernel<>,
                             c.words, c.key, error_word(t));
  if (s == status::success) s = c.to_codec();
  const auto g = geometry<Codec, Tuning>(count, opt);
  auto* bytes = static_cast<std::uint8_t*>(buf);
  auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
  std::uint8_t* wire = ws + l.wire_a;
  const batching bt(g.segments, on.pipelined());
  if (s == status::success && !packed) {
    s = sending ? t.send(peer, bytes, count * Codec::element_size, c.xfer)
                : t.recv(peer, bytes, count * Codec::element_size, c.xfer);
  } else {
    for (std::uint64_t b = 0; b < bt.count() && s == status::success; ++b) {
      const std::uint64_t s0 = bt.first(b), s1 = bt.last(b);
      if (sending) {
        s = encode_block<Codec, Tuning>(c.stream, bytes, g, ws + l.stage_a, wire, opt.codec.checksum, cb, c.key, 1, s0,
                                        s1);
        if (s == status::success) s = c.ready(b);
        if (s == status::success) s = c.await_ready(b);
        for (std::uint64_t seg = s0; seg < s1 && s == status::success; ++seg)
          s = t.send(peer, wire + g.seg_offset(seg), g.seg_bytes(seg), c.xfer);
      } else {
        for (std::uint64_t seg = s0; seg < s1 && s == status::success; ++seg)
          s = t.recv(peer, wire + g.seg_offset(seg), g.seg_bytes(seg), c.xfer);
        if (s == status::success) s = c.to_codec();
        if (s == status::success) s = unpack_block<Codec>(c.stream, wire, g, ws + l.stage_a, spans, c.key, 2, s0, s1);
        if (s == status::success)
          s = decode_block<Codec, Tuning, detail::decode_mode::store>(c.stream, ws + l.stage_a, spans, g,
                                                                       opt.codec.checksum, bytes, nullptr, nullptr, cb,
                                                                       c.key, 2, s0, s1);
      }
    }
  }
  if (s == status::success && packed) {  // the outcome, both ways
    s = c.to_xfer();
    if (s == status::success) s = c.launch_init(0, false);
    if (s == status::success)
      s = c.exchange(peer, c.words->mine, sizeof c.words->mine, peer, c.words->in, sizeof c.words->in);
    if (s == status::success) s = c.round_kernel();
  }
  if (s == status::success) s = c.finish(true, false);
  return s == status::success ? s : c.fail(s);
}
}  // namespace collective_detail

// Sends count elements to `peer`, which calls recv with the same Codec, Strategy, count and options.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, status* status_dev, const lanes& on, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::send: Transport must model the device transport");
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(true, const_cast<void*>(sendbuff), count, peer, t,
                                                             workspace, workspace_bytes, opt, cb, status_dev, on);
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            status* status_dev, const lanes& on, const collective_options& opt = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::recv: Transport must model the device transport");
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(false, recvbuff, count, peer, t, workspace,
                                                             workspace_bytes, opt, typename Codec::codebook_type{},
                                                             status_dev, on);
}

}  // namespace zipccl::cuda
