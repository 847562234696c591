// zipccl: the collectives on device buffers and the caller's stream, over a device transport
// (transport/device.hpp: transport::cuda_local, transport::nccl, or the user's own).
//
//   using C = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
//   std::uint64_t bytes = zipccl::cuda::all_reduce_workspace<C>(count, t.size());
//   ... cudaMalloc(&ws, bytes) once ...
//   zipccl::cuda::all_reduce<C>(grad, grad_out, count, zipccl::op::sum, t, ws, bytes, status_dev, stream);
//
// A call only enqueues work on `stream`: kernels, the transport's sends and receives, and
// cudaMemcpyAsync between device buffers. It never waits on the host, copies nothing to the host
// and allocates nothing, so a whole compressed all_reduce can be captured in a CUDA graph (with a
// transport whose work can be) and replayed. Every message size follows from the counts alone:
// compressed segments travel on the fixed-size wire (docs/FORMAT.md, "Fixed-size segments"), with
// room for collective_options::device_wire.spill_permille escape bytes per 1000 elements.
//
// The outcome is written to *status_dev (device, managed or mapped memory) in stream order: the
// rank's own first error (a corrupt or mismatched segment, a segment over its budget:
// wire_overflow), else peer_failed when another rank failed, else success, as the host
// collectives report it: the ranks agree on it at the end of the call (ceil(log2 n) rounds of
// 24-byte messages), and on the call itself at the start (collective, element type, path, count,
// sizes, checksums, reduction, budget): calls that differ give size_mismatch on every rank, and a
// transport with a device error word (cuda_local) is ended so that no rank waits for a message
// that will not come (transport::nccl has none: there, calls whose counts differ can wait until
// the application's watchdog aborts, as with NCCL itself; see nccl.hpp). The host return value
// says whether the work was enqueued: invalid_argument for bad arguments (the transport is then
// aborted, as the other ranks may be waiting), cuda_error (cuda::last_error() says why), or the
// transport's error. The workspace may start at any address (the sizes include the slack to
// align it); a reduce_scatter's recvbuff must not overlap its sendbuff (more than one rank).
//
// The schedule is the host collectives' (collective/schedule.hpp): ring all_gather, ring
// reduce_scatter (each hop decodes, reduces and re-encodes in one fused kernel), all_reduce as
// the two, send / recv; results are bit-identical to the host collectives and to the plain device
// path (same reduction order and precision). Chunks are the Tuning's (8,192 elements by default;
// opt.codec.chunk_elems is the host's and is not used here).
//
// This first device executor runs codec and transfers on the one stream: a ring step's transfer
// and the next step's coding do not overlap yet (the segments on the wire are those of the
// schedule, so a pipelined executor can send them one by one).
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
#include "runtime.cuh"
#include "tuning.cuh"

