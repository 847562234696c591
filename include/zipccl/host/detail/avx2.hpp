// zipccl: AVX2 paths for coded chunks (the 3-bit policies, with or without a zero mask), for CPUs
// with AVX2 and no AVX-512, and for zero-mask chunks on AVX-512 CPUs too.
//
// Decoder: a 32-element group is one 256-bit register of bytes: each plane word is spread to a
// byte per lane (a broadcast, a byte shuffle and a compare against each lane's bit), the three code
// planes are combined into codes 0..7, and one byte shuffle looks the seven table entries up.
// Escapes (about 3% of the lanes) are patched in lane order from the escape bytes, then the
// exponents are joined with the rest sections per type and stored.
// Encoder: the chunk's statistic from the groups' exponent bytes (sums by vpsadbw for the analytic
// policy, eight partial histograms for the histogram policy), then per group the codes by seven
// byte compares against the table's entries, each plane word by one vpmovmskb, the rest sections
// by shifts and packs, and the escaped exponents in lane order.
// The bytes written, the values, the statuses and the order of the checks are those of
// codec_detail::encode_chunk / decode_chunk; test_host_simd compares them on every build that
// compiles this file.
#pragma once

#include <immintrin.h>

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

namespace zipccl::host::detail::avx2 {

// Eight 32-bit lanes (each below 2^16) of a and of b as sixteen 16-bit values in lane order.
inline __m256i pack_u16(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
}

// The high bytes of a full group of 32 elements at `in`, in lane order: the exponent field for
// bf16 and fp32, the byte of sign, exponent and mantissa bits 9..8 for fp16.
template <class E>
inline __m256i group_symbols(const std::uint8_t* in) {
  if constexpr (std::is_same_v<E, fp32>) {
    __m256i s[4];
    for (int k = 0; k < 4; ++k)
      s[k] = _mm256_and_si256(_mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * k)), 23),
                              _mm256_set1_epi32(0xFF));
    const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(s[0], s[1]), _mm256_packus_epi32(s[2], s[3]));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  } else {
    __m256i s[2];
    for (int k = 0; k < 2; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * k));
      if constexpr (std::is_same_v<E, bf16>) s[k] = _mm256_and_si256(_mm256_srli_epi16(v, 7), _mm256_set1_epi16(0xFF));
      else s[k] = _mm256_srli_epi16(v, 8);
    }
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(s[0], s[1]), 0xD8);
  }
}

// Byte l of the result is 0xFF when bit l of p is set, else 0.
inline __m256i spread_bits(std::uint32_t p) {
  const __m256i v = _mm256_set1_epi32(static_cast<int>(p));
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  // bytes 0, 1 of p
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);  // bytes 2, 3
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, pick), bit), bit);
}

