// zipccl: cuda::all_reduce on device buffers over a device transport (the shared rules:
// common.cuh).
//
//   std::uint64_t bytes = zipccl::cuda::all_reduce_workspace<C>(count, t.size());
//   zipccl::cuda::all_reduce<C>(grad, grad_out, count, zipccl::op::sum, t, ws, bytes, status_dev, stream);
//
// reduce_scatter then all_gather over size() blocks of ceil(count / size()) elements, the input
// padded with zeros in the workspace, as the host all_reduce; one opening and one closing
// agreement for the whole call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "all_gather.cuh"
#include "common.cuh"
#include "reduce_scatter.cuh"

namespace zipccl::cuda {

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

// recvbuff receives count elements: the reduction of every rank's sendbuff.
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
  // the stages run in the rest of the workspace; the opening agreement uses their control words
  const args<Codec, Transport> stages{t, rest, workspace_bytes - static_cast<std::uint64_t>(rest - ws), status_dev, on,
                                      opt, cb};
  const bool rs_packed = zipccl::collective::detail::takes_compressed<Strategy>(
      [&] { return opt.model.reduce_scatter(per * elem, n).compress; });
  const bool ag_packed =
      zipccl::collective::detail::takes_compressed<Strategy>([&] { return opt.model.all_gather(per * elem, n).compress; });
  auto c = make_call(stages, rest, 0);
  const std::uint64_t sig = zipccl::collective::detail::call_signature<Codec>(
      call_kind::all_reduce, rs_packed, count, device_settings<Tuning>(opt, static_cast<int>(reduction)) ^ (ag_packed ? 1 : 0));
  if (const status a = agree_first(t, sig, -1, on.stream); a != status::success) return a;  // (nothing enqueued)
  status s = c.open(sig);
  if (s == status::success && padded)
    s = cuda::detail::check(cudaMemsetAsync(in, 0, padded, c.stream), "cuda::all_reduce: cudaMemsetAsync");
  if (s == status::success) s = c.copy(in, sendbuff, count * elem);
  if (s != status::success) return c.fail(s);
  // (an inner stage's own argument checks, implied by the outer ones, would return
  // invalid_argument with the opening enqueued: reported as a failure part way)
  s = reduce_scatter_run<Codec, Strategy, Tuning>(in, mine, per, reduction, stages, part::inner(0));
  if (s != status::success) return s == status::invalid_argument ? c.fail(s) : s;
  // (the all_gather's errors rank after the reduce_scatter's: its stages follow the n - 1 hops)
  s = all_gather_run<Codec, Strategy, Tuning>(mine, gathered, per, stages, part::inner(static_cast<std::uint64_t>(n) + 1));
  if (s != status::success) return s == status::invalid_argument ? c.fail(s) : s;
  s = c.copy(recvbuff, gathered, count * elem);
  if (s == status::success) s = c.finish(n > 1 && (rs_packed || ag_packed) ? ending::agreed : ending::own_outcome);
  return c.end(s);
}

}  // namespace zipccl::cuda
