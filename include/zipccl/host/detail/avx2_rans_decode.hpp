// zipccl: the AVX2 rANS decoder's kernels of a full group of 32 lanes, for rans_loops::
// decode_body_with and decode_pair_with (avx2_rans.hpp's decode_rans_body and decode_rans_pair):
//   decode_rank_kernel        bf16 and fp32 bodies without zero symbols whose table has at most
//                             32 symbols and 4 crowded buckets (rank_table), and two bodies of any
//                             type in one loop: the 32 states as sixteen-lane registers of 16-bit
//                             halves, a slot's rank from byte tables by vpshufb;
//                             decode_rank_zeros_kernel does the same for such a body with zero
//                             symbols.
//   decode_kernel             the other tables (fp16 alone, larger tables): four registers of
//                             eight 32-bit states; slot = x & 4095, the slot words by eight scalar
//                             loads (bf16, fp16) or a gather (fp32); x = freq * (x >> 12) + offset;
//                             the lanes below 2^16 take the stream's next words in lane order (a
//                             16-byte load, a lane permutation indexed by their mask).
//   decode_zeros_kernel       the same for bodies with zero symbols: the zero lanes found by
//                             comparing symbols, the other lanes' rests spread by pshufb.
// A kernel class's run picks the kernel for a table (run_pair for two). The registers take the
// lanes in the reference's order (lane 0 first), so the values and the words taken are the
// reference's. A group needs 32 stream words left (a zero-symbol group also 32 rests) and checks
// nothing: the loop checks the cursors and the final states. Needs AVX2 (ZIPCCL_HAS_AVX2).
#pragma once

#include <immintrin.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"
#include "avx2.hpp"
#include "avx2_rans_common.hpp"
#include "rank_table.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

namespace rans = codec_detail::rans;
using avx2::pack_u16;

// Elements of eight lanes from their symbols and rest sections (bytes: 8, words: fp32 8 x u16),
// as 32-bit values (bf16, fp16: the element in the low half).
template <class E>
inline __m256i join_regs(__m256i sym, __m128i bytes, __m128i words);

template <class E>
inline __m256i join_lanes(__m256i sym, const std::uint8_t* bytes, const std::uint8_t* words) {
  std::uint64_t b8;
  std::memcpy(&b8, bytes, 8);
  const __m128i w = std::is_same_v<E, fp32> ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(words)) : _mm_setzero_si128();
  return join_regs<E>(sym, _mm_cvtsi64_si128(static_cast<long long>(b8)), w);
}

// The same from the eight rest bytes (low half of `bytes`) and, fp32, the eight words.
template <class E>
inline __m256i join_regs(__m256i sym, __m128i bytes, __m128i words) {
  const __m256i r = _mm256_cvtepu8_epi32(bytes);
  if constexpr (std::is_same_v<E, fp32>) {
    const __m256i w = _mm256_cvtepu16_epi32(words);
    return _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x80)), 24), _mm256_slli_epi32(sym, 23)),
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x7F)), 16), w));
  } else if constexpr (std::is_same_v<E, bf16>) {
    (void)words;
    return _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x80)), 8), _mm256_slli_epi32(sym, 7)),
        _mm256_and_si256(r, _mm256_set1_epi32(0x7F)));
  } else {
    (void)words;
    return _mm256_or_si256(_mm256_slli_epi32(sym, 8), r);
  }
}

// bf16, fp16: sixteen elements, in lane order, from the symbols of two registers of eight lanes
// (each below 256) and their sixteen rest bytes.
template <class E>
inline __m256i join_pairs(__m256i sym_a, __m256i sym_b, const std::uint8_t* bytes) {
  const __m256i s = pack_u16(sym_a, sym_b);
  const __m256i r = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  if constexpr (std::is_same_v<E, bf16>)
    return _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(r, _mm256_set1_epi16(0x80)), 8),
                                           _mm256_slli_epi16(s, 7)),
                           _mm256_and_si256(r, _mm256_set1_epi16(0x7F)));
  else
    return _mm256_or_si256(_mm256_slli_epi16(s, 8), r);
}

template <class E>
inline void store_group(std::uint8_t* out, const __m256i (&v)[4]) {
  if constexpr (std::is_same_v<E, fp32>) {
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * k), v[k]);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pack_u16(v[0], v[1]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), pack_u16(v[2], v[3]));
  }
}

