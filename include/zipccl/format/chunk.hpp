// zipccl: the layout of one chunk.
//
//   chunk header (16 bytes): mode u8 | table u8[7] | escape count u32 | check u32
//   coded body:   bit planes  (per group of 32 elements: P little-endian u32 words)
//                 words       (fp32 only: bits 0..15 of each element's rest, u16 each)
//                 bytes       (one byte per element: bits 0..7 of the rest, or 16..23 for fp32)
//                 escapes     (one byte per escaped element: its raw exponent field)
//                 zero padding to 16 bytes
//   stored body:  the raw little-endian elements, zero padding to 16 bytes
//
// Everything before the escapes has a size that depends only on the element count, so a receiver
// can decode every non-escaped element before the escapes arrive.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"
#include "bytes.hpp"
#include "hash.hpp"
#include "stream.hpp"

namespace zipccl::format {

inline constexpr unsigned code_planes = 3;
inline constexpr unsigned table_size = 7;  // codes 1..7; code 0 is the escape

struct chunk_header {
  chunk_mode mode = chunk_mode::stored;
  std::uint8_t table[table_size] = {};
  std::uint32_t escapes = 0;
  std::uint32_t check = 0;
};

ZIPCCL_HOST_DEVICE void write_chunk_header(std::uint8_t* out, const chunk_header& h) {
  out[0] = static_cast<std::uint8_t>(h.mode);
  for (unsigned i = 0; i < table_size; ++i) out[1 + i] = h.table[i];
  store_le<std::uint32_t>(out + 8, h.escapes);
  store_le<std::uint32_t>(out + 12, h.check);
}

ZIPCCL_HOST_DEVICE chunk_header read_chunk_header(const std::uint8_t* in) {
  chunk_header h;
  h.mode = static_cast<chunk_mode>(in[0]);
  for (unsigned i = 0; i < table_size; ++i) h.table[i] = in[1 + i];
  h.escapes = load_le<std::uint32_t>(in + 8);
  h.check = load_le<std::uint32_t>(in + 12);
  return h;
}

// The check value of a chunk of `bytes` bytes (a multiple of 16): the hash of its words with the
// check field (bytes 12..15) read as zero. Without the checksum flag only the header's two words
// are hashed, so the mode, table and escape count are always protected.
ZIPCCL_HOST_DEVICE std::uint32_t chunk_check(const std::uint8_t* chunk, std::uint64_t bytes,
                                             bool whole) {
  const std::uint64_t w0 = load_le<std::uint64_t>(chunk);
  const std::uint64_t w1 = load_le<std::uint64_t>(chunk + 8) & 0xFFFFFFFFull;
  const std::uint64_t words = whole ? bytes / 8 : 2;
  std::uint64_t s = hash_term(0, w0) + hash_term(1, w1);
  if (whole) s += hash_sum(chunk + 16, 2, words - 2);
  return fold32(hash_finish(s, words));
}

// Per element type: how the rest (sign and mantissa) is split across the chunk's sections.
template <class E>
struct chunk_layout {
  static_assert(is_element_v<E>, "chunk_layout needs zipccl::bf16, zipccl::fp16 or zipccl::fp32");
  static constexpr unsigned elem_size = sizeof(typename E::bits_type);
  // fp16: the top three rest bits (sign, mantissa bits 9 and 8) travel as three more bit planes.
  static constexpr unsigned extra_planes = std::is_same_v<E, fp16> ? 3 : 0;
  static constexpr unsigned planes = code_planes + extra_planes;
  // fp32: the low 16 rest bits travel as a u16 array.
  static constexpr unsigned word_bytes = std::is_same_v<E, fp32> ? 2 : 0;

  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t groups(std::uint64_t m) {
    return (m + group_elems - 1) / group_elems;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t planes_offset() { return chunk_header_bytes; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t words_offset(std::uint64_t m) {
    return chunk_header_bytes + groups(m) * planes * 4;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t bytes_offset(std::uint64_t m) {
    return words_offset(m) + m * word_bytes;
  }
  // The end of the fixed-size part, where the escapes start.
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t escapes_offset(std::uint64_t m) {
    return bytes_offset(m) + m;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t coded_bytes(std::uint64_t m, std::uint64_t esc) {
    return align_up(escapes_offset(m) + esc, alignment);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t stored_bytes(std::uint64_t m) {
    return stored_chunk_bytes(m, elem_size);
  }
  // The most escapes for which a coded chunk is still strictly smaller than a stored one, or -1
  // when coding can never pay (tiny chunks).
  ZIPCCL_HOST_DEVICE static constexpr std::int64_t escape_budget(std::uint64_t m) {
    return static_cast<std::int64_t>(stored_bytes(m)) - static_cast<std::int64_t>(alignment) -
           static_cast<std::int64_t>(escapes_offset(m));
  }

  // Rest split: `word` goes to the u16 array, `byte` to the byte array, `high` to extra planes.
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t rest_byte(std::uint32_t rest) {
    return word_bytes ? (rest >> 16) & 0xFFu : rest & 0xFFu;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t rest_word(std::uint32_t rest) { return rest & 0xFFFFu; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t rest_high(std::uint32_t rest) { return rest >> 8; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t join_rest(std::uint32_t byte, std::uint32_t word,
                                                              std::uint32_t high) {
    if constexpr (word_bytes != 0) return (byte << 16) | word;
    else if constexpr (extra_planes != 0) return (high << 8) | byte;
    else return byte;
  }
};

}  // namespace zipccl::format
