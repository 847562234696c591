// zipccl: the AVX-512 rANS encoder's kernels of a full group of 32 lanes, for rans_loops::
// encode_chunk_with (avx512_rans.hpp's encode_rans_chunk runs them):
//   encode_kernel        two registers of sixteen 32-bit states; a register's (freq | cum << 16)
//                        and reciprocals come from registers when its symbols fall in a window of
//                        64 values (window_table; fp16: fp16_window_table, sign_window_table behind
//                        it), else from two gathers; the lanes at or above freq << 20 give up their
//                        low 16 bits in lane order (vpcompressd, a masked vpmovdw) just below the
//                        stream's start; x = (x / freq) << 12 + x % freq + cum by a 32-bit
//                        reciprocal multiply and one correction step. Its run picks, per chunk,
//                        the lookups that skip the window's test where the window holds every
//                        symbol.
//   encode_zeros_kernel  bodies with zero symbols: the other lanes' rests packed by one
//                        vpcompressb (fp32's words: vpcompressw), the zero lanes' entries blended
//                        in from registers, so zeros do not send a register to the gathers.
// The bytes are the reference's (test_host_simd_avx512 compares them on AVX-512 hardware,
// test_host_simd_avx512_emulated on any x86 with AVX2). A kernel codes full groups only, with room
// for 64 stream bytes below the stream's start. Needs AVX-512 F, BW, VBMI and VBMI2 with AVX2
// (where ZIPCCL_HAS_AVX512 and ZIPCCL_HAS_AVX2 hold).
#pragma once

#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx512_rans_common.hpp"
#include "avx512_rans_counts.hpp"
#include "rans_group_loops.hpp"

namespace zipccl::host::detail::avx512::rans_simd {

namespace rans = codec_detail::rans;
using rans_loops::encode_table;

// The high 32 bits of the sixteen products a * b (unsigned): the even lanes' 64-bit products
// (vpmuludq) have their high halves in the odd lanes, which one masked vpshufd (0xF5: lanes
// 1 1 3 3 of each quarter) moves down beside the odd lanes' own products.
inline __m512i mulhi_epu32(__m512i a, __m512i b) {
  const __m512i even = _mm512_mul_epu32(a, b);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
  return _mm512_mask_shuffle_epi32(odd, static_cast<__mmask16>(0x5555), even, static_cast<_MM_PERM_ENUM>(0xF5));
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

// The encoder's kernel of a full group for the group loop of rans_loops::encode_chunk_with:
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
  // Runs f (rans_loops::encode_chunk_with's group loop) with the kernel for this chunk: one
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

}  // namespace zipccl::host::detail::avx512::rans_simd
