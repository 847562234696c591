// zipccl: the AVX-512 counts of a rANS chunk's body, which the encoder's plan takes
// (rans_loops::plan_chunk, through avx512::rans_simd::encode_kernel's count and zeros):
// count_symbols for bf16 and fp32 (the exponent byte's exact counts: two groups' symbols a
// register of 64 bytes, byte counters for a window of sixteen symbols and for symbol 0, the others
// one by one), fp16_counts for fp16 (rans::counts_from_sample's rule; bodies with a zero mask or
// too small to sample go to avx2::rans_simd::fp16_counts, whose helpers it shares:
// avx2_rans_counts.hpp), and count_zeros (the numbers of +0.0 and -0.0). The counts are
// codec_detail's, so the plan and the bytes are the reference's (test_host_simd compares them).
// Needs AVX-512 F, BW, VBMI and VBMI2 with AVX2 (where ZIPCCL_HAS_AVX512 and ZIPCCL_HAS_AVX2 hold).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx2.hpp"
#include "avx2_rans_counts.hpp"

namespace zipccl::host::detail::avx512::rans_simd {

namespace rans = codec_detail::rans;

// The exact counts of a body's symbols (bf16, fp32: the exponent byte), for plan_chunk. The
// symbols of two groups make one register of 64 bytes (in whatever order the packs leave them);
// the sixteen symbols of a window and symbol 0 (zeros, subnormals) each have a register of byte
// counters that a compare's mask increments, and the few symbols outside take a scalar count. The
// window starts where the first group's largest symbol puts it and moves to the sixteen busiest
// symbols so far whenever the byte counters are emptied into the counts (after 4 registers, then
// every 255, before a counter can wrap), if too many symbols fell outside it.
template <class E>
void count_symbols(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint32_t* counts) {
  static_assert(!std::is_same_v<E, fp16>, "count_symbols: fp16's symbols fill no window of sixteen");
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  using S = rans::split<E>;
  constexpr unsigned W = 16;
  for (unsigned v = 0; v < rans::symbols; ++v) counts[v] = 0;
  // a group's 32 symbols as 16-bit values in one register
  const auto symbols16 = [&](const std::uint8_t* g) {
    if constexpr (std::is_same_v<E, fp32>) {
      const __m512i ff = _mm512_set1_epi32(0xFF);
      return _mm512_packus_epi32(_mm512_and_si512(_mm512_srli_epi32(_mm512_loadu_si512(g), 23), ff),
                                 _mm512_and_si512(_mm512_srli_epi32(_mm512_loadu_si512(g + 64), 23), ff));
    } else {
      return _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(g), 7), _mm512_set1_epi16(0xFF));
    }
  };
  __m512i acc[W], zeros = _mm512_setzero_si512();
  for (unsigned j = 0; j < W; ++j) acc[j] = _mm512_setzero_si512();
  unsigned lo = 0, filled = 0, flush_at = 4;  // lo = 0: no window yet
  std::uint64_t outside = 0, counted = 0;
  const auto flush = [&] {
    const auto sum = [](__m512i c) {
      return static_cast<std::uint32_t>(_mm512_reduce_add_epi64(_mm512_sad_epu8(c, _mm512_setzero_si512())));
    };
    for (unsigned j = 0; j < W; ++j) counts[lo + j] += sum(acc[j]), acc[j] = _mm512_setzero_si512();
    counts[0] += sum(zeros);
    zeros = _mm512_setzero_si512();
    filled = 0;
    if (8 * outside > counted) {  // more than 1/8 outside: the busiest sixteen (of 1..255) so far
      std::uint64_t held;
      lo = avx2::rans_simd::busiest_window<W>(counts, &held);
    }
    outside = counted = 0;
  };
  const auto count64 = [&](__m512i bytes, __mmask64 valid) {
    if (lo == 0) {  // the window's top three above the first group's largest symbol
      alignas(64) std::uint8_t b[64];
      _mm512_storeu_si512(b, bytes);
      unsigned top = 0;
      for (unsigned i = 0; i < 64; ++i)
        if (((valid >> i) & 1u) && b[i] > top) top = b[i];
      lo = top + 3 < W ? 1u : (top + 3 > rans::symbols - 1 ? rans::symbols - W : top + 3 - W + 1);
    }
    const __m512i d = _mm512_sub_epi8(bytes, _mm512_set1_epi8(static_cast<char>(lo)));
    const __m512i one = _mm512_set1_epi8(1);
    for (unsigned j = 0; j < W; ++j) {
      const __mmask64 k = _mm512_mask_cmpeq_epi8_mask(valid, d, _mm512_set1_epi8(static_cast<char>(j)));
      acc[j] = _mm512_mask_add_epi8(acc[j], k, acc[j], one);
    }
    const __mmask64 z = _mm512_mask_cmpeq_epi8_mask(valid, bytes, _mm512_setzero_si512());
    zeros = _mm512_mask_add_epi8(zeros, z, zeros, one);
    const __mmask64 out = _mm512_mask_cmpge_epu8_mask(valid & ~z, d, _mm512_set1_epi8(static_cast<char>(W)));
    if (out) {
      alignas(64) std::uint8_t b[64];
      _mm512_storeu_si512(b, bytes);
      for (std::uint64_t o = out; o; o &= o - 1) ++counts[b[_tzcnt_u64(o)]];
      outside += static_cast<unsigned>(_mm_popcnt_u64(out));
    }
    counted += static_cast<unsigned>(_mm_popcnt_u64(valid));
    if (++filled == flush_at) {
      flush();
      flush_at = 255;
    }
  };
  __m512i pending = _mm512_setzero_si512();
  bool have = false;
  avx2::for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    if (lanes < format::group_elems) {
      for (unsigned i = 0; i < lanes; ++i) ++counts[S::symbol(format::load_le<bits_type>(in + (first + i) * L::elem_size))];
      return;
    }
    const __m512i s = symbols16(in + first * L::elem_size);
    if (have) count64(_mm512_packus_epi16(pending, s), ~__mmask64{0});
    else pending = s;
    have = !have;
  });
  // (packus_epi16 takes bytes 0..7 of each 16 from its first operand)
  if (have) count64(_mm512_packus_epi16(pending, pending), __mmask64{0x00FF00FF00FF00FFull});
  flush();
}

