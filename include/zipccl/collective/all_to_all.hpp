// zipccl: all_to_all with variable counts (MoE dispatch and combine) on a host transport.
//
//   all_to_all<Codec, Strategy>(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
//                               transport, workspace, workspace_bytes)
//
// As MPI_Alltoallv, in elements: rank r sends sendcounts[p] elements from sendbuff + sdispls[p] to
// rank p, and receives recvcounts[p] elements from rank p at recvbuff + rdispls[p]. Every array has
// size() entries; rank p's sendcounts[r] must equal rank r's recvcounts[p]. A mismatch is caught
// by the pair (the message's size, or the compressed block's preamble), and a closing agreement
// makes it an error on every rank. The ranks exchange in n - 1 pairwise steps (step j: send to
// r + j, receive from
// r - j). On the compressed path every block travels in two phases (detail/wire.hpp): first the
// part whose size depends only on the element count, so the receiver checks and plans it at once,
// then the escapes, whose size the first part announces. The block for step j + 1 is coded while
// step j is in flight. strategy::adaptive decides per pair of ranks, from that block's size alone
// (both ends know it), so the two ends always agree.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../format/bytes.hpp"
#include "common.hpp"
#include "detail/pipeline.hpp"
#include "detail/wire.hpp"
#include "schedule.hpp"

namespace zipccl {

namespace collective::detail {
// Where block `displ` of `count` elements starts (null for an empty block: the buffer may be null).
template <class P>
P* block_at(P* base, std::uint64_t displ, std::uint64_t count, std::uint64_t esize) {
  return count ? base + displ * esize : nullptr;
}
template <class Codec>
segment_plan<Codec> block_plan(std::uint64_t count, const collective_options& opt) {
  return segment_plan<Codec>(count, opt.codec.chunk_elems, 0);  // one segment per block
}
// Whether the block between two ranks travels compressed.
template <class Codec, class Strategy>
bool compress_block(std::uint64_t count, int ranks, const collective_options& opt) {
  return takes_compressed<Strategy>([&] { return opt.model.all_to_all(count * Codec::element_size, ranks).compress; });
}
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always>
std::uint64_t all_to_all_workspace(const std::uint64_t* sendcounts, const std::uint64_t* recvcounts, int ranks,
                                   const collective_options& opt = {}) {
  return collective::detail::workspace_for<Strategy>([&](auto path) -> std::uint64_t {
    if constexpr (std::is_same_v<decltype(path), strategy::never>) {
      return 0;
    } else {
      if (!collective::detail::valid_options(opt) || sendcounts == nullptr || recvcounts == nullptr || ranks < 1)
        return 0;
      std::uint64_t total = format::align_up(collective::detail::wire<Codec>::scratch_bytes(opt.codec.chunk_elems), 16);
      for (int p = 0; p < ranks; ++p)
        total += collective::detail::block_plan<Codec>(sendcounts[p], opt).slot +
                 collective::detail::block_plan<Codec>(recvcounts[p], opt).slot;
      return total;
    }
  });
}

namespace collective::detail {
// The hooks (detail/pipeline.hpp) of the compressed all_to_all, on the steps of
// schedule::pairwise_all_to_all: each block travels as one segment, coded while the previous
// step is in flight; a block that Strategy leaves plain (adaptive decides per pair, from the
// block's size alone, which both ends know) travels as its raw bytes in one message. The
// workspace holds an out slot per peer, then an in slot per peer, then one chunk of scratch.
template <class Codec, class Strategy>
struct pairwise_exchange : schedule_steps {
  const collective_options& opt;
  const typename Codec::codebook_type& cb;
  const std::uint64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
  const std::uint8_t* send;
  std::uint8_t* recv;
  std::uint8_t* ws;
  std::uint64_t tail_in = 0;

