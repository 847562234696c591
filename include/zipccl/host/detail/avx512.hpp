// zipccl: AVX-512 (BW, VBMI, VBMI2) host path for bf16, fp16 and fp32 chunks.
//
// Works on 64 elements (two groups) per step. A per-type `lanes64` splits 64 elements into their
// exponent bytes and rest sections, and joins them back; everything else is shared: codes come
// from a 256-entry table held in four registers (or one register for fp16), each code bit becomes a
// 64-bit mask whose low and high halves are the two groups' plane words, and escapes are
// compressed and expanded with VBMI2. The bytes written and the statuses returned are exactly those
// of codec_detail::encode_chunk / decode_chunk; test_host_simd checks this on every build that
// compiles this file.
#pragma once

// GCC 12's AVX-512 intrinsic headers start some permutes from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized reports at every use; the values are fully overwritten.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../codebook/analytic_gaussian.hpp"
#include "../../codebook/histogram.hpp"
#include "../../codebook/table.hpp"
#include "../../codec/chunk_codec.hpp"
#include "../../element.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "histogram_bins.hpp"

namespace zipccl::host::detail::avx512 {

inline __mmask64 tail_mask(std::uint64_t lanes) {
  return lanes >= 64 ? ~__mmask64(0) : ((__mmask64(1) << lanes) - 1);
}

inline __m512i byte_index(int start, int step) {
  alignas(64) std::uint8_t idx[64];
  for (int i = 0; i < 64; ++i) idx[i] = static_cast<std::uint8_t>(start + step * i);
  return _mm512_load_si512(idx);
}

// Indices that interleave the bytes of two registers a, b as a0 b0 a1 b1 ..., from byte 32*half.
inline __m512i interleave_index(int half) {
  alignas(64) std::uint8_t idx[64];
  for (int i = 0; i < 32; ++i) {
    idx[2 * i] = static_cast<std::uint8_t>(32 * half + i);
    idx[2 * i + 1] = static_cast<std::uint8_t>(64 + 32 * half + i);
  }
  return _mm512_load_si512(idx);
}

// Byte-wise select: bits of `a` where `mask` is set, of `b` elsewhere.
inline __m512i select_bits(__m512i mask, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(a, b, mask, 0xE4); }

inline __m512i splat8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }

// Permutation constants, built once per chunk and kept in registers by the loops.
struct constants {
  __m512i even = byte_index(0, 2), odd = byte_index(1, 2);
  __m512i idx0 = interleave_index(0), idx1 = interleave_index(1);
};

// One step's worth of a 16-bit type: the low and high bytes of 64 elements.
struct bytes16 {
  __m512i lo, hi;
};
// Loads and stores of 64 lanes: plain for whole steps, masked (fault-suppressing) for the tail.
inline __m512i load_bytes(const std::uint8_t* p, std::uint64_t lanes) {
  return lanes >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(tail_mask(lanes), p);
}
inline void store_bytes(std::uint8_t* p, std::uint64_t lanes, __m512i v) {
  if (lanes >= 64) _mm512_storeu_si512(p, v);
  else _mm512_mask_storeu_epi8(p, tail_mask(lanes), v);
}

inline bytes16 load16(const constants& c, const std::uint8_t* in, std::uint64_t lanes) {
  __m512i a, b;
  if (lanes >= 64) {
    a = _mm512_loadu_si512(in);
    b = _mm512_loadu_si512(in + 64);
  } else {
    const __mmask64 m = tail_mask(lanes);
    a = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m), in);
    b = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m >> 32), in + 64);
  }
  return {_mm512_permutex2var_epi8(a, c.even, b), _mm512_permutex2var_epi8(a, c.odd, b)};
}
inline void store16(const constants& c, std::uint8_t* out, std::uint64_t lanes, __m512i lo, __m512i hi) {
  const __m512i a = _mm512_permutex2var_epi8(lo, c.idx0, hi);
  if (lanes >= 64) {
    _mm512_storeu_si512(out, a);
    _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi8(lo, c.idx1, hi));
    return;
  }
  const __mmask64 live = tail_mask(lanes);
  _mm512_mask_storeu_epi16(out, static_cast<__mmask32>(live), a);
  if (lanes > 32)
    _mm512_mask_storeu_epi16(out + 64, static_cast<__mmask32>(live >> 32), _mm512_permutex2var_epi8(lo, c.idx1, hi));
}

