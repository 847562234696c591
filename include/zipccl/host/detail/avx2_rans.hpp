// zipccl: AVX2 encoder and decoder of rANS chunks (codebook::entropy), on x86 CPUs with AVX2.
//
// The 32 lanes of a chunk's rANS body (codec/rans.hpp). decode_rank_kernel decodes a bf16 or fp32
// body without zero symbols whose table has at most 32 symbols and 4 crowded buckets (rank_table;
// the bf16 and fp32 chunks of real tensors), alone or two bodies of any type in one loop
// (decode_rans_pair): the 32 states as sixteen-lane registers of 16-bit halves, a slot's rank from
// byte tables by vpshufb; decode_rank_zeros_kernel does the same for such a body with zero
// symbols. Otherwise (fp16 alone, larger tables) four registers of eight 32-bit states:
//   decoder  slot = x & 4095; the slot words by eight scalar loads (bf16, fp16) or a gather
//            (fp32); x = freq * (x >> 12) + offset; the lanes below 2^16 take the stream's next
//            words in lane order (a 16-byte load, a lane permutation indexed by their mask).
//   encoder  (freq, cum) and reciprocals by eight scalar loads (encode_table::lookup8); the lanes
//            with x >> 20 >= freq give up their low 16 bits, packed in lane order by one shuffle
//            just below the stream's start; x = (x / freq) << 12 + x % freq + cum by a 32-bit
//            reciprocal multiply and one correction step.
// Registers take lanes in the reference's order (decoder lane 0 first, encoder lane 31 first), so
// the words land where the reference puts them. The group loops (encode_chunk_with,
// decode_body_with) take a full group's kernel as a parameter and serve avx512_rans.hpp too.
// Short groups, the decoder's groups of zero-symbol bodies with fewer than 32 rests left and the
// encoder's groups near the stored size take the reference's own group functions (a decoder
// group with fewer than 32 stream words left takes the kernel on a copy: stream_tail), so the
// encoder's bytes and the decoder's values and statuses are codec_detail's (test_host_simd
// compares them). Bodies with zero symbols (rans::zeros_pay) take encode_zeros_kernel and
// decode_zeros_kernel: zero lanes found by comparing symbols or elements with the zero symbols,
// the other lanes' rests packed or spread eight at a time by pshufb.
#pragma once

#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../element.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "avx2.hpp"
#include "rank_table.hpp"
#include "read_ahead.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

namespace rans = codec_detail::rans;
using avx2::pack_u16;

// The two lane-mask tables: for the encoder, the byte shuffle that moves the 16-bit words of the
// masked lanes (of eight, in lane order) to the top of 16 bytes; for the decoder, per lane the
// rank of that lane among the masked ones, three bits per lane (a vpermd index).
struct mask_tables {
  alignas(16) std::uint8_t pack[256][16];
  std::uint32_t spread[256];
  mask_tables() {
    for (unsigned mask = 0; mask < 256; ++mask) {
      const unsigned n = static_cast<unsigned>(__builtin_popcount(mask));
      for (unsigned i = 0; i < 16; ++i) pack[mask][i] = 0x80;
      std::uint32_t ranks = 0;
      for (unsigned l = 0, k = 0; l < 8; ++l) {
        if (!((mask >> l) & 1u)) continue;
        pack[mask][2 * (8 - n + k)] = static_cast<std::uint8_t>(2 * l);
        pack[mask][2 * (8 - n + k) + 1] = static_cast<std::uint8_t>(2 * l + 1);
        ranks |= k << (3 * l);
        ++k;
      }
      spread[mask] = ranks;
    }
  }
};

inline const mask_tables& tables() {
  static const mask_tables t;
  return t;
}

// Bodies with zero symbols: per mask of the eight lanes of a register that carry a rest (not
// zeros), pshufb patterns that move the rests of those lanes (a byte each, fp32 also a u16 word)
// together in lane order, to the top of the low 8 bytes (pack_bytes) or of the 16 (pack_words), or
// spread rests stored together from byte 0 on out to those lanes (spread).
struct rest_tables {
  alignas(16) std::uint8_t pack_bytes[256][16], pack_words[256][16];
  alignas(16) std::uint8_t spread_bytes[256][16], spread_words[256][16];
  rest_tables() {
    for (unsigned mask = 0; mask < 256; ++mask) {
      for (unsigned i = 0; i < 16; ++i)
        pack_bytes[mask][i] = pack_words[mask][i] = spread_bytes[mask][i] = spread_words[mask][i] = 0x80;
      const unsigned c = static_cast<unsigned>(__builtin_popcount(mask));
      for (unsigned l = 0, k = 0; l < 8; ++l) {
        if (!((mask >> l) & 1u)) continue;
        pack_bytes[mask][8 - c + k] = static_cast<std::uint8_t>(l);
        pack_words[mask][16 - 2 * c + 2 * k] = static_cast<std::uint8_t>(2 * l);
        pack_words[mask][16 - 2 * c + 2 * k + 1] = static_cast<std::uint8_t>(2 * l + 1);
        spread_bytes[mask][l] = static_cast<std::uint8_t>(k);
        spread_words[mask][2 * l] = static_cast<std::uint8_t>(2 * k);
        spread_words[mask][2 * l + 1] = static_cast<std::uint8_t>(2 * k + 1);
        ++k;
      }
    }
  }
};

