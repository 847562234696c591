// zipccl: cuda::block_decode, a block-level collective that validates and decodes one chunk of a
// stream inside the caller's own kernel, in the manner of cub::BlockReduce:
//
//   using decoder = zipccl::cuda::block_decode<zipccl::bf16, 256>;
//   __shared__ typename decoder::TempStorage temp;
//   const zipccl::status s = decoder(temp).decode_runs(chunk, span, m, checksum,
//       [&](std::uint64_t first, unsigned valid, const std::uint16_t (&v)[8]) {
//         // elements first .. first + valid - 1 of the chunk, in registers: fuse them into a
//         // reduction, an optimizer step or a GEMM prologue without a round trip through memory
//       });
//
// Every thread of the block must call it, with the same arguments; every thread gets the same
// status back. The chunk's bytes are untrusted: the header rules, the check value and the zero
// padding are checked first (the same rules, in the same order, as the host's decode_chunk, so a
// bad chunk gives the same status on either executor), then every code, escape and padding bit
// while decoding. Accesses stay inside [chunk, chunk + span).
//
// Where a chunk is: chunk c of a stream starts at format::directory_entry(stream, c) and ends at
// format::chunk_end(stream, header, c); it holds format::chunk_elements(header.count,
// header.chunk_elems, c) elements; `checksum` is the header's flag_checksum. Validate the stream
// header and directory first (cuda::decompress does it in its own kernel; a caller that decodes
// chunks by hand uses format::read_header on the host or in a kernel).
//
// decode_runs() hands each thread runs of up to 8 consecutive elements (raw bit patterns). Runs go
// to threads in a fixed order: run k of the chunk (elements 8k .. 8k + 7) to thread k % Threads,
// so two chunks of the same size decoded one after the other give every thread the same element
// indices. When the status is not success, some runs may already have been handed out: treat
// them as garbage. One block, any Threads that is a multiple of 32 (64..1024).
#pragma once

#include <cub/util_type.cuh>

#include <cstdint>

#include "../codec/chunk_codec.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/chunk.hpp"
#include "detail/block_io.cuh"

namespace zipccl::cuda {

template <class E, int Threads>
class block_decode {
  static_assert(is_element_v<E>, "block_decode: E must be zipccl::bf16, fp16 or fp32");
  static_assert(Threads % 32 == 0 && Threads >= 64 && Threads <= 1024,
                "block_decode: Threads must be a multiple of 32 between 64 and 1024");
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  using block_scan = typename detail::block_ops<Threads>::scan;
  using block_reduce = typename detail::block_ops<Threads>::reduce;

  struct storage {
    typename detail::block_ops<Threads>::storage cub;
    std::uint8_t header[format::chunk_header_bytes];
    int verdict;
  };

 public:
  using bits_type = typename E::bits_type;

  // Shared memory for one call at a time; reusable after the call returns.
  struct TempStorage : cub::Uninitialized<storage> {};

  __device__ __forceinline__ explicit block_decode(TempStorage& temp) : s_(temp.Alias()) {}

  // Checks a chunk of m elements spanning `span` bytes without decoding it: the header rules, the
  // check value (`checksum`: the stream's flag_checksum) and the zero padding.
  __device__ status check(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum) {
    format::chunk_header h;
    return check_chunk(chunk, span, m, checksum, &h);
  }

  // Checks and decodes; op(first, valid, v) receives each run (see the top of this file).
  template <class Op>
  __device__ status decode_runs(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum,
                                Op&& op) {
    format::chunk_header h;
    const status s = check_chunk(chunk, span, m, checksum, &h);
    if (s != status::success) return s;
    if (h.mode == format::chunk_mode::stored) {
      for (std::uint64_t first = 8ull * threadIdx.x; first < m; first += 8ull * Threads) {
        const unsigned valid = m - first >= 8 ? 8u : static_cast<unsigned>(m - first);
        bits_type v[8];
        detail::load_run<E>(chunk + format::chunk_header_bytes + first * L::elem_size, valid, v);
        op(first, valid, v);
      }
      return status::success;
    }
    return decode_coded(chunk, m, h, op);
  }

  // Checks and decodes into out (m elements, any alignment).
  __device__ status decode(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum,
                           std::uint8_t* out) {
    return decode_runs(chunk, span, m, checksum, [out](std::uint64_t first, unsigned valid, const bits_type(&v)[8]) {
      detail::store_run<E>(out + first * L::elem_size, valid, v);
    });
  }

 private:
  // An 8-byte little-endian word, with one wide load when the address allows.
  __device__ __forceinline__ static std::uint64_t word_at(const std::uint8_t* p) {
    if (detail::aligned_to(p, 8)) return *reinterpret_cast<const unsigned long long*>(p);
    return format::load_le<std::uint64_t>(p);
  }