namespace zipccl::cuda {

namespace collective_detail {

using zipccl::collective::detail::call_kind;

// How a device call's workspace is cut: control words, the chunk spans, two staging areas, two
// wire buffers, and (plain reduce_scatter) one block for incoming data.
struct layout {
  std::uint64_t ctrl = 0, spans = 0, stage_a = 0, stage_b = 0, wire_a = 0, wire_b = 0, plain = 0, total = 0;
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

// plain_bytes: the plain path's extra block; packed: whether the compressed path's areas are needed;
// second_stage: a second staging area (reduce_scatter's fused re-encoding).
template <class Codec, class Tuning>
layout make_layout(std::uint64_t count, const collective_options& opt, bool packed, bool second_stage,
                   std::uint64_t plain_bytes) {
  layout l;
  std::uint64_t at = 0;
  l.ctrl = at;
  at += up(sizeof(detail::agreement_words) + sizeof(unsigned long long));
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
    at += up(g.total_bytes());
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

// The settings both ends must share on the device path: the Tuning's chunk, the segment size,
// checksums, the reduction and the spill budget.
template <class Tuning>
std::uint64_t device_settings(const collective_options& opt, int reduction = -1) {
  collective_options o = opt;
  o.codec.chunk_elems = Tuning::chunk_elems;
  return zipccl::collective::detail::settings_word(o, reduction) ^
         zipccl::collective::detail::signature_mix(0xD1CEull + opt.device_wire.spill_permille);
}

template <class Transport>
int* error_word(Transport& t) {
  if constexpr (transport::has_device_error_word_v<Transport>) return t.device_error_word();
  else return nullptr;
}

// The state of one call on the device: its control words, its stream, its transport.
template <class Transport>
struct call {
  Transport& t;
  cudaStream_t stream;
  detail::agreement_words* words;
  unsigned long long* key;
  status* status_dev;

  status launch_init(unsigned long long signature, bool opening) {
    return cuda::detail::launch("cuda collective: agree init", dim3(1), dim3(32), stream, detail::agree_init_kernel<>,
                                words, key, signature, opening);
  }
  // ceil(log2 n) rounds: send what this rank knows to r + d, hear from r - d.
  status rounds() {
    const int n = t.size(), r = t.rank();
    for (int d = 1; d < n; d *= 2) {
      if (status s = t.group_start(); s != status::success) return s;
      status a = t.send((r + d) % n, words->mine, sizeof words->mine, stream);
      status b = t.recv((r - d + n) % n, words->in, sizeof words->in, stream);
      const status c = t.group_end();
      if (a != status::success || b != status::success || c != status::success)
        return a != status::success ? a : b != status::success ? b : c;
      if (status s = cuda::detail::launch("cuda collective: agree round", dim3(1), dim3(32), stream,
                                          detail::agree_round_kernel<>, words);
          s != status::success)
        return s;
    }
    return status::success;
  }
  status open(unsigned long long signature) {
    status s = launch_init(signature, true);
    if (s == status::success) s = rounds();
    if (s == status::success)
      s = cuda::detail::launch("cuda collective: agree open", dim3(1), dim3(32), stream, detail::agree_open_kernel<>,
                               words, key, error_word(t));
    return s;
  }
  // The closing agreement (exchange = false: the outcome from what this rank knows, for paths
  // with no data-dependent error) and the outcome to *status_dev.
  status close(bool exchange) {
    status s = status::success;
    if (exchange) {
      s = launch_init(0, false);
      if (s == status::success) s = rounds();
    }
    if (s == status::success)
      s = cuda::detail::launch("cuda collective: agree close", dim3(1), dim3(32), stream, detail::agree_close_kernel<>,
                               static_cast<const detail::agreement_words*>(words),
                               static_cast<const unsigned long long*>(key), static_cast<const int*>(error_word(t)),
                               status_dev, status::success);
    return s;
  }
  // A failure while enqueueing: the peers may already wait on this rank, so the transport is
  // aborted; the outcome still goes to *status_dev when the last kernel can be launched: this
  // rank's own failure (invalid_argument, cuda_error), or, when the transport refused because its
  // world had ended, what the device knows (size_mismatch or peer_failed).
  status fail(status s) {
    t.abort(s);
    (void)cuda::detail::launch("cuda collective: agree close", dim3(1), dim3(32), stream, detail::agree_close_kernel<>,
                               static_cast<const detail::agreement_words*>(words),
                               static_cast<const unsigned long long*>(key), static_cast<const int*>(error_word(t)),
                               status_dev, s == status::invalid_argument || s == status::cuda_error ? s : status::success);
    return s;
  }
  status copy(void* dst, const void* src, std::uint64_t bytes) {
    if (bytes == 0 || dst == src) return status::success;
    return cuda::detail::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
                               "cuda collective: cudaMemcpyAsync");
  }
  status exchange(int dst, const void* out, int src, void* in, std::uint64_t bytes) {
    if (status s = t.group_start(); s != status::success) return s;
    const status a = t.send(dst, out, bytes, stream);
    const status b = t.recv(src, in, bytes, stream);
    const status c = t.group_end();
    return a != status::success ? a : b != status::success ? b : c;
  }
};

template <class Transport>
call<Transport> make_call(Transport& t, void* workspace, const layout& l, status* status_dev, cudaStream_t stream) {
  auto* base = static_cast<std::uint8_t*>(workspace) + l.ctrl;
  return {t, stream, reinterpret_cast<detail::agreement_words*>(base),
          reinterpret_cast<unsigned long long*>(base + sizeof(detail::agreement_words)), status_dev};
}

template <class Codec, class Tuning>
status encode_block(cudaStream_t stream, const std::uint8_t* src, const detail::wire_geometry<Codec>& g,
                    std::uint8_t* staging, std::uint8_t* wire, bool checksum, const typename Codec::codebook_type& cb,
                    unsigned long long* key, std::uint64_t stage) {
  if (g.chunks() == 0) return status::success;
  status s = cuda::detail::launch("cuda collective: encode", dim3(static_cast<unsigned>(g.chunks())),
                                  dim3(Tuning::threads), stream, detail::encode_kernel<Codec, Tuning>, src, g, staging,
                                  checksum, cb);
  if (s == status::success)
    s = cuda::detail::launch("cuda collective: pack", dim3(static_cast<unsigned>(g.chunks())), dim3(128), stream,
                             detail::pack_kernel<Codec>, static_cast<const std::uint8_t*>(staging), g, wire, key, stage);
  return s;
}

template <class Codec>
status unpack_block(cudaStream_t stream, const std::uint8_t* wire, const detail::wire_geometry<Codec>& g,
                    std::uint8_t* staging, std::uint64_t* spans, unsigned long long* key, std::uint64_t stage) {
  if (g.chunks() == 0) return status::success;
  return cuda::detail::launch("cuda collective: unpack", dim3(static_cast<unsigned>(g.chunks())), dim3(128), stream,
                              detail::unpack_kernel<Codec>, wire, g, staging, spans, key, stage);
}

template <class Codec, class Tuning, detail::decode_mode Mode>
status decode_block(cudaStream_t stream, const std::uint8_t* staging, const std::uint64_t* spans,
                    const detail::wire_geometry<Codec>& g, bool checksum, std::uint8_t* out, const std::uint8_t* local,
                    std::uint8_t* next, const typename Codec::codebook_type& cb, unsigned long long* key,
                    std::uint64_t stage) {
  if (g.chunks() == 0) return status::success;
  return cuda::detail::launch("cuda collective: decode", dim3(static_cast<unsigned>(g.chunks())),
                              dim3(Tuning::threads), stream, detail::decode_kernel<Codec, Tuning, Mode>, staging, spans,
                              g, checksum, out, local, next, cb, key, stage);
}

inline unsigned grid_for(std::uint64_t n) {
  const std::uint64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

}  // namespace collective_detail

// ---- workspace sizes ------------------------------------------------------------------------

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_gather_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  (void)ranks;
  return zipccl::collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    constexpr bool packed = std::is_same_v<decltype(path), strategy::always>;
    return detail::with_align_slack(collective_detail::make_layout<Codec, Tuning>(count, opt, packed, false, 0).total);
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
std::uint64_t all_reduce_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  if (ranks < 1) return 0;
  const std::uint64_t per = (count + static_cast<std::uint64_t>(ranks) - 1) / static_cast<std::uint64_t>(ranks);
  const std::uint64_t padded = collective_detail::up(per * static_cast<std::uint64_t>(ranks) * Codec::element_size);
  const std::uint64_t rs = reduce_scatter_workspace<Codec, Strategy, Tuning>(per, opt);
  const std::uint64_t ag = all_gather_workspace<Codec, Strategy, Tuning>(per, ranks, opt);
  return detail::with_align_slack(2 * padded + collective_detail::up(per * Codec::element_size) + (rs > ag ? rs : ag));
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  return all_gather_workspace<Codec, Strategy, Tuning>(count, 2, opt);
}

namespace collective_detail {

template <class Codec, class Strategy, class Tuning, class Transport>
status all_gather_run(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                      std::uint64_t workspace_bytes, const collective_options& opt,
                      const typename Codec::codebook_type& cb, status* status_dev, cudaStream_t stream, bool open,
                      bool close, std::uint64_t stage0 = 0) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return opt.model.all_gather(count * Codec::element_size, t.size()).compress; },
        [&](auto path) {
          return all_gather_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, count, t, workspace, workspace_bytes,
                                                               opt, cb, status_dev, stream, open, close, stage0);
        });
  } else {
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t block = count * Codec::element_size;
    const layout l = make_layout<Codec, Tuning>(count, opt, packed, false, 0);
    if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt) || n < 1) {
      t.abort(status::invalid_argument);
      return status::invalid_argument;
    }
    auto* ws = static_cast<std::uint8_t*>(workspace);
    auto c = make_call(t, ws, l, status_dev, stream);
    auto* recv = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (open)
      s = c.open(zipccl::collective::detail::call_signature<Codec>(call_kind::all_gather, packed, count,
                                                                   device_settings<Tuning>(opt)));
    if (s == status::success) s = c.copy(recv + static_cast<std::uint64_t>(r) * block, sendbuff, block);
    const zipccl::collective::schedule sched = zipccl::collective::schedule::ring_all_gather(
        r, n, zipccl::collective::segmentation(count, Tuning::chunk_elems, segment_elems(opt)));
    const std::uint64_t S = sched.segments();
    if constexpr (!packed) {
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);
        s = c.exchange(st.dst, recv + static_cast<std::uint64_t>(st.send_block) * block, st.src,
                       recv + static_cast<std::uint64_t>(st.recv_block) * block, block);
      }
    } else {
      const auto g = geometry<Codec, Tuning>(count, opt);
      std::uint8_t *cur = ws + l.wire_a, *next = ws + l.wire_b;
      auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
      if (s == status::success && sched.items() != 0)
        s = encode_block<Codec, Tuning>(stream, static_cast<const std::uint8_t*>(sendbuff), g, ws + l.stage_a, cur,
                                        opt.codec.checksum, cb, c.key, stage0 + 1);
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);  // forwards what arrived in the step before
        s = c.exchange(st.dst, cur, st.src, next, g.total_bytes());
        if (s == status::success) s = unpack_block<Codec>(stream, next, g, ws + l.stage_a, spans, c.key, stage0 + 2 + st.hop);
        if (s == status::success)
          s = decode_block<Codec, Tuning, detail::decode_mode::store>(
              stream, ws + l.stage_a, spans, g, opt.codec.checksum,
              recv + static_cast<std::uint64_t>(st.recv_block) * block, nullptr, nullptr, cb, c.key, stage0 + 2 + st.hop);
        std::uint8_t* tmp = cur;
        cur = next;
        next = tmp;
      }
    }
    if (s == status::success && close) s = c.close(packed && n > 1);
    return s == status::success ? s : c.fail(s);
  }
}