// vpblendvb: the bytes of b where m's byte has bit 7 set, else a's. By inline assembly where the
// compiler takes it: GCC 12 turns the intrinsic into a select on m < 0 and, where one mask serves
// several blends, computes that compare (a vpcmpgtb) before them, one instruction per mask more
// in the rank decoder's step (docs/decisions.md, "Host kernels: AVX2").
ZIPCCL_ALWAYS_INLINE inline __m256i select_bytes(__m256i a, __m256i b, __m256i m) {
#if defined(__GNUC__)
  __m256i r;
  // (both assembler dialects: AT&T, and Intel for code built with -masm=intel)
  asm("vpblendvb {%3, %2, %1, %0|%0, %1, %2, %3}" : "=x"(r) : "x"(a), "x"(b), "x"(m));
  return r;
#else
  return _mm256_blendv_epi8(a, b, m);
#endif
}

// The AVX2 rank decoder: the decoder's kernel of a full group for tables that a rank_table holds
// with at most 32 symbols and Crowded crowded buckets (2 or 4), without a slot table lookup per
// lane. The 32 states are four registers of sixteen 16-bit lanes: the low halves of lanes 0..15
// and 16..31 (XL) and their high halves (XH). The tables are bytes in sixteens, each broadcast
// to both halves of a register; a byte of a table of n sixteens is found by n vpshufb (which read
// an index byte's bits 0..3) and a tree of n - 1 blends on the index's bits 4.. (look).
// A step:
//   ranks    the 32 slots' buckets (slot >> 5) and offsets (slot & 31) as bytes (two vpackuswb,
//            which put lanes 0..7, 16..23, 8..15, 24..31 in that order: the bytes' order below);
//            coarse and bound by eight vpshufb each; rank = coarse + (offset >= bound); the
//            lanes of a crowded bucket (found by comparing the bucket with each crowded one's
//            number) take that bucket's fine table's byte `offset` (two vpshufb);
//   words    the ranks' frequencies and starts (low and high bytes) and symbols, two vpshufb
//            each, the bytes joined to 16-bit lanes in lane order by vpunpcklbw / vpunpckhbw;
//   states   x = freq * (x >> 12) + offset from 16-bit products: the low half
//            mullo(freq, q & 0xFFFF) + offset, the high half mulhi(freq, q & 0xFFFF) +
//            freq * (q >> 16) + the carry out of the low half;
//   refill   the lanes whose high half is zero take the next words of the stream in lane order,
//            eight lanes at a time: one 16-byte load and a vpshufb from rest_tables::spread_words.
// Every group is one chain of dependent steps (its states come from the group before), so two
// chunks are decoded in one loop where both take this kernel (decode_pair_with), which keeps the
// core busy with the other chunk's chain (docs/design.md, "The AVX2 rANS kernels").
template <class E, unsigned Crowded = 2>
struct decode_rank_kernel {
  static_assert(Crowded == 2 || Crowded == 4, "decode_rank_kernel: 2 or 4 crowded buckets");
  static constexpr unsigned max_ranks = 32, crowded = Crowded;
  static constexpr unsigned bucket_regs = rank_table::buckets / 16, fine_regs = 2 * Crowded;
  // the tables: coarse and bound of the 128 buckets, the crowded buckets' numbers (each byte;
  // 0xFF, no bucket, past the table's crowded buckets) and fine tables, and per rank the
  // frequency's low and high bytes, the start's low and high bytes and the symbol
  enum word_table : unsigned { freq_lo, freq_hi, cum_lo, cum_hi, symbol, word_tables };
  __m256i coarse[bucket_regs], bound[bucket_regs], crowded_at[Crowded], fine[fine_regs], words[word_tables][2];
  const rest_tables& rt;
  __m256i XL[2], XH[2];