// fp16's symbol counts for plan_chunk, rans::counts_from_sample's rule as avx2::rans_simd::fp16_counts
// takes it, for a dense body that samples (a body with a zero mask, or too small to sample, goes
// to that function): 64 elements a step, their high bytes by one vpermt2b, looked up in a
// map of the symbols seen so far (a vpermb for the map's byte, from a register holding the
// 32-byte map twice so that the index needs no mask, and a vpermb for the bit), a step with a
// symbol not yet seen marking it one by one, and 0x00 and 0x80 counted by a compare and a popcount
// each; the last m % 64 elements one by one; then, in a pass of their own, the sampled groups'
// high bytes one by one into eight partial tables. Faster than the AVX2 function over a chunk in
// the L2 cache, as plan_body's zero-group scan leaves it (docs/design.md, "fp16's sampled
// counts").
inline void fp16_counts(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                        std::uint32_t* counts) {
  if (!rans::samples_counts<fp16>(shape.elems) || shape.zero_mask != nullptr) {
    avx2::rans_simd::fp16_counts(in, m, shape, counts);
    return;
  }
  alignas(64) std::uint32_t part[8][rans::symbols] = {};
  alignas(64) std::uint8_t seen[64] = {};  // bit s % 8 of bytes s / 8 and 32 + s / 8: symbol s seen
  alignas(64) std::uint8_t sym_at[64];
  alignas(64) static constexpr std::uint8_t bit_of[64] = {
      1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
      1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  alignas(64) static constexpr std::uint8_t high_bytes[64] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33,  35,  37,  39,  41,  43,
      45, 47, 49, 51, 53, 55, 57, 59, 61, 63, 65, 67, 69, 71, 73, 75, 77,  79,  81,  83,  85,  87,
      89, 91, 93, 95, 97, 99, 101, 103, 105, 107, 109, 111, 113, 115, 117, 119, 121, 123, 125, 127};
  const auto mark = [&](unsigned v) {
    seen[v / 8] = static_cast<std::uint8_t>(seen[v / 8] | (1u << (v % 8)));
    seen[32 + v / 8] = seen[v / 8];
  };
  std::uint64_t pos = 0, negs = 0;
  const __m512i bits = _mm512_load_si512(bit_of), pick = _mm512_load_si512(high_bytes), zero = _mm512_setzero_si512();
  const __m512i neg = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i map = _mm512_load_si512(seen);
  const std::uint64_t steps = m / 64;
  for (std::uint64_t j = 0; j < steps; ++j) {
    const std::uint8_t* p = in + 128 * j;
    const __m512i sym = _mm512_permutex2var_epi8(_mm512_loadu_si512(p), pick, _mm512_loadu_si512(p + 64));
    // byte s / 8 of the map (vpermb takes the index's low six bits: bit 5, from the next byte's
    // shift, picks the map's second copy), and bit s % 8
    const __m512i byte = _mm512_permutexvar_epi8(_mm512_srli_epi16(sym, 3), map);
    const __mmask64 known = _mm512_test_epi8_mask(byte, _mm512_permutexvar_epi8(sym, bits));
    pos += static_cast<std::uint64_t>(_mm_popcnt_u64(_mm512_cmp_epu8_mask(sym, zero, _MM_CMPINT_EQ)));
    negs += static_cast<std::uint64_t>(_mm_popcnt_u64(_mm512_cmp_epu8_mask(sym, neg, _MM_CMPINT_EQ)));
    if (known != ~__mmask64{0}) {  // (rare: a symbol's first step)
      _mm512_storeu_si512(sym_at, sym);
      for (std::uint64_t lanes = ~static_cast<std::uint64_t>(known); lanes != 0; lanes &= lanes - 1)
        mark(sym_at[__builtin_ctzll(lanes)]);
      map = _mm512_load_si512(seen);
    }
  }
  for (std::uint64_t i = 64 * steps; i < m; ++i) {
    const unsigned v = in[2 * i + 1];
    mark(v);
    pos += v == 0x00;
    negs += v == 0x80;
  }
  // then the sampled groups (rans::sampled_group), the short last group too when it is one of them
  // (after the pass over every element, which brings the chunk into the cache in order)
  for (std::uint64_t g = 0; g * format::group_elems < m; g += rans::sample_every)
    avx2::add_high_bytes(part, in + 2 * g * format::group_elems + 1, format::group_lanes(m, g));
  avx2::rans_simd::finish_fp16_counts(part, seen, pos, negs, shape.elems, counts);
}

