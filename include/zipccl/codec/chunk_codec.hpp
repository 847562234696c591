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
#include "../format/zero_mask.hpp"
#include "rans.hpp"

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

// What every rANS encoder of a chunk works from: the body's zero symbols (rans::zero_symbols) and
// rests, the frequencies and their cumulative starts, the number of symbols present, where the
// stream begins and the highest address its words may reach (16 bytes below a stored body's end:
// a rANS body must be strictly smaller).
struct rans_plan {
  std::uint32_t freq[rans::symbols], cum[rans::symbols];
  rans::zero_symbols zero;
  std::uint64_t rests = 0, nsym = 0, stream_at = 0, cap = 0;
};

// The plan from the symbol counts of all the body's elements and its numbers of +0.0 and -0.0
// elements, for a chunk of m elements (rans::choose_zero_symbols may change counts). False when even an empty stream would
// not beat a stored body.
template <class E>
ZIPCCL_HOST_DEVICE bool finish_rans_plan(std::uint32_t* counts, std::uint64_t n_pos, std::uint64_t n_neg, std::uint64_t m,
                                         const body_shape& shape, rans_plan* plan) {
  using L = format::chunk_layout<E>;
  const std::uint64_t b = shape.elems, base = shape.base;
  plan->zero = rans::choose_zero_symbols<E>(counts, b, n_pos, n_neg, rans::min_zero_rests<E>(m, base));
  plan->rests = rans::rests_of(b, plan->zero);
  rans::normalize(counts, b, plan->freq);
  plan->nsym = 0;
  for (unsigned k = 0, c = 0; k < rans::symbols; c += plan->freq[k], ++k) {
    plan->cum[k] = c;
    plan->nsym += plan->freq[k] != 0;
  }
  const std::uint64_t stored = L::stored_bytes(b, base);
  plan->stream_at = rans::layout<E>::stream_offset(plan->rests, base, plan->nsym);
  if (plan->stream_at + format::alignment > stored) return false;
  plan->cap = stored - format::alignment;
  return true;
}

// Counts the body's symbols (a sampling body's by rans::counts_from_sample) and normalises them
// (rans::normalize). False when even an empty stream would not beat a stored body.
template <class E>
ZIPCCL_HOST_DEVICE bool plan_rans_chunk(const std::uint8_t* in, std::uint64_t m, const body_shape& shape,
                                        rans_plan* plan) {
  using L = format::chunk_layout<E>;
  using S = rans::split<E>;
  using bits_type = typename E::bits_type;
  if (shape.elems == 0) return false;
  std::uint32_t counts[rans::symbols];
  // four partial histograms: a few hot symbols would otherwise serialise on one counter
  std::uint32_t part[4][rans::symbols] = {};
  std::uint32_t sampled[rans::symbols] = {};  // (rans::samples_counts: the sampled groups' counts)
  const bool samples = rans::samples_counts<E>(shape.elems);
  std::uint64_t n_pos = 0, n_neg = 0;
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    if (in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    const bool sample = samples && rans::sampled_group(g);
    for (std::uint64_t i = 0; i < lanes; ++i) {
      const bits_type v = load_le<bits_type>(in + (first + i) * L::elem_size);
      ++part[i & 3][S::symbol(v)];
      if (sample) ++sampled[S::symbol(v)];
      n_pos += v == 0;
      n_neg += v == S::negative_zero;
    }
  }
  for (unsigned k = 0; k < rans::symbols; ++k) counts[k] = part[0][k] + part[1][k] + part[2][k] + part[3][k];
  if (samples) rans::counts_from_sample(sampled, counts, shape.elems);
  return finish_rans_plan<E>(counts, n_pos, n_neg, m, shape, plan);
}

