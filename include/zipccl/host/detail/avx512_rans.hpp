// zipccl: AVX-512 encoder and decoder of rANS chunks (codebook::entropy), built where
// ZIPCCL_HAS_AVX512 and ZIPCCL_HAS_AVX2 hold (the kernels need AVX-512 F, BW, VBMI for the byte
// permutes and VBMI2 for the 16-bit shifts and the byte and word compress and expand).
//
// The 32 lanes of a chunk's rANS body (codec/rans.hpp):
//   decoder  tables of at most 128 symbols and 12 crowded buckets (rank_table): decode_rank_kernel,
//            the 32 states as two registers of 16-bit halves; a step takes the slots' ranks from
//            byte tables in registers (vpermi2b), their frequencies and starts (vpermw), computes
//            x = freq * (x >> 12) + offset in 16-bit products and refills the lanes below 2^16 in
//            lane order by one vpexpandw. Other tables: decode_kernel, two registers of sixteen
//            32-bit states, the slot words by a gather (gather16). Two dense chunks are decoded
//            in one loop (decode_rans_pair).
//   encoder  two registers of sixteen 32-bit states; a register's (freq | cum << 16) and
//            reciprocals come from registers when its symbols fall in a window of 64 values (fp16:
//            fp16_window_table, sign_window_table behind it), else from two gathers; the lanes at
//            or above freq << 20 give up their low 16 bits in lane order (vpcompressd, a masked
//            vpmovdw) just below the stream's start; x = (x / freq) << 12 + x % freq + cum by a
//            32-bit reciprocal multiply and one correction step.
// Bodies with zero symbols take encode_zeros_kernel and decode_zeros_kernel (or
// decode_rank_zeros_kernel): the other lanes' rests are packed by one vpcompressb (fp32's words:
// vpcompressw) or spread by one vpexpandb (vpexpandw); the zero lanes' encoder entries are
// blended in from registers, so zeros do not send a register to the gathers. The group loop is
// the AVX2 one (avx2_rans.hpp), with the same fall-backs to the reference's group functions, so
// the encoder's bytes and the decoder's values and statuses are codec_detail's
// (test_host_simd_avx512 compares them on AVX-512 hardware, test_host_simd_avx512_emulated on any
// x86 with AVX2).
#pragma once

#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <type_traits>

#include "avx2_rans.hpp"
#include "rank_table.hpp"

namespace zipccl::host::detail::avx512::rans_simd {

namespace rans = codec_detail::rans;
using avx2::rans_simd::encode_table;
using detail::rank_table;

// The high 32 bits of the sixteen products a * b (unsigned): the even lanes' 64-bit products
// (vpmuludq) have their high halves in the odd lanes, which one masked vpshufd (0xF5: lanes
// 1 1 3 3 of each quarter) moves down beside the odd lanes' own products.
inline __m512i mulhi_epu32(__m512i a, __m512i b) {
  const __m512i even = _mm512_mul_epu32(a, b);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
  return _mm512_mask_shuffle_epi32(odd, static_cast<__mmask16>(0x5555), even, static_cast<_MM_PERM_ENUM>(0xF5));
}

// The sixteen words base[idx]: by one 16-lane gather, or by two 8-lane ones.
inline __m512i gather16_wide(const std::uint32_t* base, __m512i idx) {
  return _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(base), 4);
}
inline __m512i gather16_halves(const std::uint32_t* base, __m512i idx) {
  const int* b = reinterpret_cast<const int*>(base);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_i32gather_epi32(b, _mm512_castsi512_si256(idx), 4)),
                            _mm256_i32gather_epi32(b, _mm512_extracti64x4_epi64(idx, 1), 4), 1);
}
// The decoder's gather. Built for AMD Zen 4 or Zen 5 (GCC's -march=znver4 or znver5, which
// -march=native picks there on a GCC that knows them), two 8-lane gathers, which beat one 16-lane
// gather in the decoder there on sparse bodies and match it on dense ones; elsewhere
// one 16-lane gather, which on Intel's AVX-512 cores overlaps far better with a second chunk's
// work (PERFORMANCE.md, "The pair decoder"). test_simd.cpp checks both on every build.
inline __m512i gather16(const std::uint32_t* base, __m512i idx) {
#if defined(__znver4__) || defined(__znver5__)
  return gather16_halves(base, idx);
#else
  return gather16_wide(base, idx);
#endif
}

// How an encoder kernel looks a register's symbols up, chosen per chunk (encode_kernel::run):
// checked tests the sixteen symbols against the window and takes the gathers where one falls
// outside; held_narrow and held_wide, for chunks whose symbols (the zero symbols apart) all lie
// in the window of 32 or of 64 values, skip that test, which every symbol of the chunk would
// pass (every symbol of a body has a nonzero frequency, and the window is placed on those).
enum class lookup_mode { checked, held_narrow, held_wide };

// The entries of sixteen window indices i (0..31: one vpermt2d a field; 0..63: two and a blend)
// from a table of 32 or 64 entries in four registers a field. An index is a symbol's distance
// from the window's first value modulo 256, in the lane's low byte: the lookups read bits 0..5
// and the window test bits 5..7 (every window starts at most 256 - width, so a symbol below the
// start wraps to at least its width), and bits 8 and up may hold anything (split_indices).
inline void entries32(const __m512i (&fc)[4], const __m512i (&rcp)[4], __m512i i, __m512i* freq_cum, __m512i* recip) {
  *freq_cum = _mm512_permutex2var_epi32(fc[0], i, fc[1]);
  *recip = _mm512_permutex2var_epi32(rcp[0], i, rcp[1]);
}
inline void entries64(const __m512i (&fc)[4], const __m512i (&rcp)[4], __m512i i, __m512i* freq_cum, __m512i* recip) {
  const __mmask16 high = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32));
  *freq_cum = _mm512_mask_blend_epi32(high, _mm512_permutex2var_epi32(fc[0], i, fc[1]), _mm512_permutex2var_epi32(fc[2], i, fc[3]));
  *recip = _mm512_mask_blend_epi32(high, _mm512_permutex2var_epi32(rcp[0], i, rcp[1]), _mm512_permutex2var_epi32(rcp[2], i, rcp[3]));
}
// The same for a window of 32 entries (narrow) or 64 by lookup mode M: checked, false where an
// index is outside the window; held, without that test.
template <lookup_mode M>
inline bool window_entries(const __m512i (&fc)[4], const __m512i (&rcp)[4], bool narrow, __m512i i, __m512i* freq_cum,
                           __m512i* recip) {
  if constexpr (M == lookup_mode::held_narrow) {
    entries32(fc, rcp, i, freq_cum, recip);
  } else if constexpr (M == lookup_mode::held_wide) {
    entries64(fc, rcp, i, freq_cum, recip);
  } else if (narrow) {
    if (_mm512_test_epi32_mask(i, _mm512_set1_epi32(0xE0)) != 0) return false;
    entries32(fc, rcp, i, freq_cum, recip);
  } else {
    if (_mm512_test_epi32_mask(i, _mm512_set1_epi32(0xC0)) != 0) return false;
    entries64(fc, rcp, i, freq_cum, recip);
  }
  return true;
}

