// zipccl: the fixed-size wire of the device collectives (docs/format.md, "Fixed-size segments").
//
// On a device transport every message size must be known on the host from the counts alone, so
// that a collective only enqueues work (no device-to-host copy of a size, no host wait) and can be
// captured in a CUDA graph. A segment therefore travels as ONE message of
//
//   segment_bytes(m) = 16 (preamble) + fixed_bytes(m) (detail/wire.hpp) + spill_bytes(m)
//
// bytes for m elements: the preamble, every chunk's fixed part at an offset that depends only on
// the chunk's index (so encoders write it in place, no look-back), then the spill area: every
// chunk's remaining bytes (its escapes and padding, or the rest of a chunk that fell back to
// stored; for codebook::entropy, whose fixed part is only the header and the zero mask's room,
// the whole rANS body) back to back in chunk order, then zeros up to the spill budget
//
//   spill_bytes(m) = align16(ceil(m * spill_permille / 1000)).
//
// A chunk with too many escapes falls back to stored, as in a stream; its raw rest lands in the
// spill area like any other chunk's tail. A segment whose tails together exceed the budget cannot
// travel losslessly in its fixed size: its preamble carries the overflow bit, its body is
// unspecified, and both ends report status::wire_overflow (never a silent wrong value).
//
// The sizes are host-and-device functions; encode() and decode() below are the host reference
// that the device executor must match byte for byte.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/bytes.hpp"
#include "../common.hpp"
#include "wire.hpp"

namespace zipccl::collective::detail {

// The device collectives' chunk (cuda::default_tuning's) and their largest segment: a segment of
// more chunks than this would make each chunk's block read too many headers of its segment.
inline constexpr std::uint32_t device_chunk_elems = 8192;
inline constexpr std::uint64_t device_max_segment_elems = std::uint64_t{1} << 22;
// The segment size the device collectives use for these options: segment_elems, or the largest
// segment when it is 0 or larger.
inline std::uint64_t device_segment_elems(std::uint64_t segment_elems) {
  return segment_elems == 0 || segment_elems > device_max_segment_elems ? device_max_segment_elems : segment_elems;
}

template <class Codec>
struct fixed_wire {
  using W = wire<Codec>;
  using E = typename Codec::element_type;
  static constexpr std::uint64_t preamble = 16;
  static constexpr std::uint64_t overflow_bit = 1ull << 48;
  static constexpr std::uint64_t max_index = overflow_bit - 1;  // segment indices below 2^48

