// zipccl: the layout of one chunk.
//
//   chunk header (16 bytes): mode u8 | table u8[7] | escape count u32 | check u32
//   zero mask    (zero_stored and zero_coded modes only: format/zero_mask.hpp); the body below then
//                holds only the groups the mask does not mark
//   coded body:   bit planes  (per group of 32 elements: P little-endian u32 words)
//                 words       (fp32 only: bits 0..15 of each element's rest, u16 each)
//                 bytes       (one byte per element: bits 0..7 of the rest, or 16..23 for fp32)
//                 escapes     (one byte per escaped element: its raw exponent field)
//                 zero padding to 16 bytes
//   stored body:  the raw little-endian elements, zero padding to 16 bytes
//   rANS body:    frequency table, states, rest sections, stream (codec/rans.hpp)
//
// Everything before the escapes has a size that depends only on the element count, so a receiver
// can decode every non-escaped element before the escapes arrive.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../element.hpp"
#include "bytes.hpp"
#include "hash.hpp"
#include "layout.hpp"
#include "stream.hpp"

namespace zipccl::format {

// Byte offsets of the chunk header's fields.
inline constexpr std::uint64_t chunk_escapes_field = 8;
inline constexpr std::uint64_t chunk_check_field = 12;

struct chunk_header {
  chunk_mode mode = chunk_mode::stored;
  std::uint8_t table[table_size] = {};
  std::uint32_t escapes = 0;
  std::uint32_t check = 0;
};

ZIPCCL_HOST_DEVICE void write_chunk_header(std::uint8_t* out, const chunk_header& h) {
  out[0] = static_cast<std::uint8_t>(h.mode);
  for (unsigned i = 0; i < table_size; ++i) out[1 + i] = h.table[i];
  store_le<std::uint32_t>(out + chunk_escapes_field, h.escapes);
  store_le<std::uint32_t>(out + chunk_check_field, h.check);
}

ZIPCCL_HOST_DEVICE chunk_header read_chunk_header(const std::uint8_t* in) {
  chunk_header h;
  h.mode = static_cast<chunk_mode>(in[0]);
  for (unsigned i = 0; i < table_size; ++i) h.table[i] = in[1 + i];
  h.escapes = load_le<std::uint32_t>(in + chunk_escapes_field);
  h.check = load_le<std::uint32_t>(in + chunk_check_field);
  return h;
}

// The check value of a chunk of `bytes` bytes (a multiple of 16): the hash of its words with the
// check field (bytes 12..15) read as zero. Without the checksum flag only the words before the
// body are hashed: the header's two, and in the zero_* modes the mask's (`body` is the body's
// offset, body_offset()), so the mode, table, escape count and mask are always protected.
// Executors that hash in parallel sum check_term() over words [0, check_words()) in any order and
// seal with check_value().
ZIPCCL_HOST_DEVICE constexpr std::uint64_t check_words(std::uint64_t bytes, bool whole,
                                                       std::uint64_t body = chunk_header_bytes) {
  return whole ? bytes / 8 : body / 8;
}

// The hash term of word j (its little-endian value w) of a chunk: word 1 without the check field.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t check_term(std::uint64_t j, std::uint64_t w) {
  return hash_term(j, j == 1 ? (w & 0xFFFFFFFFull) : w);
}

ZIPCCL_HOST_DEVICE constexpr std::uint32_t check_value(std::uint64_t term_sum, std::uint64_t words) {
  return fold32(hash_finish(term_sum, words));
}

ZIPCCL_HOST_DEVICE std::uint32_t chunk_check(const std::uint8_t* chunk, std::uint64_t bytes, bool whole,
                                             std::uint64_t body = chunk_header_bytes) {
  const std::uint64_t words = check_words(bytes, whole, body);
  std::uint64_t s = check_term(0, load_le<std::uint64_t>(chunk)) + check_term(1, load_le<std::uint64_t>(chunk + 8));
  if (words > 2) s += hash_sum(chunk + 16, 2, words - 2);
  return check_value(s, words);
}

ZIPCCL_HOST_DEVICE void store_chunk_check(std::uint8_t* chunk, std::uint32_t check) {
  store_le<std::uint32_t>(chunk + chunk_check_field, check);
}

}  // namespace zipccl::format
