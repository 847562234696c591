// zipccl: the checks every decoder makes before it reads a chunk, for every executor: the
// header's rules per mode, the span a header implies, the zero mask and the padding after the
// content. A chunk that passes check_chunk can be decoded without reading outside its span.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/chunk.hpp"
#include "../format/zero_mask.hpp"
#include "chunk_body.hpp"
#include "rans.hpp"
#include "rans_chunk.hpp"

namespace zipccl::codec_detail {

using format::load_le;
using format::store_le;

// The rules of a rANS chunk header's table bytes for a body of `elems` elements at `base` in a
// chunk of m: byte 0 is the symbol count less one (any value); with zero symbols, byte 1 is below
// byte 2, the zero count is at most elems, meets rans::zeros_pay and leaves at least
// rans::min_zero_rests rests (the encoders' rule); without, bytes 1..6 are zero.
template <class E>
ZIPCCL_HOST_DEVICE bool rans_header_ok(const format::chunk_header& r, std::uint64_t elems, std::uint64_t m,
                                       std::uint64_t base) {
  const rans::zero_symbols z = header_zero_symbols(r);
  if (z.on)
    return z.pos < z.neg && z.count <= elems && rans::zeros_pay(z.count, elems) &&
           elems - z.count >= rans::min_zero_rests<E>(m, base);
  for (unsigned i = 1; i < format::table_size; ++i)
    if (r.table[i] != 0) return false;
  return true;
}

// The rules a chunk header must meet for a chunk of m elements spanning `span` bytes (everything
// but the check value and the padding bytes). For the zero_* modes, `z` summarises the chunk's
// mask (format::read_zero_mask); the default summary rejects them, as the collectives' wire does.
template <class E>
ZIPCCL_HOST_DEVICE status check_chunk_header(const format::chunk_header& r, std::uint64_t span, std::uint64_t m,
                                             const format::zero_mask_summary& z = {}) {
  using L = format::chunk_layout<E>;
  if (span < format::chunk_header_bytes || span % format::alignment != 0) return status::corrupt;
  if (!format::mode_valid(static_cast<std::uint8_t>(r.mode))) return status::corrupt;
  const bool masked = format::mode_has_zero_mask(r.mode);
  if (masked && (!z.ok || !L::zero_mask_pays(m, z.zero_elems))) return status::corrupt;
  const std::uint64_t base = format::body_offset(m, masked);
  const std::uint64_t elems = masked ? m - z.zero_elems : m;
  if (format::mode_is_stored(r.mode)) {
    if (span != L::stored_bytes(elems, base) || r.escapes != 0) return status::corrupt;
    for (unsigned i = 0; i < format::table_size; ++i)
      if (r.table[i] != 0) return status::corrupt;
  } else if (format::mode_is_rans(r.mode)) {
    // table: rans_header_ok; escapes: the stream's words (at most one per element); strictly
    // smaller than the stored body
    if (!rans_header_ok<E>(r, elems, m, base)) return status::corrupt;
    if (r.escapes > elems) return status::corrupt;
    const std::uint64_t rests = rans::rests_of(elems, header_zero_symbols(r));
    if (span != rans::layout<E>::chunk_bytes(rests, base, r.table[0] + 1u, r.escapes)) return status::corrupt;
    if (span >= L::stored_bytes(elems, base)) return status::corrupt;
  } else {
    const std::int64_t budget = L::escape_budget(elems, base);
    if (budget < 0 || r.escapes > static_cast<std::uint64_t>(budget)) return status::corrupt;
    if (span != L::coded_bytes(elems, r.escapes, base)) return status::corrupt;
    for (unsigned i = 0; i < format::table_size; ++i)
      if (r.table[i] >= E::exponent_count) return status::corrupt;
  }
  return status::success;
}

// The span of a chunk of m elements from its header and, for the zero_* modes, its mask summary
// `z`, or 0 when they break the rules (check_chunk_header's, and the ones that keep the arithmetic
// in range).
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t chunk_span_of(const format::chunk_header& h, std::uint64_t m,
                                               const format::zero_mask_summary& z = {}) {
  using L = format::chunk_layout<E>;
  if (!format::mode_valid(static_cast<std::uint8_t>(h.mode))) return 0;
  const bool masked = format::mode_has_zero_mask(h.mode);
  if (masked && (!z.ok || z.zero_elems > m)) return 0;
  const std::uint64_t base = format::body_offset(m, masked), elems = masked ? m - z.zero_elems : m;
  std::uint64_t span = 0;
  if (format::mode_is_stored(h.mode)) {
    span = L::stored_bytes(elems, base);
  } else if (format::mode_is_rans(h.mode)) {
    if (h.escapes > elems || !rans_header_ok<E>(h, elems, m, base)) return 0;
    span = rans::layout<E>::chunk_bytes(rans::rests_of(elems, header_zero_symbols(h)), base, h.table[0] + 1u, h.escapes);
  } else {
    const std::int64_t budget = L::escape_budget(elems, base);
    if (budget < 0 || h.escapes > static_cast<std::uint64_t>(budget)) return 0;
    span = L::coded_bytes(elems, h.escapes, base);
  }
  return check_chunk_header<E>(h, span, m, z) == status::success ? span : 0;
}

// The span of a stored or coded chunk of m elements from its header alone (the 3-bit
// collectives' wire carries no other mode), or 0.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t dense_chunk_span(const format::chunk_header& h, std::uint64_t m) {
  if (h.mode != format::chunk_mode::stored && h.mode != format::chunk_mode::coded) return 0;
  return chunk_span_of<E>(h, m);
}