inline const rest_tables& zero_tables() {
  static const rest_tables t;
  return t;
}

// The high 32 bits of the eight products a * b (unsigned).
inline __m256i mulhi_epu32(__m256i a, __m256i b) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, b), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// A register of four 64-bit values, a in the lowest: from general registers by vmovq and vpinsrq
// (the kernels' scalar table lookups, which beat gathers).
ZIPCCL_ALWAYS_INLINE inline __m256i from_u64(long long a, long long b, long long c, long long d) {
  return _mm256_set_m128i(_mm_insert_epi64(_mm_cvtsi64_si128(c), d, 1), _mm_insert_epi64(_mm_cvtsi64_si128(a), b, 1));
}

// The encoders' group loops: the bytes of `ahead` at the offset of a group's first element `first`
// (a group's worth, those inside it), one prefetch a cache line (docs/PERFORMANCE.md, "The next
// chunk read ahead"). The loops go down the chunk, so the next chunk comes in from its end.
// Chunks with a zero mask read nothing ahead (ahead_of): their loops visit only the groups outside
// zero groups, so they would bring in only part of the next chunk.
inline read_ahead ahead_of(const codec_detail::body_shape& shape, const read_ahead& ahead) {
  return shape.zero_mask == nullptr ? ahead : read_ahead{};
}
template <class E>
ZIPCCL_ALWAYS_INLINE inline void read_group_ahead(const read_ahead& ahead, std::uint64_t first) {
  constexpr std::uint64_t span = format::group_elems * format::chunk_layout<E>::elem_size;
  const std::uint64_t o = first * format::chunk_layout<E>::elem_size;
  for (std::uint64_t q = 0; q < span && o + q < ahead.bytes; q += 64)
    _mm_prefetch(reinterpret_cast<const char*>(ahead.at + o + q), _MM_HINT_T0);
}

// The first of the W consecutive symbols of 1..255 whose counts sum highest (the first such
// window), in 1 .. 256 - W: never symbol 0, which the vector counters count apart; *held is their
// sum. The window of the symbol counters here and in avx512_rans.hpp.
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
// subtract each, emptied every 255 groups), faster than the full histogram (PERFORMANCE.md,
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
// (docs/PERFORMANCE.md, "The AVX2 symbol counts"); two passes of seven registers, and no compares
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

// codec_detail::plan_rans_chunk with the symbol counts taken by count(in, m, shape, counts): the
// kernel's (count_symbols for bf16 and fp32, fp16_counts for fp16; on AVX-512,
// avx512::rans_simd::count_symbols and fp16_counts). The zeros are counted, by zeros(in, m, shape, &n_pos, &n_neg) (the kernel's:
// avx2::count_zeros, or avx512::rans_simd::count_zeros), only where the counts of their symbols
// leave room for enough of them to give the body zero symbols (rans::zeros_pay).
template <class E, class Count, class Zeros>
inline bool plan_chunk(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                       codec_detail::rans_plan* plan, Count&& count, Zeros&& zeros) {
  using S = rans::split<E>;
  if (shape.elems == 0) return false;
  std::uint32_t counts[rans::symbols];
  count(in, m, shape, counts);
  const std::uint64_t could_be_zero =
      counts[S::pos_zero_symbol] + (S::neg_zero_symbol != S::pos_zero_symbol ? counts[S::neg_zero_symbol] : 0u);
  std::uint64_t n_pos = 0, n_neg = 0;
  if (rans::zeros_pay(could_be_zero, shape.elems)) zeros(in, m, shape, &n_pos, &n_neg);
  return codec_detail::finish_rans_plan<E>(counts, n_pos, n_neg, m, shape, plan);
}

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

inline void load_states(const std::uint32_t* x, __m256i (&v)[4]) {
  for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * k));
}
inline void store_states(const __m256i (&v)[4], std::uint32_t* x) {
  for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * k), v[k]);
}

