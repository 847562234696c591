// zipccl: per-group and per-chunk encode / decode, shared by every executor.
//
// A group is 32 consecutive elements of a chunk (the last group of a chunk may be shorter). Lane i
// of a group is element 32 * g + i; bit i of each of the group's plane words belongs to lane i:
//   plane 0..2   bits 0..2 of the lane's code (code 0 = escape, 1..7 = table entry code-1)
//   plane 3..5   fp16 only: rest bits 8..10 (mantissa bits 8, 9 and the sign)
// Lanes past the end of a short group have all plane bits zero and no bytes.
//
// The functions below are the reference: the host executor calls them directly (its SIMD paths
// are checked byte for byte against them), and the device kernels call the per-lane pieces.
#pragma once

#include <cstdint>
#include <cstring>

#include "../codebook/table.hpp"
#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/chunk.hpp"

namespace zipccl::codec_detail {

using format::load_le;
using format::store_le;

template <class E>
struct group_coder {
  using L = format::chunk_layout<E>;
  using bits_type = typename E::bits_type;
  static constexpr unsigned P = L::planes;

  // One element's pieces as the format stores them.
  struct lane {
    std::uint32_t exponent, code, byte, word;
  };

  // Codes element b as lane i: ORs its bits into the plane words p, returns its other pieces.
  // Every executor codes lanes with this function (the device with 8-lane plane bytes).
  ZIPCCL_HOST_DEVICE static lane encode_lane(bits_type b, const std::uint8_t* lut, unsigned i, std::uint32_t (&p)[P]) {
    const std::uint32_t e = E::exponent(b);
    const std::uint32_t r = E::rest(b);
    const std::uint32_t c = lut[e];
    p[0] |= (c & 1u) << i;
    p[1] |= ((c >> 1) & 1u) << i;
    p[2] |= (c >> 2) << i;
    if constexpr (L::extra_planes != 0) {
      const std::uint32_t h = L::rest_high(r);
      p[3] |= (h & 1u) << i;
      p[4] |= ((h >> 1) & 1u) << i;
      p[5] |= ((h >> 2) & 1u) << i;
    }
    return {e, c, L::rest_byte(r), L::rest_word(r)};
  }

  // The code of lane i in the plane words p.
  ZIPCCL_HOST_DEVICE static std::uint32_t lane_code(const std::uint32_t (&p)[P], unsigned i) {
    return ((p[0] >> i) & 1u) | (((p[1] >> i) & 1u) << 1) | (((p[2] >> i) & 1u) << 2);
  }

  // The table packed into one word: code k's exponent in byte k (byte 0 unused), so that looking
  // a code up is a shift rather than an indexed access (which a GPU would put in local memory).
  ZIPCCL_HOST_DEVICE static std::uint64_t pack_table(const std::uint8_t* table) {
    std::uint64_t t = 0;
    for (unsigned k = 0; k < format::table_size; ++k) t |= std::uint64_t(table[k]) << (8 * (k + 1));
    return t;
  }
  ZIPCCL_HOST_DEVICE static std::uint32_t table_exponent(std::uint64_t packed, std::uint32_t code) {
    return static_cast<std::uint32_t>((packed >> (8 * code)) & 0xFFu);
  }

  // Rebuilds lane i's element from the plane words p, its exponent, byte and word.
  ZIPCCL_HOST_DEVICE static bits_type join_lane(const std::uint32_t (&p)[P], unsigned i, std::uint32_t exponent,
                                                std::uint32_t byte, std::uint32_t word) {
    std::uint32_t high = 0;
    if constexpr (L::extra_planes != 0)
      high = ((p[3] >> i) & 1u) | (((p[4] >> i) & 1u) << 1) | (((p[5] >> i) & 1u) << 2);
    return E::join(exponent, L::join_rest(byte, word, high));
  }

  // Encodes lanes [0, lanes) of a group whose first element is at `in` (raw element bytes).
  // Writes the group's P plane words, its words and bytes, and each escaped exponent to esc (room
  // for 32). Returns how many lanes escaped.
  ZIPCCL_HOST_DEVICE static unsigned encode(const std::uint8_t* in, unsigned lanes,
                                            const std::uint8_t* lut, std::uint8_t* planes,
                                            std::uint8_t* words, std::uint8_t* bytes,
                                            std::uint8_t* esc) {
    std::uint32_t p[P] = {};
    unsigned n_esc = 0;
    for (unsigned i = 0; i < lanes; ++i) {
      const lane l = encode_lane(load_le<bits_type>(in + i * sizeof(bits_type)), lut, i, p);
      if constexpr (L::word_bytes != 0) store_le<std::uint16_t>(words + 2 * i, static_cast<std::uint16_t>(l.word));
      bytes[i] = static_cast<std::uint8_t>(l.byte);
      if (l.code == 0) esc[n_esc++] = static_cast<std::uint8_t>(l.exponent);
    }
    for (unsigned k = 0; k < P; ++k) store_le<std::uint32_t>(planes + 4 * k, p[k]);
    return n_esc;
  }