// The encoder's lookups of sixteen symbols from a window of 64 table entries in eight registers,
// or of 32 in four where the chunk's symbols (but the zero symbols) all fall in 32 values, as
// bf16's and fp32's exponents nearly always do: a lookup is then one vpermt2d per field, not two
// and a blend.
struct window_table {
  __m512i fc[4], rcp[4];
  __m512i lo, lo_words;  // the window's first symbol in each 32-bit lane, and in each 16-bit lane
  bool narrow, held;  // held: the window holds every symbol (but the zero symbols)
  window_table(const codec_detail::rans_plan& plan, const encode_table& et, const rans::zero_symbols* skip = nullptr) {
    alignas(64) std::uint32_t f[64], r[64];
    const unsigned start = et.window<32>(plan, f, r, skip);
    narrow = encode_table::holds_all<32>(plan, start, skip);
    const unsigned first = narrow ? start : et.window<64>(plan, f, r, skip);
    held = narrow || encode_table::holds_all<64>(plan, first, skip);
    // (the window tests rely on it: a symbol below the start wraps to at least the width)
    assert(first <= rans::symbols - (narrow ? 32u : 64u));
    lo = _mm512_set1_epi32(static_cast<int>(first));
    lo_words = _mm512_set1_epi16(static_cast<short>(first));
    for (unsigned k = 0; k < 4; ++k) {
      fc[k] = narrow && k >= 2 ? _mm512_setzero_si512() : _mm512_load_si512(f + 16 * k);
      rcp[k] = narrow && k >= 2 ? _mm512_setzero_si512() : _mm512_load_si512(r + 16 * k);
    }
  }
  // A symbol of the window, broadcast (the lanes of zero symbols take it: code).
  __m512i inside() const { return lo; }
  // The two lookups of sixteen symbols (0..255: a lane's bits above 7 would wrap into the
  // window), checked; false when a lane's symbol is outside the window (encode_zeros_kernel's).
  bool lookup(__m512i sym, __m512i* freq_cum, __m512i* recip) const {
    return window_entries<lookup_mode::checked>(fc, rcp, narrow, _mm512_sub_epi32(sym, lo), freq_cum, recip);
  }
  // The same by window indices i (split_indices) and lookup mode M, whose held modes the chunk's
  // plan must allow (the symbols, by sym(), are not needed): the dense kernels'.
  template <lookup_mode M, class Symbols>
  ZIPCCL_ALWAYS_INLINE bool lookup_at(__m512i i, Symbols&&, __m512i* freq_cum, __m512i* recip) const {
    return window_entries<M>(fc, rcp, narrow, i, freq_cum, recip);
  }
};

// fp16's lookups: its symbol is the high byte, sign included, so symmetric data puts a chunk's
// symbols in two clusters 128 apart, which no window of 64 holds. The window is one of 64
// magnitudes (the symbol's low seven bits: five exponent and two mantissa bits), the one that
// holds the most of the chunk's frequency over both signs, with a table of 64 entries per sign; a
// lookup is four vpermt2d and three blends per field.
struct sign_window_table {
  __m512i fc[2][4], rcp[2][4];  // [sign][quarter]
  __m512i lo;                    // the window's first magnitude
  sign_window_table(const codec_detail::rans_plan& plan, const encode_table& et, const rans::zero_symbols* skip = nullptr) {
    const unsigned start = encode_table::busiest<64>(128, [&](unsigned m) {
      return encode_table::weight(plan, m, skip) + encode_table::weight(plan, m | 0x80u, skip);
    });
    lo = _mm512_set1_epi32(static_cast<int>(start));
    for (unsigned sign = 0; sign < 2; ++sign) {
      alignas(64) std::uint32_t f[64], r[64];
      for (unsigned i = 0; i < 64; ++i) {  // (start <= 64: the window ends at magnitude 127 at most)
        const unsigned v = (start + i) | (sign << 7);
        f[i] = et.freq_cum[v];
        r[i] = et.rcp[v];
      }
      for (unsigned k = 0; k < 4; ++k) {
        fc[sign][k] = _mm512_load_si512(f + 16 * k);
        rcp[sign][k] = _mm512_load_si512(r + 16 * k);
      }
    }
  }
  __m512i inside() const { return lo; }  // (magnitude lo, sign +)
  bool lookup(__m512i sym, __m512i* freq_cum, __m512i* recip) const {
    const __m512i i = _mm512_sub_epi32(_mm512_and_si512(sym, _mm512_set1_epi32(0x7F)), lo);
    if (_mm512_test_epi32_mask(i, _mm512_set1_epi32(~63)) != 0) return false;
    const __mmask16 high = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32));
    const __mmask16 neg = _mm512_test_epi32_mask(sym, _mm512_set1_epi32(0x80));
    const auto pick = [&](const __m512i (&t)[2][4]) {
      const auto one = [&](const __m512i (&u)[4]) {
        return _mm512_mask_blend_epi32(high, _mm512_permutex2var_epi32(u[0], i, u[1]), _mm512_permutex2var_epi32(u[2], i, u[3]));
      };
      return _mm512_mask_blend_epi32(neg, one(t[0]), one(t[1]));
    };
    *freq_cum = pick(fc);
    *recip = pick(rcp);
    return true;
  }
};

