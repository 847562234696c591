// zipccl: the AVX2 symbol counts of a rANS chunk's body, which the encoder's plan takes
// (rans_loops::plan_chunk, through encode_kernel::count): count_symbols for bf16 and fp32 (the
// exponent byte's exact counts, by byte counters over a window of the busiest fourteen symbols,
// or avx2::add_exponent_counts' tables where the symbols spread wider) and fp16_counts for fp16
// (rans::counts_from_sample's rule on the sampled groups' high bytes, and every symbol seen).
// busiest_window and finish_fp16_counts serve the AVX-512 counts too (avx512_rans_counts.hpp).
// The counts are codec_detail::plan_rans_chunk's, so the plan and the bytes are the reference's
// (test_host_simd compares the counts themselves). Needs AVX2 (where ZIPCCL_HAS_AVX2 holds).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx2.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

namespace rans = codec_detail::rans;

// The first of the W consecutive symbols of 1..255 whose counts sum highest (the first such
// window), in 1 .. 256 - W: never symbol 0, which the vector counters count apart; *held is their
// sum. The window of the symbol counters here and in avx512_rans_counts.hpp.
template <unsigned W>
unsigned busiest_window(const std::uint32_t* counts, std::uint64_t* held) {
  static_assert(W >= 1 && W < rans::symbols, "busiest_window: a window inside 1..255");
  unsigned lo = 1;
  std::uint64_t best = 0, run = 0;
  for (unsigned v = 1; v < rans::symbols; ++v) {  // run: the counts of v - W + 1 .. v
    run += counts[v];
    if (v > W) run -= counts[v - W];
    if (v >= W && run > best) best = run, lo = v - W + 1;
  }
  *held = best;
  return lo;
}

// The end of fp16_counts (and of avx512::rans_simd::fp16_counts): the counts of a sampling body
// of b elements by rans::counts_from_sample, from the sampled groups' eight partial tables, the
// map of the symbols seen (bit s % 8 of seen[s / 8]) and the counts of 0x00 and 0x80.
inline void finish_fp16_counts(const std::uint32_t (&part)[8][rans::symbols], const std::uint8_t* seen, std::uint64_t pos,
                               std::uint64_t negs, std::uint64_t b, std::uint32_t* counts) {
  std::uint32_t sampled[rans::symbols];
  for (unsigned v = 0; v < rans::symbols; ++v) {
    std::uint32_t c = 0;
    for (unsigned k = 0; k < 8; ++k) c += part[k][v];
    sampled[v] = c;
    counts[v] = (seen[v / 8] >> (v % 8)) & 1u;
  }
  counts[0x00] = static_cast<std::uint32_t>(pos);
  counts[0x80] = static_cast<std::uint32_t>(negs);
  rans::counts_from_sample(sampled, counts, b);
}

