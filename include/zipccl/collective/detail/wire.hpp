// zipccl: how the collectives put a compressed segment on the wire, in two sections.
//
// A segment of `count` elements is cut into chunks of `chunk_elems` (docs/format.md, "Chunk").
// Every chunk is encoded as in a stream, then split at its fixed size, which depends only on the
// chunk's element count:
//   3-bit policies        fixed(m) = min(escapes_offset(m), stored_bytes(m)), dense chunks only
//   codebook::entropy     fixed(m) = body_offset(m, true) = 16 + zero_mask_bytes(m): the header
//                         and the room of a zero mask; chunks take zero masks where they pay, as
//                         in a stream (every chunk of m elements spans at least fixed(m) bytes)
// The segment travels as two messages:
//   fixed section: the first fixed(m) bytes of every chunk, back to back; its size is known to
//                  both sides from the count alone;
//   tail section:  the rest of every chunk (escapes and padding, the rest of a stored chunk, or
//                  all of a rANS chunk past its header and mask), back to back; its size follows
//                  from the chunk headers (and masks) in the fixed section.
// So no size message is needed, and a receiver can validate and plan a segment as soon as its fixed
// section arrives. There is no stream header: both sides know the codec and the count. Every
// chunk's check is bound to its place (wire_place): chunk j of a segment, the message's count and
// the segment's tag, so that chunks swapped, moved or taken from another segment fail their checks.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../codebook/entropy.hpp"
#include "../../codec/chunk_codec.hpp"
#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "../../host/detail/chunk_dispatch.hpp"

namespace zipccl::collective::detail {

// Where a segment's chunks belong: the message's element count and the segment's tag (the
// preamble's element type << 56 | segment index). Chunk j of the segment is sealed with
// format::place_code(j, count, tag), with or without the checksum.
struct wire_place {
  std::uint64_t count = 0, tag = 0;
  ZIPCCL_HOST_DEVICE constexpr format::chunk_seal seal(bool checksum, std::uint64_t j) const {
    return format::chunk_seal(checksum, format::place_code(j, count, tag));
  }
};

template <class Codec>
struct wire {
  using E = typename Codec::element_type;
  using L = format::chunk_layout<E>;
  // rANS chunks, and with them zero masks (on this wire and on fixed_wire, the device
  // collectives')
  static constexpr bool rans = codebook::is_entropy_v<typename Codec::codebook_type>;

  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t chunk_fixed(std::uint64_t m) {
    if constexpr (rans) return format::body_offset(m, true);
    else return L::escapes_offset(m) < L::stored_bytes(m) ? L::escapes_offset(m) : L::stored_bytes(m);
  }
  // The fixed section's size for `count` elements.
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t fixed_bytes(std::uint64_t count, std::uint64_t chunk_elems) {
    const std::uint64_t full = count / chunk_elems, rest = count % chunk_elems;
    return full * chunk_fixed(chunk_elems) + (rest ? chunk_fixed(rest) : 0);
  }
  // The largest fixed + tail for `count` elements (every chunk stored).
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t max_bytes(std::uint64_t count, std::uint64_t chunk_elems) {
    const std::uint64_t full = count / chunk_elems, rest = count % chunk_elems;
    return full * L::stored_bytes(chunk_elems) + (rest ? L::stored_bytes(rest) : 0);
  }
  // The scratch decode() needs: one chunk. Also the room encode() needs past the fixed section.
  static constexpr std::uint64_t scratch_bytes(std::uint64_t chunk_elems) { return L::stored_bytes(chunk_elems); }
  static constexpr std::uint64_t spill_bytes(std::uint64_t chunk_elems) { return L::stored_bytes(chunk_elems); }