  // ceil(m * permille / 1000), rounded up to 16; exact for m below 2^64 / 4000 (about 4.6e15
  // elements, far past any message).
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t spill_bytes(std::uint64_t m, std::uint32_t permille) {
    const std::uint64_t q = m / 1000, r = m % 1000;
    return format::align_up(q * permille + (r * permille + 999) / 1000, 16);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t segment_bytes(std::uint64_t m, std::uint64_t chunk_elems,
                                                                  std::uint32_t permille) {
    return preamble + W::fixed_bytes(m, chunk_elems) + spill_bytes(m, permille);
  }
  // The preamble's second word: element type, overflow bit, segment index.
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t tag(std::uint64_t index, bool overflow) {
    return (static_cast<std::uint64_t>(Codec::type) << 56) | (overflow ? overflow_bit : 0) | (index & max_index);
  }
  // The place segment `index` of a message of `count` elements seals its chunks with (the tag
  // without the overflow bit, which the encoder sets after the chunks are sealed).
  ZIPCCL_HOST_DEVICE static constexpr wire_place place(std::uint64_t count, std::uint64_t index) {
    return {count, tag(index, false)};
  }
  // The scratch encode() needs: one chunk as a stream would hold it.
  static constexpr std::uint64_t scratch_bytes(std::uint64_t chunk_elems) { return W::scratch_bytes(chunk_elems); }

  // Encodes m elements at `in` as segment `index` of a message of `count` elements into `out`
  // (segment_bytes(m, ...) bytes). Returns success, or wire_overflow when the tails do not fit
  // the spill budget: the preamble then carries the overflow bit and the rest of `out` is
  // unspecified.
  static status encode(const typename Codec::codebook_type& cb, const void* in, std::uint64_t m,
                       std::uint64_t chunk_elems, bool checksum, std::uint64_t count, std::uint64_t index,
                       std::uint32_t permille, std::uint8_t* out, std::uint8_t* scratch) {
    using L = format::chunk_layout<E>;
    const auto* src = static_cast<const std::uint8_t*>(in);
    std::uint8_t* fixed = out + preamble;
    std::uint8_t* spill = fixed + W::fixed_bytes(m, chunk_elems);
    const std::uint64_t room = spill_bytes(m, permille);
    std::uint64_t used = 0;
    bool overflow = false;
    for (std::uint64_t first = 0; first < m && !overflow; first += chunk_elems) {
      const std::uint64_t k = m - first < chunk_elems ? m - first : chunk_elems;
      const std::uint64_t f = W::chunk_fixed(k);
      // (zero masks with rANS only, as on the host collectives' wire: their room is in the fixed part)
      const std::uint64_t size =
          host::detail::encode_chunk<E>(cb, src + first * L::elem_size, k,
                                        place(count, index).seal(checksum, first / chunk_elems), W::rans, scratch,
                                        host::detail::read_ahead::from(src, first + k, m, chunk_elems, L::elem_size));
      if (size - f > room - used) {
        overflow = true;
        break;
      }
      std::memcpy(fixed, scratch, f);
      if (size > f) std::memcpy(spill + used, scratch + f, size - f);
      fixed += f;
      used += size - f;
    }
    format::store_le<std::uint64_t>(out, count);
    format::store_le<std::uint64_t>(out + 8, tag(index, overflow));
    if (overflow) return status::wire_overflow;
    if (room > used) std::memset(spill + used, 0, room - used);
    return status::success;
  }

  // Checks a received segment's preamble and chunk headers and gives the spill bytes in use:
  // size_mismatch when it names another count, element type or index; wire_overflow when its
  // sender could not fit it; corrupt when a chunk header breaks the stream's rules, the tails
  // exceed the budget or the unused spill is not zero.
  static status open(const std::uint8_t* seg, std::uint64_t m, std::uint64_t chunk_elems, std::uint64_t count,
                     std::uint64_t index, std::uint32_t permille, std::uint64_t* spill_used) {
    const std::uint64_t word = format::load_le<std::uint64_t>(seg + 8);
    if (format::load_le<std::uint64_t>(seg) != count || (word & ~overflow_bit) != tag(index, false))
      return status::size_mismatch;
    if (word & overflow_bit) return status::wire_overflow;
    std::uint64_t used = 0;
    const status s = W::tail_bytes(seg + preamble, m, chunk_elems, &used);
    if (s != status::success) return s;
    const std::uint64_t room = spill_bytes(m, permille);
    if (used > room) return status::corrupt;
    const std::uint8_t* spill = seg + preamble + W::fixed_bytes(m, chunk_elems);
    for (std::uint64_t i = used; i < room; ++i)
      if (spill[i] != 0) return status::corrupt;
    *spill_used = used;
    return status::success;
  }

  // Decodes a received segment: open(), then each chunk through sink(first, k, chunk, span, seal)
  // as wire::decode() does (scratch: scratch_bytes(chunk_elems)).
  template <class Sink>
  static status decode(const std::uint8_t* seg, std::uint64_t m, std::uint64_t chunk_elems, bool checksum,
                       std::uint64_t count, std::uint64_t index, std::uint32_t permille, std::uint8_t* scratch,
                       Sink&& sink) {
    std::uint64_t used = 0;
    const status s = open(seg, m, chunk_elems, count, index, permille, &used);
    if (s != status::success) return s;
    return W::decode(seg + preamble, seg + preamble + W::fixed_bytes(m, chunk_elems), used, m, chunk_elems, checksum,
                     place(count, index), scratch, static_cast<Sink&&>(sink));
  }
  static status decode_into(const std::uint8_t* seg, std::uint64_t m, std::uint64_t chunk_elems, bool checksum,
                            std::uint64_t count, std::uint64_t index, std::uint32_t permille, void* out,
                            std::uint8_t* scratch) {
    auto* dst = static_cast<std::uint8_t*>(out);
    return decode(seg, m, chunk_elems, checksum, count, index, permille, scratch,
                  [&](std::uint64_t first, std::uint64_t k, const std::uint8_t* chunk, std::uint64_t span,
                      format::chunk_seal seal) {
                    return host::detail::decode_chunk<E>(chunk, span, k, seal,
                                                         dst + first * format::chunk_layout<E>::elem_size);
                  });
  }
};

}  // namespace zipccl::collective::detail