// Joins 32 exponent bytes with the group's rest sections and stores the elements at out.
template <class E>
inline void join_store(std::uint8_t* out, __m256i exp, const std::uint32_t (&p)[format::chunk_layout<E>::planes],
                       const std::uint8_t* bytes, const std::uint8_t* words) {
  const __m256i rest = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
  if constexpr (std::is_same_v<E, bf16>) {
    // high byte s eeeeeee, low byte e mmmmmmm (the rest byte is s mmmmmmm)
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(rest, top),
                                       _mm256_and_si256(_mm256_srli_epi16(exp, 1), _mm256_set1_epi8(0x7F)));
    const __m256i lo = _mm256_or_si256(_mm256_andnot_si256(top, rest),
                                       _mm256_and_si256(_mm256_slli_epi16(exp, 7), top));
    const __m256i a = _mm256_unpacklo_epi8(lo, hi), b = _mm256_unpackhi_epi8(lo, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_permute2x128_si256(a, b, 0x31));
  } else if constexpr (std::is_same_v<E, fp16>) {
    // high byte s eeeee mm: the sign and mantissa bits 9, 8 come from planes 5, 4, 3
    const __m256i hi = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(spread_bits(p[5]), _mm256_set1_epi8(static_cast<char>(0x80))),
                        _mm256_and_si256(_mm256_slli_epi16(exp, 2), _mm256_set1_epi8(0x7C))),
        _mm256_or_si256(_mm256_and_si256(spread_bits(p[4]), _mm256_set1_epi8(2)),
                        _mm256_and_si256(spread_bits(p[3]), _mm256_set1_epi8(1))));
    const __m256i a = _mm256_unpacklo_epi8(rest, hi), b = _mm256_unpackhi_epi8(rest, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_permute2x128_si256(a, b, 0x31));
  } else {
    // s eeeeeeee mmmmmmm (rest byte: s and mantissa bits 16..22) mmmmmmmm mmmmmmmm (the word)
    alignas(32) std::uint8_t e8[32], r8[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(e8), exp);
    _mm256_store_si256(reinterpret_cast<__m256i*>(r8), rest);
    for (int q = 0; q < 4; ++q) {
      std::uint64_t e64, r64;
      std::memcpy(&e64, e8 + 8 * q, 8);
      std::memcpy(&r64, r8 + 8 * q, 8);
      const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(e64)));
      const __m256i r = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(r64)));
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 16 * q)));
      const __m256i v = _mm256_or_si256(
          _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x80)), 24), _mm256_slli_epi32(e, 23)),
          _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x7F)), 16), w));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * q), v);
    }
  }
}

// Decodes the body of a coded chunk (modes 1 and 3) that passed check_chunk: the result of
// codec_detail::decode_chunk's coded branch.
template <class E>
status decode_coded_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                         const codec_detail::body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  constexpr unsigned P = L::planes;
  const std::uint8_t* planes = chunk + L::planes_offset(body.base);
  const std::uint8_t* words = chunk + L::words_offset(body.elems, body.base);
  const std::uint8_t* bytes = chunk + L::bytes_offset(body.elems, body.base);
  const std::uint8_t* escapes = chunk + L::escapes_offset(body.elems, body.base);
  alignas(16) std::uint8_t tab[16] = {};
  for (unsigned k = 0; k < format::table_size; ++k) tab[1 + k] = h.table[k];
  const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tab)));
  std::uint64_t used = 0, b = 0;  // b: the body's group
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems, at = b * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (codec_detail::in_zero_group(body, g)) {
      std::memset(out + first * L::elem_size, 0, lanes * L::elem_size);
      continue;
    }
    const std::uint8_t* gp = planes + b * P * 4;
    if (!G::padding_clear(gp, lanes)) return status::corrupt;
    std::uint32_t p[P];
    G::load_planes(gp, p);
    const __m256i code = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(spread_bits(p[0]), _mm256_set1_epi8(1)),
                        _mm256_and_si256(spread_bits(p[1]), _mm256_set1_epi8(2))),
        _mm256_and_si256(spread_bits(p[2]), _mm256_set1_epi8(4)));
    __m256i exp = _mm256_shuffle_epi8(table, code);
    std::uint32_t esc = G::escape_mask(gp, lanes);
    if (esc != 0) {
      // in lane order, as the reference consumes them
      if (used + static_cast<std::uint64_t>(_mm_popcnt_u32(esc)) > h.escapes) return status::corrupt;
      alignas(32) std::uint8_t e8[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(e8), exp);
      for (; esc != 0; esc &= esc - 1) {
        const std::uint32_t e = escapes[used++];
        if (e >= E::exponent_count) return status::corrupt;
        e8[format::lowest_bit(esc)] = static_cast<std::uint8_t>(e);
      }
      exp = _mm256_load_si256(reinterpret_cast<const __m256i*>(e8));
    }
    if (lanes == 32) {
      join_store<E>(out + first * L::elem_size, exp, p, bytes + at, words + at * L::word_bytes);
    } else {
      // a short last group: its rest sections and its elements go through buffers of 32 lanes
      alignas(32) std::uint8_t rb[32] = {}, wb[64] = {}, ob[128];
      std::memcpy(rb, bytes + at, lanes);
      if constexpr (L::word_bytes != 0) std::memcpy(wb, words + at * L::word_bytes, lanes * L::word_bytes);
      join_store<E>(ob, exp, p, rb, wb);
      std::memcpy(out + first * L::elem_size, ob, lanes * L::elem_size);
    }
    ++b;
  }
  return used == h.escapes ? status::success : status::corrupt;
}