// The encoder's view of the table: per symbol freq | cum << 16 and the reciprocal
// floor(2^32 / freq) (2^32 - 1 for freq 1), with which (x * rcp) >> 32 is x / freq or one less.
struct alignas(64) encode_table {
  std::uint32_t freq_cum[rans::symbols];
  std::uint32_t rcp[rans::symbols];
  // freq_cum | rcp << 32 (the AVX2 kernel's scalar lookups), twice: entry[s] and entry[s + 256],
  // so that bf16 and fp32 index it by sign and exponent (lookup8: one shift, no mask; in
  // zeros_encode_table's copy, entries 0 and 256 may be zp's and zn's instead)
  std::uint64_t entry[2 * rans::symbols];
  explicit encode_table(const codec_detail::rans_plan& plan) {
    for (unsigned s = 0; s < rans::symbols; ++s) {
      const std::uint32_t f = plan.freq[s];
      freq_cum[s] = f | (plan.cum[s] << 16);
      rcp[s] = f == 0 ? 0u : f == 1 ? 0xFFFFFFFFu : static_cast<std::uint32_t>((std::uint64_t(1) << 32) / f);
      entry[s] = entry[s + rans::symbols] = freq_cum[s] | (std::uint64_t(rcp[s]) << 32);
    }
  }
  // The freq_cum and rcp words of eight lanes (lane order) from their elements at `in` (lookup8)
  // or their symbols at sym (lookup8_symbols): eight scalar loads of `entry`, two 64-bit entries an
  // xmm by vmovq and vpinsrq, and one shufps a field: faster than two gathers (fp16) or a window
  // of 32 entries in registers (bf16, fp32) (docs/PERFORMANCE.md, "The AVX2 encoder's lookups, on
  // AMD Zen 3").
  template <class E>
  ZIPCCL_ALWAYS_INLINE void lookup8(const std::uint8_t* in, __m256i* fc, __m256i* recip) const {
    entries8([&](int l) {
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
  ZIPCCL_ALWAYS_INLINE void lookup8_symbols(const std::uint32_t* sym, __m256i* fc, __m256i* recip) const {
    entries8([&](int l) { return sym[l]; }, fc, recip);
  }
  // A symbol's frequency for the choice of a window: none for the symbols of skip (zero symbols,
  // which a kernel looks up apart).
  static std::uint32_t weight(const codec_detail::rans_plan& plan, unsigned v, const rans::zero_symbols* skip) {
    return skip != nullptr && skip->on && (v == skip->pos || v == skip->neg) ? 0u : plan.freq[v];
  }
  // The first of the Width consecutive values of 0..n-1 whose weights w(v) sum highest (the first
  // such window). It starts at n - Width at the latest (it reaches past n - 1 only where
  // n < Width), which the AVX-512 encoder's window tests rely on (avx512_rans.hpp, entries32).
  template <unsigned Width, class Weight>
  static unsigned busiest(unsigned n, Weight&& w) {
    std::uint32_t run = 0, best = 0;
    unsigned start = 0;
    for (unsigned v = 0; v < n; ++v) {
      run += w(v);
      if (v >= Width) run -= w(v - Width);
      if (run > best) best = run, start = v >= Width - 1 ? v - (Width - 1) : 0;
    }
    return start;
  }
  // Whether every value of 0..255 with a nonzero weight w(v) falls in the width values from start.
  template <class Weight>
  static bool holds_all(unsigned start, unsigned width, Weight&& w) {
    for (unsigned v = 0; v < rans::symbols; ++v)
      if ((v < start || v >= start + width) && w(v) != 0) return false;
    return true;
  }
  // Whether every symbol of weight (weight()) falls in the Width values from start.
  template <unsigned Width>
  static bool holds_all(const codec_detail::rans_plan& plan, unsigned start, const rans::zero_symbols* skip) {
    return holds_all(start, Width, [&](unsigned v) { return weight(plan, v, skip); });
  }
  // The entries of the Width consecutive symbols that hold the most of the chunk's frequency (the
  // first such window; zeros past symbol 255), for the register lookups; returns its first symbol.
  // With skip, the frequencies of its symbols do not count.
  template <unsigned Width>
  unsigned window(const codec_detail::rans_plan& plan, std::uint32_t* fc, std::uint32_t* r,
                  const rans::zero_symbols* skip = nullptr) const {
    const unsigned start = busiest<Width>(rans::symbols, [&](unsigned v) { return weight(plan, v, skip); });
    for (unsigned i = 0; i < Width; ++i) {
      const unsigned v = start + i;
      fc[i] = v < rans::symbols ? freq_cum[v] : 0u;
      r[i] = v < rans::symbols ? rcp[v] : 0u;
    }
    return start;
  }

 private:
  template <class Symbol>
  ZIPCCL_ALWAYS_INLINE void entries8(Symbol&& symbol, __m256i* fc, __m256i* recip) const {
    const auto e = [&](int l) { return static_cast<long long>(entry[symbol(l)]); };
    // lanes 0 1 4 5 (g0) and 2 3 6 7 (g1), an entry a 64-bit half: the low words of the two, in
    // lane order, by one shufps, the high words by another
    const __m256i g0 = from_u64(e(0), e(1), e(4), e(5)), g1 = from_u64(e(2), e(3), e(6), e(7));
    *fc = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), 0x88));
    *recip = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), 0xDD));
  }
};

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
      if (sym != nullptr) et.lookup8_symbols(sym + 8 * k, &fc, &rcp);
      else et.template lookup8<E>(in + 8 * k * format::chunk_layout<E>::elem_size, &fc, &rcp);
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