  // (t must hold the table with at most 32 symbols and Crowded crowded buckets: run and
  // run_pair check t.holds(32, Crowded) first)
  explicit decode_rank_kernel(const rank_table& t) : rt(zero_tables()), XL(), XH() {
    assert(t.holds(max_ranks, Crowded));
    alignas(16) std::uint8_t c[rank_table::buckets], b[rank_table::buckets], w[word_tables][max_ranks] = {};
    // (bound - 1 makes the rank's test a signed compare: offset > bound - 1; a crowded bucket's
    // coarse and bound bytes are not used)
    for (unsigned i = 0; i < Crowded; ++i) crowded_at[i] = _mm256_set1_epi8(static_cast<char>(0xFF));
    for (unsigned k = 0; k < rank_table::buckets; ++k) {
      const bool crowded_bucket = (t.coarse[k] & 0x80u) != 0;
      if (crowded_bucket) crowded_at[t.coarse[k] & 0x7Fu] = _mm256_set1_epi8(static_cast<char>(k));
      c[k] = crowded_bucket ? 0u : t.coarse[k];
      b[k] = static_cast<std::uint8_t>(t.bound[k] - 1u);
    }
    for (unsigned r = 0; r < max_ranks && r < t.ranks; ++r) {
      w[freq_lo][r] = static_cast<std::uint8_t>(t.freq[r]);
      w[freq_hi][r] = static_cast<std::uint8_t>(t.freq[r] >> 8);
      w[cum_lo][r] = static_cast<std::uint8_t>(t.cum[r]);
      w[cum_hi][r] = static_cast<std::uint8_t>(t.cum[r] >> 8);
      w[symbol][r] = t.sym[r];
    }
    sixteens(c, bucket_regs, coarse);
    sixteens(b, bucket_regs, bound);
    sixteens(t.fine, fine_regs, fine);
    for (unsigned k = 0; k < word_tables; ++k) sixteens(w[k], 2, words[k]);
  }
  // n sixteens of bytes, each broadcast to both halves of a register.
  static void sixteens(const std::uint8_t* bytes, unsigned n, __m256i* out) {
    for (unsigned j = 0; j < n; ++j)
      out[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16 * j)));
  }
  // The bytes of table t (N sixteens) at the byte indices idx (each below 16 N): sixteen j's
  // byte idx & 15 by vpshufb (which reads bits 0..3 of an index byte, and bit 7, clear here),
  // the sixteen chosen by a tree of blends on the index's bits 4.. (sel[k]: bit 4 + k moved to
  // bit 7). (A recursion, not a loop, so that every compiler and -O level makes it straight code.)
  template <unsigned N>
  ZIPCCL_ALWAYS_INLINE static __m256i look(const __m256i* t, __m256i idx, const __m256i* sel) {
    if constexpr (N == 1)
      return _mm256_shuffle_epi8(t[0], idx);
    else
      return select_bytes(look<N / 2>(t, idx, sel), look<N / 2>(t + N / 2, idx, sel), sel[log2(N) - 1]);
  }
  static constexpr unsigned log2(unsigned n) { return n <= 1 ? 0 : 1 + log2(n / 2); }
  // sel for look: the index's bits 4..4 + L - 1 at bit 7 of each byte (16-bit shifts: what they
  // carry into the next byte stays below its bit 7).
  template <unsigned L>
  ZIPCCL_ALWAYS_INLINE static void selectors(__m256i idx, __m256i* sel) {
    if constexpr (L >= 1) sel[0] = _mm256_slli_epi16(idx, 3);
    if constexpr (L >= 2) sel[1] = _mm256_slli_epi16(idx, 2);
    if constexpr (L >= 3) sel[2] = _mm256_slli_epi16(idx, 1);
    static_assert(L <= 3, "selectors: indices below 128");
  }
  void load(const std::uint32_t* x) {
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    for (int h = 0; h < 2; ++h) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * h));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * h + 8));
      XL[h] = pack_u16(_mm256_and_si256(a, lo16), _mm256_and_si256(b, lo16));
      XH[h] = pack_u16(_mm256_srli_epi32(a, 16), _mm256_srli_epi32(b, 16));
    }
  }
  void store(std::uint32_t* x) const {
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = _mm256_unpacklo_epi16(XL[h], XH[h]), hi = _mm256_unpackhi_epi16(XL[h], XH[h]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 16 * h), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 16 * h + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
  // The ranks of the 32 lanes' slots (the low twelve bits of XL), as bytes in vpackuswb order.
  ZIPCCL_ALWAYS_INLINE __m256i rank() const {
    const __m256i m7f = _mm256_set1_epi16(0x7F), m31 = _mm256_set1_epi16(31);
    const __m256i bucket = _mm256_packus_epi16(_mm256_and_si256(_mm256_srli_epi16(XL[0], 5), m7f),
                                               _mm256_and_si256(_mm256_srli_epi16(XL[1], 5), m7f));
    const __m256i in = _mm256_packus_epi16(_mm256_and_si256(XL[0], m31), _mm256_and_si256(XL[1], m31));
    __m256i sel[3];
    selectors<3>(bucket, sel);
    const __m256i c = look<bucket_regs>(coarse, bucket, sel), bd = look<bucket_regs>(bound, bucket, sel);
    // the crowded buckets' lanes: fine table i's byte `offset` where the bucket is crowded one i
    const __m256i in_sel = _mm256_slli_epi16(in, 3);
    __m256i f = look<2>(fine, in, &in_sel), crowd = _mm256_cmpeq_epi8(bucket, crowded_at[0]);
    for (unsigned i = 1; i < Crowded; ++i) {
      const __m256i at = _mm256_cmpeq_epi8(bucket, crowded_at[i]);
      f = select_bytes(f, look<2>(fine + 2 * i, in, &in_sel), at);
      crowd = _mm256_or_si256(crowd, at);
    }
    return select_bytes(_mm256_sub_epi8(c, _mm256_cmpgt_epi8(in, bd)), f, crowd);
  }
  // The bytes of per-rank table k at ranks r (sel: bit 4 of each at bit 7), in r's order.
  ZIPCCL_ALWAYS_INLINE __m256i word_bytes(unsigned k, __m256i r, __m256i sel) const {
    return select_bytes(_mm256_shuffle_epi8(words[k][0], r), _mm256_shuffle_epi8(words[k][1], r), sel);
  }
  // A step in two parts, so that two kernels' steps can be interleaved (group_pair): the ranks
  // and the states advanced (advance), the lanes below 2^16 refilled (refill).
  struct advanced {
    __m256i r, lo[2], hi[2], low[2];  // the ranks; the states' new halves; the lanes below 2^16
  };
  ZIPCCL_ALWAYS_INLINE advanced advance() const {
    advanced a;
    a.r = rank();
    const __m256i hi16 = _mm256_slli_epi16(a.r, 3);  // (rank bit 4 at bit 7)
    const __m256i fff = _mm256_set1_epi16(0xFFF), one = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    __m256i d[2], f[2];
    {
      const __m256i clo = word_bytes(cum_lo, a.r, hi16), chi = word_bytes(cum_hi, a.r, hi16);
      d[0] = _mm256_and_si256(_mm256_sub_epi16(XL[0], _mm256_unpacklo_epi8(clo, chi)), fff);
      d[1] = _mm256_and_si256(_mm256_sub_epi16(XL[1], _mm256_unpackhi_epi8(clo, chi)), fff);
    }
    {
      const __m256i flo = word_bytes(freq_lo, a.r, hi16), fhi = word_bytes(freq_hi, a.r, hi16);
      f[0] = _mm256_unpacklo_epi8(flo, fhi);
      f[1] = _mm256_unpackhi_epi8(flo, fhi);
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i ql = _mm256_or_si256(_mm256_srli_epi16(XL[h], 12), _mm256_slli_epi16(XH[h], 4));
      const __m256i qh = _mm256_srli_epi16(XH[h], 12);
      a.lo[h] = _mm256_add_epi16(_mm256_mullo_epi16(f[h], ql), d[h]);
      a.hi[h] = _mm256_add_epi16(_mm256_add_epi16(_mm256_mulhi_epu16(f[h], ql), _mm256_mullo_epi16(f[h], qh)),
                                 _mm256_min_epu16(_mm256_subs_epu16(d[h], a.lo[h]), one));
      a.low[h] = _mm256_cmpeq_epi16(a.hi[h], zero);
    }
    return a;
  }
  // The states of a: the lanes below 2^16 take the stream's words from *next on, in lane order.
  ZIPCCL_ALWAYS_INLINE void refill(const advanced& a, const std::uint8_t* stream, std::uint64_t* next) {
    // the lanes below 2^16, a bit each: lanes 0..7 in bits 0..7, 16..23 in 8..15, 8..15 in
    // 16..23, 24..31 in 24..31
    const unsigned mask = static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(a.low[0], a.low[1])));
    const std::uint64_t n = *next;
    const std::uint8_t* spread = &rt.spread_words[0][0];
    // (eight lanes' words: m8 their mask, at the lanes before them taking `before` words)
    const auto words_of = [&](unsigned m8, unsigned before) ZIPCCL_ALWAYS_INLINE {
      return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(stream + 2 * (n + before))),
                              _mm_load_si128(reinterpret_cast<const __m128i*>(spread + 16 * std::size_t{m8})));
    };
    const __m128i w[4] = {words_of(mask & 0xFFu, 0), words_of((mask >> 16) & 0xFFu, _mm_popcnt_u32(mask & 0xFFu)),
                          words_of((mask >> 8) & 0xFFu, _mm_popcnt_u32(mask & 0xFF00FFu)),
                          words_of(mask >> 24, _mm_popcnt_u32(mask & 0xFFFFFFu))};
    *next = n + static_cast<unsigned>(_mm_popcnt_u32(mask));
    for (int h = 0; h < 2; ++h) {
      XL[h] = select_bytes(a.lo[h], _mm256_set_m128i(w[2 * h + 1], w[2 * h]), a.low[h]);
      XH[h] = select_bytes(a.hi[h], a.lo[h], a.low[h]);
    }
  }
  // One step of the 32 states: their slots' ranks (returned, vpackuswb order), the states
  // advanced and refilled from stream word *next on (at least 32 are left).
  ZIPCCL_ALWAYS_INLINE __m256i step(const std::uint8_t* stream, std::uint64_t* next) {
    const advanced a = advance();
    refill(a, stream, next);
    return a.r;
  }
  // Stores the 32 values of ranks r (vpackuswb order) at out, their rest bytes at `bytes` and
  // (fp32) rest words at `rest_words`, in lane order.
  ZIPCCL_ALWAYS_INLINE void values(__m256i r, const std::uint8_t* bytes, const std::uint8_t* rest_words,
                                   std::uint8_t* out) const {
    // the rest bytes in the ranks' order (lanes 0..7 are r's bytes 0..7, 8..15 its bytes 16..23,
    // 16..23 its bytes 8..15)
    const __m256i rb = _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)), 0xD8);
    join<false>(word_bytes(symbol, r, _mm256_slli_epi16(r, 3)), rb, rest_words, _mm256_setzero_si256(),
                _mm256_setzero_si256(), out);
  }
  // Stores the 32 values of symbols s and rest bytes rb (both in vpackuswb order) and (fp32) rest
  // words at rest_words (in lane order) at out. With Zeros, the lanes whose byte of `zeros` is set
  // are +0.0, or -0.0 where their byte of `neg` is set too (their rests are zeros).
  template <bool Zeros>
  ZIPCCL_ALWAYS_INLINE static void join(__m256i s, __m256i rb, const std::uint8_t* rest_words, __m256i zeros, __m256i neg,
                                        std::uint8_t* out) {
    for (int h = 0; h < 2; ++h) {  // lanes 16h .. 16h + 15, in order
      __m256i v;
      if constexpr (std::is_same_v<E, fp16>) {  // symbol << 8 | rest byte
        v = h == 0 ? _mm256_unpacklo_epi8(rb, s) : _mm256_unpackhi_epi8(rb, s);
      } else {  // bf16, and fp32's high halves: sign << 15 | symbol << 7 | mantissa
        const __m256i rr = h == 0 ? _mm256_unpacklo_epi8(rb, rb) : _mm256_unpackhi_epi8(rb, rb);
        const __m256i ss = h == 0 ? _mm256_unpacklo_epi8(s, _mm256_setzero_si256()) : _mm256_unpackhi_epi8(s, _mm256_setzero_si256());
        v = _mm256_or_si256(_mm256_and_si256(rr, _mm256_set1_epi16(static_cast<short>(0x807F))), _mm256_slli_epi16(ss, 7));
      }
      if constexpr (Zeros) {  // (their high halves: 0, or the sign alone)
        const __m256i z16 = h == 0 ? _mm256_unpacklo_epi8(zeros, zeros) : _mm256_unpackhi_epi8(zeros, zeros);
        const __m256i n16 = h == 0 ? _mm256_unpacklo_epi8(neg, neg) : _mm256_unpackhi_epi8(neg, neg);
        v = _mm256_or_si256(_mm256_andnot_si256(z16, v), _mm256_and_si256(n16, _mm256_set1_epi16(static_cast<short>(0x8000))));
      } else {
        (void)zeros, (void)neg;
      }
      if constexpr (std::is_same_v<E, fp32>) {  // each high half above its rest word
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rest_words + 32 * h));
        const __m256i lo = _mm256_unpacklo_epi16(w, v), hi = _mm256_unpackhi_epi16(w, v);  // lanes 0..3, 8..11; 4..7, 12..15
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
      } else {
        (void)rest_words;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * h), v);
      }
    }
  }
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* bytes, const std::uint8_t* rest_words, const std::uint8_t* stream,
                                  std::uint64_t* next, std::uint8_t* out) {
    values(step(stream, next), bytes, rest_words, out);
  }
  // A full group of each of two chunks (a's and b's; each argument a pair, a's first), their
  // steps interleaved by parts: a group is one chain of dependent steps, and the core overlaps
  // two chunks' chains only where their instructions come close together. (Interleaved
  // statement by statement, the two chains' values would not fit the sixteen registers.)
  ZIPCCL_ALWAYS_INLINE static void group_pair(decode_rank_kernel& a, decode_rank_kernel& b, const std::uint8_t* const (&bytes)[2],
                                              const std::uint8_t* const (&rest_words)[2], const std::uint8_t* const (&stream)[2],
                                              std::uint64_t* const (&next)[2], std::uint8_t* const (&out)[2]) {
    const advanced sa = a.advance(), sb = b.advance();
    a.refill(sa, stream[0], next[0]);
    b.refill(sb, stream[1], next[1]);
    a.values(sa.r, bytes[0], rest_words[0], out[0]);
    b.values(sb.r, bytes[1], rest_words[1], out[1]);
  }
};