// The exponent fields of a group from its high bytes (group_symbols).
template <class E>
inline __m256i group_exponents(__m256i high) {
  if constexpr (std::is_same_v<E, fp16>) return _mm256_and_si256(_mm256_srli_epi16(high, 2), _mm256_set1_epi8(0x1F));
  else return high;
}

// A full group of 32 elements in registers: two of sixteen 16-bit elements (bf16, fp16), four of
// eight 32-bit ones (fp32).
template <class E>
inline constexpr int group_regs = std::is_same_v<E, fp32> ? 4 : 2;
template <class E>
inline void load_group(const std::uint8_t* in, __m256i (&v)[group_regs<E>]) {
  for (int k = 0; k < group_regs<E>; ++k) v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * k));
}

// The rest sections of a full group (load_group): bytes (32) and, for fp32, words (32 x u16), as
// group_coder::encode writes them; rANS's split of the rest is the same (rans::split).
template <class E>
inline void store_rest(const __m256i (&v)[group_regs<E>], std::uint8_t* bytes, std::uint8_t* words) {
  if constexpr (std::is_same_v<E, fp32>) {
    __m256i r[4];
    for (int k = 0; k < 4; ++k)
      r[k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v[k], 24), _mm256_set1_epi32(0x80)),
                             _mm256_and_si256(_mm256_srli_epi32(v[k], 16), _mm256_set1_epi32(0x7F)));
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    for (int k = 0; k < 4; k += 2)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + 16 * k),
                          pack_u16(_mm256_and_si256(v[k], lo16), _mm256_and_si256(v[k + 1], lo16)));
    const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(r[0], r[1]), _mm256_packus_epi32(r[2], r[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes),
                        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  } else {
    (void)words;
    __m256i r[2];
    for (int k = 0; k < 2; ++k) {
      if constexpr (std::is_same_v<E, bf16>)
        r[k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[k], 8), _mm256_set1_epi16(0x80)),
                               _mm256_and_si256(v[k], _mm256_set1_epi16(0x7F)));
      else
        r[k] = _mm256_and_si256(v[k], _mm256_set1_epi16(0xFF));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes), _mm256_permute4x64_epi64(_mm256_packus_epi16(r[0], r[1]), 0xD8));
  }
}

template <class E>
inline void group_rest(const std::uint8_t* in, std::uint8_t* bytes, std::uint8_t* words) {
  __m256i v[group_regs<E>];
  load_group<E>(in, v);
  store_rest<E>(v, bytes, words);
}

// Calls f(first, lanes) for each group of the body (the groups outside zero groups) in order,
// from group g0 on.
template <class F>
inline void for_body_groups(std::uint64_t m, const codec_detail::body_shape& shape, F&& f, std::uint64_t g0 = 0) {
  for (std::uint64_t g = g0; g * format::group_elems < m; ++g)
    if (!codec_detail::in_zero_group(shape, g)) f(g * format::group_elems, format::group_lanes(m, g));
}