// fp16's lookups by magnitude and sign together: the window is one of the values
// r = magnitude << 1 | sign (the symbol with its sign moved from bit 7 to bit 0), in which both
// signs of a magnitude are neighbours, so that 64 entries hold 32 magnitudes (eight exponents) of
// either sign and a lookup is two vpermt2d and a blend per field, one vpermt2d where the chunk's
// symbols (the zero symbols apart) all fall in 32 such values, against sign_window_table's four
// and three blends. A register with a lane outside the window (weights and activations have
// tails below its eight exponents) takes sign_window_table's lookup, and past that the gathers.
struct fp16_window_table {
  static constexpr unsigned rotated(unsigned v) { return ((v & 0x7Fu) << 1) | (v >> 7); }
  static constexpr unsigned symbol(unsigned r) { return (r >> 1) | ((r & 1u) << 7); }
  sign_window_table signs;
  __m512i fc[4], rcp[4];
  __m512i lo, first;  // the window's first value r, and its symbol (broadcast)
  __m512i lo_words;   // the window's first value r in each 16-bit lane
  bool narrow, held;  // held: the window holds every symbol (but the zero symbols)
  fp16_window_table(const codec_detail::rans_plan& plan, const encode_table& et, const rans::zero_symbols* skip = nullptr)
      : signs(plan, et, skip) {
    const auto weight = [&](unsigned r) { return encode_table::weight(plan, symbol(r), skip); };
    unsigned start = encode_table::busiest<32>(rans::symbols, weight);
    narrow = encode_table::holds_all(start, 32, weight);
    if (!narrow) start = encode_table::busiest<64>(rans::symbols, weight);
    held = narrow || encode_table::holds_all(start, 64, weight);
    // (the window tests rely on it: a value below the start wraps to at least the width)
    assert(start <= rans::symbols - (narrow ? 32u : 64u));
    lo = _mm512_set1_epi32(static_cast<int>(start));
    lo_words = _mm512_set1_epi16(static_cast<short>(start));
    first = _mm512_set1_epi32(static_cast<int>(symbol(start)));
    alignas(64) std::uint32_t f[64], r[64];
    for (unsigned i = 0; i < 64; ++i) {
      const unsigned v = start + i;
      const bool in = v < rans::symbols && (i < 32 || !narrow);
      f[i] = in ? et.freq_cum[symbol(v)] : 0u;
      r[i] = in ? et.rcp[symbol(v)] : 0u;
    }
    for (unsigned k = 0; k < 4; ++k) {
      fc[k] = _mm512_load_si512(f + 16 * k);
      rcp[k] = _mm512_load_si512(r + 16 * k);
    }
  }
  __m512i inside() const { return first; }
  // The checked lookups of sixteen symbols (0..255; encode_zeros_kernel's).
  bool lookup(__m512i sym, __m512i* freq_cum, __m512i* recip) const {
    // r = (sym << 1 | sym >> 7) & 0xFF (vpternlogd 0xA8: (a | b) & c)
    const __m512i r = _mm512_ternarylogic_epi32(_mm512_slli_epi32(sym, 1), _mm512_srli_epi32(sym, 7), _mm512_set1_epi32(0xFF), 0xA8);
    return window_entries<lookup_mode::checked>(fc, rcp, narrow, _mm512_sub_epi32(r, lo), freq_cum, recip) ||
           (!held && signs.lookup(sym, freq_cum, recip));
  }
  // The same by window indices i of the values r (split_indices) and lookup mode M, with the
  // symbols from sym() where the sign window is needed (a held mode's window_entries is always
  // true: the sign window is never reached there): the dense kernels'.
  template <lookup_mode M, class Symbols>
  ZIPCCL_ALWAYS_INLINE bool lookup_at(__m512i i, Symbols&& sym, __m512i* freq_cum, __m512i* recip) const {
    return window_entries<M>(fc, rcp, narrow, i, freq_cum, recip) || (!held && signs.lookup(sym(), freq_cum, recip));
  }
};

// The 32 low words of two registers' 32-bit lanes (vpermt2w), or the even words of 64: 0, 2, .. 62.
alignas(64) inline constexpr std::uint16_t even_words[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
                                                             32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62};

// The rest byte of each element of v (the format's: sign << 7 | the mantissa's top seven bits;
// fp16's low byte) in the low byte of its lane (bf16, fp16: 16-bit lanes; fp32: 32-bit lanes),
// other bits above it, for a truncating move or a byte permute (vpternlogd 0xE4: c ? a : b,
// bitwise).
template <class E>
inline __m512i rest_bytes(__m512i v) {
  if constexpr (std::is_same_v<E, fp32>)
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(v, 16), _mm512_srli_epi32(v, 24), _mm512_set1_epi32(0x7F), 0xE4);
  else if constexpr (std::is_same_v<E, bf16>)
    return _mm512_ternarylogic_epi32(v, _mm512_srli_epi16(v, 8), _mm512_set1_epi16(0x7F), 0xE4);
  else
    return v;
}

// The symbols of register k (lanes 16k..16k+15) of a full group loaded as v (bf16, fp16: the 32
// elements in v[0]; fp32: sixteen in each).
template <class E>
inline __m512i group_symbols(const __m512i (&v)[2], int k) {
  if constexpr (std::is_same_v<E, fp32>) {
    return _mm512_and_si512(_mm512_srli_epi32(v[k], 23), _mm512_set1_epi32(0xFF));
  } else {
    const __m512i e = _mm512_cvtepu16_epi32(k == 0 ? _mm512_castsi512_si256(v[0]) : _mm512_extracti64x4_epi64(v[0], 1));
    if constexpr (std::is_same_v<E, bf16>) return _mm512_and_si512(_mm512_srli_epi32(e, 7), _mm512_set1_epi32(0xFF));
    else return _mm512_srli_epi32(e, 8);
  }
}

// A full group of 32 elements at `in`: the symbols and the elements (zero-extended) as two
// registers of sixteen lanes each, the 32 rest bytes (rb) and, for fp32, the 32 rest words (rw).
template <class E>
inline void split_regs(const std::uint8_t* in, __m512i (&sym)[2], __m512i (&elem)[2], __m256i* rb, __m512i* rw) {
  __m512i v[2];
  if constexpr (std::is_same_v<E, fp32>) {
    __m128i b[2];
    __m256i w[2];
    for (int k = 0; k < 2; ++k) {
      v[k] = elem[k] = _mm512_loadu_si512(in + 64 * k);
      sym[k] = group_symbols<E>(v, k);
      b[k] = _mm512_cvtepi32_epi8(rest_bytes<E>(v[k]));
      w[k] = _mm512_cvtepi32_epi16(v[k]);
    }
    *rb = _mm256_set_m128i(b[1], b[0]);
    *rw = _mm512_inserti64x4(_mm512_castsi256_si512(w[0]), w[1], 1);
  } else {
    v[0] = _mm512_loadu_si512(in);
    v[1] = _mm512_setzero_si512();
    for (int k = 0; k < 2; ++k) sym[k] = group_symbols<E>(v, k);
    elem[0] = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(v[0]));
    elem[1] = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v[0], 1));
    *rb = _mm512_cvtepi16_epi8(rest_bytes<E>(v[0]));
    *rw = _mm512_setzero_si512();
  }
}

// A full group at `in` for encode_kernel: its rest sections written at bytes (32) and words (fp32:
// 32 x u16), its elements as loaded (v: bf16 and fp16, the 32 in v[0]; fp32, sixteen in each),
// and the window indices of its symbols (idx[k]: lanes 16k..16k+15; see entries32) from the
// window's first value lo, in each 16-bit lane (bf16, fp16) or 32-bit lane (fp32). For fp16 the
// value is r = magnitude << 1 | sign (fp16_window_table). The indices are taken where the
// elements are: in 16-bit lanes for bf16 and fp16 (one subtraction for 32 symbols; fp16's r by one
// vpshldw), with the bits above a symbol left in (bf16's sign, fp16's sign again and a
// borrow), which the lookups ignore; then one vpermw a register moves them to 32-bit lanes.
template <class E>
ZIPCCL_ALWAYS_INLINE inline void split_indices(const std::uint8_t* in, __m512i lo, __m512i (&v)[2], __m512i (&idx)[2],
                                               std::uint8_t* bytes, std::uint8_t* words) {
  if constexpr (std::is_same_v<E, fp32>) {
    // byte 0 of each lane of two registers
    alignas(64) static constexpr std::uint8_t first_bytes[64] = {
        0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84,
        88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    __m512i rest[2];
    for (int k = 0; k < 2; ++k) {
      v[k] = _mm512_loadu_si512(in + 64 * k);
      idx[k] = _mm512_sub_epi32(_mm512_srli_epi32(v[k], 23), lo);
      rest[k] = rest_bytes<E>(v[k]);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes),
                        _mm512_castsi512_si256(_mm512_permutex2var_epi8(rest[0], _mm512_load_si512(first_bytes), rest[1])));
    _mm512_storeu_si512(words, _mm512_permutex2var_epi16(v[0], _mm512_load_si512(even_words), v[1]));
  } else {
    (void)words;
    // the low bytes of the 32 lanes; words 16k..16k+15 spread to the low halves of sixteen lanes
    alignas(64) static constexpr std::uint8_t low_bytes[64] = {
        0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
        44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    alignas(64) static constexpr std::uint16_t spread[2][32] = {
        {0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0},
        {16, 0, 17, 0, 18, 0, 19, 0, 20, 0, 21, 0, 22, 0, 23, 0, 24, 0, 25, 0, 26, 0, 27, 0, 28, 0, 29, 0, 30, 0, 31, 0}};
    v[0] = _mm512_loadu_si512(in);
    v[1] = _mm512_setzero_si512();
    // bf16: the exponent, the sign above it; fp16: r = high << 1 | high >> 7 in the low byte, as
    // (high << 1) | (element >> 15) by vpshldw
    const __m512i value = std::is_same_v<E, bf16> ? _mm512_srli_epi16(v[0], 7) : _mm512_shldi_epi16(_mm512_srli_epi16(v[0], 8), v[0], 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes),
                        _mm512_castsi512_si256(_mm512_permutexvar_epi8(_mm512_load_si512(low_bytes), rest_bytes<E>(v[0]))));
    const __m512i i16 = _mm512_sub_epi16(value, lo);
    for (int k = 0; k < 2; ++k) idx[k] = _mm512_permutexvar_epi16(_mm512_load_si512(spread[k]), i16);
  }
}