// Finishes a rANS chunk whose encoder left the final states in x and its stream words in
// [top, plan.cap) (pushed downwards, so in the decoder's order): moves the words down to the
// stream's place and writes the table, the states, the padding, the header and the chunk check.
// The rest sections are the encoder's. Returns the chunk's size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t seal_rans_chunk(const rans_plan& plan, const std::uint32_t* x, std::uint64_t top,
                                                 format::chunk_seal seal, std::uint8_t* out, const body_shape& shape) {
  using RL = rans::layout<E>;
  const std::uint64_t r = plan.rests, base = shape.base, nsym = plan.nsym;
  const std::uint64_t n_words = (plan.cap - top) / 2;
  // the stream down to its place (a forward copy: the source is never below the destination)
#if defined(__CUDA_ARCH__)
  for (std::uint64_t i = 0; i < 2 * n_words; ++i) out[plan.stream_at + i] = out[top + i];
#else
  std::memmove(out + plan.stream_at, out + top, 2 * n_words);
#endif
  rans::write_table(plan.freq, nsym, out + RL::table_offset(base));
  for (unsigned l = 0; l < rans::lanes; ++l) store_le<std::uint32_t>(out + RL::states_offset(base, nsym) + 4 * l, x[l]);
  const std::uint64_t end = RL::content_end(r, base, nsym, n_words);
  const std::uint64_t size = RL::chunk_bytes(r, base, nsym, n_words);
  for (std::uint64_t p = end; p < size; ++p) out[p] = 0;
  format::chunk_header h;
  h.mode = rans_mode(shape.zero_mask != nullptr, plan.zero.on);
  h.table[0] = static_cast<std::uint8_t>(nsym - 1);
  rans::store_header_zero_symbols(plan.zero, h.table);
  h.escapes = static_cast<std::uint32_t>(n_words);
  format::write_chunk_header(out, h);
  format::store_chunk_check(out, format::chunk_check(out, size, seal, RL::words_offset(base, nsym)));
  return size;
}

// Codes the symbols `sym` of one group of `lanes` elements into the lanes' states x (the encoder
// runs backwards over the body), pushing stream words downwards from *top. The lanes are
// independent but for the order of their words: first find the lanes whose state must give up a
// word (x >= ((state_low >> prob_bits) << 16) * f), push those words, highest lane first, then
// code every lane. False when the stream would reach below plan.stream_at.
ZIPCCL_HOST_DEVICE bool code_rans_lanes(const rans_plan& plan, const rans::divisor* div, const std::uint32_t* sym,
                                        unsigned lanes, std::uint32_t* x, std::uint64_t* top, std::uint8_t* out) {
  // the states in a local copy, which the stores to out cannot alias
  std::uint32_t xs[rans::lanes], push = 0;
  for (unsigned l = 0; l < lanes; ++l) {
    xs[l] = x[l];
    push |= (std::uint64_t(xs[l]) >= (std::uint64_t(plan.freq[sym[l]]) << 20) ? 1u : 0u) << l;
  }
  std::uint64_t at = *top;
  for (std::uint32_t p = push; p != 0;) {
    const unsigned l = format::highest_bit(p);
    p &= ~(1u << l);
    if (at < plan.stream_at + 2) return false;
    at -= 2;
    store_le<std::uint16_t>(out + at, static_cast<std::uint16_t>(xs[l] & 0xFFFFu));
    xs[l] >>= 16;
  }
  for (unsigned l = 0; l < lanes; ++l) {
    std::uint32_t q, r;
    div[sym[l]].divide(xs[l], &q, &r);
    x[l] = (q << rans::prob_bits) + r + plan.cum[sym[l]];
  }
  *top = at;
  return true;
}

// Codes one group of `lanes` elements at `in` (code_rans_lanes), writing the group's rest
// sections at bytes and words (fp32), one rest per lane. False when the stream would reach below
// plan.stream_at.
template <class E>
ZIPCCL_HOST_DEVICE bool encode_rans_group(const rans_plan& plan, const rans::divisor* div, const std::uint8_t* in,
                                          unsigned lanes, std::uint32_t* x, std::uint64_t* top, std::uint8_t* words,
                                          std::uint8_t* bytes, std::uint8_t* out) {
  using S = rans::split<E>;
  using bits_type = typename E::bits_type;
  std::uint32_t sym[rans::lanes];
  for (unsigned l = 0; l < lanes; ++l) {
    const bits_type v = load_le<bits_type>(in + l * sizeof(bits_type));
    sym[l] = S::symbol(v);
    bytes[l] = static_cast<std::uint8_t>(S::byte(v));
    if constexpr (S::word_bytes != 0) store_le<std::uint16_t>(words + 2 * l, static_cast<std::uint16_t>(S::word(v)));
  }
  return code_rans_lanes(plan, div, sym, lanes, x, top, out);
}