// The rank decoder's kernel of a full group of a body with zero symbols zp and zn (bf16, fp32:
// decode_zeros_kernel::run takes it where a rank_table holds the table as decode_rank_kernel's
// classes do): the states and ranks as decode_rank_kernel's, the lanes whose rank is zp's or zn's
// +0.0 or -0.0, and the others the rests stored together from rest index *rest on, eight lanes at
// a time by rest_tables' spread tables, in lane order (as decode_zeros_kernel spreads them).
// Ranks, not symbols, are compared: a zero symbol the table lacks (z.neg may be 256) has rank
// 0xFF here, which no lane's rank (below 32) takes. Needs 32 rests left (eight lanes read 8 rest
// bytes and 8 rest words from their first rest on).
template <class E, unsigned Crowded>
struct decode_rank_zeros_kernel : decode_rank_kernel<E, Crowded> {
  using base = decode_rank_kernel<E, Crowded>;
  __m256i zp, zn;  // (the ranks of zp and zn, each byte; 0xFF where the table lacks the symbol)
  static char rank_byte(const rank_table& t, std::uint32_t v) {
    const unsigned r = t.rank_of(v);
    return static_cast<char>(r < base::max_ranks ? r : 0xFFu);
  }
  decode_rank_zeros_kernel(const rank_table& t, const rans::zero_symbols& z)
      : base(t), zp(_mm256_set1_epi8(rank_byte(t, z.pos))), zn(_mm256_set1_epi8(rank_byte(t, z.neg))) {}
  ZIPCCL_ALWAYS_INLINE void group(const std::uint8_t* bytes, const std::uint8_t* words, std::uint64_t* rest,
                                  const std::uint8_t* stream, std::uint64_t* next, std::uint8_t* out) {
    const __m256i r = this->step(stream, next);
    const __m256i s = this->word_bytes(base::symbol, r, _mm256_slli_epi16(r, 3));
    const __m256i neg = _mm256_cmpeq_epi8(r, zn), zeros = _mm256_or_si256(_mm256_cmpeq_epi8(r, zp), neg);
    // the lanes with rests, a bit each in vpackuswb order (lanes 0..7 in bits 0..7, 16..23 in
    // 8..15, 8..15 in 16..23, 24..31 in 24..31), and per eight lanes in lane order their mask and
    // the rest index of their first rest
    const unsigned live = ~static_cast<unsigned>(_mm256_movemask_epi8(zeros));
    const unsigned m[4] = {live & 0xFFu, (live >> 16) & 0xFFu, (live >> 8) & 0xFFu, live >> 24};
    std::uint64_t at[4];
    at[0] = *rest;
    for (int k = 1; k < 4; ++k) at[k] = at[k - 1] + static_cast<unsigned>(_mm_popcnt_u32(m[k - 1]));
    *rest = at[3] + static_cast<unsigned>(_mm_popcnt_u32(m[3]));
    const rest_tables& rt = this->rt;
    __m128i b[4];
    for (int k = 0; k < 4; ++k)
      b[k] = _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + at[k])),
                              _mm_load_si128(reinterpret_cast<const __m128i*>(rt.spread_bytes[m[k]])));
    // (the rest bytes in vpackuswb order: lanes 0..7, 16..23 in the low half, 8..15, 24..31 in the high)
    const __m256i rb = _mm256_set_m128i(_mm_unpacklo_epi64(b[1], b[3]), _mm_unpacklo_epi64(b[0], b[2]));
    alignas(32) std::uint8_t spread_words[std::is_same_v<E, fp32> ? 64 : 1];
    if constexpr (std::is_same_v<E, fp32>)
      for (int k = 0; k < 4; ++k)
        _mm_store_si128(reinterpret_cast<__m128i*>(spread_words + 16 * k),
                        _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 2 * at[k])),
                                         _mm_load_si128(reinterpret_cast<const __m128i*>(rt.spread_words[m[k]]))));
    else
      (void)words;
    base::template join<true>(s, rb, spread_words, zeros, neg, out);
  }
};