// vpblendvb: the bytes of b where m's byte has bit 7 set, else a's. By inline assembly where the
// compiler takes it: GCC 12 turns the intrinsic into a select on m < 0 and, where one mask serves
// several blends, computes that compare (a vpcmpgtb) before them, one instruction per mask more
// in the rank decoder's step (docs/PERFORMANCE.md, "The AVX2 rank decoder").
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
// core busy with the other chunk's chain (docs/PERFORMANCE.md, "The AVX2 rank decoder").
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
  // kernel does alone (docs/PERFORMANCE.md).
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
    // fp32 keeps the gather, which decodes it faster (docs/PERFORMANCE.md)
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

// The encoder's table for a bf16 or fp32 body with zero symbols: where no element but the zeros
// has exponent 0 (no subnormals), the entries at the zeros' lookup indices (encode_table::lookup8:
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

// The encoders' hand-over to the reference's group step: for a chunk's short last group, and for
// every group once the stream comes close to the rest sections (a group pushes at most 64 bytes,
// and an AVX2 store may reach 16 bytes below the stream's start; the reference checks every word
// and, where they run out, the chunk is stored, as the reference would store it). The divisors
// are made at the first such group.
struct reference_steps {
  rans::divisor div[rans::symbols];
  bool ready = false;
  static bool needed(const codec_detail::rans_plan& plan, unsigned lanes, std::uint64_t top) {
    return lanes < rans::lanes || top < plan.stream_at + 2 * rans::lanes + 16;
  }
  const rans::divisor* divisors(const codec_detail::rans_plan& plan) {
    if (!ready)
      for (unsigned k = 0; k < rans::symbols; ++k) div[k] = rans::divisor::of(plan.freq[k]);
    ready = true;
    return div;
  }
};

