// zipccl: the rANS chunk (modes rans, zero_rans and their zero-symbol forms; codec/rans.hpp has
// the coder itself), for every executor: the plan, the 32-lane encoder and the reference decoder.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/chunk.hpp"

#include "chunk_body.hpp"
#include "rans.hpp"

namespace zipccl::codec_detail {

using format::load_le;
using format::store_le;

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

// The zero symbols a rANS chunk header names (none outside modes 12 and 14).
ZIPCCL_HOST_DEVICE rans::zero_symbols header_zero_symbols(const format::chunk_header& r) {
  return rans::header_zero_symbols(r.table, format::mode_has_zero_symbols(r.mode));
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

}  // namespace zipccl::codec_detail