// fp16's symbol counts for plan_chunk (codec_detail::plan_rans_chunk's): a body too small to
// sample (rans::samples_counts) by avx2::byte_histogram's eight partial tables of high bytes;
// otherwise by rans::counts_from_sample, the sampled groups' high bytes into the same tables and,
// for every group, its 32 high bytes in one register (in the packs' order), their bits looked up in
// a bitmap of the symbols seen so far (two vpshufb for the bitmap's byte, chosen by the symbol's
// top bit, and one for the bit), a group with a symbol not yet seen marking it one by one (at most
// once per symbol of the body), and 0x00 and 0x80 counted in byte counters (a compare and a
// subtract each, emptied every 255 groups), faster than the full histogram (docs/design.md,
// "fp16's sampled counts"); AVX-512 CPUs take avx512::rans_simd::fp16_counts for dense bodies.
inline void fp16_counts(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                        std::uint32_t* counts) {
  if (!rans::samples_counts<fp16>(shape.elems)) {
    avx2::byte_histogram<fp16, false>(in, m, shape, counts, rans::symbols);
    return;
  }
  alignas(64) std::uint32_t part[8][rans::symbols] = {};
  alignas(32) std::uint8_t seen[32] = {};  // bit s % 8 of byte s / 8: symbol s seen
  alignas(32) std::uint8_t sym_at[32];
  const __m256i bit_of = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,  //
                                          1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const __m256i low4 = _mm256_set1_epi8(0x0F), low3 = _mm256_set1_epi8(0x07), zero = _mm256_setzero_si256();
  const __m256i neg = _mm256_set1_epi8(static_cast<char>(0x80));
  const auto seen_half = [&](int h) {
    return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(seen + 16 * h)));
  };
  __m256i seen_lo = seen_half(0), seen_hi = seen_half(1), n_pos = zero, n_neg = zero;
  std::uint64_t pos = 0, negs = 0;
  unsigned pending = 0;  // groups in the byte counters
  const auto flush = [&] {
    const __m256i s = _mm256_sad_epu8(n_pos, zero), t = _mm256_sad_epu8(n_neg, zero);
    alignas(32) std::uint64_t a[4], b[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(a), s);
    _mm256_store_si256(reinterpret_cast<__m256i*>(b), t);
    pos += a[0] + a[1] + a[2] + a[3];
    negs += b[0] + b[1] + b[2] + b[3];
    n_pos = n_neg = zero;
    pending = 0;
  };
  const auto mark = [&](unsigned v) { seen[v / 8] = static_cast<std::uint8_t>(seen[v / 8] | (1u << (v % 8))); };
  for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    const std::uint8_t* hi = in + 2 * first + 1;  // (little-endian: the high byte second)
    const bool sample = rans::sampled_group(first / format::group_elems);
    if (sample) add_high_bytes(part, hi, lanes);
    if (lanes < format::group_elems) {
      for (unsigned i = 0; i < lanes; ++i) {
        const unsigned v = hi[2 * i];
        mark(v);
        pos += v == 0x00;
        negs += v == 0x80;
      }
      seen_lo = seen_half(0), seen_hi = seen_half(1);
      return;
    }
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * first));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * first + 32));
    const __m256i sym = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    const __m256i at = _mm256_and_si256(_mm256_srli_epi16(sym, 3), low4);  // bits 6..3: the byte in its half
    const __m256i byte = _mm256_blendv_epi8(_mm256_shuffle_epi8(seen_lo, at), _mm256_shuffle_epi8(seen_hi, at), sym);
    const __m256i bit = _mm256_shuffle_epi8(bit_of, _mm256_and_si256(sym, low3));
    n_pos = _mm256_sub_epi8(n_pos, _mm256_cmpeq_epi8(sym, zero));
    n_neg = _mm256_sub_epi8(n_neg, _mm256_cmpeq_epi8(sym, neg));
    if (++pending == 255) flush();
    const std::uint32_t known = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(byte, bit), bit)));
    if (known != 0xFFFFFFFFu) {  // (rare: a symbol's first group)
      _mm256_store_si256(reinterpret_cast<__m256i*>(sym_at), sym);
      for (std::uint32_t new_lanes = ~known; new_lanes != 0; new_lanes &= new_lanes - 1) mark(sym_at[__builtin_ctz(new_lanes)]);
      seen_lo = seen_half(0), seen_hi = seen_half(1);
    }
  });
  flush();
  finish_fp16_counts(part, seen, pos, negs, shape.elems, counts);
}