// Encodes one chunk whose plan has zero symbols (codec_detail::encode_rans_chunk's bytes), full
// groups by Kernel (encode_zeros_kernel here, avx512::rans_simd's on AVX-512).
template <class E, class Kernel>
std::uint64_t encode_zeros_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                 const codec_detail::body_shape& shape, const codec_detail::rans_plan& plan,
                                 const read_ahead& ahead) {
  using L = format::chunk_layout<E>;
  using RL = rans::layout<E>;
  const std::uint64_t base = shape.base, nsym = plan.nsym;
  const encode_table et(plan);
  Kernel kernel(plan, et);
  reference_steps ref;
  std::uint64_t top = plan.cap;
  std::uint8_t* words = out + RL::words_offset(base, nsym);
  std::uint8_t* bytes = out + RL::bytes_offset(plan.rests, base, nsym);
  alignas(64) std::uint32_t x[rans::lanes];
  for (unsigned l = 0; l < rans::lanes; ++l) x[l] = rans::state_low;
  kernel.load(x);
  std::uint64_t at = plan.rests;  // one past the rests of the group being coded
  for (std::uint64_t g = (m + format::group_elems - 1) / format::group_elems; g-- > 0;) {
    if (codec_detail::in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (reference_steps::needed(plan, lanes, top)) {
      kernel.store(x);
      std::uint64_t t = top, r = at;
      if (!codec_detail::encode_rans_group_zeros<E>(plan, ref.divisors(plan), in + first * L::elem_size, lanes, x, &t, words, bytes, &r,
                                                    out))
        return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
      top = t;
      at = r;
      kernel.load(x);
      continue;
    }
    std::uint64_t t = top, r = at;
    read_group_ahead<E>(ahead, first);
    kernel.group(in + first * L::elem_size, bytes, words, &r, out, &t);
    top = t;
    at = r;
  }
  kernel.store(x);
  return codec_detail::seal_rans_chunk<E>(plan, x, top, seal, out, shape);
}

// The end of a run of kernel turns that starts at group g (a kernel turn) of a body of shape
// `body` with `left` stream words unread: full groups, each with at least 32 words left whatever
// the groups before it take (at most 32 each), up to the next zero group.
ZIPCCL_ALWAYS_INLINE inline std::uint64_t kernel_run_end(const codec_detail::body_shape& body, std::uint64_t m,
                                                         std::uint64_t g, std::uint64_t left) {
  return codec_detail::next_zero_group(body, g + 1, std::min<std::uint64_t>(m / format::group_elems, g + left / rans::lanes));
}

// A body's last stream words, where fewer than 32 are left (`left`, from word `next` on), copied
// and padded with zeros to 32 words. A kernel group reads at most 32 words from its cursor on (the
// AVX2 kernels 16 bytes from up to 24 words on, the AVX-512 ones 64 bytes from the cursor): from
// the stream itself it could read past the chunk's end, from this copy (cursor 0, one copy a
// group) it stays inside. The groups that decode the last words (bf16 takes about five words a
// group, so about its last six) take the kernel this way rather than the reference's slower
// steps. A group that takes more than `left` words
// (a corrupt stream: the reference would run out) ends with its cursor past `left`, which the
// caller tests.
struct stream_tail {
  alignas(64) std::uint8_t words[2 * rans::lanes];
  stream_tail(const std::uint8_t* stream, std::uint64_t next, std::uint64_t left) {
    assert(left < rans::lanes);
    std::memset(words, 0, sizeof words);
    std::memcpy(words, stream + 2 * next, 2 * left);
  }
};

// Decodes the body of a chunk with zero symbols that passed check_chunk (codec_detail::
// decode_rans_body's values and statuses), full groups by Kernel (decode_zeros_kernel here,
// avx512::rans_simd's on AVX-512).
template <class E, class Kernel>
status decode_zeros_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                         const codec_detail::body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const codec_detail::rans_sections<E> sec(chunk, h, body);
  const rans::zero_symbols& z = sec.zero;
  const std::uint64_t rests = sec.rests, n_words = sec.n_words;
  const std::uint8_t *words = sec.words, *bytes = sec.bytes, *stream = sec.stream;
  alignas(64) rans::decode_table t;
  alignas(64) std::uint32_t x[rans::lanes];
  if (!sec.start(&t, x)) return status::corrupt;
  // (Kernel::run picks the kernel for the table and runs the loop with it, by value and inlined)
  return Kernel::run(t, z, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    kernel.load(x);
    std::uint64_t next = 0, j = 0;  // the next stream word; the next rest
    for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      if (codec_detail::in_zero_group(body, g)) {
        std::memset(out + first * L::elem_size, 0, lanes * L::elem_size);
        continue;
      }
      // fewer than 32 rests left (or a short group): the reference's steps, which check every
      // word and rest
      std::uint64_t n = next, r = j;
      if (lanes < rans::lanes || rests - j < rans::lanes) {
        kernel.store(x);
        if (!codec_detail::decode_rans_group_zeros<E>(t, z, lanes, x, words, bytes, &r, rests, stream, n_words, &n,
                                                      out + first * L::elem_size))
          return status::corrupt;
        kernel.load(x);
      } else if (n_words - next < rans::lanes) {
        // fewer than 32 words left: the kernel from a copy of them
        const stream_tail last(stream, next, n_words - next);
        std::uint64_t k = 0;
        kernel.group(bytes, words, &r, last.words, &k, out + first * L::elem_size);
        if (k > n_words - next) return status::corrupt;
        n = next + k;
      } else {
        // the run of kernel groups from g on (each takes at most 32 words and 32 rests), in a
        // loop without a call
        const std::uint64_t end = std::min(kernel_run_end(body, m, g, n_words - next), g + (rests - j) / rans::lanes);
        for (;;) {
          kernel.group(bytes, words, &r, stream, &n, out + g * format::group_elems * L::elem_size);
          if (g + 1 == end) break;
          ++g;
        }
      }
      next = n;
      j = r;
    }
    if (j != rests || next != n_words) return status::corrupt;
    kernel.store(x);
    for (unsigned l = 0; l < rans::lanes; ++l)
      if (x[l] != rans::state_low) return status::corrupt;
    return status::success;
  });
}

// Encodes one chunk (codec_detail::encode_rans_chunk's bytes), full groups by Kernel and, in
// bodies with zero symbols, by ZerosKernel (encode_kernel and encode_zeros_kernel here,
// avx512::rans_simd's on AVX-512).
template <class E, class Kernel, class ZerosKernel>
std::uint64_t encode_chunk_with(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                const codec_detail::body_shape& shape, const read_ahead& ahead) {
  using L = format::chunk_layout<E>;
  using RL = rans::layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  codec_detail::rans_plan plan;
  if (!plan_chunk<E>(in, m, shape, &plan, Kernel::count, Kernel::zeros))
    return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
  const read_ahead next = ahead_of(shape, ahead);
  // a body with zero symbols (rans::zeros_pay)
  if (plan.zero.on) return encode_zeros_chunk<E, ZerosKernel>(in, m, seal, out, shape, plan, next);
  const std::uint64_t b = shape.elems, base = shape.base, nsym = plan.nsym;
  const encode_table et(plan);
  // (Kernel::run picks the kernel for the chunk's plan and runs the loop with it; the kernel by
  // value, a local whose states can stay in registers, which the stores to out cannot alias; the
  // loop inlined, so that it reads this function's locals, not references to them that every
  // store to out would make it reload)
  return Kernel::run(plan, et, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    reference_steps ref;
    std::uint64_t top = plan.cap;
    std::uint8_t* words = out + RL::words_offset(base, nsym);
    std::uint8_t* bytes = out + RL::bytes_offset(b, base, nsym);
    alignas(64) std::uint32_t x[rans::lanes];
    for (unsigned l = 0; l < rans::lanes; ++l) x[l] = rans::state_low;
    kernel.load(x);
    std::uint64_t at = b;
    for (std::uint64_t g = (m + format::group_elems - 1) / format::group_elems; g-- > 0;) {
      if (codec_detail::in_zero_group(shape, g)) continue;
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      at -= lanes;
      if (reference_steps::needed(plan, lanes, top)) {  // (the short last group comes first)
        kernel.store(x);
        std::uint64_t t = top;  // (top itself never has its address taken: it stays in a register)
        if (!codec_detail::encode_rans_group<E>(plan, ref.divisors(plan), in + first * L::elem_size, lanes, x, &t,
                                                words + at * W, bytes + at, out))
          return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
        top = t;
        kernel.load(x);
        continue;
      }
      std::uint64_t t = top;
      read_group_ahead<E>(next, first);
      kernel.group(in + first * L::elem_size, bytes + at, words + at * W, out, &t);
      top = t;
    }
    kernel.store(x);
    return codec_detail::seal_rans_chunk<E>(plan, x, top, seal, out, shape);
  });
}