  // Mask of the escaped lanes among the first `lanes`.
  ZIPCCL_HOST_DEVICE static std::uint32_t escape_mask(const std::uint8_t* planes, unsigned lanes) {
    const std::uint32_t live = lanes >= 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1u);
    const std::uint32_t any = load_le<std::uint32_t>(planes) | load_le<std::uint32_t>(planes + 4) |
                              load_le<std::uint32_t>(planes + 8);
    return ~any & live;
  }

  // True when no plane has a bit set for a lane at or past `lanes`.
  ZIPCCL_HOST_DEVICE static bool padding_clear(const std::uint8_t* planes, unsigned lanes) {
    if (lanes >= 32) return true;
    const std::uint32_t dead = ~((1u << lanes) - 1u);
    for (unsigned k = 0; k < P; ++k)
      if (load_le<std::uint32_t>(planes + 4 * k) & dead) return false;
    return true;
  }

  // Loads a group's plane words.
  ZIPCCL_HOST_DEVICE static void load_planes(const std::uint8_t* planes, std::uint32_t (&p)[P]) {
    for (unsigned k = 0; k < P; ++k) p[k] = load_le<std::uint32_t>(planes + 4 * k);
  }
};

// Gathers a chunk's statistic and asks the policy for its table (scalar reference).
template <class E, class Policy>
ZIPCCL_HOST_DEVICE codebook::table choose_table(const Policy& policy, const std::uint8_t* in,
                                                std::uint64_t m) {
  using bits_type = typename E::bits_type;
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    std::uint64_t sum = 0, count = 0;
    for (std::uint64_t i = 0; i < m; ++i) {
      const std::uint32_t e = E::exponent(load_le<bits_type>(in + i * sizeof(bits_type)));
      if (Policy::template counts<E>(e)) {
        sum += e;
        ++count;
      }
    }
    return Policy::template select<E>(sum, count);
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    std::uint32_t counts[E::exponent_count] = {};
    for (std::uint64_t i = 0; i < m; ++i) ++counts[E::exponent(load_le<bits_type>(in + i * sizeof(bits_type)))];
    return Policy::template select<E>(counts);
  } else {
    return policy.entries;
  }
}

// Writes a stored chunk of m elements; returns its size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t write_stored_chunk(const std::uint8_t* in, std::uint64_t m,
                                                    bool checksum, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const std::uint64_t size = L::stored_bytes(m);
  const std::uint64_t body = m * L::elem_size;
  std::memcpy(out + format::chunk_header_bytes, in, body);
  for (std::uint64_t p = format::chunk_header_bytes + body; p < size; ++p) out[p] = 0;
  format::chunk_header h;
  h.mode = format::chunk_mode::stored;
  format::write_chunk_header(out, h);
  format::store_chunk_check(out, format::chunk_check(out, size, checksum));
  return size;
}

// Seals a coded chunk whose body is in place: pads, writes the header and check; returns size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t seal_coded_chunk(std::uint64_t m, const codebook::table& t,
                                                  std::uint64_t escapes, bool checksum,
                                                  std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const std::uint64_t end = L::escapes_offset(m) + escapes;
  const std::uint64_t size = L::coded_bytes(m, escapes);
  for (std::uint64_t p = end; p < size; ++p) out[p] = 0;
  format::chunk_header h;
  h.mode = format::chunk_mode::coded;
  for (unsigned i = 0; i < format::table_size; ++i) h.table[i] = t.exponent[i];
  h.escapes = static_cast<std::uint32_t>(escapes);
  format::write_chunk_header(out, h);
  format::store_chunk_check(out, format::chunk_check(out, size, checksum));
  return size;
}

// Encodes one chunk of m elements with table t into out, which must hold stored_bytes(m).
// Falls back to a stored chunk as soon as the escapes would make coding not pay. Returns the size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t encode_chunk(const std::uint8_t* in, std::uint64_t m,
                                              const codebook::table& t, bool checksum,
                                              std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  using G = group_coder<E>;
  const std::int64_t budget = L::escape_budget(m);
  if (budget < 0) return write_stored_chunk<E>(in, m, checksum, out);
  std::uint8_t lut[256];
  codebook::make_code_lut(t, lut);
  std::uint8_t* planes = out + L::planes_offset();
  std::uint8_t* words = out + L::words_offset(m);
  std::uint8_t* bytes = out + L::bytes_offset(m);
  std::uint8_t* escapes = out + L::escapes_offset(m);
  std::uint64_t n_esc = 0;
  std::uint8_t esc[32];
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = static_cast<unsigned>(m - first < 32 ? m - first : 32);
    const unsigned k = G::encode(in + first * L::elem_size, lanes, lut, planes + g * G::P * 4,
                                 words + first * L::word_bytes, bytes + first, esc);
    if (static_cast<std::int64_t>(n_esc + k) > budget) return write_stored_chunk<E>(in, m, checksum, out);
    for (unsigned j = 0; j < k; ++j) escapes[n_esc + j] = esc[j];
    n_esc += k;
  }
  return seal_coded_chunk<E>(m, t, n_esc, checksum, out);
}

