// zipccl: AVX-512 (BW, VBMI, VBMI2) host path for bf16 chunks.
//
// Works on 64 elements (two groups) per step: the exponent and rest bytes are gathered with byte
// permutes, codes come from a 256-entry table held in four registers, and each code bit becomes a
// 64-bit mask whose low and high halves are the two groups' plane words. The bytes written and
// the statuses returned are exactly those of codec_detail::encode_chunk / decode_chunk; the test
// test_host_simd checks this on every build that compiles this file.
#pragma once

// GCC 12's AVX-512 intrinsic headers start some permutes from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized reports at every use; the values are fully overwritten.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../../codebook/analytic_gaussian.hpp"
#include "../../codebook/histogram.hpp"
#include "../../codebook/table.hpp"
#include "../../codec/chunk_codec.hpp"
#include "../../element.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"

namespace zipccl::host::detail::avx512 {

using L = format::chunk_layout<bf16>;

inline __mmask64 tail_mask(std::uint64_t lanes) {
  return lanes >= 64 ? ~__mmask64(0) : ((__mmask64(1) << lanes) - 1);
}

// Byte indices that gather the low (even) and high (odd) bytes of 64 u16 lanes held in two
// registers (permutex2var: indices 0..63 pick from the first, 64..127 from the second).
inline __m512i even_bytes_index() {
  alignas(64) std::uint8_t idx[64];
  for (int i = 0; i < 64; ++i) idx[i] = static_cast<std::uint8_t>(2 * i);
  return _mm512_load_si512(idx);
}
inline __m512i interleave_index(int half) {
  alignas(64) std::uint8_t idx[64];
  for (int i = 0; i < 32; ++i) {
    idx[2 * i] = static_cast<std::uint8_t>(32 * half + i);
    idx[2 * i + 1] = static_cast<std::uint8_t>(64 + 32 * half + i);
  }
  return _mm512_load_si512(idx);
}

// Splits 64 bf16 values into their exponent bytes and rest bytes.
struct split64 {
  __m512i exp, rest;
};
inline split64 split(__m512i a, __m512i b, __m512i even, __m512i odd) {
  const __m512i lo = _mm512_permutex2var_epi8(a, even, b);
  const __m512i hi = _mm512_permutex2var_epi8(a, odd, b);
  const __m512i bit7 = _mm512_set1_epi8(static_cast<char>(0x80));
  // exponent = hi << 1 | lo >> 7, byte-wise (16-bit shifts, then keep each byte's own bits)
  const __m512i e = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(hi, 1), _mm512_set1_epi8(static_cast<char>(0xFE))),
                                    _mm512_and_si512(_mm512_srli_epi16(lo, 7), _mm512_set1_epi8(1)));
  // rest = sign (bit 7 of hi) | mantissa (bits 0..6 of lo)
  const __m512i r = _mm512_ternarylogic_epi32(hi, lo, bit7, 0xE4);
  return {e, r};
}

inline void load64(const std::uint8_t* in, std::uint64_t lanes, __m512i* a, __m512i* b) {
  const __mmask64 m = tail_mask(lanes);
  *a = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m), in);
  *b = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m >> 32), in + 64);
}

// Sum and count of the exponent fields that analytic_gaussian counts (1 <= e <= 254).
inline void exponent_sum(const std::uint8_t* in, std::uint64_t m, std::uint64_t* sum, std::uint64_t* count) {
  const __m512i even = even_bytes_index();
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(1));
  __m512i acc = _mm512_setzero_si512();
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    __m512i a, b;
    load64(in + 2 * i, m - i, &a, &b);
    const split64 s = split(a, b, even, odd);
    const __mmask64 ok = _mm512_cmp_epu8_mask(_mm512_sub_epi8(s.exp, _mm512_set1_epi8(1)),
                                              _mm512_set1_epi8(static_cast<char>(253)), _MM_CMPINT_LE) &
                         tail_mask(m - i);
    n += static_cast<std::uint64_t>(_mm_popcnt_u64(ok));
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_maskz_mov_epi8(ok, s.exp), _mm512_setzero_si512()));
  }
  *sum = static_cast<std::uint64_t>(_mm512_reduce_add_epi64(acc));
  *count = n;
}

