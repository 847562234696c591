// zipccl: all_reduce on a host transport: reduce_scatter then all_gather (ring algorithms).
//
//   all_reduce<Codec, Strategy>(sendbuff, recvbuff, count, op, transport, workspace, bytes)
//
// Results are bit-identical to the plain path and to the device all_reduce (the reduction order
// and precision of reduce_scatter.hpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "all_gather.hpp"
#include "common.hpp"
#include "reduce_scatter.hpp"

namespace zipccl {

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
    const bool rs = takes_compressed<Strategy>([&] { return opt.model.reduce_scatter(block, n).compress; });
    const bool ag = takes_compressed<Strategy>([&] { return opt.model.all_gather(block, n).compress; });
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