// The rules a chunk header must meet for a chunk of m elements spanning `span` bytes (everything
// but the check value and the padding bytes).
template <class E>
ZIPCCL_HOST_DEVICE status check_chunk_header(const format::chunk_header& r, std::uint64_t span, std::uint64_t m) {
  using L = format::chunk_layout<E>;
  if (span < format::chunk_header_bytes || span % format::alignment != 0) return status::corrupt;
  if (r.mode == format::chunk_mode::stored) {
    if (span != L::stored_bytes(m) || r.escapes != 0) return status::corrupt;
    for (unsigned i = 0; i < format::table_size; ++i)
      if (r.table[i] != 0) return status::corrupt;
  } else if (r.mode == format::chunk_mode::coded) {
    if (L::escape_budget(m) < 0 || r.escapes > static_cast<std::uint64_t>(L::escape_budget(m)))
      return status::corrupt;
    if (span != L::coded_bytes(m, r.escapes)) return status::corrupt;
    for (unsigned i = 0; i < format::table_size; ++i)
      if (r.table[i] >= E::exponent_count) return status::corrupt;
  } else {
    return status::corrupt;
  }
  return status::success;
}

// Where a valid chunk's content ends and its zero padding starts.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t chunk_content_end(const format::chunk_header& r, std::uint64_t m) {
  using L = format::chunk_layout<E>;
  return r.mode == format::chunk_mode::stored ? format::chunk_header_bytes + m * L::elem_size
                                              : L::escapes_offset(m) + r.escapes;
}

// Validates a whole chunk: header rules, check value, zero padding. On success *h holds the header.
template <class E>
ZIPCCL_HOST_DEVICE status check_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m,
                                      bool checksum, format::chunk_header* h) {
  if (span < format::chunk_header_bytes) return status::corrupt;
  const format::chunk_header r = format::read_chunk_header(chunk);
  const status s = check_chunk_header<E>(r, span, m);
  if (s != status::success) return s;
  if (format::chunk_check(chunk, span, checksum) != r.check) return status::checksum_mismatch;
  for (std::uint64_t p = chunk_content_end<E>(r, m); p < span; ++p)
    if (chunk[p] != 0) return status::corrupt;
  *h = r;
  return status::success;
}

// Decodes one validated-span chunk of m elements into out (m elements, any alignment).
template <class E>
ZIPCCL_HOST_DEVICE status decode_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m,
                                       bool checksum, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  using G = group_coder<E>;
  format::chunk_header h;
  const status st = check_chunk<E>(chunk, span, m, checksum, &h);
  if (st != status::success) return st;
  if (h.mode == format::chunk_mode::stored) {
    std::memcpy(out, chunk + format::chunk_header_bytes, m * L::elem_size);
    return status::success;
  }
  const std::uint8_t* planes = chunk + L::planes_offset();
  const std::uint8_t* words = chunk + L::words_offset(m);
  const std::uint8_t* bytes = chunk + L::bytes_offset(m);
  const std::uint8_t* escapes = chunk + L::escapes_offset(m);
  const std::uint64_t table = G::pack_table(h.table);
  std::uint64_t used = 0;
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = static_cast<unsigned>(m - first < 32 ? m - first : 32);
    const std::uint8_t* gp = planes + g * G::P * 4;
    if (!G::padding_clear(gp, lanes)) return status::corrupt;
    std::uint32_t p[G::P];
    G::load_planes(gp, p);
    for (unsigned i = 0; i < lanes; ++i) {
      const std::uint32_t code = G::lane_code(p, i);
      std::uint32_t e = G::table_exponent(table, code);
      if (code == 0) {
        if (used >= h.escapes) return status::corrupt;
        e = escapes[used++];
        if (e >= E::exponent_count) return status::corrupt;
      }
      const std::uint64_t k = first + i;
      const std::uint32_t word = L::word_bytes ? load_le<std::uint16_t>(words + 2 * k) : 0u;
      store_le<typename E::bits_type>(out + k * L::elem_size, G::join_lane(p, i, e, bytes[k], word));
    }
  }
  return used == h.escapes ? status::success : status::corrupt;
}

}  // namespace zipccl::codec_detail
