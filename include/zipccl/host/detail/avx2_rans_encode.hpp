// zipccl: the AVX2 rANS encoder's kernels of a full group of 32 lanes, for rans_loops::
// encode_chunk_with (avx2_rans.hpp's encode_rans_chunk runs them):
//   encode_kernel        the 32 states in four registers of eight, lanes 31..24 first; (freq, cum)
//                        and reciprocals by eight scalar loads of encode_table (lookup8); the lanes
//                        with x >> 20 >= freq give up their low 16 bits, packed in lane order by
//                        one shuffle just below the stream's start; x = (x / freq) << 12 +
//                        x % freq + cum by a 32-bit reciprocal multiply and one correction step.
//   encode_zeros_kernel  bodies with zero symbols (rans::zeros_pay): the zero lanes found by
//                        comparing the elements with +0.0 and -0.0, the other lanes' rests packed
//                        eight at a time by pshufb (rest_tables), the symbols looked up from the
//                        elements where zeros_encode_table allows it.
// The registers take the lanes in the reference's order (lane 31 first), so the words land where
// the reference puts them. A kernel codes full groups only, where the stream has room for 64
// bytes more and 16 below them (a register's store reaches 16 bytes below the stream's start);
// the loop gives every other group to the reference. Needs AVX2 (where ZIPCCL_HAS_AVX2 holds).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx2.hpp"
#include "avx2_rans_common.hpp"
#include "avx2_rans_counts.hpp"
#include "rans_group_loops.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

namespace rans = codec_detail::rans;
using rans_loops::encode_table;

// The high 32 bits of the eight products a * b (unsigned).
inline __m256i mulhi_epu32(__m256i a, __m256i b) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, b), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// The freq_cum and rcp words of eight lanes (lane order) of table et from their symbols
// symbol(l), l = 0..7: eight scalar loads of et.entry (lookup8, lookup8_symbols).
template <class Symbol>
ZIPCCL_ALWAYS_INLINE inline void entries8(const encode_table& et, Symbol&& symbol, __m256i* fc, __m256i* recip) {
  const auto e = [&](int l) { return static_cast<long long>(et.entry[symbol(l)]); };
  // lanes 0 1 4 5 (g0) and 2 3 6 7 (g1), an entry a 64-bit half: the low words of the two, in
  // lane order, by one shufps, the high words by another
  const __m256i g0 = from_u64(e(0), e(1), e(4), e(5)), g1 = from_u64(e(2), e(3), e(6), e(7));
  *fc = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), 0x88));
  *recip = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), 0xDD));
}

// The freq_cum and rcp words of eight lanes (lane order) of table et, from their elements at
// `in` (lookup8) or their symbols at sym (lookup8_symbols): eight scalar loads of `entry`, two
// 64-bit entries an xmm by vmovq and vpinsrq, and one shufps a field: faster than two gathers
// (fp16) or a window of 32 entries in registers (bf16, fp32) (docs/decisions.md, "Host kernels:
// AVX2").
template <class E>
ZIPCCL_ALWAYS_INLINE inline void lookup8(const encode_table& et, const std::uint8_t* in, __m256i* fc, __m256i* recip) {
  entries8(et, [&](int l) {
    if constexpr (std::is_same_v<E, fp16>) {
      return static_cast<unsigned>(in[2 * l + 1]);  // (the high byte)
    } else {  // sign and exponent (the symbol, the exponent, in entry's second half where negative)
      using bits_type = typename E::bits_type;
      std::uint32_t v = format::load_le<bits_type>(in + l * sizeof(bits_type));
#if defined(__GNUC__)
      // (a 32-bit value to GCC: of bf16's it made a 16-bit shift and a mask, one instruction a lane more)
      asm("" : "+r"(v));
#endif
      return v >> (8 * sizeof(bits_type) - 9);
    }
  }, fc, recip);
}
ZIPCCL_ALWAYS_INLINE inline void lookup8_symbols(const encode_table& et, const std::uint32_t* sym, __m256i* fc,
                                                 __m256i* recip) {
  entries8(et, [&](int l) { return sym[l]; }, fc, recip);
}

