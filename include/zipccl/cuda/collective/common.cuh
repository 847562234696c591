// zipccl: what the device collectives share (cuda/collective/all_gather.cuh, reduce_scatter.cuh,
// all_reduce.cuh, all_to_all.cuh, send_recv.cuh; cuda/collective.cuh includes them all): the
// collectives on device buffers and the caller's stream, over a device transport
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
// (docs/format.md, "Fixed-size segments"), with room for
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