// The sum and count of the body's exponent fields that analytic_gaussian counts (all but the
// all-ones field and, for bf16 and fp32, zero): a compare and one vpsadbw per group.
template <class E>
void exponent_sum(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint64_t* sum,
                  std::uint64_t* count) {
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  const __m256i top = _mm256_set1_epi8(static_cast<char>(E::exponent_mask)), zero = _mm256_setzero_si256();
  __m256i sums = zero;
  std::uint64_t s = 0, n = 0;
  for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    if (lanes < format::group_elems) {
      for (unsigned i = 0; i < lanes; ++i) {
        const std::uint32_t e = E::exponent(format::load_le<bits_type>(in + (first + i) * L::elem_size));
        if (codebook::analytic_gaussian::counts<E>(e)) s += e, ++n;
      }
      return;
    }
    const __m256i e = group_exponents<E>(group_symbols<E>(in + first * L::elem_size));
    __m256i out = _mm256_cmpeq_epi8(e, top);
    if constexpr (!std::is_same_v<E, fp16>) out = _mm256_or_si256(out, _mm256_cmpeq_epi8(e, zero));
    sums = _mm256_add_epi64(sums, _mm256_sad_epu8(_mm256_andnot_si256(out, e), zero));
    n += 32u - static_cast<unsigned>(_mm_popcnt_u32(static_cast<std::uint32_t>(_mm256_movemask_epi8(out))));
  });
  alignas(32) std::uint64_t part[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(part), sums);
  *sum = s + part[0] + part[1] + part[2] + part[3];
  *count = n;
}

// The zero-group test for format::make_zero_mask (through codec_detail::plan_body): a full
// group's bytes (128, fp32's 256) in 32-byte loads ORed together and one vptest; a short last
// group by the reference's test. Every byte of the chunk is read, as the coders read them next.
struct zero_group_test {
  unsigned elem_size;
  bool operator()(const std::uint8_t* p, std::uint64_t k) const {
    if (k != format::zero_group_elems) return format::all_zero_bits(p, k, elem_size);
    const unsigned loads = format::zero_group_elems * elem_size / 32;
    __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    for (unsigned j = 1; j < loads; ++j)
      acc = _mm256_or_si256(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * j)));
    return _mm256_testz_si256(acc, acc) != 0;
  }
};

// The body's numbers of +0.0 and -0.0 elements (codec_detail::count_zeros), a group at a time:
// each register's compares subtracted from counters in its lanes (bf16 and fp16: 16-bit lanes,
// which two registers a group bring to at most 16384 in the 8192 groups between their sums), the
// lanes summed at the end. (Faster element-sparse compression than a movemask and a popcount
// per compare.)
template <class E>
void count_zeros(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint64_t* n_pos,
                 std::uint64_t* n_neg) {
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  constexpr bool wide = std::is_same_v<E, fp32>;
  constexpr bits_type neg0 = static_cast<bits_type>(bits_type(1) << (E::total_bits - 1));
  const __m256i z0 = _mm256_setzero_si256();
  const __m256i n0 = wide ? _mm256_set1_epi32(static_cast<int>(neg0)) : _mm256_set1_epi16(static_cast<short>(neg0));
  std::uint64_t p = 0, q = 0;
  __m256i cp = z0, cn = z0;
  unsigned held = 0;  // groups in cp and cn
  const auto sum_out = [&]() {
    // (the lanes' counters as 32-bit sums: 16-bit lanes by pairs against ones)
    const __m256i sp = wide ? cp : _mm256_madd_epi16(cp, _mm256_set1_epi16(1));
    const __m256i sn = wide ? cn : _mm256_madd_epi16(cn, _mm256_set1_epi16(1));
    alignas(32) std::uint32_t a[8], b[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(a), sp);
    _mm256_store_si256(reinterpret_cast<__m256i*>(b), sn);
    for (int l = 0; l < 8; ++l) p += a[l], q += b[l];
    cp = cn = z0;
    held = 0;
  };
  for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    if (lanes < format::group_elems) {
      for (unsigned i = 0; i < lanes; ++i) {
        const bits_type v = format::load_le<bits_type>(in + (first + i) * L::elem_size);
        p += v == 0;
        q += v == neg0;
      }
      return;
    }
    __m256i v[group_regs<E>];
    load_group<E>(in + first * L::elem_size, v);
    for (int k = 0; k < group_regs<E>; ++k) {
      if constexpr (wide) {
        cp = _mm256_sub_epi32(cp, _mm256_cmpeq_epi32(v[k], z0));
        cn = _mm256_sub_epi32(cn, _mm256_cmpeq_epi32(v[k], n0));
      } else {
        cp = _mm256_sub_epi16(cp, _mm256_cmpeq_epi16(v[k], z0));
        cn = _mm256_sub_epi16(cn, _mm256_cmpeq_epi16(v[k], n0));
      }
    }
    if (++held == 8192) sum_out();
  });
  sum_out();
  *n_pos = p;
  *n_neg = q;
}