// The AVX2 decoder's kernel of a full group for decode_body_with: lanes 0..7 first.
template <class E>
struct decode_kernel {
  const rans::decode_table& t;
  const mask_tables& mt;
  __m256i X[4];
  explicit decode_kernel(const rans::decode_table& table) : t(table), mt(tables()), X() {}
  // Runs f with the kernel for table t (and for two tables: run_pair), as decode_body_with and
  // decode_pair_with call it: decode_rank_kernel where a rank_table holds it with at most 32
  // symbols and 2 or 4 crowded buckets (for a pair, where both are held by the same class), else
  // this one. A single fp16 body keeps this kernel, which decodes fp16 faster than the rank
  // kernel does alone (docs/design.md, "The AVX2 rANS kernels").
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run(const rans::decode_table& t, F&& f) {
    if constexpr (std::is_same_v<E, fp16>) {
      return f(decode_kernel(t));
    } else {
      const rank_table rt(t, 32);
      if (rt.holds(32, 2)) return f(decode_rank_kernel<E, 2>(rt));
      if (rt.holds(32, 4)) return f(decode_rank_kernel<E, 4>(rt));
      return f(decode_kernel(t));
    }
  }
  // Whether two bodies of tables ta and tb pay for one loop (decode_pair_with): where both take a
  // rank kernel of one class. Two of this kernel in one loop run slower than one after the other
  // (eight state registers of sixteen), a rank kernel and this one gain nothing.
  // Before the tables are read, their symbol counts (the headers') rule out most pairs that do
  // not pay: then each body is decoded with its table read just before (one 16 KiB table in
  // cache, not two).
  static bool pair_may_pay(std::uint64_t nsym_a, std::uint64_t nsym_b) { return nsym_a <= 32 && nsym_b <= 32; }
  static bool pair_pays(const rans::decode_table& ta, const rans::decode_table& tb) {
    const rank_table ra(ta, 32), rb(tb, 32);
    return ra.holds(32, 4) && rb.holds(32, 4);
  }
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run_pair(const rans::decode_table& ta, const rans::decode_table& tb, F&& f) {
    const rank_table ra(ta, 32), rb(tb, 32);
    if (ra.holds(32, 2) && rb.holds(32, 2)) return f(decode_rank_kernel<E, 2>(ra), decode_rank_kernel<E, 2>(rb));
    if (ra.holds(32, 4) && rb.holds(32, 4)) return f(decode_rank_kernel<E, 4>(ra), decode_rank_kernel<E, 4>(rb));
    return f(decode_kernel(ta), decode_kernel(tb));
  }
  void load(const std::uint32_t* x) { load_states(x, X); }
  void store(std::uint32_t* x) const { store_states(X, x); }
  // Decodes a full group into out, its rest sections at bytes and words, taking the stream's
  // words from stream[*next] on (at least 32 are left).
  // One step of register k: its slot words (symbol, offset, frequency), its states advanced and
  // refilled from stream[*n] on.
  __m256i step(int k, const std::uint8_t* stream, std::uint64_t* n) {
    const __m256i slot_mask = _mm256_set1_epi32(static_cast<int>(rans::prob_total - 1u));
    const __m256i fff = _mm256_set1_epi32(0xFFF), one = _mm256_set1_epi32(1);
    const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
    // bf16, fp16: the slot words by eight scalar loads, two a 64-bit half (faster than a gather);
    // fp32 keeps the gather, which decodes it faster (docs/decisions.md)
    __m256i e;
    if constexpr (std::is_same_v<E, fp32>) {
      e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(t.slot), _mm256_and_si256(X[k], slot_mask), 4);
    } else {
      alignas(32) std::uint32_t slot_of[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(slot_of), _mm256_and_si256(X[k], slot_mask));
      const auto pair = [&](int l) {
        return static_cast<long long>(t.slot[slot_of[l]] | (std::uint64_t(t.slot[slot_of[l + 1]]) << 32));
      };
      e = from_u64(pair(0), pair(2), pair(4), pair(6));
    }
    const __m256i f = _mm256_add_epi32(_mm256_srli_epi32(e, 20), one);
    const __m256i x1 = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(X[k], rans::prob_bits)),
                                        _mm256_and_si256(_mm256_srli_epi32(e, 8), fff));
    const __m256i low = _mm256_cmpeq_epi32(_mm256_srli_epi32(x1, 16), _mm256_setzero_si256());
    const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(low)));
    // (no branch on the mask: whether a register takes words is close to a coin toss)
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(stream + 2 * *n)));
    const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(mt.spread[mask])), shifts);
    const __m256i fill = _mm256_or_si256(_mm256_slli_epi32(x1, 16), _mm256_permutevar8x32_epi32(w, idx));
    X[k] = _mm256_blendv_epi8(x1, fill, low);
    *n += static_cast<unsigned>(_mm_popcnt_u32(mask));
    return e;
  }
  void group(const std::uint8_t* bytes, const std::uint8_t* words, const std::uint8_t* stream, std::uint64_t* next,
             std::uint8_t* out) {
    constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
    using L = format::chunk_layout<E>;
    const __m256i ff = _mm256_set1_epi32(0xFF);
    std::uint64_t n = *next;
    __m256i v[4];
    // (unrolled: otherwise GCC 12 keeps this loop too)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i e = step(k, stream, &n);
      if constexpr (std::is_same_v<E, fp32>) {
        v[k] = join_lanes<E>(_mm256_and_si256(e, ff), bytes + 8 * k, words + 8 * k * W);
      } else {
        v[k] = _mm256_and_si256(e, ff);
        if (k % 2 == 1)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * (k - 1) * L::elem_size),
                              join_pairs<E>(v[k - 1], v[k], bytes + 8 * (k - 1)));
      }
    }
    if constexpr (std::is_same_v<E, fp32>) store_group<E>(out, v);
    *next = n;
  }
};

