// zipccl: the compression kernels. One block codes one chunk in a single pass over its input:
// the chunk is loaded once into registers (16-byte vectors), the codebook statistic is reduced
// from those registers, codes and escape counts follow, the chunk's size goes through a
// decoupled look-back to find its place in the compacted output, and the block writes the chunk
// there directly. The per-element work is the shared code of codec/chunk_codec.hpp and
// format/chunk.hpp.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../codebook/analytic_gaussian.hpp"
#include "../../codebook/histogram.hpp"
#include "../../codebook/table.hpp"
#include "../../codec/chunk_codec.hpp"
#include "../../format/chunk.hpp"
#include "../../format/hash.hpp"
#include "../../format/stream.hpp"
#include "block_io.cuh"
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

// Marks in `taken` (shared memory) the exponents with the seven largest histogram::rank_key
// values of `counts`; run by one warp.
template <class E>
__device__ void warp_top7(const std::uint32_t* counts, bool* taken) {
  constexpr unsigned per_lane = (E::exponent_count + 31) / 32;
  const unsigned lane = threadIdx.x & 31u;
  for (unsigned e = lane; e < E::exponent_count; e += 32) taken[e] = false;
  __syncwarp();
  for (unsigned k = 0; k < format::table_size; ++k) {
    std::uint64_t best = 0;
#pragma unroll
    for (unsigned i = 0; i < per_lane; ++i) {
      const unsigned e = lane + 32 * i;
      if (e < E::exponent_count && !taken[e]) {
        const std::uint64_t key = codebook::histogram::rank_key(counts[e], e);
        best = key > best ? key : best;
      }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      const std::uint64_t o = __shfl_xor_sync(0xFFFFFFFFu, best, d);
      best = o > best ? o : best;
    }
    if (lane == 0) taken[codebook::histogram::key_exponent(best)] = true;
    __syncwarp();
  }
}

__device__ __forceinline__ void store_table(std::uint8_t* dst, const codebook::table& t) {
  for (unsigned i = 0; i < format::table_size; ++i) dst[i] = t.exponent[i];
}