// Adds the high bytes of a group's `lanes` fp16 elements (hi: the first one's high byte) to eight
// partial tables, element i to table i % 8, so that a run of equal bytes does not wait on one
// counter (fp16_high_bytes here, the sampled groups of rans_simd::fp16_counts).
inline void add_high_bytes(std::uint32_t (&part)[8][256], const std::uint8_t* hi, unsigned lanes) {
  if (lanes < format::group_elems) {
    for (unsigned i = 0; i < lanes; ++i) ++part[i & 7][hi[2 * i]];
    return;
  }
  for (unsigned i = 0; i < format::group_elems; i += 8)
    for (unsigned k = 0; k < 8; ++k) ++part[k][hi[2 * (i + k)]];
}

// fp16's histogram of its elements' high bytes (sign, exponent, mantissa bits 9..8: its rANS
// symbol), the byte of each element counted straight from memory into eight partial tables; the
// eight tables summed into hist. (A byte load and an increment an element beat symbols made in a
// register and moved out eight at a time: docs/decisions.md.)
inline void fp16_high_bytes(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                            std::uint32_t (&hist)[256]) {
  alignas(64) std::uint32_t part[8][256] = {};
  for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    add_high_bytes(part, in + 2 * first + 1, lanes);  // (little-endian: the high byte second)
  });
  for (unsigned v = 0; v < 256; ++v) {
    std::uint32_t c = 0;
    for (unsigned k = 0; k < 8; ++k) c += part[k][v];
    hist[v] = c;
  }
}

// bf16, fp32: adds the counts of the exponent fields (their rANS symbols too) of the body's groups
// from group g0 on to counts[0 .. n - 1]. Each element's high 16 bits, loaded and shifted down by
// 7 (sign and exponent, 512 values), index eight partial tables, so that a run of equal values
// does not wait on one counter; the sign is summed out at the end (faster compression than the
// exponents made 32 at a time in a register and taken out of 64-bit words by shifts).
template <class E>
void add_exponent_counts(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint64_t g0,
                         std::uint32_t* counts, unsigned n) {
  static_assert(!std::is_same_v<E, fp16>, "add_exponent_counts: bf16 and fp32 (fp16: fp16_high_bytes)");
  constexpr unsigned S = format::chunk_layout<E>::elem_size;
  alignas(64) std::uint32_t wide[8][512] = {};
  for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
    const std::uint8_t* p = in + first * S + (S - 2);
    if (lanes < format::group_elems) {
      for (unsigned i = 0; i < lanes; ++i) ++wide[i & 7][format::load_le<std::uint16_t>(p + S * i) >> 7];
      return;
    }
    for (unsigned i = 0; i < format::group_elems; i += 8)
      for (unsigned k = 0; k < 8; ++k) ++wide[k][format::load_le<std::uint16_t>(p + S * (i + k)) >> 7];
  }, g0);
  for (unsigned v = 0; v < n && v < 256; ++v)  // (no exponent field of bf16 or fp32 is 256 or more)
    for (unsigned k = 0; k < 8; ++k) counts[v] += wide[k][v] + wide[k][v + 256];
}