template <class E>
struct lanes64;

// bf16: hi = s eeeeeee, lo = e mmmmmmm. Rest byte = s mmmmmmm.
template <>
struct lanes64<bf16> {
  __m512i exp, rest;
  static lanes64 load(const constants& c, const std::uint8_t* in, std::uint64_t lanes) {
    const bytes16 b = load16(c, in, lanes);
    lanes64 r;
    r.exp = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(b.hi, 1), splat8(0xFE)),
                            _mm512_and_si512(_mm512_srli_epi16(b.lo, 7), splat8(1)));
    r.rest = select_bits(splat8(0x80), b.hi, b.lo);
    return r;
  }
  std::uint64_t extra_plane(int) const { return 0; }
  void store_rest(std::uint8_t*, std::uint8_t* bytes, std::uint64_t lanes) const { store_bytes(bytes, lanes, rest); }
  static void join(const constants& c, std::uint8_t* out, std::uint64_t lanes, __m512i exp, const std::uint64_t*, const std::uint8_t*,
                   const std::uint8_t* bytes) {
    const __m512i rest = load_bytes(bytes, lanes);
    const __m512i lo = select_bits(splat8(0x80), _mm512_slli_epi16(exp, 7), rest);
    const __m512i hi = select_bits(splat8(0x80), rest, _mm512_srli_epi16(exp, 1));
    store16(c, out, lanes, lo, hi);
  }
};

// fp16: hi = s eeeee mm, lo = mmmmmmmm. Rest byte = lo; extra planes = bits 0, 1, 7 of hi.
template <>
struct lanes64<fp16> {
  __m512i exp, lo, hi;
  static lanes64 load(const constants& c, const std::uint8_t* in, std::uint64_t lanes) {
    const bytes16 b = load16(c, in, lanes);
    return {_mm512_and_si512(_mm512_srli_epi16(b.hi, 2), splat8(0x1F)), b.lo, b.hi};
  }
  std::uint64_t extra_plane(int k) const {
    return k == 0 ? _mm512_test_epi8_mask(hi, splat8(1)) : k == 1 ? _mm512_test_epi8_mask(hi, splat8(2))
                                                                  : _mm512_movepi8_mask(hi);
  }
  void store_rest(std::uint8_t*, std::uint8_t* bytes, std::uint64_t lanes) const { store_bytes(bytes, lanes, lo); }
  static void join(const constants& c, std::uint8_t* out, std::uint64_t lanes, __m512i exp, const std::uint64_t* extra, const std::uint8_t*,
                   const std::uint8_t* bytes) {
    const __m512i lo = load_bytes(bytes, lanes);
    // exp < 32, so a 16-bit shift by 2 keeps each byte's bits inside it
    __m512i hi = _mm512_slli_epi16(exp, 2);
    hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(extra[0], splat8(1)));
    hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(extra[1], splat8(2)));
    hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(extra[2], splat8(0x80)));
    store16(c, out, lanes, lo, hi);
  }
};