// The 32 values of a group from its symbols (e & 0xFF of two registers) and rests: r, the rest
// bytes, and lo, fp32's rest words, each zero-extended to the lanes.
template <class E>
inline __m512i join_lanes(__m512i sym, __m512i r, __m512i lo) {
  if constexpr (std::is_same_v<E, fp32>)
    return _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(r, _mm512_set1_epi32(0x80)), 24), _mm512_slli_epi32(sym, 23)),
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(r, _mm512_set1_epi32(0x7F)), 16), lo));
  else if constexpr (std::is_same_v<E, bf16>)
    return _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(r, _mm512_set1_epi32(0x80)), 8), _mm512_slli_epi32(sym, 7)),
        _mm512_and_si512(r, _mm512_set1_epi32(0x7F)));
  else
    return _mm512_or_si512(_mm512_slli_epi32(sym, 8), r);
}

// Stores the sixteen values of register k of a group (lanes 16k..16k+15) at out.
template <class E>
inline void store_lanes(std::uint8_t* out, int k, __m512i v) {
  if constexpr (std::is_same_v<E, fp32>) _mm512_storeu_si512(out + 64 * k, v);
  else _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * k), _mm512_cvtepi32_epi16(v));
}

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
// the L2 cache, as plan_body's zero-group scan leaves it (PERFORMANCE.md, "fp16's sampled
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

// The encoder's kernel of a full group for the group loop of avx2::rans_simd::encode_chunk_with:
// the 32 states in two registers, lanes 31..16 first.
template <class E, lookup_mode Mode = lookup_mode::checked>
struct encode_kernel {
  using table_type = std::conditional_t<std::is_same_v<E, fp16>, fp16_window_table, window_table>;
  const encode_table& et;
  table_type wt;
  __m512i X[2];
  // (zero_symbols: the window is placed on the other symbols, as code looks the zero
  // symbols up apart)
  encode_kernel(const codec_detail::rans_plan& plan, const encode_table& t, bool zero_symbols = false)
      : et(t), wt(plan, t, zero_symbols ? &plan.zero : nullptr), X() {}
  // The same kernel for another lookup mode (its window as it is).
  template <lookup_mode M>
  explicit encode_kernel(const encode_kernel<E, M>& k) : et(k.et), wt(k.wt), X() {}
  // Runs f (avx2::rans_simd::encode_chunk_with's group loop) with the kernel for this chunk: one
  // whose lookups skip the window's test where the window holds every symbol.
  template <class F>
  ZIPCCL_ALWAYS_INLINE static std::uint64_t run(const codec_detail::rans_plan& plan, const encode_table& t, F&& f) {
    static_assert(Mode == lookup_mode::checked, "encode_kernel::run: chooses the mode itself");
    encode_kernel k(plan, t);
    if (k.wt.held && k.wt.narrow) {
      encode_kernel<E, lookup_mode::held_narrow> h(k);
      return f(h);
    }
    if (k.wt.held) {
      encode_kernel<E, lookup_mode::held_wide> h(k);
      return f(h);
    }
    return f(k);
  }
  // The body's symbol counts (plan_chunk).
  static void count(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                    std::uint32_t* counts) {
    if constexpr (std::is_same_v<E, fp16>) fp16_counts(in, m, shape, counts);
    else count_symbols<E>(in, m, shape, counts);
  }
  // The body's numbers of +0.0 and -0.0 (plan_chunk, where zero symbols could pay).
  static void zeros(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint64_t* n_pos,
                    std::uint64_t* n_neg) {
    count_zeros<E>(in, m, shape, n_pos, n_neg);
  }
  void load(const std::uint32_t* x) {
    for (int k = 0; k < 2; ++k) X[k] = _mm512_loadu_si512(x + 16 * k);
  }
  void store(std::uint32_t* x) const {
    for (int k = 0; k < 2; ++k) _mm512_storeu_si512(x + 16 * k, X[k]);
  }
  // Codes the group at `in`, its rest sections at bytes and words, its stream words pushed below
  // out + *top (which has room for 64 bytes and more).
  void group(const std::uint8_t* in, std::uint8_t* bytes, std::uint8_t* words, std::uint8_t* out, std::uint64_t* top) {
    __m512i v[2], idx[2];
    split_indices<E>(in, std::is_same_v<E, fp32> ? wt.lo : wt.lo_words, v, idx, bytes, words);
    std::uint64_t t = *top;
#pragma GCC unroll 2
    for (int k = 1; k >= 0; --k) {
      __m512i fc, rcp;
      const auto sym = [&]() { return group_symbols<E>(v, k); };
      if (!wt.template lookup_at<Mode>(idx[k], sym, &fc, &rcp)) {
        // (a held mode's lookups never miss: this is the checked kernel's)
        fc = _mm512_i32gather_epi32(sym(), et.freq_cum, 4);
        rcp = _mm512_i32gather_epi32(sym(), et.rcp, 4);
      }
      step(k, fc, rcp, out, &t);
    }
    *top = t;
  }
  // Codes the symbols of register k, whose table entries are fc (freq | cum << 16) and rcp, its
  // stream words pushed below out + *top.
  ZIPCCL_ALWAYS_INLINE void step(int k, __m512i fc, __m512i rcp, std::uint8_t* out, std::uint64_t* top) {
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i f = _mm512_and_si512(fc, _mm512_set1_epi32(0xFFFF)), cum = _mm512_srli_epi32(fc, 16);
    // push where x >= f << 20, i.e. where x >> 20 >= f (1 <= f <= 4096: every coded symbol has a
    // frequency; f = 4096 never pushes)
    const __mmask16 push = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(X[k], 20), f);
    const unsigned n = static_cast<unsigned>(_mm_popcnt_u32(push));
    *top -= 2 * n;
    _mm512_mask_cvtepi32_storeu_epi16(out + *top, static_cast<__mmask16>((1u << n) - 1u), _mm512_maskz_compress_epi32(push, X[k]));
    X[k] = _mm512_mask_srli_epi32(X[k], push, X[k], 16);
    // x = q << 12 + r + cum with q = x / f, r = x % f
    __m512i q = mulhi_epu32(X[k], rcp);
    __m512i r = _mm512_sub_epi32(X[k], _mm512_mullo_epi32(q, f));
    const __mmask16 over = _mm512_cmpge_epu32_mask(r, f);
    q = _mm512_mask_add_epi32(q, over, q, one);  // (the reciprocal's quotient is one short)
    r = _mm512_mask_sub_epi32(r, over, r, f);
    X[k] = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(q, rans::prob_bits), r), cum);
  }
  // The table entries of the zero symbols, broadcast (code, whose window lookups leave them
  // out).
  struct zero_entries {
    __m512i fc_pos, fc_neg, rcp_pos, rcp_neg;
    zero_entries(const codec_detail::rans_plan& plan, const encode_table& t)
        : fc_pos(_mm512_set1_epi32(static_cast<int>(t.freq_cum[plan.zero.pos]))),
          fc_neg(_mm512_set1_epi32(static_cast<int>(t.freq_cum[plan.zero.neg]))),
          rcp_pos(_mm512_set1_epi32(static_cast<int>(t.rcp[plan.zero.pos]))),
          rcp_neg(_mm512_set1_epi32(static_cast<int>(t.rcp[plan.zero.neg]))) {}
  };
  // Codes a group's symbols (two registers of sixteen lanes, lane order) for a body with zero
  // symbols (encode_zeros_kernel): the lanes of pos[k] and neg[k] hold the zero symbols, whose
  // entries come from z, not from the window.
  void code(const __m512i (&sym)[2], std::uint8_t* out, std::uint64_t* top, const __mmask16* pos, const __mmask16* neg,
            const zero_entries* z) {
    // (the zero lanes' lookups, which the window test guards, are the checked kernel's only)
    static_assert(Mode == lookup_mode::checked, "encode_kernel::code: zero lanes need the checked lookups");
    std::uint64_t t = *top;
#pragma GCC unroll 2
    for (int k = 1; k >= 0; --k) {
      __m512i fc, rcp;
      bool found = false;
      if (wt.lookup(_mm512_mask_blend_epi32(pos[k] | neg[k], sym[k], wt.inside()), &fc, &rcp)) {
        fc = _mm512_mask_blend_epi32(neg[k], _mm512_mask_blend_epi32(pos[k], fc, z->fc_pos), z->fc_neg);
        rcp = _mm512_mask_blend_epi32(neg[k], _mm512_mask_blend_epi32(pos[k], rcp, z->rcp_pos), z->rcp_neg);
        found = true;
      }
      if (!found) {
        fc = _mm512_i32gather_epi32(sym[k], et.freq_cum, 4);
        rcp = _mm512_i32gather_epi32(sym[k], et.rcp, 4);
      }
      step(k, fc, rcp, out, &t);
    }
    *top = t;
  }
};