// The body's numbers of +0.0 and -0.0 elements (codec_detail::count_zeros): 64 bytes at a time
// by two compares and two popcounts (a dense body in one loop, one with a zero mask a group at a
// time), a short last group element by element.
template <class E>
void count_zeros(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint64_t* n_pos,
                 std::uint64_t* n_neg) {
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  constexpr bits_type neg0 = rans::split<E>::negative_zero;
  std::uint64_t p = 0, q = 0;
  const auto registers = [&](const std::uint8_t* g, std::uint64_t n) {  // n registers of 64 bytes at g
    for (std::uint64_t k = 0; k < n; ++k) {
      const __m512i v = _mm512_loadu_si512(g + 64 * k);
      if constexpr (std::is_same_v<E, fp32>) {
        p += static_cast<unsigned>(_mm_popcnt_u32(_mm512_cmpeq_epi32_mask(v, _mm512_setzero_si512())));
        q += static_cast<unsigned>(_mm_popcnt_u32(_mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(neg0)))));
      } else {
        p += static_cast<unsigned>(_mm_popcnt_u32(_mm512_cmpeq_epi16_mask(v, _mm512_setzero_si512())));
        q += static_cast<unsigned>(_mm_popcnt_u32(_mm512_cmpeq_epi16_mask(v, _mm512_set1_epi16(static_cast<short>(neg0)))));
      }
    }
  };
  const auto elements = [&](const std::uint8_t* g, std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
      const bits_type v = format::load_le<bits_type>(g + i * L::elem_size);
      p += v == 0;
      q += v == neg0;
    }
  };
  constexpr std::uint64_t per_group = format::group_elems * L::elem_size / 64;  // registers a group
  if (shape.zero_mask == nullptr) {
    const std::uint64_t full = m / format::group_elems;
    registers(in, full * per_group);
    elements(in + full * format::group_elems * L::elem_size, m - full * format::group_elems);
  } else {
    avx2::for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
      const std::uint8_t* g = in + first * L::elem_size;
      if (lanes < format::group_elems) elements(g, lanes);
      else registers(g, per_group);
    });
  }
  *n_pos = p;
  *n_neg = q;
}

}  // namespace zipccl::host::detail::avx512::rans_simd