// fp32: bytes b3 = s eeeeeee, b2 = e mmmmmmm, b1 b0 = low mantissa. Word = b1 b0; byte = s mmmmmmm.
template <>
struct lanes64<fp32> {
  __m512i exp, v[4];
  std::uint64_t lanes;
  static lanes64 load(const constants&, const std::uint8_t* in, std::uint64_t lanes) {
    lanes64 r;
    r.lanes = lanes;
    const __mmask64 m = tail_mask(lanes);
    for (int q = 0; q < 4; ++q)
      r.v[q] = lanes >= 64 ? _mm512_loadu_si512(in + 64 * q)
                           : _mm512_maskz_loadu_epi32(static_cast<__mmask16>(m >> (16 * q)), in + 64 * q);
    const __m128i e0 = _mm512_cvtepi32_epi8(_mm512_srli_epi32(r.v[0], 23));
    const __m128i e1 = _mm512_cvtepi32_epi8(_mm512_srli_epi32(r.v[1], 23));
    const __m128i e2 = _mm512_cvtepi32_epi8(_mm512_srli_epi32(r.v[2], 23));
    const __m128i e3 = _mm512_cvtepi32_epi8(_mm512_srli_epi32(r.v[3], 23));
    r.exp = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(e1, e0)), _mm256_set_m128i(e3, e2), 1);
    return r;
  }
  std::uint64_t extra_plane(int) const { return 0; }
  void store_rest(std::uint8_t* words, std::uint8_t* bytes, std::uint64_t) const {
    const __m512i top = _mm512_set1_epi32(0x80);
    for (int q = 0; q < 4; ++q) {
      if (lanes <= 16u * q) break;
      const __mmask16 m = static_cast<__mmask16>(tail_mask(lanes - 16u * q));
      _mm512_mask_cvtepi32_storeu_epi16(words + 32 * q, m, v[q]);
      const __m512i b = _mm512_ternarylogic_epi32(_mm512_srli_epi32(v[q], 24), _mm512_srli_epi32(v[q], 16), top, 0xE4);
      _mm512_mask_cvtepi32_storeu_epi8(bytes + 16 * q, m, b);
    }
  }
  static void join(const constants&, std::uint8_t* out, std::uint64_t lanes, __m512i exp, const std::uint64_t*, const std::uint8_t* words,
                   const std::uint8_t* bytes) {
    for (int q = 0; q < 4; ++q) {
      if (lanes <= 16u * q) break;
      const __mmask16 m = static_cast<__mmask16>(tail_mask(lanes - 16u * q));
      const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, words + 32 * q));
      const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, bytes + 16 * q));
      __m128i eq;
      switch (q) {
        case 0: eq = _mm512_extracti32x4_epi32(exp, 0); break;
        case 1: eq = _mm512_extracti32x4_epi32(exp, 1); break;
        case 2: eq = _mm512_extracti32x4_epi32(exp, 2); break;
        default: eq = _mm512_extracti32x4_epi32(exp, 3); break;
      }
      const __m512i ex = _mm512_cvtepu8_epi32(eq);
      // sign: bit 7 of b -> bit 31; exponent -> bits 23..30; b bits 0..6 -> bits 16..22; word -> 0..15
      const __m512i hi = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24),
                                         _mm512_slli_epi32(ex, 23));
      const __m512i x = _mm512_ternarylogic_epi32(hi, _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x7F)), 16),
                                                  w, 0xFE);
      _mm512_mask_storeu_epi32(out + 64 * q, m, x);
    }
  }
};

// A code table lookup for E's exponent bytes.
template <class E>
struct code_lookup {
  __m512i t[4];
  explicit code_lookup(const std::uint8_t* lut) {
    for (int k = 0; k < 4; ++k) t[k] = _mm512_loadu_si512(lut + 64 * k);
  }
  __m512i operator()(__m512i exp) const {
    if constexpr (E::exponent_count <= 64) {
      return _mm512_permutexvar_epi8(exp, t[0]);
    } else {
      const __m512i lo = _mm512_permutex2var_epi8(t[0], exp, t[1]);
      const __m512i hi = _mm512_permutex2var_epi8(t[2], exp, t[3]);
      return _mm512_mask_mov_epi8(lo, _mm512_movepi8_mask(exp), hi);
    }
  }
};

// Sum and count of the exponent fields that analytic_gaussian counts.
template <class E>
void exponent_sum(const std::uint8_t* in, std::uint64_t m, std::uint64_t* sum, std::uint64_t* count) {
  using L = format::chunk_layout<E>;
  const __m512i first = splat8(std::is_same_v<E, fp16> ? 0 : 1);
  const __m512i span = splat8(static_cast<int>(E::exponent_mask) - 1 - (std::is_same_v<E, fp16> ? 0 : 1));
  const constants c;
  __m512i acc = _mm512_setzero_si512();
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const __m512i e = lanes64<E>::load(c, in + L::elem_size * i, m - i).exp;
    // counted: first <= e <= exponent_mask - 1
    const __mmask64 ok = _mm512_cmp_epu8_mask(_mm512_sub_epi8(e, first), span, _MM_CMPINT_LE) & tail_mask(m - i);
    n += static_cast<std::uint64_t>(_mm_popcnt_u64(ok));
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_maskz_mov_epi8(ok, e), _mm512_setzero_si512()));
  }
  *sum = static_cast<std::uint64_t>(_mm512_reduce_add_epi64(acc));
  *count = n;
}