  // Encodes `count` elements at `in`, a segment at `place`: the fixed section to `fixed`, the tail
  // section to `tail` (room for max_bytes - fixed_bytes). Every chunk is encoded in place at its
  // spot in the fixed section and the part past its fixed size moved to the tail, so `fixed` needs
  // spill_bytes() more room past the fixed section, which encode() overwrites. Returns the tail's
  // size.
  static std::uint64_t encode(const typename Codec::codebook_type& cb, const void* in, std::uint64_t count,
                              std::uint64_t chunk_elems, bool checksum, const wire_place& place, std::uint8_t* fixed,
                              std::uint8_t* tail) {
    const auto* src = static_cast<const std::uint8_t*>(in);
    std::uint64_t tail_bytes = 0;
    for (std::uint64_t first = 0; first < count; first += chunk_elems) {
      const std::uint64_t m = count - first < chunk_elems ? count - first : chunk_elems;
      const std::uint64_t f = chunk_fixed(m);
      const std::uint64_t size =
          host::detail::encode_chunk<E>(cb, src + first * L::elem_size, m, place.seal(checksum, first / chunk_elems),
                                        rans, fixed,
                                        host::detail::read_ahead::from(src, first + m, count, chunk_elems, L::elem_size));
      if (size > f) std::memcpy(tail + tail_bytes, fixed + f, size - f);  // the next chunk overwrites it here
      fixed += f;
      tail_bytes += size - f;
    }
    return tail_bytes;
  }

  // The tail section's size, from the chunk headers in a received fixed section; corrupt when a
  // header is not valid for its chunk.
  static status tail_bytes(const std::uint8_t* fixed, std::uint64_t count, std::uint64_t chunk_elems,
                           std::uint64_t* out) {
    std::uint64_t total = 0;
    for (std::uint64_t first = 0; first < count; first += chunk_elems) {
      const std::uint64_t m = count - first < chunk_elems ? count - first : chunk_elems;
      std::uint64_t span = 0;
      const status s = chunk_span(fixed, m, &span);
      if (s != status::success) return s;
      total += span - chunk_fixed(m);
      fixed += chunk_fixed(m);
    }
    *out = total;
    return status::success;
  }

  // Decodes a segment at `place` whose tail section holds tail_bytes bytes. For each chunk,
  // sink(first, m, chunk, span, seal) receives the chunk's bytes joined in `scratch` and the seal
  // its check must match (place.seal(checksum, its index)); it decodes them and returns a status.
  // decode() stops at the first error.
  template <class Sink>
  static status decode(const std::uint8_t* fixed, const std::uint8_t* tail, std::uint64_t tail_bytes,
                       std::uint64_t count, std::uint64_t chunk_elems, bool checksum, const wire_place& place,
                       std::uint8_t* scratch, Sink&& sink) {
    std::uint64_t used = 0;
    for (std::uint64_t first = 0; first < count; first += chunk_elems) {
      const std::uint64_t m = count - first < chunk_elems ? count - first : chunk_elems;
      const std::uint64_t f = chunk_fixed(m);
      std::uint64_t span = 0;
      status s = chunk_span(fixed, m, &span);
      if (s != status::success) return s;
      if (span - f > tail_bytes - used) return status::corrupt;
      std::memcpy(scratch, fixed, f);
      if (span > f) std::memcpy(scratch + f, tail + used, span - f);  // a tail may be empty (and null)
      s = sink(first, m, static_cast<const std::uint8_t*>(scratch), span, place.seal(checksum, first / chunk_elems));
      if (s != status::success) return s;
      fixed += f;
      used += span - f;
    }
    return used == tail_bytes ? status::success : status::corrupt;
  }

  // Decodes a segment into `out` (count elements).
  static status decode_into(const std::uint8_t* fixed, const std::uint8_t* tail, std::uint64_t tail_bytes,
                            std::uint64_t count, std::uint64_t chunk_elems, bool checksum, const wire_place& place,
                            void* out, std::uint8_t* scratch) {
    auto* dst = static_cast<std::uint8_t*>(out);
    return decode(fixed, tail, tail_bytes, count, chunk_elems, checksum, place, scratch,
                  [&](std::uint64_t first, std::uint64_t m, const std::uint8_t* chunk, std::uint64_t span,
                      format::chunk_seal seal) {
                    return host::detail::decode_chunk<E>(chunk, span, m, seal, dst + first * L::elem_size);
                  });
  }

 private:
  // A chunk's whole size from what the fixed section holds of it: its header (3-bit policies:
  // stored and coded chunks only, the encoder writes no zero mask), or its header and mask room
  // (entropy: any mode). Never less than the fixed size.
  static status chunk_span(const std::uint8_t* fixed, std::uint64_t m, std::uint64_t* span) {
    if constexpr (rans) *span = codec_detail::chunk_span_from_head<E>(fixed, chunk_fixed(m), m);
    else *span = codec_detail::dense_chunk_span<E>(format::read_chunk_header(fixed), m);
    return *span != 0 && *span >= chunk_fixed(m) ? status::success : status::corrupt;
  }
};

}  // namespace zipccl::collective::detail
