// zipccl: the decompression kernels. A one-block kernel validates the stream header, the
// directory and its hash; then blocks decode chunks independently (grid-stride over chunks, so
// the launch needs no host knowledge of the chunk count). Every field and offset is checked
// before use; the first error found is stored as the call's status.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../codec/chunk_codec.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "../../format/hash.hpp"
#include "../../format/stream.hpp"
#include "block_io.cuh"

namespace zipccl::cuda::detail {

// Lives in the caller's temp storage between the two kernels.
struct decode_state {
  format::stream_header header;
};

}  // namespace zipccl::cuda::detail

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

struct decode_params {
  const std::uint8_t* in;
  std::uint64_t in_bytes;
  std::uint8_t* out;
  std::uint64_t out_capacity;
  status* result;        // device: the call's status, success unless an error is found
  std::uint64_t* count;  // device, optional: the element count
  decode_state* state;
};

// One tensor (items == nullptr: `single`) or a batch; tensor i is decoded by the blocks with
// blockIdx.y == i.
struct decode_batch {
  decode_params single;
  const decompress_item* items;
  status* results;
  std::uint64_t* counts;
  decode_state* states;

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
};

__device__ __forceinline__ void report(status* result, status s) {
  atomicCAS(reinterpret_cast<int*>(result), static_cast<int>(status::success), static_cast<int>(s));
}

template <class E, int Threads>
__global__ void __launch_bounds__(Threads) validate_kernel(decode_batch batch) {
  const decode_params p = batch.item(blockIdx.y);
  using block_reduce = cub::BlockReduce<std::uint64_t, Threads>;
  __shared__ typename block_reduce::TempStorage tmp;
  __shared__ format::stream_header h;
  __shared__ int parsed;
  if (threadIdx.x == 0) {
    format::stream_header r;
    status s = format::parse_header(p.in, p.in_bytes, &r);
    if (s == status::success && r.type != E::id) s = status::type_mismatch;
    if (s == status::success && r.count * sizeof(typename E::bits_type) > p.out_capacity) s = status::buffer_too_small;
    if (s == status::success && p.out == nullptr && r.count != 0) s = status::invalid_argument;
    *p.result = s;
    parsed = s == status::success;
    if (parsed) h = r;
  }
  __syncthreads();
  if (!parsed) return;
  const std::uint64_t data = format::data_offset(h.chunks);
  std::uint64_t sum = 0;
  int bad = 0;
  for (std::uint64_t c = threadIdx.x; c < h.chunks; c += Threads) {
    const std::uint64_t off = format::directory_entry(p.in, c);
    sum += format::hash_term(5 + c, off);
    const std::uint64_t prev = c == 0 ? 0 : format::directory_entry(p.in, c - 1);
    if ((c == 0 && off != data) || (c > 0 && off <= prev) || off >= h.total_bytes) bad = 1;
  }
  for (std::uint64_t q = format::header_bytes + 8 * h.chunks + threadIdx.x; q < data; q += Threads)
    if (p.in[q] != 0) bad = 1;
  const std::uint64_t total = block_reduce(tmp).Sum(sum);
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) {
    status s = status::success;
    if (format::load_le<std::uint64_t>(p.in + 40) != format::hash_finish(format::hash_sum(p.in, 0, 5) + total, 5 + h.chunks))
      s = status::checksum_mismatch;
    else if (bad)
      s = status::corrupt;
    else if (p.in_bytes < h.total_bytes)
      s = status::truncated;
    *p.result = s;
    p.state->header = h;
    if (p.count && s == status::success) *p.count = h.count;
  }
}

