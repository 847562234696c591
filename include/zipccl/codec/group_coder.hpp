// zipccl: the 3-bit group coder and the coded chunk (modes coded and zero_coded), for every
// executor.
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

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/chunk.hpp"

#include "../codebook/table.hpp"
#include "chunk_body.hpp"

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

// Gathers a chunk's statistic over the elements of its body and asks the policy for its table
// (scalar reference).
template <class E, class Policy>
ZIPCCL_HOST_DEVICE codebook::table choose_table(const Policy& policy, const std::uint8_t* in, std::uint64_t m,
                                                const body_shape& shape) {
  using bits_type = typename E::bits_type;
  if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
    std::uint64_t sum = 0, count = 0;
    for (std::uint64_t i = 0; i < m; ++i) {
      if (in_zero_group(shape, i / format::group_elems)) continue;
      const std::uint32_t e = E::exponent(load_le<bits_type>(in + i * sizeof(bits_type)));
      if (Policy::template counts<E>(e)) {
        sum += e;
        ++count;
      }
    }
    return Policy::template select<E>(sum, count, shape.elems);
  } else if constexpr (Policy::stat == codebook::statistic::histogram) {
    std::uint32_t counts[E::exponent_count] = {};
    for (std::uint64_t i = 0; i < m; ++i)
      if (!in_zero_group(shape, i / format::group_elems))
        ++counts[E::exponent(load_le<bits_type>(in + i * sizeof(bits_type)))];
    return Policy::template select<E>(counts);
  } else {
    return policy.entries;
  }
}

template <class E, class Policy>
ZIPCCL_HOST_DEVICE codebook::table choose_table(const Policy& policy, const std::uint8_t* in, std::uint64_t m) {
  return choose_table<E>(policy, in, m, dense_body(m));
}

// Seals a coded chunk whose body (per `shape`) is in place: pads, writes the header and check;
// returns its size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t seal_coded_chunk(const body_shape& shape, const codebook::table& t,
                                                  std::uint64_t escapes, format::chunk_seal seal, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const std::uint64_t end = L::escapes_offset(shape.elems, shape.base) + escapes;
  const std::uint64_t size = L::coded_bytes(shape.elems, escapes, shape.base);
  for (std::uint64_t p = end; p < size; ++p) out[p] = 0;
  format::chunk_header h;
  h.mode = mode_for(format::chunk_mode::coded, shape.zero_mask != nullptr);
  for (unsigned i = 0; i < format::table_size; ++i) h.table[i] = t.exponent[i];
  h.escapes = static_cast<std::uint32_t>(escapes);
  format::write_chunk_header(out, h);
  format::store_chunk_check(out, format::chunk_check(out, size, seal, shape.base));
  return size;
}

template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t seal_coded_chunk(std::uint64_t m, const codebook::table& t, std::uint64_t escapes,
                                                  format::chunk_seal seal, std::uint8_t* out) {
  return seal_coded_chunk<E>(dense_body(m), t, escapes, seal, out);
}

// Encodes one chunk of m elements with table t into out, which must hold stored_bytes(m); the
// body per `shape` (plan_body()). Falls back to a stored body as soon as the escapes would make
// coding not pay. Returns the chunk's size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t encode_chunk(const std::uint8_t* in, std::uint64_t m, const codebook::table& t,
                                              format::chunk_seal seal, std::uint8_t* out, const body_shape& shape) {
  using L = format::chunk_layout<E>;
  using G = group_coder<E>;
  const std::int64_t budget = L::escape_budget(shape.elems, shape.base);
  if (budget < 0) return write_stored_chunk<E>(in, m, seal, out, shape);
  std::uint8_t lut[256];
  codebook::make_code_lut(t, lut);
  std::uint8_t* planes = out + L::planes_offset(shape.base);
  std::uint8_t* words = out + L::words_offset(shape.elems, shape.base);
  std::uint8_t* bytes = out + L::bytes_offset(shape.elems, shape.base);
  std::uint8_t* escapes = out + L::escapes_offset(shape.elems, shape.base);
  std::uint64_t n_esc = 0, b = 0;  // b: the body's group
  std::uint8_t esc[32];
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    if (in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems, at = b * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    const unsigned k = G::encode(in + first * L::elem_size, lanes, lut, planes + b * G::P * 4,
                                 words + at * L::word_bytes, bytes + at, esc);
    if (static_cast<std::int64_t>(n_esc + k) > budget) return write_stored_chunk<E>(in, m, seal, out, shape);
    for (unsigned j = 0; j < k; ++j) escapes[n_esc + j] = esc[j];
    n_esc += k;
    ++b;
  }
  return seal_coded_chunk<E>(shape, t, n_esc, seal, out);
}

template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t encode_chunk(const std::uint8_t* in, std::uint64_t m, const codebook::table& t,
                                              format::chunk_seal seal, std::uint8_t* out) {
  return encode_chunk<E>(in, m, t, seal, out, dense_body(m));
}

// Decodes the 3-bit coded body (per `body`) of a chunk that passed check_chunk into out (m
// elements): a lane padding bit set, an escape past the header's count, an escaped exponent out of
// range or escapes left over are corrupt.
template <class E>
ZIPCCL_HOST_DEVICE status decode_coded_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                                            const body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  using G = group_coder<E>;
  const std::uint8_t* planes = chunk + L::planes_offset(body.base);
  const std::uint8_t* words = chunk + L::words_offset(body.elems, body.base);
  const std::uint8_t* bytes = chunk + L::bytes_offset(body.elems, body.base);
  const std::uint8_t* escapes = chunk + L::escapes_offset(body.elems, body.base);
  const std::uint64_t table = G::pack_table(h.table);
  std::uint64_t used = 0, b = 0;  // b: the body's group
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems, at = b * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (in_zero_group(body, g)) {
      store_zeros<E>(out + first * L::elem_size, lanes);
      continue;
    }
    const std::uint8_t* gp = planes + b * G::P * 4;
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
      const std::uint64_t k = at + i;
      const std::uint32_t word = L::word_bytes ? load_le<std::uint16_t>(words + 2 * k) : 0u;
      store_le<typename E::bits_type>(out + (first + i) * L::elem_size, G::join_lane(p, i, e, bytes[k], word));
    }
    ++b;
  }
  return used == h.escapes ? status::success : status::corrupt;
}

}  // namespace zipccl::codec_detail
