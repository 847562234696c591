// zipccl: cuda::all_to_all (variable counts, as MPI_Alltoallv) on device buffers over a device
// transport (the shared rules: common.cuh).
//
//   std::uint64_t bytes = zipccl::cuda::all_to_all_workspace<C>(sendcounts, recvcounts, t.size());
//   zipccl::cuda::all_to_all<C>(send, sendcounts, sdispls, recv, recvcounts, rdispls, t, ws, bytes,
//                               status_dev, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common.cuh"

namespace zipccl::cuda {

namespace collective_detail {

// Whether the block between two ranks travels compressed (adaptive decides per pair, from the
// block's size alone, which both ends know).
template <class Codec, class Strategy>
bool block_packed(std::uint64_t count, int ranks, const collective_options& opt) {
  return count != 0 && zipccl::collective::detail::takes_compressed<Strategy>(
                           [&] { return opt.model.all_to_all(count * Codec::element_size, ranks).compress; });
}

// The workspace: control words, spans and staging for the largest block, then the wires of the
// coded blocks (out, then in).
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

// sendcounts and recvcounts: `ranks` entries each, as all_to_all takes them (0 for null arrays).
template <class Codec, class Strategy = strategy::always, class Tuning = default_tuning>
std::uint64_t all_to_all_workspace(const std::uint64_t* sendcounts, const std::uint64_t* recvcounts, int ranks,
                                   const collective_options& opt = {}) {
  if (sendcounts == nullptr || recvcounts == nullptr || ranks < 1) return 0;
  return detail::with_align_slack(
      collective_detail::make_a2a_layout<Codec, Strategy, Tuning>(sendcounts, recvcounts, ranks, opt).total);
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
// sizes are NCCL's undefined case, which its checked mode does not catch either (the per-pair
// counts differ between ranks by design and are not in the call's signature; see nccl.hpp).
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
  const args<Codec, Transport> a{t, ws, workspace_bytes, status_dev, on, opt, cb};
  auto c = make_call(a, ws, 0);
  auto* spans = reinterpret_cast<std::uint64_t*>(ws + l.spans);
  const auto packed = [&](std::uint64_t count) { return block_packed<Codec, Strategy>(count, n, opt); };
  const auto send_block = [&](int p) { return sendcounts[p] ? send + sdispls[p] * esize : nullptr; };
  const auto recv_block = [&](int p) { return recvcounts[p] ? recv + rdispls[p] * esize : nullptr; };
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
      call_kind::all_to_all, !std::is_same_v<Strategy, strategy::never>, 0, device_settings<Tuning>(opt));
  // (the pairs' counts are not in the signature: cuda_local checks them by the messages' sizes)
  if (const status g = agree_first(t, sig, -1, on.stream); g != status::success) return g;  // (nothing enqueued)
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
      e = coder<Codec, Tuning>(c.stream, g, opt, cb, c.key, ws + l.staging, spans)
              .encode(send_block(p), ws + coded_at, 1 + 2 * j);
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
    if (s == status::success)
      s = c.exchange(st.dst, out, ps ? gs.total_bytes() : sc * esize, st.src, in, pr ? gr.total_bytes() : rc * esize);
    if (s == status::success) s = c.to_codec();
    if (pr) {
      const auto blocks = coder<Codec, Tuning>(c.stream, gr, opt, cb, c.key, ws + l.staging, spans);
      if (s == status::success) s = blocks.unpack(ws + in_at, 2 + 2 * j);
      if (s == status::success)
        s = blocks.template decode<detail::decode_mode::store>(recv_block(st.src), nullptr, nullptr, 2 + 2 * j);
    }
    if (s == status::success && j + ahead < items) s = encode_step(j + ahead);
    if (ps) out_at += up(gs.total_bytes());
    if (pr) in_at += up(gr.total_bytes());
  }
  if (s == status::success)
    s = c.finish(n > 1 && !std::is_same_v<Strategy, strategy::never> ? ending::agreed : ending::own_outcome);
  return c.end(s);
}

}  // namespace zipccl::cuda