  // Sets *h and returns a block-uniform status: codec_detail::check_chunk's rules and order.
  __device__ status check_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum,
                                format::chunk_header* h) {
    const unsigned t = threadIdx.x;
    if (t == 0) {
      status s = status::corrupt;
      if (span >= format::chunk_header_bytes) {
        for (unsigned i = 0; i < format::chunk_header_bytes; ++i) s_.header[i] = chunk[i];
        s = codec_detail::check_chunk_header<E>(format::read_chunk_header(s_.header), span, m);
      }
      s_.verdict = static_cast<int>(s);
    }
    __syncthreads();
    status s = static_cast<status>(s_.verdict);
    if (s != status::success) {
      __syncthreads();  // every thread has read the verdict before a next call rewrites it
      return s;
    }
    *h = format::read_chunk_header(s_.header);

    std::uint64_t sum = 0;
    const std::uint64_t words = format::check_words(span, checksum);
    for (std::uint64_t w = t; w < words; w += Threads) sum += format::check_term(w, word_at(chunk + 8 * w));
    const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(sum);
    int bad = 0;
    for (std::uint64_t q = codec_detail::chunk_content_end<E>(*h, m) + t; q < span; q += Threads)
      if (chunk[q] != 0) bad = 1;
    bad = __syncthreads_or(bad);  // also the barrier before the verdict is rewritten
    if (t == 0) {
      s = format::check_value(total, words) != h->check ? status::checksum_mismatch
                                                         : (bad ? status::corrupt : status::success);
      s_.verdict = static_cast<int>(s);
    }
    __syncthreads();
    s = static_cast<status>(s_.verdict);
    __syncthreads();  // the verdict may be rewritten by the next call
    return s;
  }

  // The coded body: per pass, thread t takes run base/8 + t; escapes are consumed in element
  // order through a block-wide scan of each pass's escape counts.
  template <class Op>
  __device__ status decode_coded(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h, Op& op) {
    const unsigned t = threadIdx.x;
    const std::uint8_t* planes = chunk + L::planes_offset();
    const std::uint8_t* wsec = chunk + L::words_offset(m);
    const std::uint8_t* bsec = chunk + L::bytes_offset(m);
    const std::uint8_t* esc = chunk + L::escapes_offset(m);
    const std::uint64_t table = G::pack_table(h.table);
    const std::uint64_t groups_end = L::groups(m) * format::group_elems;
    std::uint64_t esc_base = 0;
    int bad = 0;
    for (std::uint64_t base = 0; base < groups_end; base += 8ull * Threads) {
      const std::uint64_t first = base + 8ull * t;
      const unsigned valid = first >= m ? 0u : (m - first >= 8 ? 8u : static_cast<unsigned>(m - first));
      std::uint32_t pl[L::planes] = {};
      if (first < groups_end) {
        // group first / 32, byte (first % 32) / 8 of each of its plane words
        const std::uint8_t* gp = planes + (first / format::group_elems) * L::planes * 4 + (first % 32) / 8;
        const std::uint32_t dead = ~((1u << valid) - 1u) & 0xFFu;
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) {
          pl[q] = gp[4 * q];
          if (pl[q] & dead) bad = 1;  // bits for lanes past the end
        }
      }
      const std::uint32_t live = (1u << valid) - 1u;
      const std::uint32_t emask = ~(pl[0] | pl[1] | pl[2]) & live;
      std::uint32_t before = 0, pass_escapes = 0;  // every thread receives the pass's total
      block_scan(s_.cub.scan_storage).ExclusiveSum(static_cast<std::uint32_t>(__popc(emask)), before, pass_escapes);
      if (valid) {
        const std::uint64_t rest_bytes = detail::load_bytes(bsec + first, valid);
        std::uint64_t wlo = 0, whi = 0;
        if constexpr (L::word_bytes != 0) {
          wlo = detail::load_bytes(wsec + 2 * first, valid >= 4 ? 8u : 2 * valid);
          if (valid > 4) whi = detail::load_bytes(wsec + 2 * first + 8, 2 * (valid - 4));
        }
        std::uint64_t k = esc_base + before;
        bits_type v[8];
#pragma unroll
        for (unsigned i = 0; i < 8; ++i) {
          const std::uint32_t code = G::lane_code(pl, i);
          std::uint32_t e = G::table_exponent(table, code);
          if (i < valid && code == 0) {
            if (k >= h.escapes) {
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
        op(first, valid, v);
      }
      __syncthreads();  // the scan's temp storage is reused by the next pass
      esc_base += pass_escapes;
    }
    if (esc_base != h.escapes) bad = 1;  // esc_base is the same in every thread
    return __syncthreads_or(bad) ? status::corrupt : status::success;
  }

  storage& s_;
};

}  // namespace zipccl::cuda