// Exact histogram top 7. The mean locates the bulk; eleven bins around it (the analytic window, two below and two above) and the zero bin are
// counted with compares. When everything outside those bins adds up to less than the seventh
// largest counted bin, no outside exponent can enter the top 7 (nor tie with it), and the counted
// bins give the reference's table; otherwise all 256 bins are counted.
inline codebook::table histogram_table(const std::uint8_t* in, std::uint64_t m) {
  constexpr int bins = 11;
  std::uint64_t sum = 0, count = 0;
  exponent_sum(in, m, &sum, &count);
  const int lo = codebook::analytic_gaussian::select<bf16>(sum, count).exponent[0];
  const int base = lo - 2 < 1 ? 1 : (lo - 2 > 256 - bins ? 256 - bins : lo - 2);
  const __m512i even = even_bytes_index();
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(1));
  std::uint64_t near[bins] = {}, zero = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    __m512i a, b;
    load64(in + 2 * i, m - i, &a, &b);
    const __mmask64 live = tail_mask(m - i);
    const __m512i e = split(a, b, even, odd).exp;
    zero += static_cast<std::uint64_t>(_mm_popcnt_u64(_mm512_mask_cmpeq_epi8_mask(live, e, _mm512_setzero_si512())));
    for (int j = 0; j < bins; ++j)
      near[j] += static_cast<std::uint64_t>(_mm_popcnt_u64(
          _mm512_mask_cmpeq_epi8_mask(live, e, _mm512_set1_epi8(static_cast<char>(base + j)))));
  }
  std::uint32_t counts[256] = {};
  std::uint64_t inside = zero;
  counts[0] = static_cast<std::uint32_t>(zero);
  for (int j = 0; j < bins; ++j) {
    counts[base + j] = static_cast<std::uint32_t>(near[j]);
    inside += near[j];
  }
  const codebook::table t = codebook::histogram::select<bf16>(counts);
  std::uint32_t seventh = UINT32_MAX;
  for (unsigned k = 0; k < format::table_size; ++k) seventh = std::min(seventh, counts[t.exponent[k]]);
  if (m - inside < seventh) return t;
  for (int e = 0; e < 256; ++e) counts[e] = 0;
  for (std::uint64_t i = 0; i < m; ++i) ++counts[bf16::exponent(format::load_le<std::uint16_t>(in + 2 * i))];
  return codebook::histogram::select<bf16>(counts);
}

template <class Policy>
codebook::table choose_table(const Policy& policy, const std::uint8_t* in, std::uint64_t m) {
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    std::uint64_t sum = 0, count = 0;
    exponent_sum(in, m, &sum, &count);
    return Policy::template select<bf16>(sum, count);
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    static_assert(std::is_same_v<Policy, codebook::histogram>,
                  "the AVX-512 path knows the histogram policy's selection rule only");
    return histogram_table(in, m);
  } else {
    return policy.entries;
  }
}

template <class Policy>
std::uint64_t encode_chunk_bf16(const Policy& policy, const std::uint8_t* in, std::uint64_t m, bool checksum,
                                std::uint8_t* out) {
  const std::int64_t budget = L::escape_budget(m);
  if (budget < 0) return codec_detail::write_stored_chunk<bf16>(in, m, checksum, out);
  const codebook::table t = choose_table(policy, in, m);
  alignas(64) std::uint8_t lut[256];
  codebook::make_code_lut(t, lut);
  const __m512i t0 = _mm512_load_si512(lut), t1 = _mm512_load_si512(lut + 64);
  const __m512i t2 = _mm512_load_si512(lut + 128), t3 = _mm512_load_si512(lut + 192);
  const __m512i even = even_bytes_index();
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(1));
  const __m512i one = _mm512_set1_epi8(1), two = _mm512_set1_epi8(2), four = _mm512_set1_epi8(4);
  std::uint8_t* planes = out + L::planes_offset();
  std::uint8_t* bytes = out + L::bytes_offset(m);
  std::uint8_t* escapes = out + L::escapes_offset(m);
  std::uint64_t n_esc = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const std::uint64_t lanes = m - i;
    const __mmask64 live = tail_mask(lanes);
    __m512i a, b;
    load64(in + 2 * i, lanes, &a, &b);
    const split64 s = split(a, b, even, odd);
    const __m512i lo = _mm512_permutex2var_epi8(t0, s.exp, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, s.exp, t3);
    const __m512i code = _mm512_mask_mov_epi8(lo, _mm512_movepi8_mask(s.exp), hi);
    const std::uint64_t m0 = _mm512_mask_test_epi8_mask(live, code, one);
    const std::uint64_t m1 = _mm512_mask_test_epi8_mask(live, code, two);
    const std::uint64_t m2 = _mm512_mask_test_epi8_mask(live, code, four);
    const std::uint64_t esc = ~(m0 | m1 | m2) & live;
    if (esc) {
      const std::uint64_t k = static_cast<std::uint64_t>(_mm_popcnt_u64(esc));
      if (static_cast<std::int64_t>(n_esc + k) > budget)
        return codec_detail::write_stored_chunk<bf16>(in, m, checksum, out);
      _mm512_mask_storeu_epi8(escapes + n_esc, tail_mask(k), _mm512_maskz_compress_epi8(esc, s.exp));
      n_esc += k;
    }
    std::uint8_t* gp = planes + (i / 32) * 12;
    const std::uint32_t w0[6] = {static_cast<std::uint32_t>(m0), static_cast<std::uint32_t>(m1),
                                 static_cast<std::uint32_t>(m2), static_cast<std::uint32_t>(m0 >> 32),
                                 static_cast<std::uint32_t>(m1 >> 32), static_cast<std::uint32_t>(m2 >> 32)};
    std::memcpy(gp, w0, lanes > 32 ? 24 : 12);
    _mm512_mask_storeu_epi8(bytes + i, live, s.rest);
  }
  return codec_detail::seal_coded_chunk<bf16>(m, t, n_esc, checksum, out);
}