template <class E, int Threads>
__global__ void __launch_bounds__(Threads) decode_kernel(decode_batch batch) {
  const decode_params p = batch.item(blockIdx.y);
  using bits = typename E::bits_type;
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  using block_scan = cub::BlockScan<std::uint32_t, Threads>;
  using block_reduce = cub::BlockReduce<std::uint64_t, Threads>;
  __shared__ union {
    typename block_scan::TempStorage scan;
    typename block_reduce::TempStorage reduce;
  } tmp;
  __shared__ format::stream_header h;
  __shared__ std::uint8_t ch[format::chunk_header_bytes];  // the chunk header's bytes
  __shared__ std::uint64_t span_s;
  __shared__ int ok_s;

  if (*p.result != status::success) return;
  if (threadIdx.x == 0) h = p.state->header;
  __syncthreads();
  const unsigned t = threadIdx.x;
  const bool whole = (h.flags & format::flag_checksum) != 0;

  for (std::uint64_t c = blockIdx.x; c < h.chunks; c += gridDim.x) {
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    const std::uint64_t off = format::directory_entry(p.in, c);
    const std::uint8_t* chunk = p.in + off;
    if (t == 0) {
      const std::uint64_t end = c + 1 < h.chunks ? format::directory_entry(p.in, c + 1) : h.total_bytes;
      span_s = end - off;  // the validate kernel checked off < end <= total_bytes <= in_bytes
      ok_s = 0;
      if (span_s >= format::chunk_header_bytes) {
        for (unsigned i = 0; i < format::chunk_header_bytes; ++i) ch[i] = chunk[i];
        const status s = codec_detail::check_chunk_header<E>(format::read_chunk_header(ch), span_s, m);
        if (s == status::success) ok_s = 1;
        else report(p.result, s);
      } else {
        report(p.result, status::corrupt);
      }
    }
    __syncthreads();
    if (!ok_s) return;
    const std::uint64_t span = span_s;
    const format::chunk_header hd = format::read_chunk_header(ch);

    // check value and zero padding
    std::uint64_t sum = 0;
    const std::uint64_t words = whole ? span / 8 : 2;
    for (std::uint64_t w = t; w < words; w += Threads) {
      std::uint64_t word = format::load_le<std::uint64_t>(chunk + 8 * w);
      if (w == 1) word &= 0xFFFFFFFFull;
      sum += format::hash_term(w, word);
    }
    const std::uint64_t total = block_reduce(tmp.reduce).Sum(sum);
    int bad = 0;
    for (std::uint64_t q = codec_detail::chunk_content_end<E>(hd, m) + t; q < span; q += Threads)
      if (chunk[q] != 0) bad = 1;
    if (t == 0 && format::fold32(format::hash_finish(total, words)) != hd.check) {
      report(p.result, status::checksum_mismatch);
      bad = 1;
    }
    if (__syncthreads_or(bad)) {
      if (t == 0) report(p.result, status::corrupt);
      return;
    }

    std::uint8_t* dst = p.out + c * h.chunk_elems * L::elem_size;
    if (hd.mode == format::chunk_mode::stored) {
      for (std::uint64_t first = 8ull * t; first < m; first += 8ull * Threads) {
        const unsigned valid = m - first >= 8 ? 8u : static_cast<unsigned>(m - first);
        bits v[8];
        load_run<E>(chunk + format::chunk_header_bytes + first * L::elem_size, valid, v);
        store_run<E>(dst + first * L::elem_size, valid, v);
      }
      __syncthreads();
      continue;
    }

    const std::uint8_t* planes = chunk + L::planes_offset();
    const std::uint8_t* wsec = chunk + L::words_offset(m);
    const std::uint8_t* bsec = chunk + L::bytes_offset(m);
    const std::uint8_t* esc = chunk + L::escapes_offset(m);
    const std::uint64_t table = G::pack_table(hd.table);
    const std::uint64_t groups_end = (m + 31) / 32 * 32;
    std::uint64_t esc_base = 0;
    for (std::uint64_t base = 0; base < groups_end; base += 8ull * Threads) {
      const std::uint64_t first = base + 8ull * t;
      const unsigned valid = first >= m ? 0u : (m - first >= 8 ? 8u : static_cast<unsigned>(m - first));
      std::uint32_t pl[L::planes] = {};
      if (first < groups_end) {
        const std::uint8_t* gp = planes + (first / 32) * L::planes * 4 + (first % 32) / 8;
        const std::uint32_t dead = ~((1u << valid) - 1u) & 0xFFu;
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) {
          pl[q] = gp[4 * q];
          if (pl[q] & dead) bad = 1;  // bits for lanes past the end
        }
      }
      const std::uint32_t live = (1u << valid) - 1u;
      const std::uint32_t emask = ~(pl[0] | pl[1] | pl[2]) & live;
      std::uint32_t before = 0, run_total = 0;  // every thread receives the run's total
      block_scan(tmp.scan).ExclusiveSum(static_cast<std::uint32_t>(__popc(emask)), before, run_total);
      if (valid) {
        const std::uint64_t rest_bytes = load_bytes(bsec + first, valid);
        std::uint64_t wlo = 0, whi = 0;
        if constexpr (L::word_bytes != 0) {
          wlo = load_bytes(wsec + 2 * first, valid >= 4 ? 8u : 2 * valid);
          if (valid > 4) whi = load_bytes(wsec + 2 * first + 8, 2 * (valid - 4));
        }
        std::uint64_t k = esc_base + before;
        bits v[8];
#pragma unroll
        for (unsigned i = 0; i < 8; ++i) {
          const std::uint32_t code = G::lane_code(pl, i);
          std::uint32_t e = G::table_exponent(table, code);
          if (i < valid && code == 0) {
            if (k >= hd.escapes) {
              bad = 1;
            } else {
              e = esc[k++];
              if (e >= E::exponent_count) bad = 1;
            }
          }
          const std::uint32_t word =
              L::word_bytes ? static_cast<std::uint32_t>(((i < 4 ? wlo : whi) >> (16 * (i & 3))) & 0xFFFFu) : 0u;
          v[i] = G::join_lane(pl, i, e, static_cast<std::uint32_t>((rest_bytes >> (8 * i)) & 0xFFu), word);
        }
        store_run<E>(dst + first * L::elem_size, valid, v);
      }
      __syncthreads();  // the scan's temp storage is reused by the next run
      esc_base += run_total;
    }
    if (t == 0 && esc_base != hd.escapes) bad = 1;
    if (__syncthreads_or(bad)) {
      if (t == 0) report(p.result, status::corrupt);
      return;
    }
  }
}

}  // namespace zipccl::cuda::detail