// The decoder's kernel of a full group of a body with zero symbols: lanes that decode zp or zn are
// +0.0 or -0.0; the others' rests, stored together from rest index *rest on, are spread out to
// them (rest_tables). Needs 32 rests left (it reads up to 16 bytes past a register's rests).
template <class E>
struct decode_zeros_kernel : decode_kernel<E> {
  const rest_tables& rt;
  __m256i zp, zn, neg0;
  decode_zeros_kernel(const rans::decode_table& table, const rans::zero_symbols& z)
      : decode_kernel<E>(table), rt(zero_tables()), zp(_mm256_set1_epi32(static_cast<int>(z.pos))),
        zn(_mm256_set1_epi32(static_cast<int>(z.neg))),
        neg0(_mm256_set1_epi32(static_cast<int>(rans::split<E>::negative_zero))) {}
  // Runs f with the kernel for table t: decode_rank_zeros_kernel for bf16 and fp32 where a
  // rank_table holds t with at most 32 symbols and 2 or 4 crowded buckets (zp and zn among them),
  // else this one.
  template <class F>
  ZIPCCL_ALWAYS_INLINE static auto run(const rans::decode_table& t, const rans::zero_symbols& z, F&& f) {
    if constexpr (!std::is_same_v<E, fp16>) {
      const rank_table rt(t, 32);
      if (rt.holds(32, 2)) return f(decode_rank_zeros_kernel<E, 2>(rt, z));
      if (rt.holds(32, 4)) return f(decode_rank_zeros_kernel<E, 4>(rt, z));
    }
    return f(decode_zeros_kernel(t, z));
  }
  void group(const std::uint8_t* bytes, const std::uint8_t* words, std::uint64_t* rest, const std::uint8_t* stream,
             std::uint64_t* next, std::uint8_t* out) {
    std::uint64_t n = *next, j = *rest;
    __m256i v[4];
    // (unrolled: GCC 12 keeps this loop otherwise)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i sym = _mm256_and_si256(this->step(k, stream, &n), _mm256_set1_epi32(0xFF));
      const __m256i is_pos = _mm256_cmpeq_epi32(sym, zp), is_neg = _mm256_cmpeq_epi32(sym, zn);
      const __m256i zeros = _mm256_or_si256(is_pos, is_neg);
      const unsigned rests = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(zeros))) & 0xFFu;
      std::uint64_t b8;
      std::memcpy(&b8, bytes + j, 8);
      const __m128i rb = _mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(b8)),
                                          _mm_load_si128(reinterpret_cast<const __m128i*>(rt.spread_bytes[rests])));
      __m128i rw = _mm_setzero_si128();
      if constexpr (std::is_same_v<E, fp32>)
        rw = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 2 * j)),
                              _mm_load_si128(reinterpret_cast<const __m128i*>(rt.spread_words[rests])));
      j += static_cast<unsigned>(_mm_popcnt_u32(rests));
      v[k] = _mm256_or_si256(_mm256_andnot_si256(zeros, join_regs<E>(sym, rb, rw)), _mm256_and_si256(is_neg, neg0));
    }
    store_group<E>(out, v);
    *next = n;
    *rest = j;
  }
};

}  // namespace zipccl::host::detail::avx2::rans_simd