template <class Codec, class Strategy, class Tuning, class Transport>
status reduce_scatter_run(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                          void* workspace, std::uint64_t workspace_bytes, const collective_options& opt,
                          const typename Codec::codebook_type& cb, status* status_dev, cudaStream_t stream, bool open,
                          bool close, std::uint64_t stage0 = 0) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return zipccl::collective::detail::on_path<Strategy>(
        [&] { return opt.model.reduce_scatter(recvcount * Codec::element_size, t.size()).compress; },
        [&](auto path) {
          return reduce_scatter_run<Codec, decltype(path), Tuning>(sendbuff, recvbuff, recvcount, reduction, t,
                                                                   workspace, workspace_bytes, opt, cb, status_dev,
                                                                   stream, open, close, stage0);
        });
  } else {
    using E = typename Codec::element_type;
    constexpr bool packed = std::is_same_v<Strategy, strategy::always>;
    const int n = t.size(), r = t.rank();
    const std::uint64_t block = recvcount * Codec::element_size;
    const layout l = make_layout<Codec, Tuning>(recvcount, opt, packed, true, packed ? 0 : block);
    if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
        zipccl::collective::detail::reduce_overlaps(sendbuff, recvbuff, block, n) ||
        !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt) || n < 1) {
      t.abort(status::invalid_argument);
      return status::invalid_argument;
    }
    auto* ws = static_cast<std::uint8_t*>(workspace);
    auto c = make_call(t, ws, l, status_dev, stream);
    const auto* send = static_cast<const std::uint8_t*>(sendbuff);
    auto* acc = static_cast<std::uint8_t*>(recvbuff);
    status s = status::success;
    if (open)
      s = c.open(zipccl::collective::detail::call_signature<Codec>(
          call_kind::reduce_scatter, packed, recvcount, device_settings<Tuning>(opt, static_cast<int>(reduction))));
    const zipccl::collective::schedule sched = zipccl::collective::schedule::ring_reduce_scatter(
        r, n, zipccl::collective::segmentation(recvcount, Tuning::chunk_elems, segment_elems(opt)));
    const std::uint64_t S = sched.segments();
    if (n == 1 && s == status::success) s = c.copy(acc, send, block);
    const auto local = [&](int b) { return send + static_cast<std::uint64_t>(b) * block; };
    const std::uint64_t last_hop = sched.items() ? (sched.items() - 1) / S : 0;
    if constexpr (!packed) {
      std::uint8_t* in = ws + l.plain;
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);
        s = c.exchange(st.dst, st.from_input ? local(st.send_block) : acc, st.src, in, block);
        if (s == status::success && recvcount)
          s = cuda::detail::launch("cuda collective: add", dim3(grid_for(recvcount)), dim3(256), stream,
                                   detail::add_kernel<E>, acc, static_cast<const std::uint8_t*>(in),
                                   local(st.recv_block), recvcount);
      }
    } else {
      const auto g = geometry<Codec, Tuning>(recvcount, opt);
      auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
      std::uint8_t *out_wire = ws + l.wire_a, *in_wire = ws + l.wire_b;
      for (std::uint64_t i = 0; i < sched.items() && s == status::success; i += S) {
        const zipccl::collective::step st = sched.at(i);
        if (st.from_input)
          s = encode_block<Codec, Tuning>(stream, local(st.send_block), g, ws + l.stage_a, out_wire,
                                          opt.codec.checksum, cb, c.key, stage0 + 1);
        if (s == status::success) s = c.exchange(st.dst, out_wire, st.src, in_wire, g.total_bytes());
        if (s == status::success) s = unpack_block<Codec>(stream, in_wire, g, ws + l.stage_a, spans, c.key, stage0 + 2 + st.hop);
        if (s != status::success) break;
        if (static_cast<std::uint64_t>(st.hop) == last_hop) {
          s = decode_block<Codec, Tuning, detail::decode_mode::add_store>(stream, ws + l.stage_a, spans, g,
                                                                          opt.codec.checksum, acc, local(st.recv_block),
                                                                          nullptr, cb, c.key, stage0 + 2 + st.hop);
        } else {
          // decode, add the local block and code the sum for the next hop, in one kernel
          s = decode_block<Codec, Tuning, detail::decode_mode::add_encode>(
              stream, ws + l.stage_a, spans, g, opt.codec.checksum, nullptr, local(st.recv_block), ws + l.stage_b, cb,
              c.key, stage0 + 2 + st.hop);
          if (s == status::success && g.chunks())
            s = cuda::detail::launch("cuda collective: pack", dim3(static_cast<unsigned>(g.chunks())), dim3(128),
                                     stream, detail::pack_kernel<Codec>, static_cast<const std::uint8_t*>(ws + l.stage_b),
                                     g, out_wire, c.key, stage0 + 2 + st.hop);
        }
      }
    }
    if (s == status::success && reduction == op::avg && n > 1 && recvcount)
      s = cuda::detail::launch("cuda collective: divide", dim3(grid_for(recvcount)), dim3(256), stream,
                               detail::divide_kernel<E>, acc, recvcount, n);
    if (s == status::success && close) s = c.close(packed && n > 1);
    return s == status::success ? s : c.fail(s);
  }
}

}  // namespace collective_detail

