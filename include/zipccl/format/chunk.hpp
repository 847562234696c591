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

// What a chunk's check covers (docs/format.md, "Hash"): with `whole` (the checksum flag) every
// word of the chunk, else only the words before its element data; and `place`, the chunk's place
// code (place_code below), which is xored into the check so that a chunk moved to another place
// fails it. Streams of version 4 (written with the flag) and the collectives' wires bind their
// chunks to their places; versions 1 to 3 and streams without the flag do not (place 0). A bool
// converts to a seal without a place.
struct chunk_seal {
  bool whole = false;
  std::uint32_t place = 0;
  ZIPCCL_HOST_DEVICE constexpr chunk_seal(bool whole_ = false, std::uint32_t place_ = 0)
      : whole(whole_), place(place_) {}
};

// The place code of chunk `index` of a container of `count` elements named by `tag`: a stream
// (tag = its element type << 56) or a segment of the collectives' wires (tag = the preamble's
// element type << 56 | segment index). For one container the codes of indices below 2^32 are
// distinct (mix32 is a bijection), and they change with count and tag.
ZIPCCL_HOST_DEVICE constexpr std::uint32_t place_code(std::uint64_t index, std::uint64_t count, std::uint64_t tag) {
  const std::uint32_t salt = fold32(hash_finish(hash_term(0, count) + hash_term(1, tag), 2));
  return mix32(static_cast<std::uint32_t>(index) + salt);
}

// The container tag of a stream of elements of type t.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t stream_tag(dtype t) { return static_cast<std::uint64_t>(t) << 56; }

// The seal of chunk i that a writer of this version gives a stream of n elements of type t: with
// the checksum flag the whole chunk and its place (version 4), without it the prefix alone.
ZIPCCL_HOST_DEVICE constexpr chunk_seal writer_seal(dtype t, std::uint64_t n, bool checksum, std::uint64_t i) {
  return checksum ? chunk_seal(true, place_code(i, n, stream_tag(t))) : chunk_seal(false);
}

// The seal chunk i of a stream with header h is checked against (the version's rule).
ZIPCCL_HOST_DEVICE constexpr chunk_seal reader_seal(const stream_header& h, std::uint64_t i) {
  const bool whole = (h.flags & flag_checksum) != 0;
  return chunk_seal(whole, version_binds_chunks(h.version) ? place_code(i, h.count, stream_tag(h.type)) : 0u);
}

// The check value of a chunk of `bytes` bytes (a multiple of 16): the hash of its words with the
// check field (bytes 12..15) read as zero, xored with the seal's place. Without seal.whole only
// the words before the body are hashed: the header's two, and in the zero_* modes the mask's
// (`body` is the body's offset, body_offset()), so the mode, table, escape count and mask are
// always protected. Executors that hash in parallel sum check_term() over words
// [0, check_words()) in any order and seal with check_value().
ZIPCCL_HOST_DEVICE constexpr std::uint64_t check_words(std::uint64_t bytes, bool whole,
                                                       std::uint64_t body = chunk_header_bytes) {
  return whole ? bytes / 8 : body / 8;
}

// The hash term of word j (its little-endian value w) of a chunk: word 1 without the check field.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t check_term(std::uint64_t j, std::uint64_t w) {
  return hash_term(j, j == 1 ? (w & 0xFFFFFFFFull) : w);
}

ZIPCCL_HOST_DEVICE constexpr std::uint32_t check_value(std::uint64_t term_sum, std::uint64_t words,
                                                       std::uint32_t place = 0) {
  return fold32(hash_finish(term_sum, words)) ^ place;
}

ZIPCCL_HOST_DEVICE std::uint32_t chunk_check(const std::uint8_t* chunk, std::uint64_t bytes, chunk_seal seal,
                                             std::uint64_t body = chunk_header_bytes) {
  const std::uint64_t words = check_words(bytes, seal.whole, body);
  std::uint64_t s = check_term(0, load_le<std::uint64_t>(chunk)) + check_term(1, load_le<std::uint64_t>(chunk + 8));
  if (words > 2) s += hash_sum(chunk + 16, 2, words - 2);
  return check_value(s, words, seal.place);
}

// The chunk digest of a version 4 stream (header bytes 36..39): fold32 of the hash of the
// sequence of its chunks' check fields, chunk i's as word i. The header hash covers it, so a chunk
// replaced by another one that passes its own check (the same place of another stream) is
// caught. Executors sum digest_term() over the chunks in any order and finish with
// digest_value().
ZIPCCL_HOST_DEVICE constexpr std::uint64_t digest_term(std::uint64_t i, std::uint32_t check) {
  return hash_term(i, check);
}
ZIPCCL_HOST_DEVICE constexpr std::uint32_t digest_value(std::uint64_t term_sum, std::uint64_t chunks) {
  return fold32(hash_finish(term_sum, chunks));
}
// The digest of the chunks of a stream being written, as its directory places them (a writer's
// own bytes: every chunk spans at least its header).
ZIPCCL_HOST_DEVICE std::uint32_t chunk_digest(const std::uint8_t* stream, std::uint64_t chunks) {
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < chunks; ++i)
    s += digest_term(i, load_le<std::uint32_t>(stream + directory_entry(stream, i) + chunk_check_field));
  return digest_value(s, chunks);
}

// A reader's check of the digest of a stream whose header h passed read_header (the caller holds
// h.total_bytes bytes): success before version 4; corrupt when a directory entry breaks its rule
// or a chunk is shorter than its header; checksum_mismatch when the chunks' check fields are not
// the ones the header was sealed with. Decoders report it after every chunk has passed its own
// checks.
ZIPCCL_HOST_DEVICE status check_digest(const std::uint8_t* stream, const stream_header& h) {
  if (!version_binds_chunks(h.version)) return status::success;
  std::uint64_t s = 0, prev = 0;
  for (std::uint64_t i = 0; i < h.chunks; ++i) {
    const std::uint64_t e = directory_entry(stream, i);
    if (!directory_entry_ok(h, i, e, prev) || e + chunk_header_bytes > h.total_bytes) return status::corrupt;
    prev = e;
    s += digest_term(i, load_le<std::uint32_t>(stream + e + chunk_check_field));
  }
  return digest_value(s, h.chunks) == h.digest ? status::success : status::checksum_mismatch;
}

ZIPCCL_HOST_DEVICE void store_chunk_check(std::uint8_t* chunk, std::uint32_t check) {
  store_le<std::uint32_t>(chunk + chunk_check_field, check);
}

}  // namespace zipccl::format