// Counts, for every live lane, exponent values base + first .. base + first + count - 1 and, with
// zero, zero: a register of 64 byte counters per value, which each 64 lanes' compare mask
// increments, emptied into the totals by vpsadbw every 255 registers (before a counter can wrap).
// For fp16's 31 values (count_bins), where a popcount of each mask into memory makes a loop bound
// by its front end, whose speed depends on where the compiler places it; this one is faster than
// that loop at its best (docs/design.md, "The 3-bit policies").
template <class E, int first, int count>
void count_bins_pass(const std::uint8_t* in, std::uint64_t m, int base, std::uint64_t* near, std::uint64_t* zero) {
  static_assert(count >= 1 && count <= 16, "count_bins_pass: at most sixteen counter registers");
  using L = format::chunk_layout<E>;
  const constants c;
  const __m512i one = splat8(1);
  const auto total = [](__m512i v) {
    return static_cast<std::uint64_t>(_mm512_reduce_add_epi64(_mm512_sad_epu8(v, _mm512_setzero_si512())));
  };
  __m512i acc[count], zeros = _mm512_setzero_si512();
  for (int j = 0; j < count; ++j) acc[j] = _mm512_setzero_si512();
  const auto flush = [&] {
    for (int j = 0; j < count; ++j) near[first + j] += total(acc[j]), acc[j] = _mm512_setzero_si512();
    if (zero != nullptr) *zero += total(zeros), zeros = _mm512_setzero_si512();
  };
  unsigned filled = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const __mmask64 live = tail_mask(m - i);
    const __m512i e = lanes64<E>::load(c, in + L::elem_size * i, m - i).exp;
    if (zero != nullptr) zeros = _mm512_mask_add_epi8(zeros, _mm512_mask_cmpeq_epi8_mask(live, e, _mm512_setzero_si512()), zeros, one);
    for (int j = 0; j < count; ++j)
      acc[j] = _mm512_mask_add_epi8(acc[j], _mm512_mask_cmpeq_epi8_mask(live, e, splat8(base + first + j)), acc[j], one);
    if (++filled == 255) flush(), filled = 0;
  }
  flush();
}

// Counts, for every live lane, exponent values base .. base + bins - 1 and zero: up to sixteen
// values (bf16's and fp32's eleven bins) by a popcount of each compare mask, more (fp16's 31) by
// two passes of count_bins_pass.
template <class E, int bins>
void count_bins(const std::uint8_t* in, std::uint64_t m, int base, std::uint64_t* near, std::uint64_t* zero) {
  static_assert(bins >= 1 && bins <= 32, "count_bins: up to 32 values");
  if constexpr (bins > 16) {
    count_bins_pass<E, 0, 16>(in, m, base, near, zero);
    count_bins_pass<E, 16, bins - 16>(in, m, base, near, nullptr);
  } else {
    using L = format::chunk_layout<E>;
    const constants c;
    for (std::uint64_t i = 0; i < m; i += 64) {
      const __mmask64 live = tail_mask(m - i);
      const __m512i e = lanes64<E>::load(c, in + L::elem_size * i, m - i).exp;
      *zero += static_cast<std::uint64_t>(_mm_popcnt_u64(_mm512_mask_cmpeq_epi8_mask(live, e, _mm512_setzero_si512())));
      for (int j = 0; j < bins; ++j)
        near[j] += static_cast<std::uint64_t>(_mm_popcnt_u64(_mm512_mask_cmpeq_epi8_mask(live, e, splat8(base + j))));
    }
  }
}