template <class E>
std::uint64_t encode_rans_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                const codec_detail::body_shape& shape, const read_ahead& ahead = {}) {
  return encode_chunk_with<E, encode_kernel<E>, encode_zeros_kernel<E>>(in, m, seal, out, shape, ahead);
}

// Who decodes group g of a dense rANS body of m elements with `left` stream words still unread:
// nobody (a zero group's elements are zeros), the reference's steps (a short group), the vector
// kernel from a copy of the last words (fewer than 32 left: tail_group), or the vector kernel.
enum class group_turn { none, zeros, reference, tail, kernel };
ZIPCCL_ALWAYS_INLINE inline group_turn turn_of(const codec_detail::body_shape& body, std::uint64_t m, std::uint64_t g, std::uint64_t left) {
  if (codec_detail::in_zero_group(body, g)) return group_turn::zeros;
  if (format::group_lanes(m, g) < rans::lanes) return group_turn::reference;
  return left < rans::lanes ? group_turn::tail : group_turn::kernel;
}

// A tail turn: a full group of a dense body of sections s by kernel k from a copy of the stream's
// last words (stream_tail), its stream and rest cursors *n and *j advanced. False where it took
// more words than were left (a corrupt stream).
template <class E, class Kernel>
ZIPCCL_ALWAYS_INLINE inline bool tail_group(Kernel& k, const codec_detail::rans_sections<E>& s, std::uint64_t* n,
                                            std::uint64_t* j, std::uint8_t* out) {
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const std::uint64_t left = s.n_words - *n, at = *j;
  const stream_tail last(s.stream, *n, left);
  std::uint64_t taken = 0;
  k.group(s.bytes + at, s.words + at * W, last.words, &taken, out);
  if (taken > left) return false;
  *n += taken, *j = at + rans::lanes;
  return true;
}

// Decodes a dense rANS body (no zero symbols) whose sections are sec, table t and states x (read
// by sec.start), full groups by Kernel: codec_detail::decode_rans_body's values and statuses.
template <class E, class Kernel>
status decode_dense_body(const codec_detail::rans_sections<E>& sec, const rans::decode_table& t, std::uint32_t* x,
                         std::uint64_t m, const codec_detail::body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const std::uint64_t n_words = sec.n_words;
  const std::uint8_t *words = sec.words, *bytes = sec.bytes, *stream = sec.stream;
  // (Kernel::run picks the kernel for the table and runs the loop with it, by value and inlined,
  // as encode_chunk_with's)
  return Kernel::run(t, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    kernel.load(x);
    std::uint64_t next = 0, j = 0;
    for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      const group_turn turn = turn_of(body, m, g, n_words - next);
      if (turn == group_turn::zeros) {
        std::memset(out + first * L::elem_size, 0, lanes * L::elem_size);
        continue;
      }
      std::uint64_t n = next;  // (next itself never has its address taken: it stays in a register)
      if (turn == group_turn::tail) {
        std::uint64_t k = j;
        if (!tail_group<E>(kernel, sec, &n, &k, out + first * L::elem_size)) return status::corrupt;
        j = k;
      } else if (turn == group_turn::reference) {
        kernel.store(x);
        if (!codec_detail::decode_rans_group<E>(t, lanes, x, words + j * W, bytes + j, stream, n_words, &n,
                                                out + first * L::elem_size))
          return status::corrupt;
        kernel.load(x);
        j += lanes;
      } else {
        // the run of kernel groups from g on, in a loop without a call, so that the kernel's
        // tables and constants stay in registers
        const std::uint64_t end = kernel_run_end(body, m, g, n_words - next);
        for (;;) {
          kernel.group(bytes + j, words + j * W, stream, &n, out + g * format::group_elems * L::elem_size);
          j += rans::lanes;
          if (g + 1 == end) break;
          ++g;
        }
      }
      next = n;
    }
    if (next != n_words) return status::corrupt;
    kernel.store(x);
    for (unsigned l = 0; l < rans::lanes; ++l)
      if (x[l] != rans::state_low) return status::corrupt;
    return status::success;
  });
}

