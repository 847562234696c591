// zipccl: the decompression kernels, short entry points over the shared format code and
// cuda::block_decode.
//
//   validate_kernel   one block per tensor: the stream header, the directory and its hash, the
//                     caller's output; the same checks in the same order as the host's
//                     decompress_as<E>, so a bad stream gives the same status on either executor.
//                     In a version 4 stream it also matches the chunks' digest, whose verdict
//                     counts only when every chunk passes (the host's order).
//   prefix_kernel     (batches) one block: where each tensor's chunks start in one flat
//                     numbering of all the batch's chunks (a block-wide scan).
//   decode_kernel     a grid-stride loop over the flat chunk numbering, one chunk per block at a
//                     time, whatever the tensors' sizes. A failing chunk records (chunk, status)
//                     with atomicMin, so the reported error is that of the lowest failing chunk,
//                     as on the host; chunks after a known failure are skipped. The last block to
//                     finish writes each tensor's status and element count.
//                     With RansByWarps, its decoder is built without rANS: it checks every chunk
//                     and decodes all but the rANS chunks, which it leaves to
//   rans_warps_kernel one rANS chunk per warp (warp_rans.cuh), the chunks the decode kernel
//                     checked and left, none at or after a known failure; its last block writes
//                     the outcomes.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/atomic>

#include <cstdint>

#include "../../element.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "../../format/stream.hpp"
#include "../block_decode.cuh"
#include "prefix.cuh"
#include "warp_rans.cuh"

namespace zipccl::cuda {
// One tensor of a batched decompression (an array of these lives in device memory).
struct decompress_item {
  const void* in;
  std::uint64_t in_bytes;
  void* out;
  std::uint64_t out_capacity;
};
}  // namespace zipccl::cuda

namespace zipccl::cuda::detail {

// Per tensor, in the caller's temp storage between the kernels.
struct decode_state {
  format::stream_header header;
  unsigned long long first_failure;  // (chunk << 8) | status of the lowest failing chunk; no_failure if none
  int digest_ok;  // version 4: the chunks' check fields match the header's digest (else 1)
};
inline constexpr unsigned long long no_failure = ~0ull;

struct decode_params {
  const std::uint8_t* in;
  std::uint64_t in_bytes;
  std::uint8_t* out;
  std::uint64_t out_capacity;
  status* result;        // device: the call's status
  std::uint64_t* count;  // device, optional: the element count
  decode_state* state;
};

// One tensor (items == nullptr: `single`) or a batch of `count` tensors whose chunks are numbered
// consecutively: tensor i owns flat chunks chunk_prefix[i] .. chunk_prefix[i + 1] - 1.
struct decode_batch {
  decode_params single;
  const decompress_item* items;
  status* results;
  std::uint64_t* counts;
  decode_state* states;
  std::uint32_t count;
  std::uint64_t* chunk_prefix;  // batches: count + 1 entries, written by the prefix kernel
  unsigned* blocks_done;        // the decode kernel's finishing counter

  __device__ decode_params item(unsigned i) const {
    if (items == nullptr) return single;
    const decompress_item it = items[i];
    decode_params p;
    p.in = static_cast<const std::uint8_t*>(it.in);
    p.in_bytes = it.in_bytes;
    p.out = static_cast<std::uint8_t*>(it.out);
    p.out_capacity = it.out_capacity;
    p.result = results + i;
    p.count = counts ? counts + i : nullptr;
    p.state = states + i;
    return p;
  }

  // The chunks the decode kernel has to go through (a tensor that failed validation has none).
  __device__ std::uint64_t total_chunks() const {
    if (items != nullptr) return chunk_prefix[count];
    return *single.result == status::success ? single.state->header.chunks : 0;
  }