// The AVX2 encoder's kernel of a full group for encode_chunk_with: the 32 states in four
// registers, lanes 31..24 first.
template <class E>
struct encode_kernel {
  const encode_table& et;
  const mask_tables& mt;
  __m256i X[4];
  explicit encode_kernel(const encode_table& t) : et(t), mt(tables()), X() {}
  // Runs f (encode_chunk_with's group loop) with the kernel for this chunk (here always this one).
  template <class F>
  ZIPCCL_ALWAYS_INLINE static std::uint64_t run(const codec_detail::rans_plan&, const encode_table& t, F&& f) {
    encode_kernel k(t);
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
    avx2::count_zeros<E>(in, m, shape, n_pos, n_neg);
  }
  void load(const std::uint32_t* x) { load_states(x, X); }
  void store(std::uint32_t* x) const { store_states(X, x); }
  // Codes the group at `in`, its rest sections at bytes and words, its stream words pushed below
  // out + *top (each register's store reaches 16 bytes below the stream's start: the loop leaves
  // room for 64 bytes and more).
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* in, std::uint8_t* bytes, std::uint8_t* words, std::uint8_t* out,
                                  std::uint64_t* top) {
    avx2::group_rest<E>(in, bytes, words);
    code(in, nullptr, out, top);
  }
  // Codes a group: the symbols of the 32 elements at `in` or, where sym is not null (bodies with
  // zero symbols, whose zeros take zp and zn), the 32 symbols at sym (lane order).
  ZIPCCL_ALWAYS_INLINE void code(const std::uint8_t* in, const std::uint32_t* sym, std::uint8_t* out,
                                 std::uint64_t* top) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i low_words = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                               0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    std::uint64_t t = *top;
    // (unrolled, so that the four registers' states stay in registers: GCC 12 keeps the loop and
    // the states in memory otherwise)
#pragma GCC unroll 4
    for (int k = 3; k >= 0; --k) {
      __m256i fc, rcp;
      if (sym != nullptr) lookup8_symbols(et, sym + 8 * k, &fc, &rcp);
      else lookup8<E>(et, in + 8 * k * format::chunk_layout<E>::elem_size, &fc, &rcp);
      // (the low halves by a blend with zero: the register pressure here would reload a mask)
      const __m256i f = _mm256_blend_epi16(fc, _mm256_setzero_si256(), 0xAA), cum = _mm256_srli_epi32(fc, 16);
      // push where x >= f << 20, i.e. where x >> 20 >= f; stay marks the others, where f > x >> 20
      // (both below 2^13: a signed compare; f = 4096 never pushes)
      const __m256i stay = _mm256_cmpgt_epi32(f, _mm256_srli_epi32(X[k], 20));
      const unsigned mask = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(stay))) & 0xFFu;
      // (no branch on the mask: whether a register pushes is close to a coin toss)
      const __m256i lw = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(X[k], low_words), 0x08);
      const __m128i packed = _mm_shuffle_epi8(_mm256_castsi256_si128(lw),
                                              _mm_load_si128(reinterpret_cast<const __m128i*>(mt.pack[mask])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + t - 16), packed);
      t -= 2 * static_cast<unsigned>(_mm_popcnt_u32(mask));
      X[k] = _mm256_blendv_epi8(_mm256_srli_epi32(X[k], 16), X[k], stay);
      // x = q << 12 + r + cum with q = x / f, r = x % f
      __m256i q = mulhi_epu32(X[k], rcp);
      __m256i r = _mm256_sub_epi32(X[k], _mm256_mullo_epi32(q, f));
      const __m256i over = _mm256_cmpgt_epi32(r, _mm256_sub_epi32(f, one));
      q = _mm256_sub_epi32(q, over);
      r = _mm256_sub_epi32(r, _mm256_and_si256(over, f));
      X[k] = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(q, rans::prob_bits), r), cum);
    }
    *top = t;
  }
};

// The encoder's table for a bf16 or fp32 body with zero symbols: where no element but the zeros
// has exponent 0 (no subnormals), the entries at the zeros' lookup indices (lookup8 above:
// sign and exponent, 0 for +0.0 and 256 for -0.0) are zp's and zn's, so that the kernel looks the
// lanes up from the elements, as a dense body's kernel does (`from_elements`); else the copy is
// the plan's table as it is (6 KiB a chunk, small beside the chunk's coding). Faster compression
// of element-sparse bf16 and fp32. (Not for fp16, whose smallest subnormals share the zeros' high
// bytes 0x00 and 0x80: the choice in its kernel costs more than it saves.)
struct zeros_encode_table {
  encode_table table;
  bool from_elements;
  // (symbol 0 is the zeros' alone where it is a zero symbol, a value that was free, or no element
  // takes it)
  zeros_encode_table(const codec_detail::rans_plan& plan, const encode_table& t, bool may)
      : table(t), from_elements(may && (plan.zero.pos == 0 || plan.zero.neg == 0 || plan.freq[0] == 0)) {
    if (!from_elements) return;
    table.entry[0] = t.entry[plan.zero.pos];
    table.entry[rans::symbols] = t.entry[plan.zero.neg];
  }
};