// Decodes the rANS body of a chunk that passed check_chunk (codec_detail::decode_rans_body's
// values and statuses), full groups by Kernel and, in bodies with zero symbols, by ZerosKernel
// (decode_kernel and decode_zeros_kernel here, avx512::rans_simd's on AVX-512).
template <class E, class Kernel, class ZerosKernel>
status decode_body_with(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                        const codec_detail::body_shape& body, std::uint8_t* out) {
  if (format::mode_has_zero_symbols(h.mode)) return decode_zeros_body<E, ZerosKernel>(chunk, m, h, body, out);
  const codec_detail::rans_sections<E> sec(chunk, h, body);
  alignas(64) rans::decode_table t;
  alignas(64) std::uint32_t x[rans::lanes];
  if (!sec.start(&t, x)) return status::corrupt;
  return decode_dense_body<E, Kernel>(sec, t, x, m, body, out);
}

// Group g of a dense rANS body by the reference's steps, its stream and rest cursors *n and *j
// advanced on success (decode_pair_with passes copies of its cursors, which stay in registers).
template <class E>
bool reference_group(const codec_detail::rans_sections<E>& s, const rans::decode_table& t, std::uint64_t m,
                     std::uint64_t g, std::uint32_t* x, std::uint64_t* n, std::uint64_t* j, std::uint8_t* out) {
  constexpr unsigned W = rans::split<E>::word_bytes;
  const unsigned lanes = format::group_lanes(m, g);
  std::uint64_t next = *n;
  const std::uint64_t at = *j;
  if (!codec_detail::decode_rans_group<E>(t, lanes, x, s.words + at * W, s.bytes + at, s.stream, s.n_words, &next, out))
    return false;
  *n = next, *j = at + lanes;
  return true;
}

// Whether kernel class K says, by K::pair_may_pay(nsym_a, nsym_b) and K::pair_pays(ta, tb), when
// two bodies pay for one loop.
template <class K, class = void>
struct has_pair_pays : std::false_type {};
template <class K>
struct has_pair_pays<K, std::void_t<decltype(&K::pair_pays), decltype(&K::pair_may_pay)>> : std::true_type {};

// A full group of each of two chunks by kernels ka and kb: by the kernel's group_pair where it
// has one (which interleaves the two), else one after the other.
template <class K, class = void>
struct has_group_pair : std::false_type {};
template <class K>
struct has_group_pair<K, std::void_t<decltype(&K::group_pair)>> : std::true_type {};
template <class K>
ZIPCCL_ALWAYS_INLINE inline void pair_group(K& ka, K& kb, const std::uint8_t* const (&bytes)[2],
                                            const std::uint8_t* const (&words)[2], const std::uint8_t* const (&stream)[2],
                                            std::uint64_t* const (&next)[2], std::uint8_t* const (&out)[2]) {
  if constexpr (has_group_pair<K>::value) {
    K::group_pair(ka, kb, bytes, words, stream, next, out);
  } else {
    ka.group(bytes[0], words[0], stream[0], next[0], out[0]);
    kb.group(bytes[1], words[1], stream[1], next[1], out[1]);
  }
}