// Bodies with zero symbols: the encoder's kernel of a full group. The zeros take the symbols zp
// and zn; the other lanes' rests, packed together in lane order by vpcompressb (fp32's words by
// vpcompressw) in a register, go just below rest index *rest by masked stores, and *rest moves
// down past them.
template <class E>
struct encode_zeros_kernel : encode_kernel<E> {
  typename encode_kernel<E>::zero_entries ze;
  __m512i zp, zn, neg0;
  encode_zeros_kernel(const codec_detail::rans_plan& plan, const encode_table& t)
      : encode_kernel<E>(plan, t, true), ze(plan, t), zp(_mm512_set1_epi32(static_cast<int>(plan.zero.pos))),
        zn(_mm512_set1_epi32(static_cast<int>(plan.zero.neg))),
        neg0(_mm512_set1_epi32(static_cast<int>(rans::split<E>::negative_zero))) {}
  void group(const std::uint8_t* in, std::uint8_t* bytes, std::uint8_t* words, std::uint64_t* rest, std::uint8_t* out,
             std::uint64_t* top) {
    __m512i sym[2], elem[2], rw;
    __m256i rb;
    split_regs<E>(in, sym, elem, &rb, &rw);
    std::uint32_t rests = 0;  // bit i: element i of the group is not a zero
    __mmask16 pos[2], neg[2];
    for (int k = 0; k < 2; ++k) {
      pos[k] = _mm512_cmpeq_epi32_mask(elem[k], _mm512_setzero_si512());
      neg[k] = _mm512_cmpeq_epi32_mask(elem[k], neg0);
      sym[k] = _mm512_mask_blend_epi32(neg[k], _mm512_mask_blend_epi32(pos[k], sym[k], zp), zn);
      rests |= static_cast<std::uint32_t>(static_cast<std::uint16_t>(~(pos[k] | neg[k]))) << (16 * k);
    }
    const unsigned live = static_cast<unsigned>(_mm_popcnt_u32(rests));
    const std::uint64_t at = *rest - live;
    _mm512_mask_storeu_epi8(bytes + at, _bzhi_u64(~std::uint64_t{0}, live),
                            _mm512_maskz_compress_epi8(rests, _mm512_castsi256_si512(rb)));
    if constexpr (std::is_same_v<E, fp32>)
      _mm512_mask_storeu_epi16(words + 2 * at, _bzhi_u32(~0u, live), _mm512_maskz_compress_epi16(rests, rw));
    else
      (void)words;
    *rest = at;
    this->code(sym, out, top, pos, neg, &ze);
  }
};