// The exact counts of a body's symbols, bf16 and fp32 (the exponent byte), for plan_chunk (fp16's
// high bytes, 51-120 values a chunk, take fp16_counts). The body's first four groups
// (zero groups skipped) are counted one by one; then, per batch of up to 255 full groups (as many
// as a byte counter holds), each group's 32 symbols are made bytes in one register (in whatever
// order the packs leave them), less the window's first symbol lo, and stored to a stack buffer;
// symbol 0 (zeros, subnormals) is counted there by a compare, and the symbols outside the window
// lo .. lo + 13 one by one from memory. Two passes over the buffer then count the window's
// fourteen symbols, seven registers of byte counters a pass (a compare and a subtract per symbol
// and group). The window is placed before the first batch and after each on the fourteen busiest
// symbols of 1..255 so far. Where
// even that window misses more than 1/32 of the elements counted so far, symbol 0 apart (more than
// a quarter after the first four groups alone; symbols spread wider than any window, e.g. random
// bits), the rest of the body goes to avx2::add_exponent_counts, whose tables are faster then
// than the misses' branches. (The test is on the best window over everything counted, not on the
// misses of the last batch: a window placed from the first four groups can miss much of a
// gradient chunk's first batch, and then moves.) The window's counters beat the tables
// (docs/decisions.md, "Host kernels: AVX2"); two passes of seven registers, and no compares
// in the first loop, keep the counters within the sixteen registers.
template <class E>
void count_symbols(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint32_t* counts) {
  static_assert(!std::is_same_v<E, fp16>, "count_symbols: fp16's symbols fill no window of fourteen");
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  using S = rans::split<E>;
  constexpr unsigned W = 14, P = 7, batch = 255, first_groups = 4;
  static_assert(W % P == 0, "count_symbols: whole passes");
  for (unsigned v = 0; v < rans::symbols; ++v) counts[v] = 0;
  const std::uint64_t groups = (m + format::group_elems - 1) / format::group_elems;
  const auto count_group = [&](std::uint64_t g) {  // one by one
    const std::uint8_t* p = in + g * format::group_elems * L::elem_size;
    const unsigned lanes = format::group_lanes(m, g);
    for (unsigned i = 0; i < lanes; ++i) ++counts[S::symbol(format::load_le<bits_type>(p + i * L::elem_size))];
  };
  // a group's 32 symbols as bytes
  const auto symbol_bytes = [](const std::uint8_t* p) {
    if constexpr (std::is_same_v<E, fp32>) {
      __m256i v[4];
      for (int k = 0; k < 4; ++k)
        v[k] = _mm256_and_si256(_mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k)), 23),
                                _mm256_set1_epi32(0xFF));
      return _mm256_packus_epi16(_mm256_packus_epi32(v[0], v[1]), _mm256_packus_epi32(v[2], v[3]));
    } else {
      __m256i v[2];
      for (int k = 0; k < 2; ++k)  // (bits 14..7 to the high byte, then down)
        v[k] = _mm256_srli_epi16(_mm256_slli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k)), 1), 8);
      return _mm256_packus_epi16(v[0], v[1]);
    }
  };
  // the element of the group behind each byte of symbol_bytes (per 16 bytes, bf16: eight words of
  // each register; fp32: four dwords of each of the four)
  static constexpr std::uint8_t byte_lane[2][32] = {
      {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
      {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}};
  const std::uint8_t* lane_of = byte_lane[std::is_same_v<E, fp32> ? 1 : 0];
  const auto sum_bytes = [](__m256i c) {
    const __m256i s = _mm256_sad_epu8(c, _mm256_setzero_si256());
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
  };
  std::uint64_t g = 0, seen = 0, held = 0;  // seen: the elements counted so far
  for (unsigned first = 0; g < groups && first < first_groups; ++g)  // (the body's first groups)
    if (!codec_detail::in_zero_group(shape, g)) count_group(g), seen += format::group_lanes(m, g), ++first;
  alignas(32) __m256i buf[batch];
  for (std::uint64_t share = 4; g < groups; share = 32) {
    // (lo in 1 .. 256 - W, so symbol 0's byte less lo, 256 - lo, is W or more: never in the window)
    const unsigned lo = busiest_window<W>(counts, &held);
    assert(lo >= 1 && lo <= rans::symbols - W);
    // more than 1/32 of the elements so far outside the best window (and not 0): the misses'
    // branches would cost more than the tables. (After the first groups alone, more than a
    // quarter: a few outliers there must not cost a chunk its counters.)
    if (share * (seen - held - counts[0]) > seen) {
      avx2::add_exponent_counts<E>(in, m, shape, g, counts, rans::symbols);
      return;
    }
    const __m256i base = _mm256_set1_epi8(static_cast<char>(lo)), last = _mm256_set1_epi8(static_cast<char>(W - 1));
    __m256i zeros = _mm256_setzero_si256();
    unsigned n = 0;
    for (const std::uint64_t stop = g + std::min<std::uint64_t>(batch, groups - g); g < stop; ++g) {
      if (codec_detail::in_zero_group(shape, g)) continue;
      if (format::group_lanes(m, g) < format::group_elems) {
        count_group(g);
        seen += format::group_lanes(m, g);
        continue;
      }
      const __m256i b = symbol_bytes(in + g * format::group_elems * L::elem_size);
      const __m256i d = _mm256_sub_epi8(b, base), z = _mm256_cmpeq_epi8(b, _mm256_setzero_si256());
      zeros = _mm256_sub_epi8(zeros, z);
      const unsigned out = ~static_cast<unsigned>(
          _mm256_movemask_epi8(_mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(d, last), d), z)));
      if (out != 0) {  // (from memory: bytes stored from b and loaded one by one wait on the store)
        const std::uint8_t* p = in + g * format::group_elems * L::elem_size;
        for (unsigned o = out; o != 0; o &= o - 1)
          ++counts[S::symbol(format::load_le<bits_type>(p + L::elem_size * lane_of[_tzcnt_u32(o)]))];
      }
      _mm256_store_si256(buf + n++, d);
    }
    seen += std::uint64_t(format::group_elems) * n;
    counts[0] += sum_bytes(zeros);
    for (unsigned j = 0; j < W; j += P) {
      __m256i acc[P], want[P];
      for (unsigned k = 0; k < P; ++k) acc[k] = _mm256_setzero_si256(), want[k] = _mm256_set1_epi8(static_cast<char>(j + k));
      for (unsigned i = 0; i < n; ++i) {
        const __m256i d = _mm256_load_si256(buf + i);
        for (unsigned k = 0; k < P; ++k) acc[k] = _mm256_sub_epi8(acc[k], _mm256_cmpeq_epi8(d, want[k]));
      }
      for (unsigned k = 0; k < P; ++k) counts[lo + j + k] += sum_bytes(acc[k]);
    }
  }
}

}  // namespace zipccl::host::detail::avx2::rans_simd