// The same for a body with zero symbols (plan.zero): the group's zeros take their symbols and no
// rest; the others' rests go, in lane order, just below rest index *rest (one past the group's
// last rest), which moves down past them. words and bytes are the sections' starts.
template <class E>
ZIPCCL_HOST_DEVICE bool encode_rans_group_zeros(const rans_plan& plan, const rans::divisor* div, const std::uint8_t* in,
                                                unsigned lanes, std::uint32_t* x, std::uint64_t* top,
                                                std::uint8_t* words, std::uint8_t* bytes, std::uint64_t* rest,
                                                std::uint8_t* out) {
  using S = rans::split<E>;
  using bits_type = typename E::bits_type;
  std::uint32_t sym[rans::lanes];
  bits_type v[rans::lanes];
  unsigned live = 0;
  for (unsigned l = 0; l < lanes; ++l) {
    v[l] = load_le<bits_type>(in + l * sizeof(bits_type));
    sym[l] = S::symbol(v[l], plan.zero);
    live += S::is_zero(v[l]) ? 0u : 1u;
  }
  std::uint64_t k = *rest - live;
  *rest = k;
  for (unsigned l = 0; l < lanes; ++l) {
    if (S::is_zero(v[l])) continue;
    bytes[k] = static_cast<std::uint8_t>(S::byte(v[l]));
    if constexpr (S::word_bytes != 0) store_le<std::uint16_t>(words + 2 * k, static_cast<std::uint16_t>(S::word(v[l])));
    ++k;
  }
  return code_rans_lanes(plan, div, sym, lanes, x, top, out);
}

