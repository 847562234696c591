// zipccl: the internals shared by the device collectives (cuda/collective/*.cuh): how a call cuts
// its workspace, checks its arguments, orders its two streams, runs its agreements and codes its
// blocks. Host code that enqueues kernels; the kernels are in cuda/detail/wire_kernels.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../../../codec/codec.hpp"
#include "../../../collective/common.hpp"
#include "../../../collective/detail/fixed_wire.hpp"
#include "../../../collective/schedule.hpp"
#include "../../../error.hpp"
#include "../../../transport/device.hpp"
#include "../../detail/wire_kernels.cuh"
#include "../../pipeline.cuh"
#include "../../runtime.cuh"
#include "../../tuning.cuh"

namespace zipccl::cuda::collective_detail {

using zipccl::collective::detail::call_kind;

static_assert(default_tuning::chunk_elems == zipccl::collective::detail::device_chunk_elems,
              "the fixed-size wire's helpers assume the default tuning's chunk");

inline std::uint64_t up(std::uint64_t v) { return (v + temp_align - 1) / temp_align * temp_align; }

inline std::uint64_t segment_elems(const collective_options& opt) {
  return zipccl::collective::detail::device_segment_elems(opt.pipeline.segment_elems);
}

template <class Codec, class Tuning>
detail::wire_geometry<Codec> geometry(std::uint64_t count, const collective_options& opt) {
  return detail::wire_geometry<Codec>(count, Tuning::chunk_elems, segment_elems(opt), opt.device_wire.spill_permille);
}

inline constexpr std::uint64_t control_bytes = sizeof(detail::agreement_words) + sizeof(unsigned long long);

// What a call's workspace holds besides its control words.
struct layout_shape {
  bool packed = false;            // the compressed path's spans, staging and wires
  bool second_stage = false;      // a second staging area (reduce_scatter's fused re-encoding)
  std::uint64_t in_wires = 1;     // in wires after the out wire (packed)
  std::uint64_t plain_bytes = 0;  // the plain path's extra block (reduce_scatter's incoming data)
};

// How the workspace is cut: control words, the chunk spans, two staging areas, the out wire, the
// in wires (wire_b, every wire_stride bytes), and the plain block.
struct layout {
  std::uint64_t ctrl = 0, spans = 0, stage_a = 0, stage_b = 0, wire_a = 0, wire_b = 0, wire_stride = 0, plain = 0,
                total = 0;
};

template <class Codec, class Tuning>
layout make_layout(std::uint64_t count, const collective_options& opt, const layout_shape& shape) {
  layout l;
  std::uint64_t at = 0;
  l.ctrl = at;
  at += up(control_bytes);
  if (shape.packed) {
    const auto g = geometry<Codec, Tuning>(count, opt);
    l.spans = at;
    at += up(g.chunks() * 8);
    l.stage_a = at;
    at += up(g.staging_bytes());
    l.stage_b = at;
    if (shape.second_stage) at += up(g.staging_bytes());
    l.wire_a = at;
    at += up(g.total_bytes());
    l.wire_b = at;
    l.wire_stride = up(g.total_bytes());
    at += shape.in_wires * l.wire_stride;
  }
  l.plain = at;
  at += up(shape.plain_bytes);
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

// What a call shares with its stages: the transport, the caller's workspace and streams, the
// options and codebook, and where the outcome goes. The public functions take these one by one.
template <class Codec, class Transport>
struct args {
  Transport& t;
  void* workspace;
  std::uint64_t workspace_bytes;
  status* status_dev;
  lanes on;
  const collective_options& opt;
  const typename Codec::codebook_type& cb;
};

// Which part of a call a stage is: a whole collective opens with the agreement on the call and
// closes with the agreement on its outcome; all_reduce's reduce_scatter and all_gather are inner
// stages, whose kernels number their stages from stage0 (a segment's error names the first stage
// that saw it).
struct part {
  bool opens = true, closes = true;
  std::uint64_t stage0 = 0;
  static part whole() { return part{}; }
  static part inner(std::uint64_t first_stage) { return part{false, false, first_stage}; }
};

// How a call ends (call::finish): mid_call (an inner stage: no agreement), own_outcome (the
// outcome from what this rank knows, for paths with no data-dependent error), agreed (the ranks
// exchange what they know first).
enum class ending { mid_call, own_outcome, agreed };

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
  std::uint64_t failures_before;  // cuda::detail::failures_recorded() when the call began

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

  // The agreement words reset for an opening (with the call's signature) or a closing round.
  status open_words(unsigned long long signature) { return launch_init(signature, true); }
  status close_words() { return launch_init(0, false); }
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
    if (s == status::success) s = open_words(signature);
    if (s == status::success) s = rounds();
    if (s == status::success)
      s = cuda::detail::launch("cuda collective: agree open", dim3(1), dim3(32), xfer, detail::agree_open_kernel<>,
                               words, key, error_word(t));
    if (s == status::success) s = to_codec();
    return s;
  }
  // The end of a call or of an inner stage: the transfer stream after the last kernels, the
  // closing agreement as `how` says with the outcome to *status_dev, and `stream` after the last
  // transfer.
  status finish(ending how) {
    status s = to_xfer();
    if (s == status::success && how == ending::agreed) s = close_words();
    if (s == status::success && how == ending::agreed) s = rounds();
    if (s == status::success && how != ending::mid_call)
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
  // messages): see "Errors" in cuda/collective/common.cuh. Never invalid_argument, which promises
  // that nothing was enqueued: a transport that refuses an operation part way (a rank another
  // thread is in, NCCL's ncclInvalidUsage) is cuda_error. cuda::last_error() keeps what the
  // transport recorded of it (NCCL's code), else gets the transport's status.
  status fail(status s) {
    if (s == status::invalid_argument) {
      s = cuda::detail::failures_recorded() != failures_before
              ? status::cuda_error
              : cuda::detail::fail_library(static_cast<int>(s), "cuda collective: the transport refused an operation part way");
    }
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
  // Success as it is, else fail(s).
  status end(status s) { return s == status::success ? s : fail(s); }
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
  // The agreement words both ways with one peer (send / recv).
  status swap_words(int peer) { return exchange(peer, words->mine, sizeof words->mine, peer, words->in, sizeof words->in); }

 private:
  status launch_init(unsigned long long signature, bool opening) {
    return cuda::detail::launch("cuda collective: agree init", dim3(1), dim3(32), xfer, detail::agree_init_kernel<>,
                                words, key, signature, opening);
  }
};

// The call's state over its control words at workspace + ctrl.
template <class Codec, class Transport>
call<Transport> make_call(const args<Codec, Transport>& a, void* workspace, std::uint64_t ctrl) {
  auto* base = static_cast<std::uint8_t*>(workspace) + ctrl;
  return {a.t,
          a.on,
          a.on.stream,
          a.on.pipelined() ? a.on.transfer : a.on.stream,
          reinterpret_cast<detail::agreement_words*>(base),
          reinterpret_cast<unsigned long long*>(base + sizeof(detail::agreement_words)),
          a.status_dev,
          cuda::detail::failures_recorded()};
}

// Segments [first, last) of a block (all of them by default).
inline constexpr std::uint64_t all_segments = ~std::uint64_t{0};
struct segments {
  std::uint64_t first = 0, last = all_segments;
};

// The kernels on some segments of a block: their chunks, one thread block each.
struct chunk_range {
  std::uint64_t c0 = 0, c1 = 0;
  unsigned grid() const { return static_cast<unsigned>(c1 - c0); }
};
template <class Codec>
chunk_range chunks_of(const detail::wire_geometry<Codec>& g, segments sg) {
  const std::uint64_t s1 = sg.last > g.segments ? g.segments : sg.last;
  return sg.first >= s1 ? chunk_range{} : chunk_range{g.chunk_begin(sg.first), g.chunk_end(s1)};
}

// The codec kernels on one block's wire (geometry g), on `stream`: what every call of one block
// shares. staging and spans are where a block is coded before it is packed and where an unpacked
// one waits for its decoding; key collects the first error (stage numbers say where it was seen).
template <class Codec, class Tuning>
struct block_coder {
  cudaStream_t stream;
  const detail::wire_geometry<Codec>& g;
  bool checksum;
  const typename Codec::codebook_type& cb;
  unsigned long long* key;
  std::uint8_t* staging;
  std::uint64_t* spans;

  // The staged chunks of `from` (staging by default) packed into the wire.
  status pack(const std::uint8_t* from, std::uint8_t* wire, std::uint64_t stage, segments sg = {}) const {
    const chunk_range cr = chunks_of(g, sg);
    if (cr.grid() == 0) return status::success;
    return cuda::detail::launch("cuda collective: pack", dim3(cr.grid()), dim3(128), stream, detail::pack_kernel<Codec>,
                                from, g, cr.c0, wire, key, stage);
  }
  // src's elements coded into staging, then packed into the wire.
  status encode(const std::uint8_t* src, std::uint8_t* wire, std::uint64_t stage, segments sg = {}) const {
    const chunk_range cr = chunks_of(g, sg);
    if (cr.grid() == 0) return status::success;
    const status s = cuda::detail::launch("cuda collective: encode", dim3(cr.grid()), dim3(Tuning::threads), stream,
                                          detail::encode_kernel<Codec, Tuning>, src, g, cr.c0, staging, checksum, cb);
    return s == status::success ? pack(staging, wire, stage, sg) : s;
  }
  // The wire's chunks checked and unpacked into staging and spans.
  status unpack(const std::uint8_t* wire, std::uint64_t stage, segments sg = {}) const {
    const chunk_range cr = chunks_of(g, sg);
    if (cr.grid() == 0) return status::success;
    return cuda::detail::launch("cuda collective: unpack", dim3(cr.grid()), dim3(128), stream,
                                detail::unpack_kernel<Codec>, static_cast<const std::uint8_t*>(wire), g, cr.c0, staging,
                                spans, key, stage);
  }
  // The unpacked chunks decoded (Mode: stored to out; added to `local` and stored; added to
  // `local` and coded again into `next`, a staging area for pack()).
  template <detail::decode_mode Mode>
  status decode(std::uint8_t* out, const std::uint8_t* local, std::uint8_t* next, std::uint64_t stage,
                segments sg = {}) const {
    const chunk_range cr = chunks_of(g, sg);
    if (cr.grid() == 0) return status::success;
    return cuda::detail::launch("cuda collective: decode", dim3(cr.grid()), dim3(Tuning::threads), stream,
                                detail::decode_kernel<Codec, Tuning, Mode>, static_cast<const std::uint8_t*>(staging),
                                static_cast<const std::uint64_t*>(spans), g, cr.c0, checksum, out, local, next, cb, key,
                                stage);
  }
};

template <class Codec, class Tuning>
block_coder<Codec, Tuning> coder(cudaStream_t stream, const detail::wire_geometry<Codec>& g,
                                 const collective_options& opt, const typename Codec::codebook_type& cb,
                                 unsigned long long* key, std::uint8_t* staging, std::uint64_t* spans) {
  return {stream, g, opt.codec.checksum, cb, key, staging, spans};
}

// Segments of a block's wire out to dst and in from src, one grouped message each.
template <class Transport, class Codec>
status exchange_segments(call<Transport>& c, const detail::wire_geometry<Codec>& g, segments sg, int dst,
                         const std::uint8_t* out, int src, std::uint8_t* in) {
  const std::uint64_t s1 = sg.last > g.segments ? g.segments : sg.last;
  status s = status::success;
  for (std::uint64_t seg = sg.first; seg < s1 && s == status::success; ++seg)
    s = c.exchange(dst, out + g.seg_offset(seg), g.seg_bytes(seg), src, in + g.seg_offset(seg), g.seg_bytes(seg));
  return s;
}

inline unsigned grid_for(std::uint64_t n) {
  const std::uint64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

}  // namespace zipccl::cuda::collective_detail
