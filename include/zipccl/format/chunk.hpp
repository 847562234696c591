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

#include "../config.hpp"
#include "../element.hpp"
#include "bytes.hpp"
#include "hash.hpp"
#include "layout.hpp"
#include "stream.hpp"

namespace zipccl::format {

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

}  // namespace zipccl::format