// The decoder's kernel of a full group for tables that a rank_table holds with at most Ranks
// symbols (32, 64 or 128) and 4 Pairs crowded buckets, without a gather: the group's 32 states
// are two registers of 32 16-bit lanes in lane order, their low halves (XL) and high halves (XH),
// so that every step works on all 32 lanes at once. A step: the slots' ranks (two vpermi2b, a
// compare, and one vpermi2b a pair of fine tables with a blend), the ranks' frequencies and starts
// (vpermw: one for 32 symbols, a vpermi2w for 64, two and a blend for 128),
// x = freq * (x >> 12) + offset as 16-bit products with a carry, the lanes whose high half is
// zero take the stream's next words in lane order (one vpexpandw); the values from the ranks'
// symbols and the rests by byte permutes and a vpternlogd.
template <class E, unsigned Ranks = 32, unsigned Pairs = 1>
struct decode_rank_kernel {
  static_assert(Ranks == 32 || Ranks == 64 || Ranks == 128, "decode_rank_kernel: 32, 64 or 128 symbols");
  static_assert(Pairs >= 1 && Pairs <= rank_table::max_crowded / 4, "decode_rank_kernel: 1 to 4 pairs of fine tables");
  static constexpr unsigned ranks = Ranks, pairs = Pairs;
  static constexpr unsigned word_regs = Ranks / 32;  // (a table of 16-bit words a rank)
  static constexpr unsigned sym_shift = std::is_same_v<E, fp16> ? 8 : 7;  // (where a value's 16 bits hold the symbol)
  __m512i coarse[2], bound[2], fine[2 * Pairs], freq[word_regs], cum[word_regs], sym[word_regs];
  __m512i XL, XH;
  explicit decode_rank_kernel(const rank_table& rt) : XL(), XH() {
    alignas(64) std::uint8_t c[rank_table::buckets];
    alignas(64) std::uint16_t sw[Ranks];
    // (one pair of fine tables: a crowded bucket's coarse byte holds its fine table's offset,
    // 0x80 | i << 5, which makes its slots' index with an OR)
    // (run picks this kernel only where rt.fits(Ranks, Pairs): crowded bucket i < 4 Pairs)
    for (unsigned b = 0; b < rank_table::buckets; ++b)
      c[b] = Pairs == 1 && (rt.coarse[b] & 0x80u) ? static_cast<std::uint8_t>(0x80u | (rt.coarse[b] & 0x7Fu) << 5) : rt.coarse[b];
    for (unsigned r = 0; r < Ranks; ++r) sw[r] = static_cast<std::uint16_t>(rt.sym[r] << sym_shift);
    for (int k = 0; k < 2; ++k) {
      coarse[k] = _mm512_load_si512(c + 64 * k);
      bound[k] = _mm512_load_si512(rt.bound + 64 * k);
    }
    for (unsigned k = 0; k < 2 * Pairs; ++k) fine[k] = _mm512_load_si512(rt.fine + 64 * k);
    for (unsigned k = 0; k < word_regs; ++k) {
      freq[k] = _mm512_load_si512(rt.freq + 32 * k);
      cum[k] = _mm512_load_si512(rt.cum + 32 * k);
      sym[k] = _mm512_load_si512(sw + 32 * k);
    }
  }
  void load(const std::uint32_t* x) {
    const __m512i a = _mm512_loadu_si512(x), b = _mm512_loadu_si512(x + 16);
    const __m512i even = _mm512_load_si512(even_words);
    XL = _mm512_permutex2var_epi16(a, even, b);
    XH = _mm512_permutex2var_epi16(a, _mm512_add_epi16(even, _mm512_set1_epi16(1)), b);
  }
  void store(std::uint32_t* x) const {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5,
                                        36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    _mm512_storeu_si512(x, _mm512_permutex2var_epi16(XL, lo, XH));
    _mm512_storeu_si512(x + 16, _mm512_permutex2var_epi16(XL, _mm512_add_epi16(lo, _mm512_set1_epi16(16)), XH));
  }
  // The 16-bit words of table t (word_regs registers) at the 32 ranks r.
  ZIPCCL_ALWAYS_INLINE static __m512i lookup(const __m512i (&t)[word_regs], __m512i r) {
    if constexpr (Ranks == 32) {
      return _mm512_permutexvar_epi16(r, t[0]);
    } else if constexpr (Ranks == 64) {
      return _mm512_permutex2var_epi16(t[0], r, t[1]);
    } else {
      return _mm512_mask_blend_epi16(_mm512_test_epi16_mask(r, _mm512_set1_epi16(64)), _mm512_permutex2var_epi16(t[0], r, t[1]),
                                     _mm512_permutex2var_epi16(t[2], r, t[3]));
    }
  }
  // The ranks of the 32 slots (the low twelve bits of XL).
  ZIPCCL_ALWAYS_INLINE __m512i rank() const {
    const __mmask64 low_bytes = 0x5555555555555555ull;
    // (vpermi2b reads an index byte's low seven bits: XL >> 5's low byte is the slot's bucket,
    // and the high bytes' results are zeroed)
    const __m512i b = _mm512_srli_epi16(XL, 5), in = _mm512_and_si512(XL, _mm512_set1_epi16(31));
    const __m512i c = _mm512_maskz_permutex2var_epi8(low_bytes, coarse[0], b, coarse[1]);
    const __m512i bd = _mm512_maskz_permutex2var_epi8(low_bytes, bound[0], b, bound[1]);
    const __m512i r = _mm512_mask_add_epi16(c, _mm512_cmpge_epu16_mask(in, bd), c, _mm512_set1_epi16(1));
    // a crowded bucket's slots: fine table i's byte `in`; the index's bits 7.. pick the pair
    // (vpermi2b ignores them; c's bit 7, the crowded mark, lands above them)
    const __m512i i = Pairs == 1 ? _mm512_or_si512(c, in) : _mm512_or_si512(_mm512_slli_epi16(c, 5), in);
    __m512i f = _mm512_maskz_permutex2var_epi8(low_bytes, fine[0], i, fine[1]);
    for (unsigned p = 1; p < Pairs; ++p)
      f = _mm512_mask_blend_epi16(_mm512_cmpge_epu16_mask(_mm512_and_si512(i, _mm512_set1_epi16(0x180)), _mm512_set1_epi16(static_cast<short>(p << 7))),
                                  f, _mm512_maskz_permutex2var_epi8(low_bytes, fine[2 * p], i, fine[2 * p + 1]));
    return _mm512_mask_blend_epi16(_mm512_test_epi16_mask(c, _mm512_set1_epi16(0x80)), r, f);
  }
  // One step of the 32 states: their slots' ranks, and the states advanced and refilled from
  // stream word *next on (at least 32 are left).
  ZIPCCL_ALWAYS_INLINE __m512i step(const std::uint8_t* stream, std::uint64_t* next) {
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i r = rank();
    const __m512i f = lookup(freq, r);
    const __m512i d = _mm512_and_si512(_mm512_sub_epi16(XL, lookup(cum, r)),
                                       _mm512_set1_epi16(static_cast<short>(rans::prob_total - 1u)));
    // x = f * q + d for q = x >> 12 (< 2^20): its low half, and its high half f * (q >> 16) +
    // the high half of f * (q & 0xFFFF) + the carry out of the low half
    const __m512i ql = _mm512_shldi_epi16(XH, XL, 4), qh = _mm512_srli_epi16(XH, 12);
    const __m512i lo = _mm512_add_epi16(_mm512_mullo_epi16(f, ql), d);
    __m512i hi = _mm512_add_epi16(_mm512_mulhi_epu16(f, ql), _mm512_mullo_epi16(f, qh));
    hi = _mm512_mask_add_epi16(hi, _mm512_cmplt_epu16_mask(lo, d), hi, one);
    // below 2^16: x << 16 | the next word, in lane order
    const __mmask32 low = _mm512_testn_epi16_mask(hi, hi);
    const __m512i w = _mm512_maskz_expand_epi16(low, _mm512_loadu_si512(stream + 2 * *next));
    *next += static_cast<unsigned>(_mm_popcnt_u32(low));
    XL = _mm512_mask_blend_epi16(low, lo, w);
    XH = _mm512_mask_blend_epi16(low, hi, lo);
    return r;
  }
  // Stores the 32 values of ranks r at out, their rests rb (the rest bytes in lane order, the low
  // 32 bytes) and rw (fp32: the rest words); with Zeros, the lanes of pos and neg are +0.0 and
  // -0.0.
  template <bool Zeros = false>
  ZIPCCL_ALWAYS_INLINE void values(__m512i r, __m512i rb, __m512i rw, std::uint8_t* out, __mmask32 pos = 0,
                                   __mmask32 neg = 0) const {
    const __m512i s = lookup(sym, r);
    if constexpr (std::is_same_v<E, fp32>) {
      // value i: bytes 0..1 its rest word, 2..3 its rest byte (sign at bit 31, mantissa at
      // 16..22), the symbol's bits 23..30 from s's word i (in the high half)
      for (int k = 0; k < 2; ++k) {
        // (byte indices 32k + 2i, 32k + 2i + 1 into rw, 64 + 16k + i twice into rb)
        const __m512i bi = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x40400100u + 0x10102020u * k)),
                                            _mm512_set_epi32(0x0F0F1E1E, 0x0E0E1C1C, 0x0D0D1A1A, 0x0C0C1818, 0x0B0B1616,
                                                             0x0A0A1414, 0x09091212, 0x08081010, 0x07070E0E, 0x06060C0C,
                                                             0x05050A0A, 0x04040808, 0x03030606, 0x02020404, 0x01010202, 0));
        const __m512i wi = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x00100000u * k)),
                                            _mm512_set_epi32(0x000F0000, 0x000E0000, 0x000D0000, 0x000C0000, 0x000B0000,
                                                             0x000A0000, 0x00090000, 0x00080000, 0x00070000, 0x00060000,
                                                             0x00050000, 0x00040000, 0x00030000, 0x00020000, 0x00010000, 0));
        __m512i v = _mm512_ternarylogic_epi32(_mm512_set1_epi32(static_cast<int>(0x807FFFFFu)),
                                              _mm512_permutex2var_epi8(rw, bi, rb), _mm512_permutexvar_epi16(wi, s), 0xCA);
        if constexpr (Zeros) {
          v = _mm512_mask_mov_epi32(v, static_cast<__mmask16>(pos >> (16 * k)), _mm512_setzero_si512());
          v = _mm512_mask_mov_epi32(v, static_cast<__mmask16>(neg >> (16 * k)), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
        }
        _mm512_storeu_si512(out + 64 * k, v);
      }
    } else {
      (void)rw;
      __m512i v;
      if constexpr (std::is_same_v<E, bf16>) {  // sign << 15 | symbol << 7 | mantissa
        const __m512i twice = _mm512_set_epi8(31, 31, 30, 30, 29, 29, 28, 28, 27, 27, 26, 26, 25, 25, 24, 24, 23, 23, 22, 22,
                                              21, 21, 20, 20, 19, 19, 18, 18, 17, 17, 16, 16, 15, 15, 14, 14, 13, 13, 12, 12,
                                              11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        v = _mm512_ternarylogic_epi32(_mm512_set1_epi16(static_cast<short>(0x807F)), _mm512_permutexvar_epi8(twice, rb), s, 0xCA);
      } else {  // symbol << 8 | rest byte
        v = _mm512_or_si512(s, _mm512_cvtepu8_epi16(_mm512_castsi512_si256(rb)));
      }
      if constexpr (Zeros) {
        v = _mm512_mask_mov_epi16(v, pos, _mm512_setzero_si512());
        v = _mm512_mask_mov_epi16(v, neg, _mm512_set1_epi16(static_cast<short>(0x8000)));
      }
      _mm512_storeu_si512(out, v);
    }
  }
  // Decodes a full group into out, its rest sections at bytes and words, taking the stream's
  // words from stream[*next] on (at least 32 are left).
  // (forced inline, as step and values are: with a loop instantiated for each kernel, GCC stops
  // inlining them, and the tables go through memory at every call)
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* bytes, const std::uint8_t* words, const std::uint8_t* stream,
                                  std::uint64_t* next, std::uint8_t* out) {
    const __m512i r = step(stream, next);
    const __m512i rb = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
    values(r, rb, std::is_same_v<E, fp32> ? _mm512_loadu_si512(words) : _mm512_setzero_si512(), out);
  }
};

