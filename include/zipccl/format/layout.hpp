// zipccl: the sizes of the wire format: header, directory, chunk sections, and the bounds on a
// stream's size that follow from an element count. Shared by every executor (host and device).
//
// docs/format.md describes these bytes; the constants below are the normative ones.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"
#include "bytes.hpp"

namespace zipccl::format {

inline constexpr std::uint64_t header_bytes = 48;
inline constexpr std::uint64_t directory_entry_bytes = 8;
inline constexpr std::uint64_t chunk_header_bytes = 16;
inline constexpr std::uint64_t alignment = 16;
inline constexpr std::uint32_t group_elems = 32;  // elements per bit-plane group
inline constexpr std::uint32_t chunk_granularity = 256;
inline constexpr std::uint32_t min_chunk_elems = 256;
inline constexpr std::uint32_t max_chunk_elems = 1u << 24;
inline constexpr std::uint32_t default_chunk_elems = 1u << 16;

// Chunk modes. Bit 0: the body is coded with the 3-bit exponent code; bit 2: the body is coded
// with rANS (codebook::entropy); neither: stored raw. Bit 1: a zero-group mask follows the chunk
// header and the body holds only the groups it does not mark. Bit 3 (rANS only): the body's +0.0
// and -0.0 elements are coded as two symbols of their own and have no rest (codec/rans.hpp,
// "zero symbols"). Modes 2, 3, 4 and 6 need stream version 2, modes 12 and 14 version 3; 5, 7 to
// 11, 13 and 15 and above are invalid.
enum class chunk_mode : std::uint8_t {
  stored = 0, coded = 1, zero_stored = 2, zero_coded = 3, rans = 4, zero_rans = 6, rans_zeros = 12,
  zero_rans_zeros = 14
};

ZIPCCL_HOST_DEVICE constexpr bool mode_is_coded(chunk_mode m) { return (static_cast<unsigned>(m) & 1u) != 0; }
ZIPCCL_HOST_DEVICE constexpr bool mode_has_zero_mask(chunk_mode m) { return (static_cast<unsigned>(m) & 2u) != 0; }
ZIPCCL_HOST_DEVICE constexpr bool mode_is_rans(chunk_mode m) { return (static_cast<unsigned>(m) & 4u) != 0; }
ZIPCCL_HOST_DEVICE constexpr bool mode_has_zero_symbols(chunk_mode m) { return (static_cast<unsigned>(m) & 8u) != 0; }
ZIPCCL_HOST_DEVICE constexpr bool mode_is_stored(chunk_mode m) { return (static_cast<unsigned>(m) & 5u) == 0; }
ZIPCCL_HOST_DEVICE constexpr bool mode_valid(std::uint8_t m) { return m <= 4u || m == 6u || m == 12u || m == 14u; }

// Zero groups: 64 consecutive elements of a chunk (the last may be shorter) whose bit patterns
// are all 0 (+0.0). A chunk in a zero_* mode marks them in a bit mask and leaves them out of its
// body; they cost one bit each.
inline constexpr std::uint32_t zero_group_elems = 64;

ZIPCCL_HOST_DEVICE constexpr std::uint64_t zero_groups(std::uint64_t m) {
  return (m + zero_group_elems - 1) / zero_group_elems;
}
// Elements of zero group g of a chunk of m elements.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t zero_group_size(std::uint64_t m, std::uint64_t g) {
  return m - g * zero_group_elems < zero_group_elems ? m - g * zero_group_elems : zero_group_elems;
}
// Bytes of the mask that carries one bit per group, padded with zeros to 16 bytes.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t zero_mask_bytes(std::uint64_t m) {
  return align_up((zero_groups(m) + 7) / 8, alignment);
}
// Where the body of a chunk starts: after the header, and after the mask in the zero_* modes.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t body_offset(std::uint64_t m, bool zero_mask) {
  return zero_mask ? chunk_header_bytes + zero_mask_bytes(m) : chunk_header_bytes;
}

// Lanes of 32-element (plane) group g of a chunk of m elements: 32, or fewer in the last group.
ZIPCCL_HOST_DEVICE constexpr unsigned group_lanes(std::uint64_t m, std::uint64_t g) {
  return m - g * group_elems < group_elems ? static_cast<unsigned>(m - g * group_elems) : group_elems;
}

ZIPCCL_HOST_DEVICE constexpr bool valid_chunk_elems(std::uint64_t c) {
  return c >= min_chunk_elems && c <= max_chunk_elems && c % chunk_granularity == 0;
}

ZIPCCL_HOST_DEVICE constexpr std::uint64_t chunk_count(std::uint64_t n, std::uint64_t chunk_elems) {
  return n / chunk_elems + (n % chunk_elems != 0 ? 1 : 0);
}

// Elements in chunk i of a stream of n elements.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t chunk_elements(std::uint64_t n, std::uint64_t chunk_elems,
                                                          std::uint64_t i) {
  const std::uint64_t start = i * chunk_elems;
  return n - start < chunk_elems ? n - start : chunk_elems;
}

// Offset of chunk 0: header, directory, zero padding to 16 bytes.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t data_offset(std::uint64_t chunks) {
  return align_up(header_bytes + directory_entry_bytes * chunks, alignment);
}

// A stored body of m elements that starts at `base` (chunk_header_bytes, or body_offset()).
ZIPCCL_HOST_DEVICE constexpr std::uint64_t stored_chunk_bytes(std::uint64_t m, unsigned elem_size,
                                                              std::uint64_t base = chunk_header_bytes) {
  return align_up(base + m * elem_size, alignment);
}

