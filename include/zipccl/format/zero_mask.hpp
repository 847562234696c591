// zipccl: the zero-group mask of the zero_stored, zero_coded and zero_rans chunk modes (stream
// version 2).
//
//   chunk header (16 bytes) | mask (zero_mask_bytes(m)) | body over the groups the mask leaves
//
// Bit g of the mask (byte g / 8, bit g % 8) is set when group g of the chunk, its elements
// 64g .. 64g + 63, is all +0.0 bit patterns; those elements are not in the body. Bits past the
// chunk's last group and the padding bytes are zero. Every executor reads and writes the mask with
// the functions below, so the rules are stated once.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "bytes.hpp"
#include "layout.hpp"

namespace zipccl::format {

ZIPCCL_HOST_DEVICE constexpr unsigned popcount8(std::uint32_t b) {
  b = b - ((b >> 1) & 0x55u);
  b = (b & 0x33u) + ((b >> 2) & 0x33u);
  return (b + (b >> 4)) & 0x0Fu;
}

// Whether zero group g is marked in the mask.
ZIPCCL_HOST_DEVICE bool zero_bit(const std::uint8_t* mask, std::uint64_t g) { return (mask[g / 8] >> (g % 8)) & 1u; }

// How many of the groups [g0, g1) the mask marks.
ZIPCCL_HOST_DEVICE std::uint64_t zero_groups_in(const std::uint8_t* mask, std::uint64_t g0, std::uint64_t g1) {
  std::uint64_t n = 0;
  while (g0 < g1 && g0 % 8 != 0) n += zero_bit(mask, g0++);
  for (; g0 + 8 <= g1; g0 += 8) n += popcount8(mask[g0 / 8]);
  while (g0 < g1) n += zero_bit(mask, g0++);
  return n;
}

// Mask byte i of a chunk of m elements: whether it keeps the rules (no bit for a group past the
// end; a padding byte is zero), and how many of the chunk's elements its set bits cover.
ZIPCCL_HOST_DEVICE constexpr bool zero_mask_byte_ok(std::uint64_t m, std::uint64_t i, std::uint8_t b) {
  const std::uint64_t groups = zero_groups(m);
  if (8 * i >= groups) return b == 0;
  const std::uint64_t live = groups - 8 * i;
  return live >= 8 || (b >> live) == 0;
}
ZIPCCL_HOST_DEVICE constexpr std::uint64_t zero_mask_byte_elems(std::uint64_t m, std::uint64_t i, std::uint8_t b) {
  const std::uint64_t groups = zero_groups(m);
  std::uint64_t elems = std::uint64_t(popcount8(b)) * zero_group_elems;
  const std::uint64_t last = groups - 1;  // only the last group may be short
  if (groups != 0 && last / 8 == i && ((b >> (last % 8)) & 1u)) elems -= zero_group_elems - zero_group_size(m, last);
  return elems;
}

// The summary of a received mask that the chunk rules need.
struct zero_mask_summary {
  bool ok = false;              // every byte keeps the rules
  std::uint64_t zero_elems = 0;  // elements in the marked groups
};

// Reads the mask of a chunk of m elements that spans `span` bytes (one thread; a GPU block reads
// the bytes in parallel with zero_mask_byte_ok / zero_mask_byte_elems and combines the same way).
ZIPCCL_HOST_DEVICE zero_mask_summary read_zero_mask(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m) {
  zero_mask_summary z;
  if (span < body_offset(m, true)) return z;
  z.ok = true;
  const std::uint8_t* mask = chunk + chunk_header_bytes;
  for (std::uint64_t i = 0; i < zero_mask_bytes(m); ++i) {
    z.ok = z.ok && zero_mask_byte_ok(m, i, mask[i]);
    z.zero_elems += zero_mask_byte_elems(m, i, mask[i]);
  }
  return z;
}

// Whether the k elements of `elem_size` bytes at `p` are all +0.0 (all bits zero).
ZIPCCL_HOST_DEVICE bool all_zero_bits(const std::uint8_t* p, std::uint64_t k, unsigned elem_size) {
  const std::uint64_t bytes = k * elem_size;
  std::uint64_t any = 0, i = 0;
  for (; i + 32 <= bytes; i += 32)
    any |= load_le<std::uint64_t>(p + i) | load_le<std::uint64_t>(p + i + 8) | load_le<std::uint64_t>(p + i + 16) |
           load_le<std::uint64_t>(p + i + 24);
  for (; i < bytes; ++i) any |= p[i];
  return any == 0;
}

// The reference's test of a zero group (all_zero_bits), for make_zero_mask.
struct zero_bits_test {
  unsigned elem_size;
  ZIPCCL_HOST_DEVICE bool operator()(const std::uint8_t* p, std::uint64_t k) const { return all_zero_bits(p, k, elem_size); }
};

// Writes the zero mask of the m elements at `in` to `mask` (zero_mask_bytes(m) bytes, padding
// included) and returns how many elements its marked groups hold. all_zero(p, k) says whether the
// k elements at p (a group) are all +0.0; the host's vector paths pass a faster test of their own.
template <class AllZero>
ZIPCCL_HOST_DEVICE std::uint64_t make_zero_mask(const std::uint8_t* in, std::uint64_t m, unsigned elem_size,
                                                std::uint8_t* mask, const AllZero& all_zero) {
  for (std::uint64_t i = 0; i < zero_mask_bytes(m); ++i) mask[i] = 0;
  std::uint64_t zero = 0;
  for (std::uint64_t g = 0; g < zero_groups(m); ++g) {
    const std::uint64_t k = zero_group_size(m, g);
    if (all_zero(in + g * zero_group_elems * elem_size, k)) {
      mask[g / 8] = static_cast<std::uint8_t>(mask[g / 8] | (1u << (g % 8)));
      zero += k;
    }
  }
  return zero;
}
ZIPCCL_HOST_DEVICE std::uint64_t make_zero_mask(const std::uint8_t* in, std::uint64_t m, unsigned elem_size,
                                                std::uint8_t* mask) {
  return make_zero_mask(in, m, elem_size, mask, zero_bits_test{elem_size});
}

}  // namespace zipccl::format
