// zipccl: what the device collectives share (cuda/collective/all_gather.cuh, reduce_scatter.cuh,
// all_reduce.cuh, all_to_all.cuh, send_recv.cuh; cuda/collective.cuh includes them all): the
// collectives on device buffers and the caller's stream, over a device transport
// (transport/device.hpp: transport::cuda_local, transport::nccl, or the user's own).
//
//   std::uint64_t bytes = zipccl::cuda::all_reduce_workspace<C>(count, t.size());
//   zipccl::cuda::all_reduce<C>(grad, out, count, zipccl::op::sum, t, ws, bytes, status_dev, stream);
//
// Promises (docs/guide.md: "Collectives and strategies", "Errors", "Streams, graphs and workspaces"):
// - A call only enqueues work (kernels, the transport's operations, device-to-device copies, event
//   records and waits): it never waits for device work (the transport may wait on the host for
//   its peers' calls; transport::nccl's checked mode, once per signature, for its agreement),
//   copies nothing to the host and allocates nothing, so it can be captured in a graph. Every message size follows from the counts: the
//   fixed-size wire (docs/format.md, "Fixed-size segments"), with spill_permille bytes per 1000
//   elements past each chunk's fixed part.
// - A plain cudaStream_t runs the call on that stream alone; a cuda::pipeline's lanes run the
//   transport on its transfer stream and the codec kernels on `stream`, segment by segment, joined
//   by events. Ranks may mix the two. Either way the call is ordered on `stream` as one piece.
// - The outcome goes to *status_dev in stream order, agreed by every rank at the end: the rank's
//   own first error, else peer_failed, else success. Calls that differ between ranks give
//   size_mismatch on every rank (an opening agreement), except where a message's size differs too
//   over transport::nccl outside its checked mode: NCCL's undefined case.
// - The host return: invalid_argument enqueued nothing and left the transport as it was; any other
//   error came after the call began, its transfers may be partly enqueued, and the caller ends the
//   transport as NCCL's model asks (async_error(), then abort()). zipccl never aborts it.
// - Results are bit-identical to the host collectives' and the plain path's (the schedule of
//   collective/schedule.hpp, the same reduction order). Chunks are the Tuning's (8,192 elements;
//   opt.codec.chunk_elems is the host's). A reduce_scatter's recvbuff must not overlap its sendbuff.
#pragma once

#include <cstdint>

#include "../../collective/common.hpp"
#include "../../collective/spill_budget.hpp"
#include "../tuning.cuh"
#include "detail/call.cuh"

namespace zipccl::cuda {

// The bytes one block of `count` elements takes on the fixed-size wire (every segment's preamble,
// fixed part and spill room): what a compressed ring step sends, against count * element_size plain.
template <class Codec, class Tuning = default_tuning>
std::uint64_t wire_bytes(std::uint64_t count, const collective_options& opt = {}) {
  return collective_detail::geometry<Codec, Tuning>(count, opt).total_bytes();
}

}  // namespace zipccl::cuda