// Two dense rANS bodies (no zero symbols) of chunks that passed check_chunk, decoded in one loop
// of groups, a full group of each by its own Kernel: the two chunks' states are independent, so
// the core overlaps one chunk's chain of gather, multiply and refill with the other's, where one
// chunk's 32 lanes give it only two chains (AVX-512) that wait on each other's latency. Where the
// kernel says the pair does not pay (has_pair_pays: the AVX2 kernel, unless both tables take one
// rank class), the two bodies are decoded one after the other by the single loop instead. True
// when both bodies decoded and ended as decode_body_with requires (same values out); false when
// either did not, and then the caller decodes each on its own for its status.
template <class E, class Kernel>
bool decode_pair_with(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  using L = format::chunk_layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const codec_detail::rans_sections<E> sa(chunk[0], h[0], body[0]), sb(chunk[1], h[1], body[1]);
  alignas(64) rans::decode_table ta, tb;
  alignas(64) std::uint32_t xa[rans::lanes], xb[rans::lanes];
  // (a kernel whose pair loop is slower than two single loops for some tables says so: then
  // the two bodies are decoded one after the other, by the single loop)
  if constexpr (has_pair_pays<Kernel>::value)
    if (!Kernel::pair_may_pay(sa.nsym, sb.nsym))
      return sa.start(&ta, xa) && decode_dense_body<E, Kernel>(sa, ta, xa, m[0], body[0], out[0]) == status::success &&
             sb.start(&ta, xb) && decode_dense_body<E, Kernel>(sb, ta, xb, m[1], body[1], out[1]) == status::success;
  if (!sa.start(&ta, xa) || !sb.start(&tb, xb)) return false;
  if constexpr (has_pair_pays<Kernel>::value)
    if (!Kernel::pair_pays(ta, tb))
      return decode_dense_body<E, Kernel>(sa, ta, xa, m[0], body[0], out[0]) == status::success &&
             decode_dense_body<E, Kernel>(sb, tb, xb, m[1], body[1], out[1]) == status::success;
  return Kernel::run_pair(ta, tb, [&](auto ka, auto kb) ZIPCCL_ALWAYS_INLINE {
    bool ok = true;
    ka.load(xa), kb.load(xb);
    // (the cursors are locals whose address is never taken, only their copies': they stay in
    // registers, where a store of decoded values could otherwise alias them)
    std::uint64_t na = 0, nb = 0, ja = 0, jb = 0;
    const std::uint64_t ga = (m[0] + format::group_elems - 1) / format::group_elems;
    const std::uint64_t gb = (m[1] + format::group_elems - 1) / format::group_elems;
    for (std::uint64_t g = 0; ok && g < std::max(ga, gb); ++g) {
      const std::uint64_t at = g * format::group_elems * L::elem_size;
      const group_turn a = g < ga ? turn_of(body[0], m[0], g, sa.n_words - na) : group_turn::none;
      const group_turn b = g < gb ? turn_of(body[1], m[1], g, sb.n_words - nb) : group_turn::none;
      if (a == group_turn::kernel && b == group_turn::kernel) {
        // the run of groups that both decode by their kernels, in a loop without a call (the
        // kernels' tables and constants stay in registers)
        const std::uint64_t end =
            std::min(kernel_run_end(body[0], m[0], g, sa.n_words - na), kernel_run_end(body[1], m[1], g, sb.n_words - nb));
        std::uint64_t n0 = na, n1 = nb;
        for (;;) {
          const std::uint64_t o = g * format::group_elems * L::elem_size;
          pair_group(ka, kb, {sa.bytes + ja, sb.bytes + jb}, {sa.words + ja * W, sb.words + jb * W}, {sa.stream, sb.stream},
                     {&n0, &n1}, {out[0] + o, out[1] + o});
          ja += rans::lanes, jb += rans::lanes;
          if (g + 1 == end) break;
          ++g;
        }
        na = n0, nb = n1;
        continue;
      }
      if (a == group_turn::kernel) {
        std::uint64_t n = na;
        ka.group(sa.bytes + ja, sa.words + ja * W, sa.stream, &n, out[0] + at);
        na = n, ja += rans::lanes;
      }
      if (b == group_turn::kernel) {
        std::uint64_t n = nb;
        kb.group(sb.bytes + jb, sb.words + jb * W, sb.stream, &n, out[1] + at);
        nb = n, jb += rans::lanes;
      }
      if (a == group_turn::tail) {
        std::uint64_t n = na, j = ja;
        ok = tail_group<E>(ka, sa, &n, &j, out[0] + at);
        na = n, ja = j;
      }
      if (ok && b == group_turn::tail) {
        std::uint64_t n = nb, j = jb;
        ok = tail_group<E>(kb, sb, &n, &j, out[1] + at);
        nb = n, jb = j;
      }
      if (a == group_turn::zeros) std::memset(out[0] + at, 0, format::group_lanes(m[0], g) * L::elem_size);
      if (b == group_turn::zeros) std::memset(out[1] + at, 0, format::group_lanes(m[1], g) * L::elem_size);
      // (a group by the reference's steps: the states through their arrays, the cursors as copies)
      if (a == group_turn::reference) {
        std::uint64_t n = na, j = ja;
        ka.store(xa);
        ok = reference_group<E>(sa, ta, m[0], g, xa, &n, &j, out[0] + at);
        ka.load(xa);
        na = n, ja = j;
      }
      if (ok && b == group_turn::reference) {
        std::uint64_t n = nb, j = jb;
        kb.store(xb);
        ok = reference_group<E>(sb, tb, m[1], g, xb, &n, &j, out[1] + at);
        kb.load(xb);
        nb = n, jb = j;
      }
    }
    if (ok) {
      ka.store(xa), kb.store(xb);
      ok = na == sa.n_words && nb == sb.n_words;
      for (unsigned l = 0; ok && l < rans::lanes; ++l) ok = xa[l] == rans::state_low && xb[l] == rans::state_low;
    }
    return ok;
  });
}

template <class E>
status decode_rans_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                        const codec_detail::body_shape& body, std::uint8_t* out) {
  return decode_body_with<E, decode_kernel<E>, decode_zeros_kernel<E>>(chunk, m, h, body, out);
}

template <class E>
bool decode_rans_pair(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  return decode_pair_with<E, decode_kernel<E>>(chunk, m, h, body, out);
}

}  // namespace zipccl::host::detail::avx2::rans_simd