  // The tensor that owns flat chunk g, and g's index in it.
  __device__ unsigned locate(std::uint64_t g, std::uint64_t* c) const {
    if (items == nullptr) {
      *c = g;
      return 0;
    }
    const unsigned i = owner_of(chunk_prefix, count, g);
    *c = g - chunk_prefix[i];
    return i;
  }
};

// How many of a tensor's chunks the decode kernel covers: all of them once validated, else none.
struct validated_chunks {
  const status* results;
  const decode_state* states;
  __device__ std::uint64_t operator()(std::uint32_t i) const {
    return results[i] == status::success ? states[i].header.chunks : 0;
  }
};

template <class E, int Threads>
__global__ void __launch_bounds__(Threads) validate_kernel(decode_batch batch) {
  const decode_params p = batch.item(blockIdx.y);
  using block_reduce = cub::BlockReduce<std::uint64_t, Threads>;
  __shared__ typename block_reduce::TempStorage tmp;
  __shared__ format::stream_header h;
  __shared__ int parsed;
  const unsigned t = threadIdx.x;
  if (t == 0) {
    if (blockIdx.y == 0) *batch.blocks_done = 0;
    p.state->first_failure = no_failure;
    format::stream_header r;
    const status s = format::parse_header(p.in, p.in_bytes, &r);
    *p.result = s;
    parsed = s == status::success;
    if (parsed) h = r;
  }
  __syncthreads();
  if (!parsed) return;
  // the directory's hash terms, its rule and its padding (format::read_header's checks); in a
  // version 4 stream the digest terms of the chunks' check fields, read only where a chunk's header
  // lies inside the stream (where it does not, a chunk check fails first: the digest comes last)
  const bool digest = format::version_binds_chunks(h.version) && h.total_bytes <= p.in_bytes;
  std::uint64_t sum = 0, digest_sum = 0;
  int bad_entry = 0, bad_padding = 0;
  for (std::uint64_t c = t; c < h.chunks; c += Threads) {
    const std::uint64_t entry = format::directory_entry(p.in, c);
    sum += format::directory_term(c, entry);
    if (!format::directory_entry_ok(h, c, entry, c == 0 ? 0 : format::directory_entry(p.in, c - 1))) bad_entry = 1;
    else if (digest && entry + format::chunk_header_bytes <= h.total_bytes)
      digest_sum += format::digest_term(c, format::load_le<std::uint32_t>(p.in + entry + format::chunk_check_field));
  }
  const std::uint64_t directory_end = format::header_bytes + format::directory_entry_bytes * h.chunks;
  for (std::uint64_t q = directory_end + t; q < format::data_offset(h.chunks); q += Threads)
    if (p.in[q] != 0) bad_padding = 1;
  const std::uint64_t total = block_reduce(tmp).Sum(sum);
  __syncthreads();  // the reduction's storage is reused
  const std::uint64_t digest_total = block_reduce(tmp).Sum(digest_sum);
  bad_entry = __syncthreads_or(bad_entry);
  bad_padding = __syncthreads_or(bad_padding);
  if (t == 0) {
    // host order: read_header (hash, padding, length), the type (decompress_as), the output
    // (decompress), then the directory
    status s = status::success;
    if (!format::header_hash_matches(p.in, total, h.chunks)) s = status::checksum_mismatch;
    else if (bad_padding) s = status::corrupt;
    else if (p.in_bytes < h.total_bytes) s = status::truncated;
    else if (h.type != E::id) s = status::type_mismatch;
    else if (h.count * dtype_size(h.type) > p.out_capacity) s = status::buffer_too_small;
    else if (p.out == nullptr && h.count != 0) s = status::invalid_argument;
    else if (bad_entry) s = status::corrupt;
    *p.result = s;
    p.state->header = h;
    p.state->digest_ok = !digest || format::digest_value(digest_total, h.chunks) == h.digest;
  }
}

// Ends a decoding grid: the last block to finish (all of its threads call this) writes every
// tensor's outcome, from the validation's verdict and the lowest failing chunk.
template <int Threads>
__device__ void finish_decode(const decode_batch& batch) {
  __shared__ int last;
  const unsigned t = threadIdx.x;
  __syncthreads();  // every thread of the block is done with its chunks
  if (t == 0) {
    __threadfence();
    ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device> done(*batch.blocks_done);
    last = done.fetch_add(1, ::cuda::memory_order_acq_rel) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (std::uint32_t i = t; i < batch.count; i += Threads) {
    const decode_params p = batch.item(i);
    if (*p.result != status::success) continue;  // the validate kernel's verdict stands
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> failure(p.state->first_failure);
    const unsigned long long f = failure.load(::cuda::memory_order_relaxed);
    if (f != no_failure) *p.result = static_cast<status>(f & 0xFFu);
    else if (!p.state->digest_ok) *p.result = status::checksum_mismatch;  // last, as on the host
    else if (p.count != nullptr) *p.count = p.state->header.count;
  }
}

template <class E, int Threads, bool RansByWarps = false>
__global__ void __launch_bounds__(Threads) decode_kernel(decode_batch batch) {
  // rANS here where it fits, unless rans_warps_kernel decodes it
  using decoder = block_decode<E, Threads, !RansByWarps && block_decode_takes_rans<E, Threads>>;
  using L = format::chunk_layout<E>;
  __shared__ typename decoder::TempStorage tmp;
  __shared__ int skip;
  const unsigned t = threadIdx.x;
  const std::uint64_t total = batch.total_chunks();
  for (std::uint64_t g = blockIdx.x; g < total; g += gridDim.x) {
    std::uint64_t c = 0;
    const decode_params p = batch.item(batch.locate(g, &c));
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> failure(p.state->first_failure);
    if (t == 0) skip = failure.load(::cuda::memory_order_relaxed) < (c << 8);  // a lower chunk failed
    __syncthreads();
    if (!skip) {
      const format::stream_header h = p.state->header;
      const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
      const std::uint64_t off = format::directory_entry(p.in, c);
      // validate_kernel checked off < end <= total_bytes <= in_bytes
      const std::uint64_t span = format::chunk_end(p.in, h, c) - off;
      // a zero_* chunk in a version 1 stream is corrupt, as on the host (the same in every thread)
      const status s = format::chunk_mode_allowed(h, p.in[off])
                           ? decoder(tmp).decode(p.in + off, span, m, format::reader_seal(h, c),
                                                 p.out + c * h.chunk_elems * L::elem_size)
                           : status::corrupt;
      // (built without rANS, the decoder reports unsupported_mode for a rANS chunk that passed
      // every check, and only for that: rans_warps_kernel decodes it)
      const bool left = RansByWarps && s == status::unsupported_mode;
      if (t == 0 && s != status::success && !left) failure.fetch_min((c << 8) | static_cast<unsigned>(s));
    }
    __syncthreads();  // `skip` is rewritten for the next chunk
  }
  if constexpr (!RansByWarps) finish_decode<Threads>(batch);
}

// After decode_kernel<E, Threads, true>: each warp takes flat chunks warp, warp + warps, ... of
// the grid and decodes those that are rANS chunks, unless that chunk or a lower one failed (so a
// chunk that failed its checks is never decoded, and the lowest failure is still reported).
template <class E, int Warps>
__global__ void __launch_bounds__(32 * Warps) rans_warps_kernel(decode_batch batch) {
  using decoder = warp_rans<E>;
  using L = format::chunk_layout<E>;
  __shared__ typename decoder::storage tmp[Warps];
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t total = batch.total_chunks();
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * Warps;
  for (std::uint64_t g = static_cast<std::uint64_t>(blockIdx.x) * Warps + w; g < total; g += stride) {
    std::uint64_t c = 0;
    const decode_params p = batch.item(batch.locate(g, &c));
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> failure(p.state->first_failure);
    const format::stream_header h = p.state->header;
    const std::uint64_t off = format::directory_entry(p.in, c);
    // lane 0 decides for the warp (another warp may lower the failure meanwhile)
    int take = 0;
    if (lane == 0)
      take = failure.load(::cuda::memory_order_relaxed) >= ((c + 1) << 8) &&
             format::mode_is_rans(static_cast<format::chunk_mode>(p.in[off]));
    if (!__shfl_sync(0xFFFFFFFFu, take, 0)) continue;
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    if (!decoder::decode(tmp[w], p.in + off, m, p.out + c * h.chunk_elems * L::elem_size) && lane == 0)
      failure.fetch_min((c << 8) | static_cast<unsigned>(status::corrupt));
  }
  finish_decode<32 * Warps>(batch);
}

}  // namespace zipccl::cuda::detail
