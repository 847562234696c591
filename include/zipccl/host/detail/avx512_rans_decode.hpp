// zipccl: the AVX-512 rANS decoder's kernels of a full group of 32 lanes, for rans_loops::
// decode_body_with and decode_pair_with (avx512_rans.hpp's decode_rans_body and decode_rans_pair):
//   decode_rank_kernel   tables of at most 128 symbols and 12 crowded buckets (rank_table): the
//                        32 states as two registers of 16-bit halves; a step takes the slots'
//                        ranks from byte tables in registers (vpermi2b), their frequencies and
//                        starts (vpermw), computes x = freq * (x >> 12) + offset in 16-bit
//                        products and refills the lanes below 2^16 in lane order by one vpexpandw;
//                        decode_rank_zeros_kernel the same for bodies with zero symbols.
//   decode_kernel        the other tables: two registers of sixteen 32-bit states, the slot words
//                        by a gather (gather16); decode_zeros_kernel for bodies with zero symbols,
//                        whose rests go out to the other lanes by one vpexpandb (fp32's words:
//                        vpexpandw).
// A kernel class's run picks the kernel for a table (run_pair for two, rank kernels where both
// tables fit one). The values and the words taken are the reference's (test_host_simd_avx512 and
// test_host_simd_avx512_emulated compare them). A group needs 32 stream words left (a zero-symbol
// group also 32 rests) and checks nothing: the loop checks the cursors and the final states.
// Needs AVX-512 F, BW, VBMI and VBMI2 with AVX2 (where ZIPCCL_HAS_AVX512 and ZIPCCL_HAS_AVX2 hold).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx512_rans_common.hpp"
#include "rank_table.hpp"

namespace zipccl::host::detail::avx512::rans_simd {

namespace rans = codec_detail::rans;
using detail::rank_table;

// The sixteen words base[idx]: by one 16-lane gather, or by two 8-lane ones.
inline __m512i gather16_wide(const std::uint32_t* base, __m512i idx) {
  return _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(base), 4);
}
inline __m512i gather16_halves(const std::uint32_t* base, __m512i idx) {
  const int* b = reinterpret_cast<const int*>(base);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_i32gather_epi32(b, _mm512_castsi512_si256(idx), 4)),
                            _mm256_i32gather_epi32(b, _mm512_extracti64x4_epi64(idx, 1), 4), 1);
}
// The decoder's gather. Where the build targets a core whose 16-lane gather is split in two
// anyway (__znver4__ / __znver5__, which GCC's -march=native sets on those cores), two 8-lane
// gathers, which decode sparse bodies faster there and dense ones as fast; elsewhere one 16-lane
// gather, which overlaps better with a second chunk's work (docs/decisions.md, "Host kernels:
// AVX-512", has the figures). test_simd.cpp checks both on every build.
inline __m512i gather16(const std::uint32_t* base, __m512i idx) {
#if defined(__znver4__) || defined(__znver5__)
  return gather16_halves(base, idx);
#else
  return gather16_wide(base, idx);
#endif
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

// The decoder's kernel of a full group for rans_loops::decode_body_with: lanes 0..15 first.
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

}  // namespace zipccl::host::detail::avx512::rans_simd
