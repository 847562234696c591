// Helpers that look inside streams for the corruption tests and the fuzzer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <zipccl/codec/chunk_codec.hpp>
#include <zipccl/format/stream.hpp>

namespace zipccl::testing {

// Recomputes the header hash and every chunk's check field, as a forger would, so that tests
// reach the structural validation behind the hashes. Leaves bytes it cannot interpret alone.
// A version 4 stream whose directory entries are near 2^64 (found by the fuzzer in its
// decode_repaired mode): repair_hashes once checked such an entry with a sum that wrapped, and
// then read the chunk digest through it.
inline std::vector<std::uint8_t> wrapping_directory_stream() {
  return {
    0x5a, 0x50, 0x43, 0x4c, 0x04, 0x00, 0x02, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
    0x28, 0x23, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x5f, 0x80, 0xf0, 0xb3, 0x2b, 0x1f, 0x43, 0x2e, 0x4b, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x6d, 0x23,
    0x3e, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xd0, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5a, 0x50, 0x43, 0x4c, 0x04, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x52, 0x00, 0x00, 0x02, 0x03, 0x35,
  };
}

inline void repair_hashes(std::vector<std::uint8_t>& s) {
  if (s.size() < format::header_bytes) return;
  const std::uint32_t chunks = format::load_le<std::uint32_t>(s.data() + 32);
  const std::uint64_t total = format::load_le<std::uint64_t>(s.data() + 24);
  const bool whole = (format::load_le<std::uint32_t>(s.data() + 8) & format::flag_checksum) != 0;
  // version 4: each check bound to its chunk's place, and the chunks' digest in bytes 36..39
  const bool bound = format::version_binds_chunks(format::load_le<std::uint16_t>(s.data() + 4));
  const std::uint64_t count = format::load_le<std::uint64_t>(s.data() + 16);
  const auto type = static_cast<dtype>(s[6]);
  if (format::data_offset(chunks) > s.size()) return;
  bool digest = bound;  // false once a chunk's header lies outside the bytes held
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t off = format::directory_entry(s.data(), c);
    const std::uint64_t end = c + 1 < chunks ? format::directory_entry(s.data(), c + 1) : total;
    if (off >= end || end > s.size() || (end - off) % 16 != 0 || off % 8 != 0) {
      digest = digest && off <= s.size() && s.size() - off >= format::chunk_header_bytes;  // (no wrap)
      continue;
    }
    // the words before the body: the header's, and the mask's in the zero_* modes
    const std::uint64_t chunk_elems = format::load_le<std::uint32_t>(s.data() + 12);
    const std::uint64_t m = format::chunk_elements(format::load_le<std::uint64_t>(s.data() + 16), chunk_elems, c);
    // (and a rANS chunk's table and states)
    std::uint64_t body = format::body_offset(m, format::mode_has_zero_mask(format::chunk_mode(s[off] & 3u)));
    if (format::mode_is_rans(format::chunk_mode(s[off] & 7u))) body = codec_detail::rans::prefix_end(body, s[off + 1] + 1u);
    if (body > end - off) body = format::chunk_header_bytes;
    const format::chunk_seal seal(whole, bound ? format::place_code(c, count, format::stream_tag(type)) : 0u);
    format::store_le<std::uint32_t>(s.data() + off + 12, format::chunk_check(s.data() + off, end - off, seal, body));
  }
  if (digest) format::store_le<std::uint32_t>(s.data() + 36, format::chunk_digest(s.data(), chunks));
  format::store_le<std::uint64_t>(s.data() + 40, format::header_hash(s.data(), chunks));
}

