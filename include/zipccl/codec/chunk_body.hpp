// zipccl: the pieces every chunk mode shares, for every executor: where a chunk's body lies
// (the zero mask of the zero_* modes), the chunk modes, and stored chunks written and read.
// The reference the host executor calls directly and the device kernels call per lane.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/chunk.hpp"
#include "../format/zero_mask.hpp"

namespace zipccl::codec_detail {

using format::load_le;
using format::store_le;

// Where a chunk's body starts and what it holds: all m elements after the header (stored and
// coded modes), or, in the zero_* modes, the elements of the groups the mask at chunk offset 16
// does not mark, after the mask.
struct body_shape {
  std::uint64_t base = format::chunk_header_bytes;  // the body's offset in the chunk
  std::uint64_t elems = 0;                          // elements in the body
  const std::uint8_t* zero_mask = nullptr;          // the mask (zero_* modes), else null
};

ZIPCCL_HOST_DEVICE constexpr body_shape dense_body(std::uint64_t m) { return {format::chunk_header_bytes, m, nullptr}; }

// Whether 32-element group g (plane group) of a chunk lies in a zero group of `shape`'s mask.
ZIPCCL_HOST_DEVICE bool in_zero_group(const body_shape& shape, std::uint64_t g) {
  return shape.zero_mask != nullptr &&
         format::zero_bit(shape.zero_mask, g * format::group_elems / format::zero_group_elems);
}

// The first 32-element group from g on, below end, that lies in a zero group of `shape`'s mask;
// end where none does (at once for a body without a mask). The vector decoders bound a run of
// kernel groups by it, so that the run's loop tests only its end.
ZIPCCL_HOST_DEVICE std::uint64_t next_zero_group(const body_shape& shape, std::uint64_t g, std::uint64_t end) {
  if (shape.zero_mask == nullptr) return end;
  for (; g < end; ++g)
    if (in_zero_group(shape, g)) return g;
  return end;
}

// Decides a chunk's shape for the encoder: with zero_masks, the chunk's zero mask is written at
// out + 16 and used when format's rule says it pays (chunk_layout::zero_mask_pays); otherwise the
// body is the whole chunk (and the body's bytes later overwrite whatever was written at out + 16).
// all_zero: the zero-group test (format::make_zero_mask).
template <class E, class AllZero = format::zero_bits_test>
ZIPCCL_HOST_DEVICE body_shape plan_body(const std::uint8_t* in, std::uint64_t m, bool zero_masks, std::uint8_t* out,
                                        const AllZero& all_zero = AllZero{format::chunk_layout<E>::elem_size}) {
  using L = format::chunk_layout<E>;
  if (!zero_masks) return dense_body(m);
  std::uint8_t* mask = out + format::chunk_header_bytes;
  const std::uint64_t zero = format::make_zero_mask(in, m, L::elem_size, mask, all_zero);
  if (!L::zero_mask_pays(m, zero)) return dense_body(m);
  return {format::body_offset(m, true), m - zero, mask};
}

// The chunk mode of a body coded as `kind` (stored, coded or rans), with the mask bit when the
// body has a zero mask.
ZIPCCL_HOST_DEVICE constexpr format::chunk_mode mode_for(format::chunk_mode kind, bool masked) {
  return static_cast<format::chunk_mode>(static_cast<unsigned>(kind) | (masked ? 2u : 0u));
}

// The mode of a rANS body, with or without a mask and zero symbols.
ZIPCCL_HOST_DEVICE constexpr format::chunk_mode rans_mode(bool masked, bool zero_symbols) {
  return static_cast<format::chunk_mode>(static_cast<unsigned>(mode_for(format::chunk_mode::rans, masked)) |
                                         (zero_symbols ? 8u : 0u));
}

// Writes a stored chunk of m elements (its body per `shape`, whose mask is already in place);
// returns its size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t write_stored_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal,
                                                    std::uint8_t* out, const body_shape& shape) {
  using L = format::chunk_layout<E>;
  const std::uint64_t size = L::stored_bytes(shape.elems, shape.base);
  std::uint64_t pos = shape.base;
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    if (in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    std::memcpy(out + pos, in + first * L::elem_size, lanes * L::elem_size);
    pos += lanes * L::elem_size;
  }
  for (std::uint64_t p = pos; p < size; ++p) out[p] = 0;
  format::chunk_header h;
  h.mode = mode_for(format::chunk_mode::stored, shape.zero_mask != nullptr);
  format::write_chunk_header(out, h);
  format::store_chunk_check(out, format::chunk_check(out, size, seal, shape.base));
  return size;
}

template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t write_stored_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal,
                                                    std::uint8_t* out) {
  return write_stored_chunk<E>(in, m, seal, out, dense_body(m));
}

// Writes `lanes` +0.0 elements at out.
template <class E>
ZIPCCL_HOST_DEVICE void store_zeros(std::uint8_t* out, std::uint64_t lanes) {
  for (std::uint64_t i = 0; i < lanes * sizeof(typename E::bits_type); ++i) out[i] = 0;
}

// Decodes a stored body (per `body`) into out (m elements).
template <class E>
ZIPCCL_HOST_DEVICE void decode_stored_body(const std::uint8_t* chunk, std::uint64_t m, const body_shape& body,
                                           std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  if (body.zero_mask == nullptr) {
    std::memcpy(out, chunk + body.base, m * L::elem_size);
    return;
  }
  std::uint64_t pos = body.base;
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (in_zero_group(body, g)) {
      store_zeros<E>(out + first * L::elem_size, lanes);
      continue;
    }
    std::memcpy(out + first * L::elem_size, chunk + pos, lanes * L::elem_size);
    pos += lanes * L::elem_size;
  }
}

}  // namespace zipccl::codec_detail
