// zipccl: AVX2 decoder for coded chunks (the 3-bit policies, with or without a zero mask), for
// CPUs with AVX2 and no AVX-512 (such as the AMD EPYC VMs zipccl is developed on), and for zero-mask
// chunks on AVX-512 CPUs too.
//
// A 32-element group is one 256-bit register of bytes: each plane word is spread to a byte per
// lane (a broadcast, a byte shuffle and a compare against each lane's bit), the three code planes
// are combined into codes 0..7, and one byte shuffle looks the seven table entries up. Escapes
// (about 3% of the lanes) are patched in lane order from the escape bytes, then the exponents are
// joined with the rest sections per type and stored. The values, the statuses and the order of
// the checks are those of codec_detail::decode_chunk; test_host_simd compares them on every build
// that compiles this file.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../element.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"

namespace zipccl::host::detail::avx2 {

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

}  // namespace zipccl::host::detail::avx2