// For a valid stream: true for every byte whose value is element data (planes, words, bytes and
// escapes of coded chunks, the body of stored chunks), false for headers, tables, directory and
// padding.
template <class E>
std::vector<bool> payload_map(const std::vector<std::uint8_t>& s) {
  std::vector<bool> payload(s.size(), false);
  format::stream_header h;
  if (format::read_header(s.data(), s.size(), &h) != status::success) return payload;
  for (std::uint64_t c = 0; c < h.chunks; ++c) {
    const std::uint64_t off = format::directory_entry(s.data(), c);
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    const auto ch = format::read_chunk_header(s.data() + off);
    const auto z = codec_detail::mask_summary_for(s.data() + off, format::chunk_end(s.data(), h, c) - off, m);
    const auto body = codec_detail::chunk_body<E>(ch, m, z, s.data() + off);
    const std::uint64_t end = codec_detail::chunk_content_end<E>(ch, body);
    // element data starts after what the chunk check always covers (header, mask, rANS table)
    for (std::uint64_t p = codec_detail::check_prefix<E>(ch, body); p < end; ++p) payload[off + p] = true;
  }
  return payload;
}

// How many chunks of a valid stream are in each mode (index: the mode byte less its zero-symbol
// bit, 0..7; zero_symbol_chunks counts the chunks with that bit).
inline std::vector<std::uint64_t> chunk_modes(const std::vector<std::uint8_t>& s) {
  std::vector<std::uint64_t> modes(8, 0);
  format::stream_header h;
  if (format::read_header(s.data(), s.size(), &h) != status::success) return modes;
  for (std::uint64_t c = 0; c < h.chunks; ++c) ++modes[s[format::directory_entry(s.data(), c)] & 7u];
  return modes;
}

// How many chunks of a valid stream have zero symbols (modes 12 and 14).
inline std::uint64_t zero_symbol_chunks(const std::vector<std::uint8_t>& s) {
  std::uint64_t n = 0;
  format::stream_header h;
  if (format::read_header(s.data(), s.size(), &h) != status::success) return n;
  for (std::uint64_t c = 0; c < h.chunks; ++c) n += (s[format::directory_entry(s.data(), c)] & 8u) != 0;
  return n;
}

// Where chunk c of a valid stream lies: its offset and span ({0, 0} for an invalid stream).
struct chunk_place {
  std::uint64_t off = 0, span = 0;
};
inline chunk_place chunk_at(const std::vector<std::uint8_t>& s, std::uint64_t c) {
  format::stream_header h;
  if (format::read_header(s.data(), s.size(), &h) != status::success || c >= h.chunks) return {};
  const std::uint64_t off = format::directory_entry(s.data(), c);
  return {off, format::chunk_end(s.data(), h, c) - off};
}

// The stream with chunks a and b exchanged, every hash as it was; empty unless they have one size.
inline std::vector<std::uint8_t> swap_chunks(std::vector<std::uint8_t> s, std::uint64_t a, std::uint64_t b) {
  const chunk_place x = chunk_at(s, a), y = chunk_at(s, b);
  if (x.span == 0 || x.span != y.span) return {};
  std::swap_ranges(s.begin() + x.off, s.begin() + x.off + x.span, s.begin() + y.off);
  return s;
}

// The stream with chunk c replaced by chunk c of `donor`, every hash as it was; empty unless the
// two have one size.
inline std::vector<std::uint8_t> transplant(std::vector<std::uint8_t> s, const std::vector<std::uint8_t>& donor,
                                            std::uint64_t c) {
  const chunk_place x = chunk_at(s, c), y = chunk_at(donor, c);
  if (x.span == 0 || x.span != y.span) return {};
  std::copy(donor.begin() + y.off, donor.begin() + y.off + y.span, s.begin() + x.off);
  return s;
}

// Rewrites a stream's version field (and its header hash), as an older or newer writer would.
inline void set_version(std::vector<std::uint8_t>& s, std::uint16_t version) {
  format::store_le<std::uint16_t>(s.data() + 4, version);
  format::store_le<std::uint64_t>(s.data() + 40,
                                  format::header_hash(s.data(), format::load_le<std::uint32_t>(s.data() + 32)));
}

}  // namespace zipccl::testing