// ---- the collectives ------------------------------------------------------------------------

// Every rank contributes `count` elements; recvbuff receives size() * count, rank r's at r * count.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, status* status_dev, cudaStream_t stream,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_gather: Transport must model the device transport");
  return collective_detail::all_gather_run<Codec, Strategy, Tuning>(sendbuff, recvbuff, count, t, workspace,
                                                                    workspace_bytes, opt, cb, status_dev, stream, true,
                                                                    true);
}

// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction of block r.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                      void* workspace, std::uint64_t workspace_bytes, status* status_dev, cudaStream_t stream,
                      const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>,
                "cuda::reduce_scatter: Transport must model the device transport");
  return collective_detail::reduce_scatter_run<Codec, Strategy, Tuning>(sendbuff, recvbuff, recvcount, reduction, t,
                                                                        workspace, workspace_bytes, opt, cb,
                                                                        status_dev, stream, true, true);
}

// reduce_scatter + all_gather over size() blocks of ceil(count / size()) elements, the input
// padded with zeros in the workspace, as the host all_reduce. recvbuff receives count elements.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, Transport& t,
                  void* workspace, std::uint64_t workspace_bytes, status* status_dev, cudaStream_t stream,
                  const collective_options& opt = {}, const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::all_reduce: Transport must model the device transport");
  using namespace collective_detail;
  const int n = t.size();
  const std::uint64_t elem = Codec::element_size;
  const std::uint64_t per = n > 0 ? (count + static_cast<std::uint64_t>(n) - 1) / static_cast<std::uint64_t>(n) : 0;
  const std::uint64_t padded = up(per * static_cast<std::uint64_t>(n) * elem);
  const std::uint64_t need = all_reduce_workspace<Codec, Strategy, Tuning>(count, n, opt) - (temp_align - 1);
  if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || n < 1 ||
      !align_workspace(workspace, workspace_bytes, need) || status_dev == nullptr || !options_ok(opt)) {
    t.abort(status::invalid_argument);
    return status::invalid_argument;
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
  const layout ctl = make_layout<Codec, Tuning>(0, opt, false, false, 0);
  auto c = make_call(t, rest, ctl, status_dev, stream);
  status s = c.open(zipccl::collective::detail::call_signature<Codec>(
      call_kind::all_reduce, rs_packed, count, device_settings<Tuning>(opt, static_cast<int>(reduction)) ^ (ag_packed ? 1 : 0)));
  if (s == status::success && padded) s = cuda::detail::check(cudaMemsetAsync(in, 0, padded, stream), "cuda::all_reduce: cudaMemsetAsync");
  if (s == status::success) s = c.copy(in, sendbuff, count * elem);
  if (s != status::success) return c.fail(s);
  s = reduce_scatter_run<Codec, Strategy, Tuning>(in, mine, per, reduction, t, rest, rest_bytes, opt, cb, status_dev,
                                                  stream, false, false);
  if (s != status::success) return s;
  // (the all_gather's errors rank after the reduce_scatter's: its stages follow the n - 1 hops)
  s = all_gather_run<Codec, Strategy, Tuning>(mine, gathered, per, t, rest, rest_bytes, opt, cb, status_dev, stream,
                                              false, false, static_cast<std::uint64_t>(n) + 1);
  if (s != status::success) return s;
  s = c.copy(recvbuff, gathered, count * elem);
  if (s == status::success) s = c.close(n > 1 && (rs_packed || ag_packed));
  return s == status::success ? s : c.fail(s);
}

