// zipccl: the compression kernels, short entry points over cuda::block_encode. One block codes
// one chunk in a single pass over its input: the chunk is loaded once into registers (16-byte
// vectors), block_encode::plan reduces the codebook statistic from those registers and counts
// the escapes, the chunk's size goes through a decoupled look-back to find its place in the
// compacted output, and block_encode::write puts the chunk there directly. A finishing block per
// tensor writes the stream header.
#pragma once

#include <cub/block/block_reduce.cuh>

#include <cstdint>

#include "../../format/chunk.hpp"
#include "../../format/hash.hpp"
#include "../../format/stream.hpp"
#include "../block_encode.cuh"
#include "lookback.cuh"
#include "prefix.cuh"

namespace zipccl::cuda {
// One tensor of a batched compression.
struct compress_item {
  const void* in;
  std::uint64_t n;  // elements
  void* out;
  std::uint64_t out_capacity;
  std::uint64_t* out_bytes;  // device: the stream's size is written here
};
}  // namespace zipccl::cuda

namespace zipccl::cuda::detail {

struct encode_params {
  const std::uint8_t* in;
  std::uint64_t n;
  std::uint8_t* out;
  std::uint64_t* out_bytes;
  std::uint64_t chunks;
  bool checksum;
  bool zero_masks;  // compress_options::zero_groups
  chunk_lookback lookback;
  std::uint64_t* chunk_sizes;  // temp: each chunk's size, read by the finishing kernel
};

// One tensor (items == nullptr: `single`) or a batch whose chunks are numbered consecutively:
// tensor i owns global chunks chunk_prefix[i] .. chunk_prefix[i + 1] - 1, and the look-back
// words and chunk sizes of those chunks.
struct encode_batch {
  encode_params single;
  const compress_item* items;
  const std::uint64_t* chunk_prefix;  // count + 1 entries
  std::uint32_t count;
  unsigned long long* words;
  std::uint64_t* sizes;

  __device__ encode_params tensor(std::uint32_t i) const {
    if (items == nullptr) return single;
    const compress_item it = items[i];
    encode_params p;
    p.in = static_cast<const std::uint8_t*>(it.in);
    p.n = it.n;
    p.out = static_cast<std::uint8_t*>(it.out);
    p.out_bytes = it.out_bytes;
    p.chunks = chunk_prefix[i + 1] - chunk_prefix[i];
    p.checksum = single.checksum;
    p.zero_masks = single.zero_masks;
    p.lookback = chunk_lookback{words + chunk_prefix[i]};
    p.chunk_sizes = sizes + chunk_prefix[i];
    return p;
  }

  // The tensor that owns global chunk g, and g's index inside it.
  __device__ encode_params tensor_of_chunk(std::uint64_t g, std::uint64_t* c) const {
    if (items == nullptr) {
      *c = g;
      return single;
    }
    const std::uint32_t i = owner_of(chunk_prefix, count, g);
    *c = g - chunk_prefix[i];
    return tensor(i);
  }
};

// The chunk count of each tensor of a batch (the prefix kernel's input).
template <class Tuning>
struct item_chunks {
  const compress_item* items;
  __device__ std::uint64_t operator()(std::uint32_t i) const {
    return format::chunk_count(items[i].n, Tuning::chunk_elems);
  }
};

template <class E, class Policy, class Tuning>
__global__ void __launch_bounds__(Tuning::threads) encode_kernel(encode_batch batch, Policy policy) {
  using encoder = block_encode<E, Policy, Tuning::threads, Tuning::items_per_thread>;
  __shared__ typename encoder::TempStorage tmp;
  __shared__ std::uint64_t chunk_offset;
  const unsigned t = threadIdx.x;
  std::uint64_t c = 0;
  const encode_params p = batch.tensor_of_chunk(blockIdx.x, &c);
  const std::uint64_t m = format::chunk_elements(p.n, Tuning::chunk_elems, c);
  typename encoder::runs_type v;
  encoder::load(p.in + c * Tuning::chunk_elems * sizeof(typename E::bits_type), m, v);
  encoder enc(tmp, policy, p.zero_masks);
  const std::uint64_t size = enc.plan(v, m);
  if (t < 32) {  // the first warp looks back, 32 predecessors at a time
    const std::uint64_t before = p.lookback.exclusive_prefix(c, size);
    if (t == 0) {
      chunk_offset = format::data_offset(p.chunks) + before;
      p.chunk_sizes[c] = size;
      format::store_le<std::uint64_t>(p.out + format::header_bytes + format::directory_entry_bytes * c, chunk_offset);
    }
  }
  __syncthreads();
  enc.write(v, m, p.out + chunk_offset, format::writer_seal(E::id, p.n, p.checksum, c));
}

// One block per tensor: the stream header (with the checksum flag, the chunks' digest), its hash
// over the directory, the padding, and the total size. `h` carries the fields common to the batch.
template <int Threads>
__global__ void __launch_bounds__(Threads) finish_kernel(encode_batch batch, format::stream_header h) {
  using block_reduce = cub::BlockReduce<std::uint64_t, Threads>;
  __shared__ typename block_reduce::TempStorage tmp;
  const encode_params p = batch.tensor(blockIdx.x);
  std::uint8_t* out = p.out;
  h.count = p.n;
  h.chunks = static_cast<std::uint32_t>(p.chunks);
  const std::uint64_t total =
      h.chunks == 0 ? format::data_offset(0)
                    : format::directory_entry(out, h.chunks - 1) + p.chunk_sizes[h.chunks - 1];
  const bool checksum = (h.flags & format::flag_checksum) != 0;
  std::uint64_t sum = 0, digest_sum = 0;
  // the highest chunk mode, as 1 (a mode above 1: version 2) or 8 (zero symbols: version 3), for
  // format::writer_version; with the checksum flag the chunks' digest terms
  int v2 = 0, v3 = 0;
  for (std::uint64_t c = threadIdx.x; c < h.chunks; c += Threads) {
    const std::uint64_t entry = format::directory_entry(out, c);
    sum += format::directory_term(c, entry);
    v2 |= out[entry] > 1u ? 1 : 0;
    v3 |= out[entry] >= 8u ? 1 : 0;
    if (checksum) digest_sum += format::digest_term(c, format::load_le<std::uint32_t>(out + entry + format::chunk_check_field));
  }
  v2 = __syncthreads_or(v2);
  v3 = __syncthreads_or(v3);
  h.version = format::writer_version(h.codebook, std::uint8_t(v3 ? 8 : v2 ? 2 : 0), checksum);
  for (std::uint64_t q = format::header_bytes + format::directory_entry_bytes * h.chunks + threadIdx.x;
       q < format::data_offset(h.chunks); q += Threads)
    out[q] = 0;
  const std::uint64_t directory_sum = block_reduce(tmp).Sum(sum);
  __syncthreads();  // the reduction's storage is reused
  const std::uint64_t digest_total = block_reduce(tmp).Sum(digest_sum);
  if (threadIdx.x == 0) {
    h.total_bytes = total;
    if (format::version_binds_chunks(h.version)) h.digest = format::digest_value(digest_total, h.chunks);
    format::write_header_fields(out, h);
    format::finish_header(out, directory_sum, h.chunks);
    *p.out_bytes = total;
  }
}

}  // namespace zipccl::cuda::detail