// The rank kernel of a full group of a body with zero symbols: lanes whose rank is zp's or zn's
// are +0.0 or -0.0; the others' rests, stored together from rest index *rest on, go out to them
// by one vpexpandb of 32 bytes (fp32's words by one vpexpandw). Needs 32 rests left (it reads 32
// bytes, and 32 words, from *rest on).
template <class E, unsigned Ranks = 32, unsigned Pairs = 1>
struct decode_rank_zeros_kernel : decode_rank_kernel<E, Ranks, Pairs> {
  __m512i zp, zn;  // (the ranks of zp and zn)
  decode_rank_zeros_kernel(const rank_table& rt, const rans::zero_symbols& z)
      : decode_rank_kernel<E, Ranks, Pairs>(rt), zp(_mm512_set1_epi16(static_cast<short>(rt.rank_of(z.pos)))),
        zn(_mm512_set1_epi16(static_cast<short>(rt.rank_of(z.neg)))) {}
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* bytes, const std::uint8_t* words, std::uint64_t* rest,
                                  const std::uint8_t* stream, std::uint64_t* next, std::uint8_t* out) {
    const __m512i r = this->step(stream, next);
    const __mmask32 pos = _mm512_cmpeq_epi16_mask(r, zp), neg = _mm512_cmpeq_epi16_mask(r, zn);
    const __mmask32 rests = ~(pos | neg);
    const std::uint64_t j = *rest;
    const __m512i rb = _mm512_maskz_expand_epi8(rests, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + j))));
    const __m512i rw = std::is_same_v<E, fp32> ? _mm512_maskz_expand_epi16(rests, _mm512_loadu_si512(words + 2 * j))
                                               : _mm512_setzero_si512();
    this->template values<true>(r, rb, rw, out, pos, neg);
    *rest = j + static_cast<unsigned>(_mm_popcnt_u32(rests));
  }
};