namespace collective_detail {
// send and recv: both ends swap {signature, role} first (24-byte messages), so a mismatch is
// size_mismatch on both at once; then the segments; then the outcome, both ways.
template <class Codec, class Strategy, class Tuning, class Transport>
status p2p_run(bool sending, void* buf, std::uint64_t count, int peer, Transport& t, void* workspace,
               std::uint64_t workspace_bytes, const collective_options& opt, const typename Codec::codebook_type& cb,
               status* status_dev, cudaStream_t stream) {
  const bool packed = zipccl::collective::detail::takes_compressed<Strategy>(
      [&] { return opt.model.send_recv(count * Codec::element_size).compress; });
  const layout l = make_layout<Codec, Tuning>(count, opt, packed, false, 0);
  if ((buf == nullptr && count != 0) || peer < 0 || peer >= t.size() || peer == t.rank() ||
      !align_workspace(workspace, workspace_bytes, l.total) || status_dev == nullptr || !options_ok(opt)) {
    t.abort(status::invalid_argument);
    return status::invalid_argument;
  }
  auto* ws = static_cast<std::uint8_t*>(workspace);
  auto c = make_call(t, ws, l, status_dev, stream);
  // the two ends' words differ only in the role, folded into the signature: lo != hi unless one
  // end sends and the other receives the same call
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(call_kind::send_recv, packed, count,
                                                                                device_settings<Tuning>(opt));
  status s = c.launch_init(sending ? sig : ~sig, true);
  if (s == status::success) s = c.exchange(peer, c.words->mine, peer, c.words->in, sizeof c.words->mine);
  if (s == status::success)
    s = cuda::detail::launch("cuda collective: p2p check", dim3(1), dim3(32), stream, detail::p2p_check_kernel<>,
                             c.words, c.key, error_word(t));
  const auto g = geometry<Codec, Tuning>(count, opt);
  auto* bytes = static_cast<std::uint8_t*>(buf);
  if (s == status::success) {
    if (!packed) {
      s = sending ? t.send(peer, bytes, count * Codec::element_size, stream)
                  : t.recv(peer, bytes, count * Codec::element_size, stream);
    } else if (sending) {
      s = encode_block<Codec, Tuning>(stream, bytes, g, ws + l.stage_a, ws + l.wire_a, opt.codec.checksum, cb, c.key, 1);
      if (s == status::success && g.total_bytes()) s = t.send(peer, ws + l.wire_a, g.total_bytes(), stream);
    } else {
      if (g.total_bytes()) s = t.recv(peer, ws + l.wire_a, g.total_bytes(), stream);
      auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
      if (s == status::success) s = unpack_block<Codec>(stream, ws + l.wire_a, g, ws + l.stage_a, spans, c.key, 2);
      if (s == status::success)
        s = decode_block<Codec, Tuning, detail::decode_mode::store>(stream, ws + l.stage_a, spans, g,
                                                                     opt.codec.checksum, bytes, nullptr, nullptr, cb,
                                                                     c.key, 2);
    }
  }
  if (s == status::success && packed) {  // the outcome, both ways
    s = c.launch_init(0, false);
    if (s == status::success) s = c.exchange(peer, c.words->mine, peer, c.words->in, sizeof c.words->mine);
    if (s == status::success)
      s = cuda::detail::launch("cuda collective: agree round", dim3(1), dim3(32), stream, detail::agree_round_kernel<>,
                               c.words);
  }
  if (s == status::success) s = c.close(false);
  return s == status::success ? s : c.fail(s);
}
}  // namespace collective_detail

// Sends count elements to `peer`, which calls recv with the same Codec, Strategy, count and options.
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, status* status_dev, cudaStream_t stream, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::send: Transport must model the device transport");
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(true, const_cast<void*>(sendbuff), count, peer, t,
                                                             workspace, workspace_bytes, opt, cb, status_dev, stream);
}

template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            status* status_dev, cudaStream_t stream, const collective_options& opt = {}) {
  static_assert(transport::is_device_transport_v<Transport>, "cuda::recv: Transport must model the device transport");
  return collective_detail::p2p_run<Codec, Strategy, Tuning>(false, recvbuff, count, peer, t, workspace,
                                                             workspace_bytes, opt, typename Codec::codebook_type{},
                                                             status_dev, stream);
}

}  // namespace zipccl::cuda