// The exact upper bound on a stream's size: every chunk stored raw.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t max_compressed_size(std::uint64_t n, unsigned elem_size,
                                                               std::uint64_t chunk_elems) {
  const std::uint64_t c = chunk_count(n, chunk_elems);
  if (c == 0) return data_offset(0);
  const std::uint64_t last = chunk_elements(n, chunk_elems, c - 1);
  return data_offset(c) + (c - 1) * stored_chunk_bytes(chunk_elems, elem_size) +
         stored_chunk_bytes(last, elem_size);
}

inline constexpr unsigned code_planes = 3;
inline constexpr unsigned table_size = 7;  // codes 1..7; code 0 is the escape

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
  // Section offsets of a body of m elements that starts at `base`: chunk_header_bytes for the
  // stored and coded modes, body_offset(chunk elements, true) for the zero_* modes.
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t planes_offset(std::uint64_t base = chunk_header_bytes) {
    return base;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t words_offset(std::uint64_t m,
                                                                 std::uint64_t base = chunk_header_bytes) {
    return base + groups(m) * planes * 4;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t bytes_offset(std::uint64_t m,
                                                                 std::uint64_t base = chunk_header_bytes) {
    return words_offset(m, base) + m * word_bytes;
  }
  // The end of the fixed-size part, where the escapes start.
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t escapes_offset(std::uint64_t m,
                                                                   std::uint64_t base = chunk_header_bytes) {
    return bytes_offset(m, base) + m;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t coded_bytes(std::uint64_t m, std::uint64_t esc,
                                                                std::uint64_t base = chunk_header_bytes) {
    return align_up(escapes_offset(m, base) + esc, alignment);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t stored_bytes(std::uint64_t m,
                                                                 std::uint64_t base = chunk_header_bytes) {
    return stored_chunk_bytes(m, elem_size, base);
  }
  // The most escapes for which a coded body is still strictly smaller than a stored one, or -1
  // when coding can never pay (tiny chunks).
  ZIPCCL_HOST_DEVICE static constexpr std::int64_t escape_budget(std::uint64_t m,
                                                                 std::uint64_t base = chunk_header_bytes) {
    return static_cast<std::int64_t>(stored_bytes(m, base)) - static_cast<std::int64_t>(alignment) -
           static_cast<std::int64_t>(escapes_offset(m, base));
  }
  // Whether a chunk of m elements, `zero_elems` of them in zero groups, uses a zero_* mode: when
  // leaving those groups out shrinks the fixed-size part by more than the mask and 16 bytes. The
  // encoder decides by this rule, and a decoder rejects a zero_* chunk that breaks it, so that a
  // zero_* chunk is always smaller than the stored or coded chunk of the same elements.
  ZIPCCL_HOST_DEVICE static constexpr bool zero_mask_pays(std::uint64_t m, std::uint64_t zero_elems) {
    return zero_elems <= m && escapes_offset(m - zero_elems, body_offset(m, true)) + alignment < escapes_offset(m);
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

// The fewest bytes a chunk of m elements of type E can occupy: coded with no escape, or stored,
// whichever is smaller (a chunk's span is exact in either mode); with zero masks (stream version
// 2), a chunk of zeros only: its header and mask. (Version 3 adds nothing: a chunk with zero
// symbols is at least 192 bytes and never smaller than its header and a mask's room,
// codec_detail::rans::min_zero_rests.)
template <class E>
ZIPCCL_HOST_DEVICE constexpr std::uint64_t min_chunk_bytes(std::uint64_t m, bool zero_masks = true) {
  using L = chunk_layout<E>;
  const std::uint64_t dense = L::coded_bytes(m, 0) < L::stored_bytes(m) ? L::coded_bytes(m, 0) : L::stored_bytes(m);
  if (!zero_masks || !L::zero_mask_pays(m, m)) return dense;
  return body_offset(m, true) < dense ? body_offset(m, true) : dense;
}

template <class E>
ZIPCCL_HOST_DEVICE constexpr std::uint64_t min_compressed_size(std::uint64_t n, std::uint64_t chunk_elems,
                                                               bool zero_masks = true) {
  const std::uint64_t c = chunk_count(n, chunk_elems);
  if (c == 0) return data_offset(0);
  return data_offset(c) + (c - 1) * min_chunk_bytes<E>(chunk_elems, zero_masks) +
         min_chunk_bytes<E>(chunk_elements(n, chunk_elems, c - 1), zero_masks);
}

// The exact lower bound on the size of a valid stream of n elements of type t. In version 1
// every element costs at least 11 bits (bf16; fp16 14, fp32 27); in version 2 (zero masks) a
// chunk of zeros costs its 16-byte header and its mask (one bit per 64 elements, at least 16 bytes). So a header that claims more elements
// than its stream's size allows is corrupt: readers check this before they size anything from a
// count.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t min_compressed_size(dtype t, std::uint64_t n, std::uint64_t chunk_elems,
                                                               bool zero_masks = true) {
  switch (t) {
    case dtype::bf16: return min_compressed_size<bf16>(n, chunk_elems, zero_masks);
    case dtype::fp16: return min_compressed_size<fp16>(n, chunk_elems, zero_masks);
    case dtype::fp32: return min_compressed_size<fp32>(n, chunk_elems, zero_masks);
  }
  return 0;
}

}  // namespace zipccl::format