  int n() const { return sched.ranks(); }
  bool packed(std::uint64_t count) const { return compress_block<Codec, Strategy>(count, n(), opt); }
  std::uint8_t* out_slot(int p) const {
    std::uint64_t off = 0;
    for (int q = 0; q < p; ++q) off += block_plan<Codec>(sendcounts[q], opt).slot;
    return ws + off;
  }
  std::uint8_t* in_slot(int p) const {
    std::uint64_t off = 0;
    for (int q = 0; q < n(); ++q) off += block_plan<Codec>(sendcounts[q], opt).slot;
    for (int q = 0; q < p; ++q) off += block_plan<Codec>(recvcounts[q], opt).slot;
    return ws + off;
  }
  std::uint8_t* scratch() const { return in_slot(n()); }
  status produce(std::uint64_t i, section* out) {
    const int p = sched.at(i).send_block;
    const std::uint64_t count = sendcounts[p];
    const std::uint8_t* from = block_at(send, sdispls[p], count, Codec::element_size);
    if (!packed(count)) {
      *out = {from, count * Codec::element_size, nullptr, 0};
      return status::success;
    }
    *out = block_plan<Codec>(count, opt).encode(cb, from, 0, opt.codec.checksum, out_slot(p));
    return status::success;
  }
  landing incoming(std::uint64_t i) {
    const int p = sched.at(i).recv_block;
    const std::uint64_t count = recvcounts[p];
    if (!packed(count)) return {block_at(recv, rdispls[p], count, Codec::element_size), count * Codec::element_size};
    return block_plan<Codec>(count, opt).head(in_slot(p), 0);
  }
  status arrived(std::uint64_t i, std::uint64_t* tail_bytes, std::uint8_t** tail) {
    const int p = sched.at(i).recv_block;
    const std::uint64_t count = recvcounts[p];
    if (!packed(count)) {
      *tail_bytes = tail_in = 0;
      *tail = nullptr;
      return status::success;
    }
    const status st = block_plan<Codec>(count, opt).arrived(in_slot(p), 0, tail_bytes, tail);
    tail_in = *tail_bytes;
    return st;
  }
  status consume(std::uint64_t i) {
    const int p = sched.at(i).recv_block;
    const std::uint64_t count = recvcounts[p];
    if (!packed(count)) return status::success;
    return block_plan<Codec>(count, opt).decode_into(in_slot(p), 0, tail_in, opt.codec.checksum,
                                                     block_at(recv, rdispls[p], count, Codec::element_size), scratch());
  }
};
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always, class Transport>
status all_to_all(const void* sendbuff, const std::uint64_t* sendcounts, const std::uint64_t* sdispls, void* recvbuff,
                  const std::uint64_t* recvcounts, const std::uint64_t* rdispls, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, const collective_options& opt = {},
                  const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "all_to_all: Transport must model the host transport concept");
  using namespace collective::detail;
  const abort_on_unwind<Transport> guard(t);
  const int n = t.size(), r = t.rank();
  const std::uint64_t esize = Codec::element_size;
  const auto* send = static_cast<const std::uint8_t*>(sendbuff);
  auto* recv = static_cast<std::uint8_t*>(recvbuff);
  if (sendcounts == nullptr || sdispls == nullptr || recvcounts == nullptr || rdispls == nullptr || !valid_options(opt))
    return fail(t, status::invalid_argument);
  bool any_send = false, any_recv = false;
  for (int p = 0; p < n; ++p) {
    any_send = any_send || sendcounts[p] != 0;
    any_recv = any_recv || recvcounts[p] != 0;
  }
  const std::uint64_t need = all_to_all_workspace<Codec, Strategy>(sendcounts, recvcounts, n, opt);
  if ((any_send && sendbuff == nullptr) || (any_recv && recvbuff == nullptr) || sendcounts[r] != recvcounts[r] ||
      workspace_bytes < need || (workspace == nullptr && need != 0))
    return fail(t, status::invalid_argument);
  if (n > 1) {  // the same collective, element type and strategy everywhere (the counts: see below)
    const status s = agree(t, status::success,
                           call_signature<Codec>(call_kind::all_to_all, !std::is_same_v<Strategy, strategy::never>, 0,
                                                 settings_word(opt)));
    if (s != status::success) return s;
  }
  if (sendcounts[r]) std::memmove(recv + rdispls[r] * esize, send + sdispls[r] * esize, sendcounts[r] * esize);
  const auto send_block = [&](int p) { return block_at(send, sdispls[p], sendcounts[p], esize); };
  const auto recv_block = [&](int p) { return block_at(recv, rdispls[p], recvcounts[p], esize); };
  if (n == 1) return status::success;

  const collective::schedule sched = collective::schedule::pairwise_all_to_all(r, n);
  if constexpr (std::is_same_v<Strategy, strategy::never>) {
    for (std::uint64_t i = 0; i < sched.items(); ++i) {
      const int dst = sched.at(i).dst, src = sched.at(i).src;
      const status s =
          t.sendrecv(dst, send_block(dst), sendcounts[dst] * esize, src, recv_block(src), recvcounts[src] * esize);
      if (s != status::success) return fail(t, s);
    }
    return agree(t, status::success);  // a pair whose counts differed failed: every rank hears of it
  } else {
    pairwise_exchange<Codec, Strategy> h{{sched}, opt,     cb,   sendcounts, sdispls,
                                         recvcounts, rdispls, send, recv,       static_cast<std::uint8_t*>(workspace)};
    const status s = run_pipeline(t, sched.items(), opt.pipeline.depth, 0, h);
    if (s != status::success) return s;
    return agree(t, status::success);
  }
}

}  // namespace zipccl