// Exact histogram top 7. fp16 has 32 exponents: all are counted with compares. For bf16 and fp32
// the eleven bins of histogram_bins.hpp are counted first; when they do not decide the table, a
// full histogram is.
template <class E>
codebook::table histogram_table(const std::uint8_t* in, std::uint64_t m) {
  using L = format::chunk_layout<E>;
  std::uint32_t counts[E::exponent_count] = {};
  if constexpr (E::exponent_count <= 32) {
    std::uint64_t all[E::exponent_count - 1] = {}, zero = 0;
    count_bins<E, E::exponent_count - 1>(in, m, 1, all, &zero);
    counts[0] = static_cast<std::uint32_t>(zero);
    for (unsigned e = 1; e < E::exponent_count; ++e) counts[e] = static_cast<std::uint32_t>(all[e - 1]);
    return codebook::histogram::select<E>(counts);
  } else {
    constexpr int bins = histogram_bins::bins;
    std::uint64_t sum = 0, count = 0;
    exponent_sum<E>(in, m, &sum, &count);
    const int base = histogram_bins::first_bin<E>(sum, count);
    std::uint64_t near[bins] = {}, zero = 0;
    count_bins<E, bins>(in, m, base, near, &zero);
    codebook::table t;
    if (histogram_bins::select<E>(zero, near, base, m, &t)) return t;
    // Full count, four interleaved tables to keep increments of equal bins apart.
    std::uint32_t sub[4][E::exponent_count] = {};
    using bits_type = typename E::bits_type;
    std::uint64_t i = 0;
    for (; i + 4 <= m; i += 4)
      for (int k = 0; k < 4; ++k) ++sub[k][E::exponent(format::load_le<bits_type>(in + L::elem_size * (i + k)))];
    for (; i < m; ++i) ++sub[0][E::exponent(format::load_le<bits_type>(in + L::elem_size * i))];
    for (unsigned e = 0; e < E::exponent_count; ++e) counts[e] = sub[0][e] + sub[1][e] + sub[2][e] + sub[3][e];
    return codebook::histogram::select<E>(counts);
  }
}

template <class E, class Policy>
codebook::table choose_table(const Policy& policy, const std::uint8_t* in, std::uint64_t m) {
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    std::uint64_t sum = 0, count = 0;
    exponent_sum<E>(in, m, &sum, &count);
    return Policy::template select<E>(sum, count, m);
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    static_assert(std::is_same_v<Policy, codebook::histogram>,
                  "the AVX-512 path knows the histogram policy's selection rule only");
    return histogram_table<E>(in, m);
  } else {
    return policy.entries;
  }
}

template <class E, class Policy>
std::uint64_t encode_chunk(const Policy& policy, const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal,
                           std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  constexpr unsigned P = L::planes;
  const std::int64_t budget = L::escape_budget(m);
  if (budget < 0) return codec_detail::write_stored_chunk<E>(in, m, seal, out);
  const codebook::table t = choose_table<E>(policy, in, m);
  alignas(64) std::uint8_t lut[256];
  codebook::make_code_lut(t, lut);
  const code_lookup<E> lookup(lut);
  const constants c;
  std::uint8_t* planes = out + L::planes_offset();
  std::uint8_t* words = out + L::words_offset(m);
  std::uint8_t* bytes = out + L::bytes_offset(m);
  std::uint8_t* escapes = out + L::escapes_offset(m);
  std::uint64_t n_esc = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const std::uint64_t lanes = m - i;
    const __mmask64 live = tail_mask(lanes);
    const lanes64<E> s = lanes64<E>::load(c, in + L::elem_size * i, lanes);
    const __m512i code = lookup(s.exp);
    std::uint64_t mask[6] = {_mm512_mask_test_epi8_mask(live, code, splat8(1)),
                             _mm512_mask_test_epi8_mask(live, code, splat8(2)),
                             _mm512_mask_test_epi8_mask(live, code, splat8(4)), 0, 0, 0};
    for (unsigned k = 3; k < P; ++k) mask[k] = s.extra_plane(static_cast<int>(k - 3)) & live;
    const std::uint64_t esc = ~(mask[0] | mask[1] | mask[2]) & live;
    if (esc) {
      const std::uint64_t k = static_cast<std::uint64_t>(_mm_popcnt_u64(esc));
      if (static_cast<std::int64_t>(n_esc + k) > budget) return codec_detail::write_stored_chunk<E>(in, m, seal, out);
      _mm512_mask_storeu_epi8(escapes + n_esc, tail_mask(k), _mm512_maskz_compress_epi8(esc, s.exp));
      n_esc += k;
    }
    std::uint8_t* gp = planes + (i / 32) * P * 4;
    for (unsigned k = 0; k < P; ++k) format::store_le<std::uint32_t>(gp + 4 * k, static_cast<std::uint32_t>(mask[k]));
    if (lanes > 32)
      for (unsigned k = 0; k < P; ++k)
        format::store_le<std::uint32_t>(gp + 4 * (P + k), static_cast<std::uint32_t>(mask[k] >> 32));
    s.store_rest(words + L::word_bytes * i, bytes + i, lanes);
  }
  return codec_detail::seal_coded_chunk<E>(m, t, n_esc, seal, out);
}

