// zipccl: the stream header, the chunk directory and the exact size bound.
//
// docs/format.md describes these bytes; the field offsets below are the normative ones.
//
//   stream  = header (48 bytes) | directory (8 bytes per chunk) | zero padding to 16 |
//             chunk 0 | chunk 1 | ...                  (every chunk starts 16-byte aligned)
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "bytes.hpp"
#include "hash.hpp"
#include "layout.hpp"

namespace zipccl {

// The wire identifier of the codebook policy that wrote a stream (header byte 7). Decoding does
// not depend on it: every coded chunk carries its own table.
enum class codebook_kind : std::uint8_t { analytic_gaussian = 1, histogram = 2, fixed = 3, entropy = 4 };

ZIPCCL_HOST_DEVICE constexpr const char* codebook_name(codebook_kind k) {
  switch (k) {
    case codebook_kind::analytic_gaussian: return "analytic";
    case codebook_kind::histogram: return "histogram";
    case codebook_kind::fixed: return "fixed";
    case codebook_kind::entropy: return "entropy";
  }
  return "unknown";
}

namespace format {

// The four magic bytes "ZPCL", as one little-endian word (usable in host and device code).
inline constexpr std::uint32_t magic_word = 0x4C43505Au;
ZIPCCL_HOST_DEVICE constexpr std::uint8_t magic_byte(std::uint64_t i) {
  return static_cast<std::uint8_t>(magic_word >> (8 * i));
}
// The newest version; readers accept every version from 1. Version 1 streams have only stored and
// coded chunks and the three 3-bit policies; version 2 adds the zero-mask and rANS chunk modes and
// codebook::entropy; version 3 adds the rANS modes with zero symbols; version 4, written exactly
// when the checksum flag is set, binds every chunk's check to its place and holds the chunks'
// digest in header bytes 36..39 (docs/format.md). A writer stamps the lowest version its stream
// needs (writer_version), so a stream without the new features stays readable by older readers.
inline constexpr std::uint16_t version = 4;
inline constexpr std::uint16_t min_version = 1;
ZIPCCL_HOST_DEVICE constexpr bool version_has_zero_masks(std::uint16_t v) { return v >= 2; }
ZIPCCL_HOST_DEVICE constexpr bool version_has_zero_symbols(std::uint16_t v) { return v >= 3; }
ZIPCCL_HOST_DEVICE constexpr bool version_binds_chunks(std::uint16_t v) { return v >= 4; }
inline constexpr std::uint32_t flag_checksum = 1u;  // every chunk check covers its whole body
inline constexpr std::uint32_t known_flags = flag_checksum;

// The decoded stream header.
struct stream_header {
  std::uint16_t version = format::version;
  dtype type = dtype::bf16;
  codebook_kind codebook = codebook_kind::analytic_gaussian;
  std::uint32_t flags = 0;
  std::uint32_t chunk_elems = default_chunk_elems;
  std::uint64_t count = 0;        // elements
  std::uint64_t total_bytes = 0;  // the whole stream, header included
  std::uint32_t chunks = 0;
  std::uint32_t digest = 0;  // version 4: the chunks' digest (format/chunk.hpp); else 0
};

// The version a writer stamps from its policy, the highest chunk mode byte in the stream and the
// checksum flag: 4 with the flag; else 3 when a chunk has zero symbols (mode 8 and above), 2 when
// the policy or any chunk (a mode byte above 1) needs it, else 1.
ZIPCCL_HOST_DEVICE constexpr std::uint16_t writer_version(codebook_kind k, std::uint8_t top_mode, bool checksum) {
  return checksum          ? std::uint16_t(4)
         : top_mode >= 8u ? std::uint16_t(3)
         : top_mode > 1u || static_cast<unsigned>(k) > 3u ? std::uint16_t(2)
                                                          : std::uint16_t(1);
}

// Header hash: words 0..4 of the header (bytes 0..39) followed by the directory's words.
// (header_hash_from() below takes the directory's part as a precomputed sum.)
ZIPCCL_HOST_DEVICE std::uint64_t header_hash(const std::uint8_t* stream, std::uint64_t chunks) {
  return hash_finish(hash_sum(stream, 0, 5) + hash_sum(stream + header_bytes, 5, chunks), 5 + chunks);
}

// Writes header bytes 0..39 (everything but the hash).
ZIPCCL_HOST_DEVICE void write_header_fields(std::uint8_t* out, const stream_header& h) {
  store_le<std::uint32_t>(out, magic_word);
  store_le<std::uint16_t>(out + 4, h.version);
  out[6] = static_cast<std::uint8_t>(h.type);
  out[7] = static_cast<std::uint8_t>(h.codebook);
  store_le<std::uint32_t>(out + 8, h.flags);
  store_le<std::uint32_t>(out + 12, h.chunk_elems);
  store_le<std::uint64_t>(out + 16, h.count);
  store_le<std::uint64_t>(out + 24, h.total_bytes);
  store_le<std::uint32_t>(out + 32, h.chunks);
  store_le<std::uint32_t>(out + 36, h.digest);
}

inline constexpr std::uint64_t header_hash_field = 40;

// The header hash from the sum of the directory's hash terms (directory_term() over its entries,
// which a device executor forms in parallel).
ZIPCCL_HOST_DEVICE constexpr std::uint64_t directory_term(std::uint64_t i, std::uint64_t entry) {
  return hash_term(5 + i, entry);
}
ZIPCCL_HOST_DEVICE std::uint64_t header_hash_from(const std::uint8_t* stream, std::uint64_t directory_sum,
                                                  std::uint64_t chunks) {
  return hash_finish(hash_sum(stream, 0, 5) + directory_sum, 5 + chunks);
}
ZIPCCL_HOST_DEVICE bool header_hash_matches(const std::uint8_t* stream, std::uint64_t directory_sum,
                                            std::uint64_t chunks) {
  return load_le<std::uint64_t>(stream + header_hash_field) == header_hash_from(stream, directory_sum, chunks);
}

// Stores the header hash, given the sum of the directory's hash terms.
ZIPCCL_HOST_DEVICE void finish_header(std::uint8_t* out, std::uint64_t directory_sum, std::uint64_t chunks) {
  store_le<std::uint64_t>(out + header_hash_field, header_hash_from(out, directory_sum, chunks));
}

// Writes the 48 header bytes. The directory (chunks entries) must already be in place after it,
// because the header hash covers it; the padding up to data_offset() is zeroed here.
ZIPCCL_HOST_DEVICE void write_header(std::uint8_t* out, const stream_header& h) {
  write_header_fields(out, h);
  for (std::uint64_t p = header_bytes + directory_entry_bytes * h.chunks; p < data_offset(h.chunks); ++p)
    out[p] = 0;
  finish_header(out, hash_sum(out + header_bytes, 5, h.chunks), h.chunks);
}

// Reads the header and checks every rule of its own fields; in_bytes is how many bytes the caller
// holds. Does not look at the directory: read_header() below adds its hash and padding.
ZIPCCL_HOST_DEVICE status parse_header(const std::uint8_t* in, std::uint64_t in_bytes, stream_header* h) {
  if (in == nullptr && in_bytes != 0) return status::invalid_argument;
  if (in_bytes < 8) {
    for (std::uint64_t i = 0; i < in_bytes && i < 4; ++i)
      if (in[i] != magic_byte(i)) return status::bad_magic;
    return status::truncated;
  }
  for (int i = 0; i < 4; ++i)
    if (in[i] != magic_byte(i)) return status::bad_magic;
  const std::uint16_t v = load_le<std::uint16_t>(in + 4);
  if (v < min_version || v > version) return status::unsupported_version;
  if (in_bytes < header_bytes) return status::truncated;
  stream_header r;
  r.version = v;
  const std::uint8_t t = in[6], cb = in[7];
  if (t < 1 || t > 3) return status::corrupt;
  if (cb < 1 || cb > (version_has_zero_masks(v) ? 4 : 3)) return status::corrupt;  // entropy from version 2
  r.type = static_cast<dtype>(t);
  r.codebook = static_cast<codebook_kind>(cb);
  r.flags = load_le<std::uint32_t>(in + 8);
  r.chunk_elems = load_le<std::uint32_t>(in + 12);
  r.count = load_le<std::uint64_t>(in + 16);
  r.total_bytes = load_le<std::uint64_t>(in + 24);
  r.chunks = load_le<std::uint32_t>(in + 32);
  r.digest = load_le<std::uint32_t>(in + 36);
  if ((r.flags & ~known_flags) != 0) return status::corrupt;
  // version 4 is the checksum flag's version; before it bytes 36..39 are reserved and zero
  if (version_binds_chunks(v) ? (r.flags & flag_checksum) == 0 : r.digest != 0) return status::corrupt;
  if (!valid_chunk_elems(r.chunk_elems)) return status::corrupt;
  if (chunk_count(r.count, r.chunk_elems) != r.chunks) return status::corrupt;
  const std::uint64_t data = data_offset(r.chunks);
  if (r.total_bytes < data || r.total_bytes % alignment != 0) return status::corrupt;
  // Every chunk holds at most chunk_elems * 4 bytes, so this also keeps later sums from overflowing.
  if (r.total_bytes > max_compressed_size(r.count, dtype_size(r.type), r.chunk_elems)) return status::corrupt;
  // A count the stream's size cannot hold (checked before anyone sizes a buffer from it).
  if (r.total_bytes < min_compressed_size(r.type, r.count, r.chunk_elems, version_has_zero_masks(v)))
    return status::corrupt;
  if (in_bytes < data) return status::truncated;
  *h = r;
  return status::success;
}

// Reads and validates the header, the directory's hash and its padding. A stream longer than
// in_bytes is reported as truncated.
ZIPCCL_HOST_DEVICE status read_header(const std::uint8_t* in, std::uint64_t in_bytes, stream_header* h) {
  stream_header r;
  const status s = parse_header(in, in_bytes, &r);
  if (s != status::success) return s;
  if (!header_hash_matches(in, hash_sum(in + header_bytes, 5, r.chunks), r.chunks)) return status::checksum_mismatch;
  for (std::uint64_t p = header_bytes + directory_entry_bytes * r.chunks; p < data_offset(r.chunks); ++p)
    if (in[p] != 0) return status::corrupt;
  if (in_bytes < r.total_bytes) return status::truncated;
  *h = r;
  return status::success;
}

ZIPCCL_HOST_DEVICE std::uint64_t directory_entry(const std::uint8_t* stream, std::uint64_t i) {
  return load_le<std::uint64_t>(stream + header_bytes + directory_entry_bytes * i);
}

// The directory's rule, entry by entry: chunk 0 starts at data_offset(), every later chunk starts
// after its predecessor, and every chunk starts inside the stream. (Alignment and exact spans
// follow from the chunk header checks.) `prev` is entry i - 1 (ignored for i == 0).
ZIPCCL_HOST_DEVICE constexpr bool directory_entry_ok(const stream_header& h, std::uint64_t i, std::uint64_t entry,
                                                     std::uint64_t prev) {
  return (i == 0 ? entry == data_offset(h.chunks) : entry > prev) && entry < h.total_bytes;
}

// Whether a chunk whose first byte (its mode) is `mode_byte` may appear in a stream of this
// header's version: only modes 0 and 1 in version 1, modes below 8 in version 2. (The chunk's own
// rules come after.)
ZIPCCL_HOST_DEVICE constexpr bool chunk_mode_allowed(const stream_header& h, std::uint8_t mode_byte) {
  return version_has_zero_symbols(h.version) || (version_has_zero_masks(h.version) ? mode_byte < 8u : mode_byte <= 1u);
}

// Where chunk i ends: the next chunk's start, or the stream's end for the last one.
ZIPCCL_HOST_DEVICE std::uint64_t chunk_end(const std::uint8_t* stream, const stream_header& h, std::uint64_t i) {
  return i + 1 < h.chunks ? directory_entry(stream, i + 1) : h.total_bytes;
}

}  // namespace format
}  // namespace zipccl