template <class E, class Policy, class Tuning>
__global__ void __launch_bounds__(Tuning::threads) encode_kernel(encode_batch batch, Policy policy) {
  using bits = typename E::bits_type;
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  constexpr int T = Tuning::threads;
  constexpr int R = Tuning::runs_per_thread;
  constexpr std::uint64_t chunk = Tuning::chunk_elems;
  using block_scan = cub::BlockScan<std::uint32_t, T>;
  using block_reduce = cub::BlockReduce<std::uint64_t, T>;

  __shared__ union {
    typename block_scan::TempStorage scan;
    typename block_reduce::TempStorage reduce;
  } tmp;
  __shared__ std::uint32_t hist[Policy::stat == codebook::statistic::histogram ? E::exponent_count : 1];
  __shared__ bool taken[Policy::stat == codebook::statistic::histogram ? E::exponent_count : 1];
  __shared__ std::uint8_t lut[256];
  __shared__ std::uint8_t tab[format::table_size];  // the chunk's table (no constructors in shared memory)
  __shared__ std::uint64_t chunk_offset;
  __shared__ std::uint32_t run_escapes[R];

  std::uint64_t c = 0;
  const encode_params p = batch.tensor_of_chunk(blockIdx.x, &c);
  const std::uint64_t m = format::chunk_elements(p.n, chunk, c);
  const std::uint8_t* src = p.in + c * chunk * L::elem_size;
  const unsigned t = threadIdx.x;

  // 1. Load: run r of thread t holds elements r * T * 8 + 8t .. +7 of the chunk.
  bits v[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::uint64_t first = static_cast<std::uint64_t>(r) * T * 8 + 8ull * t;
    const unsigned valid = first >= m ? 0u : (m - first >= 8 ? 8u : static_cast<unsigned>(m - first));
    load_run<E>(src + first * L::elem_size, valid, v[r]);
  }
  auto live = [&](int r, int i) {
    return static_cast<std::uint64_t>(r) * T * 8 + 8ull * t + static_cast<unsigned>(i) < m;
  };

  // 2. The codebook, from the statistic of the values in registers.
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    std::uint64_t packed = 0;  // sum << 25 | count (a chunk holds at most 2^24 elements)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const std::uint32_t e = E::exponent(v[r][i]);
        if (live(r, i) && Policy::template counts<E>(e)) packed += (std::uint64_t(e) << 25) | 1u;
      }
    const std::uint64_t total = block_reduce(tmp.reduce).Sum(packed);
    if (t == 0) store_table(tab, Policy::template select<E>(total >> 25, total & ((1u << 25) - 1)));
    __syncthreads();
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    for (unsigned e = t; e < E::exponent_count; e += T) hist[e] = 0;
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (live(r, i)) atomicAdd(&hist[E::exponent(v[r][i])], 1u);
    __syncthreads();
    if (t < 32) warp_top7<E>(hist, taken);
    __syncthreads();
    if (t == 0) {  // ascending order, as histogram::table_from_taken writes it
      unsigned k = 0;
      for (unsigned e = 0; e < E::exponent_count && k < format::table_size; ++e)
        if (taken[e]) tab[k++] = static_cast<std::uint8_t>(e);
    }
    __syncthreads();
  } else {
    if (t == 0) store_table(tab, policy.entries);
    __syncthreads();
  }
  for (unsigned e = t; e < 256; e += T) lut[e] = 0;
  __syncthreads();
  if (t < format::table_size) lut[tab[t]] = static_cast<std::uint8_t>(t + 1);
  __syncthreads();

  // 3. Codes and escape counts; each run's escapes are scanned across the block in element order.
  std::uint32_t esc_mask[R];
  std::uint32_t esc_before[R];
  std::uint64_t escapes = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    std::uint32_t mask = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (live(r, i) && lut[E::exponent(v[r][i])] == 0) mask |= 1u << i;
    esc_mask[r] = mask;
    std::uint32_t total = 0;
    block_scan(tmp.scan).ExclusiveSum(static_cast<std::uint32_t>(__popc(mask)), esc_before[r], total);
    if (t == 0) run_escapes[r] = total;
    __syncthreads();
  }
  for (int r = 0; r < R; ++r) escapes += run_escapes[r];

  // 4. The chunk's size and, through the look-back, its offset.
  const std::int64_t budget = L::escape_budget(m);
  const bool coded = budget >= 0 && escapes <= static_cast<std::uint64_t>(budget);
  const std::uint64_t size = coded ? L::coded_bytes(m, escapes) : L::stored_bytes(m);
  if (t < 32) {  // the first warp looks back, 32 predecessors at a time
    const std::uint64_t before = p.lookback.exclusive_prefix(c, size);
    if (t == 0) {
      chunk_offset = format::data_offset(p.chunks) + before;
      p.chunk_sizes[c] = size;
      format::store_le<std::uint64_t>(p.out + format::header_bytes + format::directory_entry_bytes * c, chunk_offset);
    }
  }
  __syncthreads();
  std::uint8_t* dst = p.out + chunk_offset;

  // 5. Write the chunk.
  if (coded) {
    std::uint8_t* planes = dst + L::planes_offset();
    std::uint8_t* words = dst + L::words_offset(m);
    std::uint8_t* bytes = dst + L::bytes_offset(m);
    std::uint8_t* esc_out = dst + L::escapes_offset(m);
    std::uint64_t esc_base = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = static_cast<std::uint64_t>(r) * T * 8 + 8ull * t;
      if (first < m) {
        const unsigned valid = m - first >= 8 ? 8u : static_cast<unsigned>(m - first);
        // group first / 32, byte (first % 32) / 8 of each plane word
        std::uint8_t* gp = planes + (first / 32) * L::planes * 4 + (first % 32) / 8;
        std::uint32_t pl[L::planes] = {};
        std::uint64_t rest_bytes = 0, rest_words_lo = 0, rest_words_hi = 0;
        std::uint32_t k = esc_before[r];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (i < static_cast<int>(valid)) {
            const auto l = G::encode_lane(v[r][i], lut, static_cast<unsigned>(i), pl);
            rest_bytes |= std::uint64_t(l.byte) << (8 * i);
            if constexpr (L::word_bytes != 0) {
              if (i < 4) rest_words_lo |= std::uint64_t(l.word) << (16 * i);
              else rest_words_hi |= std::uint64_t(l.word) << (16 * (i - 4));
            }
            if (l.code == 0) esc_out[esc_base + k++] = static_cast<std::uint8_t>(l.exponent);
          }
        }
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) gp[4 * q] = static_cast<std::uint8_t>(pl[q]);
        store_bytes(bytes + first, rest_bytes, valid);
        if constexpr (L::word_bytes != 0) {
          store_bytes(words + 2 * first, rest_words_lo, valid >= 4 ? 8u : 2 * valid);
          if (valid > 4) store_bytes(words + 2 * first + 8, rest_words_hi, 2 * (valid - 4));
        }
      } else if (first < (m + 31) / 32 * 32) {
        // lanes past the end of the last group: their plane bytes are zero
        std::uint8_t* gp = planes + (first / 32) * L::planes * 4 + (first % 32) / 8;
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) gp[4 * q] = 0;
      }
      esc_base += run_escapes[r];
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = static_cast<std::uint64_t>(r) * T * 8 + 8ull * t;
      if (first < m)
        store_run<E>(dst + format::chunk_header_bytes + first * L::elem_size,
                     m - first >= 8 ? 8u : static_cast<unsigned>(m - first), v[r]);
    }
  }
  // header (check field 0 for now) and zero padding
  const std::uint64_t content_end =
      coded ? L::escapes_offset(m) + escapes : format::chunk_header_bytes + m * L::elem_size;
  for (std::uint64_t q = content_end + t; q < size; q += T) dst[q] = 0;
  if (t == 0) {
    format::chunk_header h;
    h.mode = coded ? format::chunk_mode::coded : format::chunk_mode::stored;
    if (coded)
      for (unsigned i = 0; i < format::table_size; ++i) h.table[i] = tab[i];
    h.escapes = coded ? static_cast<std::uint32_t>(escapes) : 0u;
    format::write_chunk_header(dst, h);
  }
  __syncthreads();

  // 6. The check value: the whole chunk's words with the checksum flag, else the header's two.
  if (p.checksum) {
    // dst is 16-byte aligned when the output is 8-byte aligned (chunk offsets are multiples of 16)
    const bool wide = aligned_to(dst, 8);
    std::uint64_t sum = 0;
    const std::uint64_t words = format::check_words(size, true);
    for (std::uint64_t w = t; w < words; w += T)
      sum += format::check_term(w, wide ? reinterpret_cast<const unsigned long long*>(dst)[w]
                                        : format::load_le<std::uint64_t>(dst + 8 * w));
    const std::uint64_t total = block_reduce(tmp.reduce).Sum(sum);
    if (t == 0) format::store_chunk_check(dst, format::check_value(total, words));
  } else if (t == 0) {
    format::store_chunk_check(dst, format::chunk_check(dst, size, false));
  }
}

// One block per tensor: the stream header, its hash over the directory, the padding, and the
// total size. `h` carries the fields common to the batch.
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
  std::uint64_t sum = 0;
  for (std::uint64_t c = threadIdx.x; c < h.chunks; c += Threads)
    sum += format::directory_term(c, format::directory_entry(out, c));
  for (std::uint64_t q = format::header_bytes + format::directory_entry_bytes * h.chunks + threadIdx.x;
       q < format::data_offset(h.chunks); q += Threads)
    out[q] = 0;
  const std::uint64_t directory_sum = block_reduce(tmp).Sum(sum);
  if (threadIdx.x == 0) {
    h.total_bytes = total;
    format::write_header_fields(out, h);
    format::finish_header(out, directory_sum, h.chunks);
    *p.out_bytes = total;
  }
}

}  // namespace zipccl::cuda::detail
