// zipccl: what the AVX2 rANS encoder and decoder kernels share (avx2_rans_encode.hpp,
// avx2_rans_decode.hpp): the lane-mask tables (mask_tables: the encoder's packs of the pushed
// words, the decoder's refill permutes), the rest tables of bodies with zero symbols (rest_tables:
// the pshufb patterns that pack or spread eight lanes' rests), a register from four 64-bit scalars
// (from_u64) and the loads and stores of 32 states as four registers of eight. The tables are
// built once, on first use, and only read after. Needs AVX2 (included where ZIPCCL_HAS_AVX2 holds).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "../../config.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

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

// A register of four 64-bit values, a in the lowest: from general registers by vmovq and vpinsrq
// (the kernels' scalar table lookups, which beat gathers).
ZIPCCL_ALWAYS_INLINE inline __m256i from_u64(long long a, long long b, long long c, long long d) {
  return _mm256_set_m128i(_mm_insert_epi64(_mm_cvtsi64_si128(c), d, 1), _mm_insert_epi64(_mm_cvtsi64_si128(a), b, 1));
}

inline void load_states(const std::uint32_t* x, __m256i (&v)[4]) {
  for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * k));
}
inline void store_states(const __m256i (&v)[4], std::uint32_t* x) {
  for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * k), v[k]);
}

}  // namespace zipccl::host::detail::avx2::rans_simd