// The body's histogram of exponent fields (Exponents) or of rANS symbols (the high bytes:
// codec/rans.hpp), the first `n` entries into counts: bf16 and fp32 by add_exponent_counts (their
// symbol is the exponent field), fp16 by fp16_high_bytes, its exponents summed from the high
// bytes' counts.
template <class E, bool Exponents>
void byte_histogram(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape, std::uint32_t* counts,
                    unsigned n) {
  using bits_type = typename E::bits_type;
  if constexpr (std::is_same_v<E, fp16>) {
    std::uint32_t hist[256];
    fp16_high_bytes(in, m, shape, hist);
    for (unsigned v = 0; v < n; ++v) counts[v] = 0;
    for (unsigned b = 0; b < 256; ++b) {
      const unsigned v = Exponents ? E::exponent(static_cast<bits_type>(b << 8)) : b;
      if (v < n) counts[v] += hist[b];
    }
  } else {
    for (unsigned v = 0; v < n; ++v) counts[v] = 0;
    add_exponent_counts<E>(in, m, shape, 0, counts, n);
  }
}

// The histogram policy's table: for bf16 and fp32 from the eleven bins of histogram_bins.hpp,
// counted with compares and popcounts, when they decide it; otherwise, and for fp16, from the full
// histogram.
template <class E>
codebook::table histogram_table(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape) {
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  if constexpr (E::exponent_count > 32) {
    constexpr int bins = histogram_bins::bins;
    std::uint64_t sum = 0, count = 0;
    exponent_sum<E>(in, m, shape, &sum, &count);
    const int base = histogram_bins::first_bin<E>(sum, count);
    __m256i bin[bins];
    for (int j = 0; j < bins; ++j) bin[j] = _mm256_set1_epi8(static_cast<char>(base + j));
    std::uint64_t near[bins] = {}, zero = 0;
    for_body_groups(m, shape, [&](std::uint64_t first, unsigned lanes) {
      if (lanes < format::group_elems) {
        for (unsigned i = 0; i < lanes; ++i) {
          const int e = static_cast<int>(E::exponent(format::load_le<bits_type>(in + (first + i) * L::elem_size)));
          if (e == 0) ++zero;
          else if (e >= base && e < base + bins) ++near[e - base];
        }
        return;
      }
      const __m256i e = group_exponents<E>(group_symbols<E>(in + first * L::elem_size));
      zero += static_cast<unsigned>(
          _mm_popcnt_u32(static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(e, _mm256_setzero_si256())))));
      for (int j = 0; j < bins; ++j)
        near[j] += static_cast<unsigned>(_mm_popcnt_u32(static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(e, bin[j])))));
    });
    codebook::table t;
    if (histogram_bins::select<E>(zero, near, base, shape.elems, &t)) return t;
  }
  std::uint32_t counts[E::exponent_count] = {};
  byte_histogram<E, true>(in, m, shape, counts, E::exponent_count);
  return codebook::histogram::select<E>(counts);
}

// codec_detail::choose_table with the statistic taken 32 elements at a time (the short last group
// element by element).
template <class E, class Policy>
codebook::table choose_table(const Policy& policy, const std::uint8_t* in, std::uint64_t m,
                             const codec_detail::body_shape& shape) {
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    static_assert(std::is_same_v<Policy, codebook::analytic_gaussian>, "avx2::choose_table: unknown mean statistic");
    std::uint64_t sum = 0, count = 0;
    exponent_sum<E>(in, m, shape, &sum, &count);
    return Policy::template select<E>(sum, count, shape.elems);
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    static_assert(std::is_same_v<Policy, codebook::histogram>, "avx2::choose_table: unknown histogram policy");
    return histogram_table<E>(in, m, shape);
  } else {
    return codec_detail::choose_table<E>(policy, in, m, shape);
  }
}