// The decoder's kernel of a full group for avx2::rans_simd::decode_body_with: lanes 0..15 first.
template <class E>
struct decode_kernel {
  const rans::decode_table& t;
  __m512i X[2];
  explicit decode_kernel(const rans::decode_table& table) : t(table), X() {}
  // Runs f with the kernel for table t: decode_rank_kernel where a rank_table holds it, else
  // this one (and for two tables, run_pair: rank kernels where both are held).
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run(const rans::decode_table& t, F&& f) {
    const rank_table rt(t);
    if (rt.fits(32, 1)) return f(decode_rank_kernel<E, 32, 1>(rt));
    if (rt.fits(64, 1)) return f(decode_rank_kernel<E, 64, 1>(rt));
    if (rt.fits(128, 3)) return f(decode_rank_kernel<E, 128, 3>(rt));
    return f(decode_kernel(t));
  }
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run_pair(const rans::decode_table& ta, const rans::decode_table& tb, F&& f) {
    const rank_table ra(ta), rb(tb);
    if (ra.fits(32, 1) && rb.fits(32, 1)) return f(decode_rank_kernel<E, 32, 1>(ra), decode_rank_kernel<E, 32, 1>(rb));
    if (ra.fits(64, 1) && rb.fits(64, 1)) return f(decode_rank_kernel<E, 64, 1>(ra), decode_rank_kernel<E, 64, 1>(rb));
    if (ra.fits(128, 3) && rb.fits(128, 3)) return f(decode_rank_kernel<E, 128, 3>(ra), decode_rank_kernel<E, 128, 3>(rb));
    return f(decode_kernel(ta), decode_kernel(tb));
  }
  void load(const std::uint32_t* x) {
    for (int k = 0; k < 2; ++k) X[k] = _mm512_loadu_si512(x + 16 * k);
  }
  void store(std::uint32_t* x) const {
    for (int k = 0; k < 2; ++k) _mm512_storeu_si512(x + 16 * k, X[k]);
  }
  // One step of register k: its slots' words (symbol, offset, frequency), its states advanced
  // and refilled from stream word *n on.
  __m512i step(int k, const std::uint8_t* stream, std::uint64_t* n) {
    const __m512i slot_mask = _mm512_set1_epi32(static_cast<int>(rans::prob_total - 1u));
    const __m512i fff = _mm512_set1_epi32(0xFFF), one = _mm512_set1_epi32(1);
    const __m512i low_bound = _mm512_set1_epi32(static_cast<int>(rans::state_low));
    const __m512i e = gather16(t.slot, _mm512_and_si512(X[k], slot_mask));
    const __m512i f = _mm512_add_epi32(_mm512_srli_epi32(e, 20), one);
    const __m512i x1 = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(X[k], rans::prob_bits)),
                                        _mm512_and_si512(_mm512_srli_epi32(e, 8), fff));
    const __mmask16 low = _mm512_cmplt_epu32_mask(x1, low_bound);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(stream + 2 * *n)));
    X[k] = _mm512_mask_or_epi32(x1, low, _mm512_slli_epi32(x1, 16), _mm512_maskz_expand_epi32(low, w));
    *n += static_cast<unsigned>(_mm_popcnt_u32(low));
    return e;
  }
  // Decodes a full group into out, its rest sections at bytes and words, taking the stream's
  // words from stream[*next] on (at least 32 are left).
  void group(const std::uint8_t* bytes, const std::uint8_t* words, const std::uint8_t* stream, std::uint64_t* next,
             std::uint8_t* out) {
    const __m512i ff = _mm512_set1_epi32(0xFF);
    std::uint64_t n = *next;
    for (int k = 0; k < 2; ++k) {
      const __m512i sym = _mm512_and_si512(step(k, stream, &n), ff);
      const __m512i r = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16 * k)));
      __m512i lo = _mm512_setzero_si512();
      if constexpr (std::is_same_v<E, fp32>)
        lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 32 * k)));
      store_lanes<E>(out, k, join_lanes<E>(sym, r, lo));
    }
    *next = n;
  }
};

// The decoder's kernel of a full group of a body with zero symbols: lanes that decode zp or zn are
// +0.0 or -0.0; the others' rests, stored together from rest index *rest on, go out to them by one
// vpexpandb of 32 bytes (fp32's words by one vpexpandw) for both registers. Needs 32 rests left
// (it reads 32 bytes, and 32 words, from *rest on).
template <class E>
struct decode_zeros_kernel : decode_kernel<E> {
  __m512i zp, zn, neg0;
  decode_zeros_kernel(const rans::decode_table& table, const rans::zero_symbols& z)
      : decode_kernel<E>(table), zp(_mm512_set1_epi32(static_cast<int>(z.pos))),
        zn(_mm512_set1_epi32(static_cast<int>(z.neg))),
        neg0(_mm512_set1_epi32(static_cast<int>(rans::split<E>::negative_zero))) {}
  // Runs f with the kernel for table t: decode_rank_zeros_kernel where a rank_table holds it (as
  // decode_kernel::run picks), else this one.
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run(const rans::decode_table& t, const rans::zero_symbols& z, F&& f) {
    const rank_table rt(t);
    if (rt.fits(32, 1)) return f(decode_rank_zeros_kernel<E, 32, 1>(rt, z));
    if (rt.fits(64, 1)) return f(decode_rank_zeros_kernel<E, 64, 1>(rt, z));
    if (rt.fits(128, 3)) return f(decode_rank_zeros_kernel<E, 128, 3>(rt, z));
    return f(decode_zeros_kernel(t, z));
  }
  void group(const std::uint8_t* bytes, const std::uint8_t* words, std::uint64_t* rest, const std::uint8_t* stream,
             std::uint64_t* next, std::uint8_t* out) {
    const __m512i ff = _mm512_set1_epi32(0xFF);
    std::uint64_t n = *next;
    const std::uint64_t j = *rest;
    __m512i sym[2];
    __mmask16 neg[2];
    std::uint32_t rests = 0;  // bit i: element i of the group is not a zero
    for (int k = 0; k < 2; ++k) {
      sym[k] = _mm512_and_si512(this->step(k, stream, &n), ff);
      const __mmask16 pos = _mm512_cmpeq_epi32_mask(sym[k], zp);
      neg[k] = _mm512_cmpeq_epi32_mask(sym[k], zn);
      rests |= static_cast<std::uint32_t>(static_cast<std::uint16_t>(~(pos | neg[k]))) << (16 * k);
    }
    const __m512i rb = _mm512_maskz_expand_epi8(
        rests, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + j))));
    __m512i rw = _mm512_setzero_si512();
    if constexpr (std::is_same_v<E, fp32>) rw = _mm512_maskz_expand_epi16(rests, _mm512_loadu_si512(words + 2 * j));
    for (int k = 0; k < 2; ++k) {
      const __m512i r = _mm512_cvtepu8_epi32(k == 0 ? _mm512_castsi512_si128(rb) : _mm512_extracti32x4_epi32(rb, 1));
      const __m512i lo = _mm512_cvtepu16_epi32(k == 0 ? _mm512_castsi512_si256(rw) : _mm512_extracti64x4_epi64(rw, 1));
      const __mmask16 live = static_cast<__mmask16>(rests >> (16 * k));
      // zeros: +0.0 where the lane decoded zp, -0.0 where zn
      const __m512i zero = _mm512_mask_blend_epi32(neg[k], _mm512_setzero_si512(), neg0);
      store_lanes<E>(out, k, _mm512_mask_blend_epi32(live, zero, join_lanes<E>(sym[k], r, lo)));
    }
    *next = n;
    *rest = j + static_cast<unsigned>(_mm_popcnt_u32(rests));
  }
};

template <class E>
std::uint64_t encode_rans_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                const codec_detail::body_shape& shape, const read_ahead& ahead = {}) {
  return avx2::rans_simd::encode_chunk_with<E, encode_kernel<E>, encode_zeros_kernel<E>>(in, m, seal, out, shape,
                                                                                        ahead);
}

template <class E>
status decode_rans_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                        const codec_detail::body_shape& body, std::uint8_t* out) {
  return avx2::rans_simd::decode_body_with<E, decode_kernel<E>, decode_zeros_kernel<E>>(chunk, m, h, body, out);
}

// Two dense rANS bodies in one loop (avx2::rans_simd::decode_pair_with): four chains of sixteen
// states in flight instead of two, which Intel's cores overlap (PERFORMANCE.md).
template <class E>
bool decode_rans_pair(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  return avx2::rans_simd::decode_pair_with<E, decode_kernel<E>>(chunk, m, h, body, out);
}

}  // namespace zipccl::host::detail::avx512::rans_simd