// Encodes one chunk of m elements with rANS (codec/rans.hpp) into out, which must hold
// stored_bytes(m); the body per `shape`. Falls back to a stored body when the rANS body would not
// be strictly smaller. Returns the chunk's size.
template <class E>
ZIPCCL_HOST_DEVICE std::uint64_t encode_rans_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal,
                                                   std::uint8_t* out, const body_shape& shape) {
  using L = format::chunk_layout<E>;
  using RL = rans::layout<E>;
  rans_plan plan;
  if (!plan_rans_chunk<E>(in, m, shape, &plan)) return write_stored_chunk<E>(in, m, seal, out, shape);
  const std::uint64_t base = shape.base, nsym = plan.nsym;
  rans::divisor div[rans::symbols];
  for (unsigned k = 0; k < rans::symbols; ++k) div[k] = rans::divisor::of(plan.freq[k]);
  // words are pushed downwards from plan.cap (the decoder reads them upwards) and moved into
  // place at the end
  std::uint64_t top = plan.cap;
  std::uint8_t* words = out + RL::words_offset(base, nsym);
  std::uint8_t* bytes = out + RL::bytes_offset(plan.rests, base, nsym);
  std::uint32_t x[rans::lanes];
  for (unsigned l = 0; l < rans::lanes; ++l) x[l] = rans::state_low;
  // backwards over the body (lane l of a body group is lane l of its chunk group)
  std::uint64_t at = plan.rests;  // one past the rest of the body group's last element
  for (std::uint64_t g = (m + format::group_elems - 1) / format::group_elems; g-- > 0;) {
    if (in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    bool fits;
    if (plan.zero.on) {
      fits = encode_rans_group_zeros<E>(plan, div, in + first * L::elem_size, lanes, x, &top, words, bytes, &at, out);
    } else {
      at -= lanes;
      fits = encode_rans_group<E>(plan, div, in + first * L::elem_size, lanes, x, &top,
                                  words + at * rans::split<E>::word_bytes, bytes + at, out);
    }
    if (!fits) return write_stored_chunk<E>(in, m, seal, out, shape);
  }
  return seal_rans_chunk<E>(plan, x, top, seal, out, shape);
}

// The whole reference encoder for one chunk: its shape (zero mask or not), the policy's table
// over the body, the body coded or stored. Returns the chunk's size.
template <class E, class Policy>
ZIPCCL_HOST_DEVICE std::uint64_t code_chunk(const Policy& policy, const std::uint8_t* in, std::uint64_t m,
                                            format::chunk_seal seal, bool zero_masks, std::uint8_t* out) {
  const body_shape shape = plan_body<E>(in, m, zero_masks, out);
  if constexpr (Policy::stat == codebook::statistic::symbol_counts) {
    (void)policy;
    return encode_rans_chunk<E>(in, m, seal, out, shape);
  } else {
    const codebook::table t = choose_table<E>(policy, in, m, shape);
    return encode_chunk<E>(in, m, t, seal, out, shape);
  }
}

// The zero symbols a rANS chunk header names (none outside modes 12 and 14).
ZIPCCL_HOST_DEVICE rans::zero_symbols header_zero_symbols(const format::chunk_header& r) {
  return rans::header_zero_symbols(r.table, format::mode_has_zero_symbols(r.mode));
}

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

// The refill of a decoded group's states: the lanes of `low` (bit l: state l fell below
// rans::state_low), in lane order, each take the next 16-bit word of the stream, from word *next
// on, which moves past them. False, *next unchanged, when the stream's n_words run out first.
ZIPCCL_HOST_DEVICE bool rans_refill(std::uint32_t* xs, std::uint32_t low, const std::uint8_t* stream,
                                    std::uint64_t n_words, std::uint64_t* next) {
  std::uint64_t k = *next;
  for (; low != 0; low &= low - 1) {
    if (k == n_words) return false;
    const unsigned l = format::lowest_bit(low);
    xs[l] = (xs[l] << 16) | load_le<std::uint16_t>(stream + 2 * k++);
  }
  *next = k;
  return true;
}

// Decodes one group of `lanes` elements of a rANS body from the lanes' states x and the group's
// rest sections at bytes and words (fp32) into out, taking stream words from stream[*next] on
// (n_words in all). The lanes' steps are independent; only their words come in lane order, so
// decode all lanes first and then hand the words to the lanes that fell below 2^16. False when
// the stream runs out.
template <class E>
ZIPCCL_HOST_DEVICE bool decode_rans_group(const rans::decode_table& t, unsigned lanes, std::uint32_t* x,
                                          const std::uint8_t* words, const std::uint8_t* bytes,
                                          const std::uint8_t* stream, std::uint64_t n_words, std::uint64_t* next,
                                          std::uint8_t* out) {
  using S = rans::split<E>;
  // the states in a local copy, which the byte stores to out cannot alias
  std::uint32_t xs[rans::lanes], low = 0;
  for (unsigned l = 0; l < lanes; ++l) xs[l] = x[l];
  for (unsigned l = 0; l < lanes; ++l) {
    const std::uint32_t sym = rans::decode_step(t, &xs[l]);
    low |= (xs[l] < rans::state_low ? 1u : 0u) << l;
    const std::uint32_t word = S::word_bytes ? load_le<std::uint16_t>(words + 2 * l) : 0u;
    store_le<typename E::bits_type>(out + l * sizeof(typename E::bits_type), S::join(sym, bytes[l], word));
  }
  if (!rans_refill(xs, low, stream, n_words, next)) return false;
  for (unsigned l = 0; l < lanes; ++l) x[l] = xs[l];
  return true;
}

// The same for a body with zero symbols z: lanes that decode z.pos or z.neg are +0.0 or -0.0 and
// take no rest; the others take the rests from rest index *rest on, in lane order, of `rests` in
// all. False when the stream or the rests run out.
template <class E>
ZIPCCL_HOST_DEVICE bool decode_rans_group_zeros(const rans::decode_table& t, const rans::zero_symbols& z, unsigned lanes,
                                                std::uint32_t* x, const std::uint8_t* words, const std::uint8_t* bytes,
                                                std::uint64_t* rest, std::uint64_t rests, const std::uint8_t* stream,
                                                std::uint64_t n_words, std::uint64_t* next, std::uint8_t* out) {
  using S = rans::split<E>;
  using bits_type = typename E::bits_type;
  std::uint32_t xs[rans::lanes], low = 0;
  std::uint64_t k = *rest;
  for (unsigned l = 0; l < lanes; ++l) xs[l] = x[l];
  for (unsigned l = 0; l < lanes; ++l) {
    const std::uint32_t sym = rans::decode_step(t, &xs[l]);
    low |= (xs[l] < rans::state_low ? 1u : 0u) << l;
    bits_type v;
    if (sym == z.pos) {
      v = 0;
    } else if (sym == z.neg) {
      v = S::negative_zero;
    } else {
      if (k == rests) return false;
      const std::uint32_t word = S::word_bytes ? load_le<std::uint16_t>(words + 2 * k) : 0u;
      v = S::join(sym, bytes[k], word);
      ++k;
    }
    store_le<bits_type>(out + l * sizeof(bits_type), v);
  }
  if (!rans_refill(xs, low, stream, n_words, next)) return false;
  for (unsigned l = 0; l < lanes; ++l) x[l] = xs[l];
  *rest = k;
  return true;
}

// A rANS body's sections, from the header of a chunk that passed check_chunk: its zero symbols,
// rests, symbol count and stream words, and where its table, states, rest words, rest bytes and
// stream start. Every rANS decoder starts from it.
template <class E>
struct rans_sections {
  rans::zero_symbols zero;
  std::uint64_t rests = 0, nsym = 0, n_words = 0;
  const std::uint8_t *table = nullptr, *states = nullptr, *words = nullptr, *bytes = nullptr, *stream = nullptr;
  ZIPCCL_HOST_DEVICE rans_sections(const std::uint8_t* chunk, const format::chunk_header& h, const body_shape& body)
      : zero(header_zero_symbols(h)), rests(rans::rests_of(body.elems, zero)), nsym(h.table[0] + 1u), n_words(h.escapes) {
    using RL = rans::layout<E>;
    table = chunk + RL::table_offset(body.base);
    states = chunk + RL::states_offset(body.base, nsym);
    words = chunk + RL::words_offset(body.base, nsym);
    bytes = chunk + RL::bytes_offset(rests, body.base, nsym);
    stream = chunk + RL::stream_offset(rests, body.base, nsym);
  }
  // The table's rules (rans::table_ok) and, when they hold, the decoder's table and the 32 states.
  ZIPCCL_HOST_DEVICE bool start(rans::decode_table* t, std::uint32_t* x) const {
    if (!rans::table_ok(table, nsym, zero)) return false;
    rans::read_table(table, t);
    for (unsigned l = 0; l < rans::lanes; ++l) x[l] = load_le<std::uint32_t>(states + 4 * l);
    return true;
  }
};

// Decodes the rANS body of a chunk that passed check_chunk (codec/rans.hpp). Every stream word
// is read at most once and inside the chunk (check_chunk_header bounds the word count by the
// span); a table that breaks its rules, a stream that runs out or is left over, or a lane that
// does not end at 2^16 is corrupt.
template <class E>
ZIPCCL_HOST_DEVICE status decode_rans_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                                           const body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const rans_sections<E> sec(chunk, h, body);
  const rans::zero_symbols& z = sec.zero;
  const std::uint64_t rests = sec.rests, n_words = sec.n_words;
  const std::uint8_t *words = sec.words, *bytes = sec.bytes, *stream = sec.stream;
  rans::decode_table t;
  std::uint32_t x[rans::lanes];
  if (!sec.start(&t, x)) return status::corrupt;
  std::uint64_t next = 0, j = 0;  // the next stream word; the next rest
  for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (in_zero_group(body, g)) {
      store_zeros<E>(out + first * L::elem_size, lanes);
      continue;
    }
    if (z.on) {
      if (!decode_rans_group_zeros<E>(t, z, lanes, x, words, bytes, &j, rests, stream, n_words, &next,
                                      out + first * L::elem_size))
        return status::corrupt;
      continue;
    }
    if (!decode_rans_group<E>(t, lanes, x, words + j * rans::split<E>::word_bytes, bytes + j, stream, n_words, &next,
                              out + first * L::elem_size))
      return status::corrupt;
    j += lanes;
  }
  // every rest used (with zero symbols: so exactly z.count zeros decoded) and every word read
  if (j != rests || next != n_words) return status::corrupt;
  for (unsigned l = 0; l < rans::lanes; ++l)
    if (x[l] != rans::state_low) return status::corrupt;
  return status::success;
}

// Decodes one validated-span chunk of m elements into out (m elements, any alignment).
template <class E>
ZIPCCL_HOST_DEVICE status decode_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m,
                                       format::chunk_seal seal, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  using G = group_coder<E>;
  format::chunk_header h;
  body_shape body;
  const status st = check_chunk<E>(chunk, span, m, seal, &h, &body);
  if (st != status::success) return st;
  if (format::mode_is_stored(h.mode)) {
    decode_stored_body<E>(chunk, m, body, out);
    return status::success;
  }
  if (format::mode_is_rans(h.mode)) {
#if defined(__CUDA_ARCH__)
    // not in one device thread: its 16 KiB slot table would sit in local memory. The device
    // decodes rANS in cuda::block_decode<E, Threads, true> (one warp of a block per chunk), which
    // cuda::decompress uses, or with tuning<..., RansWarps > 0> in cuda/detail/warp_rans.cuh
    // (every warp a chunk of its own).
    return rans::table_ok(chunk + rans::layout<E>::table_offset(body.base), h.table[0] + 1u, header_zero_symbols(h))
               ? status::unsupported_mode
               : status::corrupt;
#else
    return decode_rans_body<E>(chunk, m, h, body, out);
#endif
  }
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