// codec_detail::encode_chunk (a coded body with table t, or stored when escapes make coding not
// pay) with full groups coded 32 lanes at a time.
template <class E>
std::uint64_t encode_coded_chunk(const std::uint8_t* in, std::uint64_t m, const codebook::table& t, format::chunk_seal seal,
                                 std::uint8_t* out, const codec_detail::body_shape& shape) {
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  constexpr unsigned P = L::planes;
  const std::int64_t budget = L::escape_budget(shape.elems, shape.base);
  if (budget < 0) return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
  std::uint8_t lut[256];
  codebook::make_code_lut(t, lut);
  // code k + 1 where a lane's exponent is entry k; entries are tried from the last to the first,
  // so that a repeated entry takes its first code, as make_code_lut's table does
  __m256i entry[format::table_size], code_of[format::table_size];
  for (unsigned k = 0; k < format::table_size; ++k) {
    entry[k] = _mm256_set1_epi8(static_cast<char>(t.exponent[k]));
    code_of[k] = _mm256_set1_epi8(static_cast<char>(k + 1));
  }
  std::uint8_t* planes = out + L::planes_offset(shape.base);
  std::uint8_t* words = out + L::words_offset(shape.elems, shape.base);
  std::uint8_t* bytes = out + L::bytes_offset(shape.elems, shape.base);
  std::uint8_t* escapes = out + L::escapes_offset(shape.elems, shape.base);
  std::uint64_t n_esc = 0, b = 0;  // b: the body's group
  alignas(32) std::uint8_t esc[32], e8[32];
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    if (codec_detail::in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems, at = b * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (lanes < format::group_elems) {
      const unsigned k =
          G::encode(in + first * L::elem_size, lanes, lut, planes + b * P * 4, words + at * L::word_bytes, bytes + at, esc);
      if (static_cast<std::int64_t>(n_esc + k) > budget) return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
      std::memcpy(escapes + n_esc, esc, k);
      n_esc += k;
    } else {
      const __m256i high = group_symbols<E>(in + first * L::elem_size);
      const __m256i e = group_exponents<E>(high);
      __m256i code = _mm256_setzero_si256();
      for (unsigned j = format::table_size; j-- > 0;) code = _mm256_blendv_epi8(code, code_of[j], _mm256_cmpeq_epi8(e, entry[j]));
      // bit j of a lane's code to the top of its byte, then one vpmovmskb per plane word
      std::uint32_t p[P];
      p[0] = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(code, 7)));
      p[1] = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(code, 6)));
      p[2] = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(code, 5)));
      if constexpr (P > 3) {  // fp16: mantissa bits 8, 9 and the sign, bits 0, 1 and 7 of the high byte
        p[3] = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(high, 7)));
        p[4] = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(high, 6)));
        p[5] = static_cast<std::uint32_t>(_mm256_movemask_epi8(high));
      }
      for (unsigned j = 0; j < P; ++j) format::store_le<std::uint32_t>(planes + b * P * 4 + 4 * j, p[j]);
      group_rest<E>(in + first * L::elem_size, bytes + at, words + at * L::word_bytes);
      // the escaped lanes' exponents, in lane order
      std::uint32_t lanes_out = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(code, _mm256_setzero_si256())));
      if (lanes_out != 0) {
        if (static_cast<std::int64_t>(n_esc + static_cast<unsigned>(_mm_popcnt_u32(lanes_out))) > budget)
          return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
        _mm256_store_si256(reinterpret_cast<__m256i*>(e8), e);
        for (; lanes_out != 0; lanes_out &= lanes_out - 1) escapes[n_esc++] = e8[format::lowest_bit(lanes_out)];
      }
    }
    ++b;
  }
  return codec_detail::seal_coded_chunk<E>(shape, t, n_esc, seal, out);
}

// The whole chunk encoder of a 3-bit policy: the statistic, the table, the body.
template <class E, class Policy>
std::uint64_t encode_chunk(const Policy& policy, const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                           const codec_detail::body_shape& shape) {
  return encode_coded_chunk<E>(in, m, avx2::choose_table<E>(policy, in, m, shape), seal, out, shape);
}

}  // namespace zipccl::host::detail::avx2