// Bodies with zero symbols (plan.zero / the header's): the encoder's kernel of a full group. The
// zeros take the symbols zp and zn; the other lanes' rests are packed together (rest_tables) and
// stored just below rest index *rest, which moves down past them. The symbols are looked up from
// the elements where zeros_encode_table::from_elements holds, else from a stack array of them
// (the zeros' blended in).
template <class E>
struct encode_zeros_kernel : private zeros_encode_table, encode_kernel<E> {
  static constexpr bool may_look_up_elements = !std::is_same_v<E, fp16>;  // (zeros_encode_table)
  const rest_tables& rt;
  __m256i zp, zn, neg0;
  encode_zeros_kernel(const codec_detail::rans_plan& plan, const encode_table& t)
      : zeros_encode_table(plan, t, may_look_up_elements),
        encode_kernel<E>(zeros_encode_table::table), rt(zero_tables()),
        zp(_mm256_set1_epi32(static_cast<int>(plan.zero.pos))), zn(_mm256_set1_epi32(static_cast<int>(plan.zero.neg))),
        neg0(_mm256_set1_epi32(static_cast<int>(rans::split<E>::negative_zero))) {}
  encode_zeros_kernel(const encode_zeros_kernel&) = delete;  // (the base's table reference is to its own table)
  // (inlined: GCC 12 makes the fp32 kernel a call otherwise)
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* in, std::uint8_t* bytes, std::uint8_t* words, std::uint64_t* rest,
                                  std::uint8_t* out, std::uint64_t* top) {
    constexpr unsigned W = rans::split<E>::word_bytes;
    __m256i v[avx2::group_regs<E>], e[4];
    alignas(32) std::uint32_t sym[32];
    avx2::load_group<E>(in, v);
    alignas(32) std::uint8_t all_bytes[32], all_words[64];
    avx2::store_rest<E>(v, all_bytes, all_words);
    if constexpr (std::is_same_v<E, fp32>) {
      for (int k = 0; k < 4; ++k) e[k] = v[k];
    } else {
      for (int k = 0; k < 2; ++k) {
        e[2 * k] = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(v[k]));
        e[2 * k + 1] = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(v[k], 1));
      }
    }
    // (false at compile time for fp16, whose kernel then has no branch on it)
    const bool by_elements = may_look_up_elements && this->from_elements;
    unsigned rests[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i is_pos = _mm256_cmpeq_epi32(e[k], _mm256_setzero_si256()), is_neg = _mm256_cmpeq_epi32(e[k], neg0);
      rests[k] = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(is_pos, is_neg)))) & 0xFFu;
      if (by_elements) continue;
      const __m256i s = std::is_same_v<E, fp32> ? _mm256_and_si256(_mm256_srli_epi32(e[k], 23), _mm256_set1_epi32(0xFF))
                        : std::is_same_v<E, bf16> ? _mm256_and_si256(_mm256_srli_epi32(e[k], 7), _mm256_set1_epi32(0xFF))
                                                  : _mm256_srli_epi32(e[k], 8);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sym + 8 * k), _mm256_blendv_epi8(_mm256_blendv_epi8(s, zp, is_pos), zn, is_neg));
    }
    // The registers' rests, the last register's first: each packed to the top of 8 bytes (16 for
    // the words) and stored so that it ends where the rests stored after it begin. The up to 8
    // bytes below a register's rests are overwritten by the next register's store or, below the
    // group's rests, by the groups coded after it (every rest index below the cursor is written
    // exactly once more). Where the cursor is below 40 (a group has up to 32 rests, so fewer
    // than 8 might be left below them), into a buffer first, and copied.
    std::uint64_t r = *rest;
    alignas(16) std::uint8_t low_bytes[40], low_words[80];
    const bool in_place = r >= 40;
    std::uint8_t* const to_bytes = in_place ? bytes : low_bytes;
    std::uint8_t* const to_words = in_place ? words : low_words;
    std::uint64_t end = in_place ? r : 40;
    for (int k = 3; k >= 0; --k) {
      std::uint64_t b8;
      std::memcpy(&b8, all_bytes + 8 * k, 8);
      const __m128i pb = _mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(b8)),
                                          _mm_load_si128(reinterpret_cast<const __m128i*>(rt.pack_bytes[rests[k]])));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(to_bytes + end - 8), pb);
      if constexpr (W != 0) {
        const __m128i pw = _mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(all_words + 16 * k)),
                                            _mm_load_si128(reinterpret_cast<const __m128i*>(rt.pack_words[rests[k]])));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(to_words + 2 * end - 16), pw);
      }
      end -= static_cast<unsigned>(_mm_popcnt_u32(rests[k]));
    }
    if (!in_place) {
      const std::uint64_t live = 40 - end;
      r -= live;
      std::memcpy(bytes + r, low_bytes + end, live);
      if constexpr (W != 0) std::memcpy(words + 2 * r, low_words + 2 * end, 2 * live);
    } else {
      r = end;
    }
    *rest = r;
    this->code(in, by_elements ? nullptr : sym, out, top);
  }
};

}  // namespace zipccl::host::detail::avx2::rans_simd