// The span of a chunk of m elements of any mode from its first `have` bytes: the header, and for
// the zero_* modes the mask after it (which needs have >= body_offset(m, true)), or 0.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t chunk_span_from_head(const std::uint8_t* chunk, std::uint64_t have, std::uint64_t m) {
  if (have < format::chunk_header_bytes) return 0;
  const format::chunk_header h = format::read_chunk_header(chunk);
  format::zero_mask_summary z;
  if (format::mode_valid(static_cast<std::uint8_t>(h.mode)) && format::mode_has_zero_mask(h.mode)) {
    if (have < format::body_offset(m, true)) return 0;
    z = format::read_zero_mask(chunk, have, m);
  }
  return chunk_span_of<E>(h, m, z);
}

// The body of a chunk whose header passed check_chunk_header (with the same summary).
template <class E>
ZIPCCL_HOST_DEVICE body_shape chunk_body(const format::chunk_header& r, std::uint64_t m,
                                         const format::zero_mask_summary& z, const std::uint8_t* chunk) {
  if (!format::mode_has_zero_mask(r.mode)) return dense_body(m);
  return {format::body_offset(m, true), m - z.zero_elems, chunk + format::chunk_header_bytes};
}

// The bytes of a valid chunk that its check covers even without the checksum flag: the header,
// the mask, and a rANS chunk's table and states (format::chunk_check's `body` argument).
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t check_prefix(const format::chunk_header& r, const body_shape& body) {
  if (format::mode_is_rans(r.mode)) return rans::prefix_end(body.base, r.table[0] + 1u);
  return body.base;
}

// Where a valid chunk's content ends and its zero padding starts.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t chunk_content_end(const format::chunk_header& r, const body_shape& body) {
  using L = format::chunk_layout<E>;
  if (format::mode_is_rans(r.mode))
    return rans::layout<E>::content_end(rans::rests_of(body.elems, header_zero_symbols(r)), body.base, r.table[0] + 1u,
                                        r.escapes);
  return format::mode_is_coded(r.mode) ? L::escapes_offset(body.elems, body.base) + r.escapes
                                       : body.base + body.elems * L::elem_size;
}

template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t chunk_content_end(const format::chunk_header& r, std::uint64_t m) {
  return chunk_content_end<E>(r, dense_body(m));
}

// The mask summary check_chunk_header needs for the chunk's mode (a dense chunk needs none).
ZIPCCL_HOST_DEVICE format::zero_mask_summary mask_summary_for(const std::uint8_t* chunk, std::uint64_t span,
                                                              std::uint64_t m) {
  if (span < format::chunk_header_bytes || !format::mode_has_zero_mask(static_cast<format::chunk_mode>(chunk[0] & 3u)))
    return {};
  return format::read_zero_mask(chunk, span, m);
}

// Validates a whole chunk: header rules (the mask's included), check value, zero padding. On
// success *h holds the header and *body (when not null) the body's shape.
template <class E>
ZIPCCL_HOST_DEVICE status check_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                                      format::chunk_header* h, body_shape* body = nullptr) {
  if (span < format::chunk_header_bytes) return status::corrupt;
  const format::chunk_header r = format::read_chunk_header(chunk);
  const format::zero_mask_summary z = mask_summary_for(chunk, span, m);
  const status s = check_chunk_header<E>(r, span, m, z);
  if (s != status::success) return s;
  const body_shape b = chunk_body<E>(r, m, z, chunk);
  if (format::chunk_check(chunk, span, seal, check_prefix<E>(r, b)) != r.check) return status::checksum_mismatch;
  for (std::uint64_t p = chunk_content_end<E>(r, b); p < span; ++p)
    if (chunk[p] != 0) return status::corrupt;
  *h = r;
  if (body != nullptr) *body = b;
  return status::success;
}

}  // namespace zipccl::codec_detail