template <class E>
status decode_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                    std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  constexpr unsigned P = L::planes;
  format::chunk_header h;
  const status st = codec_detail::check_chunk<E>(chunk, span, m, seal, &h);
  if (st != status::success) return st;
  if (h.mode == format::chunk_mode::stored) {
    std::memcpy(out, chunk + format::chunk_header_bytes, m * L::elem_size);
    return status::success;
  }
  // zero masks and rANS are decoded by the reference path (host/detail/chunk_dispatch.hpp)
  if (h.mode != format::chunk_mode::coded) return codec_detail::decode_chunk<E>(chunk, span, m, seal, out);
  alignas(64) std::uint8_t tab[64] = {};
  for (unsigned k = 0; k < format::table_size; ++k) tab[1 + k] = h.table[k];
  const __m512i table = _mm512_load_si512(tab);
  const constants c;
  const std::uint8_t* planes = chunk + L::planes_offset();
  const std::uint8_t* words = chunk + L::words_offset(m);
  const std::uint8_t* bytes = chunk + L::bytes_offset(m);
  const std::uint8_t* escapes = chunk + L::escapes_offset(m);
  std::uint64_t used = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const std::uint64_t lanes = m - i;
    const __mmask64 live = tail_mask(lanes);
    const std::uint8_t* gp = planes + (i / 32) * P * 4;
    std::uint64_t mask[6] = {};
    std::uint64_t any = 0;
    for (unsigned k = 0; k < P; ++k) {
      mask[k] = format::load_le<std::uint32_t>(gp + 4 * k);
      if (lanes > 32) mask[k] |= std::uint64_t(format::load_le<std::uint32_t>(gp + 4 * (P + k))) << 32;
      any |= mask[k];
    }
    if (any & ~live) return status::corrupt;  // bits in padding lanes
    const __m512i code = _mm512_or_si512(
        _mm512_or_si512(_mm512_maskz_mov_epi8(mask[0], splat8(1)), _mm512_maskz_mov_epi8(mask[1], splat8(2))),
        _mm512_maskz_mov_epi8(mask[2], splat8(4)));
    __m512i exp = _mm512_permutexvar_epi8(code, table);
    const std::uint64_t esc = ~(mask[0] | mask[1] | mask[2]) & live;
    if (esc) {
      const std::uint64_t k = static_cast<std::uint64_t>(_mm_popcnt_u64(esc));
      if (used + k > h.escapes) return status::corrupt;
      const __m512i raw = used + 64 <= h.escapes ? _mm512_maskz_expand_epi8(esc, _mm512_loadu_si512(escapes + used))
                                                 : _mm512_maskz_expandloadu_epi8(esc, escapes + used);
      if constexpr (E::exponent_count < 256)
        if (_mm512_mask_cmpge_epu8_mask(esc, raw, splat8(static_cast<int>(E::exponent_count)))) return status::corrupt;
      exp = _mm512_mask_mov_epi8(exp, esc, raw);
      used += k;
    }
    lanes64<E>::join(c, out + L::elem_size * i, lanes, exp, mask + 3, words + L::word_bytes * i, bytes + i);
  }
  return used == h.escapes ? status::success : status::corrupt;
}

}  // namespace zipccl::host::detail::avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