inline status decode_chunk_bf16(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum,
                                std::uint8_t* out) {
  format::chunk_header h;
  const status st = codec_detail::check_chunk<bf16>(chunk, span, m, checksum, &h);
  if (st != status::success) return st;
  if (h.mode == format::chunk_mode::stored) {
    std::memcpy(out, chunk + format::chunk_header_bytes, m * 2);
    return status::success;
  }
  alignas(64) std::uint8_t tab[64] = {};
  for (unsigned k = 0; k < format::table_size; ++k) tab[1 + k] = h.table[k];
  const __m512i table = _mm512_load_si512(tab);
  const __m512i idx0 = interleave_index(0), idx1 = interleave_index(1);
  const __m512i bit7 = _mm512_set1_epi8(static_cast<char>(0x80));
  const std::uint8_t* planes = chunk + L::planes_offset();
  const std::uint8_t* bytes = chunk + L::bytes_offset(m);
  const std::uint8_t* escapes = chunk + L::escapes_offset(m);
  std::uint64_t used = 0;
  for (std::uint64_t i = 0; i < m; i += 64) {
    const std::uint64_t lanes = m - i;
    const __mmask64 live = tail_mask(lanes);
    std::uint32_t w[6] = {};
    std::memcpy(w, planes + (i / 32) * 12, lanes > 32 ? 24 : 12);
    const std::uint64_t m0 = w[0] | (std::uint64_t(w[3]) << 32);
    const std::uint64_t m1 = w[1] | (std::uint64_t(w[4]) << 32);
    const std::uint64_t m2 = w[2] | (std::uint64_t(w[5]) << 32);
    if (((m0 | m1 | m2) & ~live) != 0) return status::corrupt;  // bits in padding lanes
    const __m512i code = _mm512_or_si512(
        _mm512_or_si512(_mm512_maskz_mov_epi8(m0, _mm512_set1_epi8(1)), _mm512_maskz_mov_epi8(m1, _mm512_set1_epi8(2))),
        _mm512_maskz_mov_epi8(m2, _mm512_set1_epi8(4)));
    __m512i exp = _mm512_permutexvar_epi8(code, table);
    const std::uint64_t esc = ~(m0 | m1 | m2) & live;
    if (esc) {
      const std::uint64_t k = static_cast<std::uint64_t>(_mm_popcnt_u64(esc));
      if (used + k > h.escapes) return status::corrupt;
      const __m512i raw = used + 64 <= h.escapes
                              ? _mm512_maskz_expand_epi8(esc, _mm512_loadu_si512(escapes + used))
                              : _mm512_maskz_expandloadu_epi8(esc, escapes + used);
      exp = _mm512_mask_mov_epi8(exp, esc, raw);
      used += k;
    }
    const __m512i rest = _mm512_maskz_loadu_epi8(live, bytes + i);
    // low byte = exponent bit 0 << 7 | mantissa; high byte = sign | exponent >> 1
    const __m512i lo = _mm512_ternarylogic_epi32(_mm512_slli_epi16(exp, 7), rest, bit7, 0xE4);
    const __m512i hi = _mm512_ternarylogic_epi32(rest, _mm512_srli_epi16(exp, 1), bit7, 0xE4);
    _mm512_mask_storeu_epi16(out + 2 * i, static_cast<__mmask32>(live), _mm512_permutex2var_epi8(lo, idx0, hi));
    if (lanes > 32)
      _mm512_mask_storeu_epi16(out + 2 * i + 64, static_cast<__mmask32>(live >> 32),
                               _mm512_permutex2var_epi8(lo, idx1, hi));
  }
  return used == h.escapes ? status::success : status::corrupt;
}

}  // namespace zipccl::host::detail::avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
