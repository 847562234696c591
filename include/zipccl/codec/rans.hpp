// zipccl: the rANS body of the rans and zero_rans chunk modes (codebook::entropy), shared by
// every executor. docs/format.md ("rANS chunk") is the normative description.
//
// Each element splits into an 8-bit symbol, entropy coded, and a rest that travels raw:
//   bf16  symbol = exponent field (bits 7..14)     rest byte = sign << 7 | mantissa
//   fp16  symbol = high byte (sign, exponent, mantissa bits 9..8)   rest byte = low byte
//   fp32  symbol = exponent field (bits 23..30)    rest word = bits 0..15, rest byte = bits 16..22
//                                                   and the sign in bit 7
// Body of b elements at `base`:
//   table: 32-byte symbol bitmap, then a u16 frequency per symbol present, ascending (each
//   1..4096, sum 4096), zeros to 16 bytes | states: 32 x u32 | words (fp32: r x u16) | bytes (r) |
//   stream: W x u16, for r rests (b, or b - z with zero symbols, below)
// The table and states come first so that the chunk check covers them even without the checksum
// flag (as it covers a 3-bit chunk's table in its header).
// Element i of the body belongs to lane i % 32. A decoder starts lane l at states[l] and walks the
// elements in order: slot = x & 4095, the symbol s whose [cum, cum + freq) holds slot,
// x = freq * (x >> 12) + slot - cum, and when x < 2^16 it shifts in the next stream word. After the
// last element every lane's state is 2^16 and every word has been read; anything else is corrupt.
// At most one word per element is read, so lanes that renormalise in the same step of 32 take
// consecutive words in lane order, which a vector unit or a warp does in one step.
//
// Zero symbols (modes 12 and 14, stream version 3): when enough of a body's elements are +0.0 or
// -0.0 (zeros_pay), the encoder codes them as two symbols of their own, `zp` (+0)
// and `zn` (-0): the two smallest symbol values that no other element of the body has. They have
// no rest: the rest sections hold the other elements' rests only, in element order. The header's
// table bytes 1 and 2 name zp and zn, bytes 3..6 hold the zero count z (u32), and the sections
// are sized for b - z rests.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/layout.hpp"
#include "../format/zero_mask.hpp"

namespace zipccl::codec_detail::rans {

using format::load_le;
using format::store_le;

inline constexpr unsigned prob_bits = 12;
inline constexpr std::uint32_t prob_total = 1u << prob_bits;   // frequencies sum to 4096
inline constexpr std::uint32_t state_low = 1u << 16;           // states live in [2^16, 2^32)
inline constexpr unsigned lanes = 32;
inline constexpr unsigned symbols = 256;
inline constexpr std::uint64_t bitmap_bytes = symbols / 8;
inline constexpr std::uint64_t states_bytes = 4 * lanes;

// The zero symbols of a body (zero_symbols::on) or none.
struct zero_symbols {
  bool on = false;
  std::uint32_t pos = 0, neg = 0;  // the symbols of +0.0 and -0.0
  std::uint64_t count = 0;         // elements that are +0.0 or -0.0
};

// A body of b elements uses zero symbols when at least min_zero_elems of them, and at least
// b / zero_share_den, are zeros (and two symbol values are free). A zero then costs at most
// log2(64) + 1 bits of symbol against the 8 bits (fp32: 24) of rest it no longer carries, and at
// least 64 of them pay for the two table entries (up to 16 bytes) and the padding. With fewer, the
// zeros' own symbols (fp16: 0x00 and 0x80, shared with the subnormals) can cost less than the
// rare zero symbols.
inline constexpr std::uint64_t min_zero_elems = 64;
inline constexpr std::uint64_t zero_share_den = 64;

// Whether z zeros in a body of b elements are enough for zero symbols (before the free values).
ZIPCCL_HOST_DEVICE constexpr bool zeros_pay(std::uint64_t z, std::uint64_t b) {
  return z >= min_zero_elems && z * zero_share_den >= b;
}

// Sampled counts (fp16 bodies of at least sample_min_elems elements): the table's counts of the
// symbols other than 0x00 and 0x80 come from the body's groups of 32 whose index in the chunk is a
// multiple of sample_every (every fifth: an odd stride, so that rows of a power-of-two number of
// groups are sampled in every column), scaled up; a symbol that only the other groups use counts
// 1, so every symbol of the body keeps a frequency. 0x00 and 0x80, the symbols of +0.0 and -0.0
// and of the subnormals, are counted in full, as choose_zero_symbols takes the zeros out of them.
// fp16's symbols (its elements' high bytes) fill no byte-compare window of fourteen or sixteen to
// be counted in (bf16 and fp32 do: host/detail/avx*_rans.hpp's count_symbols): a full histogram
// is a large share of the host's fp16 compression, and the sample costs little of the ratio
// (docs/design.md, "fp16's sampled counts"). bf16, fp32 and smaller bodies count every element.
inline constexpr std::uint64_t sample_min_elems = 32768;
inline constexpr std::uint64_t sample_every = 5;

template <class E>
ZIPCCL_HOST_DEVICE constexpr bool samples_counts(std::uint64_t b) {
  return std::is_same_v<E, fp16> && b >= sample_min_elems;
}

// Whether the body's counts sample group g (the chunk's g-th group of 32 elements).
ZIPCCL_HOST_DEVICE constexpr bool sampled_group(std::uint64_t g) { return g % sample_every == 0; }

// The counts of a sampling body of b elements (samples_counts), in counts: on entry counts[0x00]
// and counts[0x80] hold those symbols' counts over the whole body and every other counts[s] is
// nonzero exactly where some element of the body has symbol s; `sampled` holds the counts over the
// sampled groups. Each other symbol that the sample saw gets its sampled count scaled to the body's
// elements outside 0x00 and 0x80 (rounded down; at least its sampled count, so at least 1), the
// others present 1.
ZIPCCL_HOST_DEVICE void counts_from_sample(const std::uint32_t* sampled, std::uint32_t* counts, std::uint64_t b) {
  constexpr unsigned zp = 0x00, zn = 0x80;
  const std::uint64_t full = b - counts[zp] - counts[zn];
  std::uint64_t n = 0;
  for (unsigned s = 0; s < symbols; ++s) n += (s == zp || s == zn) ? 0u : sampled[s];
  for (unsigned s = 0; s < symbols; ++s) {
    if (s == zp || s == zn) continue;
    counts[s] = sampled[s] != 0 ? static_cast<std::uint32_t>(std::uint64_t(sampled[s]) * full / n)
                                : (counts[s] != 0 ? 1u : 0u);
  }
}

// The fewest rests a body with zero symbols keeps in a chunk of m elements whose body starts at
// `base`, so that the chunk never comes out smaller than a chunk header and the room of a zero
// mask (16 + zero_mask_bytes(m)), the part of every chunk that the collectives' wire sends in its
// fixed section. Above zero only past 90,112-element chunks without a mask (a chunk with zero symbols
// is at least its header, a 48-byte table and the states: 192 bytes).
template <class E>
ZIPCCL_HOST_DEVICE constexpr std::uint64_t min_zero_rests(std::uint64_t m, std::uint64_t base) {
  const std::uint64_t need = format::body_offset(m, true), have = base + 48 + 128;
  const std::uint64_t per = 1 + (sizeof(typename E::bits_type) == 4 ? 2 : 0);
  return have >= need ? 0 : (need - have + per - 1) / per;
}

// The rule every encoder follows: from the symbol counts of all b elements of a body and its
// numbers of +0.0 and -0.0 elements, the zero symbols, and the counts the table is normalised
// from (the zeros moved from their own symbols to zp and zn). Without zeros_pay, or with fewer than
// two symbol values unused by the other elements, none, and counts unchanged.
// min_rests: min_zero_rests of the chunk (fewer rests: none).
template <class E>
ZIPCCL_HOST_DEVICE zero_symbols choose_zero_symbols(std::uint32_t* counts, std::uint64_t b, std::uint64_t n_pos,
                                                    std::uint64_t n_neg, std::uint64_t min_rests);

// The split of an element into symbol and rest, per type.
template <class E>
struct split {
  using bits_type = typename E::bits_type;
  static constexpr unsigned word_bytes = std::is_same_v<E, fp32> ? 2 : 0;
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t symbol(bits_type b) {
    if constexpr (std::is_same_v<E, fp16>) return static_cast<std::uint32_t>(b) >> 8;
    else return E::exponent(b);
  }
  // The rest byte (bf16, fp16: all of the rest; fp32: bits 16..22 of the mantissa and the sign).
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t byte(bits_type b) {
    if constexpr (std::is_same_v<E, fp16>) return static_cast<std::uint32_t>(b) & 0xFFu;
    else if constexpr (std::is_same_v<E, bf16>) return ((static_cast<std::uint32_t>(b) >> 8) & 0x80u) | (b & 0x7Fu);
    else return ((static_cast<std::uint32_t>(b) >> 24) & 0x80u) | ((static_cast<std::uint32_t>(b) >> 16) & 0x7Fu);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t word(bits_type b) { return static_cast<std::uint32_t>(b) & 0xFFFFu; }
  // -0.0 (+0.0 is all zero bits), and the symbols the two have as ordinary elements.
  static constexpr bits_type negative_zero = static_cast<bits_type>(bits_type(1) << (E::total_bits - 1));
  static constexpr std::uint32_t pos_zero_symbol = 0;
  static constexpr std::uint32_t neg_zero_symbol = std::is_same_v<E, fp16> ? 0x80u : 0u;
  // An element's symbol in a body with zero symbols z.
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t symbol(bits_type b, const zero_symbols& z) {
    return b == 0 ? z.pos : b == negative_zero ? z.neg : symbol(b);
  }
  ZIPCCL_HOST_DEVICE static constexpr bool is_zero(bits_type b) { return b == 0 || b == negative_zero; }
  ZIPCCL_HOST_DEVICE static constexpr bits_type join(std::uint32_t sym, std::uint32_t byte, std::uint32_t word) {
    if constexpr (std::is_same_v<E, fp16>) return static_cast<bits_type>((sym << 8) | byte);
    else if constexpr (std::is_same_v<E, bf16>)
      return static_cast<bits_type>(((byte & 0x80u) << 8) | (sym << 7) | (byte & 0x7Fu));
    else return static_cast<bits_type>(((byte & 0x80u) << 24) | (sym << 23) | ((byte & 0x7Fu) << 16) | word);
  }
};

// Section offsets of a body of b elements at `base` with `nsym` symbols and `words` stream words.
// The table's bytes (padding included), and the end of the table and states: the chunk check
// always covers the bytes before it.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t table_bytes(std::uint64_t nsym) {
  return format::align_up(bitmap_bytes + 2 * nsym, format::alignment);
}
ZIPCCL_HOST_DEVICE constexpr std::uint64_t prefix_end(std::uint64_t base, std::uint64_t nsym) {
  return base + table_bytes(nsym) + states_bytes;
}

// The sections after them, for a body with `b` rests: its elements, less its zeros when it has
// zero symbols (rests_of).
template <class E>
struct layout {
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t table_offset(std::uint64_t base) { return base; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t states_offset(std::uint64_t base, std::uint64_t nsym) {
    return base + table_bytes(nsym);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t words_offset(std::uint64_t base, std::uint64_t nsym) {
    return prefix_end(base, nsym);
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t bytes_offset(std::uint64_t b, std::uint64_t base,
                                                                 std::uint64_t nsym) {
    return words_offset(base, nsym) + b * split<E>::word_bytes;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t stream_offset(std::uint64_t b, std::uint64_t base,
                                                                  std::uint64_t nsym) {
    return bytes_offset(b, base, nsym) + b;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t content_end(std::uint64_t b, std::uint64_t base,
                                                                std::uint64_t nsym, std::uint64_t words) {
    return stream_offset(b, base, nsym) + 2 * words;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t chunk_bytes(std::uint64_t b, std::uint64_t base,
                                                                std::uint64_t nsym, std::uint64_t words) {
    return format::align_up(content_end(b, base, nsym, words), format::alignment);
  }
};

// The rests of a body of `elems` elements with zero symbols z.
ZIPCCL_HOST_DEVICE constexpr std::uint64_t rests_of(std::uint64_t elems, const zero_symbols& z) {
  return z.on ? elems - z.count : elems;
}

// Frequencies from symbol counts over b >= 1 elements: every present symbol gets at least 1, the
// rest in proportion (rounded down); the shortfall goes to the most frequent symbol (ties: the
// smaller), an excess is taken one by one from the largest frequency (ties: the smaller symbol).
// Integer arithmetic only, so every executor computes the same table.
ZIPCCL_HOST_DEVICE void normalize(const std::uint32_t* counts, std::uint64_t b, std::uint32_t* freq) {
  std::int64_t sum = 0;
  unsigned top = 0;
  for (unsigned s = 0; s < symbols; ++s) {
    const std::uint64_t f = counts[s] == 0 ? 0 : (std::uint64_t(counts[s]) * prob_total) / b;
    freq[s] = counts[s] == 0 ? 0u : (f == 0 ? 1u : static_cast<std::uint32_t>(f));
    sum += freq[s];
    if (counts[s] > counts[top]) top = s;
  }
  if (sum < prob_total) freq[top] += static_cast<std::uint32_t>(prob_total - sum);
  if (sum <= prob_total) return;
  // The excess (at most 255: only symbols rounded up to 1 overshoot), taken one by one from the
  // largest frequency, first brings every frequency above some level L down to L and then takes
  // one from each of the first r frequencies at L in symbol order; L is the lowest level whose
  // cost (the frequencies' sum above it) the excess covers. Found by bisection between the largest
  // frequency less the excess less one (whose cost, that frequency's alone, passes the excess)
  // and the largest, it makes the same table as the one-by-one rule (test_codebook.cpp compares
  // them) in at most eight rounds over the table, not up to 255.
  const std::uint64_t excess = static_cast<std::uint64_t>(sum - prob_total);
  const auto cost = [&](std::uint32_t level) {
    std::uint64_t c = 0;
    for (unsigned s = 0; s < symbols; ++s) c += freq[s] > level ? freq[s] - level : 0u;
    return c;
  };
  std::uint32_t big = 0;
  for (unsigned s = 0; s < symbols; ++s) big = freq[s] > big ? freq[s] : big;
  // cost(lo) > excess >= cost(hi)
  std::uint32_t hi = big, lo = big > excess + 1 ? big - static_cast<std::uint32_t>(excess) - 1u : 0u;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    (cost(mid) <= excess ? hi : lo) = mid;
  }
  std::uint64_t r = excess - cost(hi);
  for (unsigned s = 0; s < symbols; ++s) freq[s] = freq[s] > hi ? hi : freq[s];
  for (unsigned s = 0; s < symbols && r > 0; ++s)
    if (freq[s] == hi) --freq[s], --r;
}

// The decoder's view of a table: one word per slot, so a decoding step is one lookup:
// bits 0..7 the symbol, bits 8..19 the slot's offset in its symbol's range (slot - cum), bits
// 20..31 the symbol's frequency less one.
struct decode_table {
  std::uint32_t slot[prob_total];
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t symbol(std::uint32_t e) { return e & 0xFFu; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t offset(std::uint32_t e) { return (e >> 8) & 0xFFFu; }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t freq(std::uint32_t e) { return (e >> 20) + 1u; }
};

// One decoding step of state x: the symbol, and x advanced past it (before renormalisation).
ZIPCCL_HOST_DEVICE std::uint32_t decode_step(const decode_table& t, std::uint32_t* x) {
  const std::uint32_t e = t.slot[*x & (prob_total - 1u)];
  *x = decode_table::freq(e) * (*x >> prob_bits) + decode_table::offset(e);
  return decode_table::symbol(e);
}

// The rules of a table at p with nsym symbols and of the 32 states after it: exactly nsym bitmap
// bits, every frequency 1..4096, their sum 4096, zero padding, every state at least 2^16; with
// zero symbols z (the header's), what the table can show of choose_zero_symbols's choice: every
// value below z.neg but z.pos is a symbol of the table (in use). (Whether z.pos or z.neg is also a
// value the other elements use, the table cannot tell.) Every decoder checks these before
// it decodes (a device decoder built without rANS checks them before it reports
// unsupported_mode).
ZIPCCL_HOST_DEVICE bool table_ok(const std::uint8_t* p, std::uint64_t nsym, const zero_symbols& z) {
  std::uint64_t bits = 0, sum = 0;
  for (std::uint64_t i = 0; i < bitmap_bytes; ++i) bits += format::popcount8(p[i]);
  if (bits != nsym) return false;
  if (z.on)
    for (unsigned v = 0; v < z.neg && v < symbols; ++v)
      if (v != z.pos && !((p[v / 8] >> (v % 8)) & 1u)) return false;
  for (std::uint64_t k = 0; k < nsym; ++k) {
    const std::uint32_t f = load_le<std::uint16_t>(p + bitmap_bytes + 2 * k);
    if (f == 0 || f > prob_total) return false;
    sum += f;
  }
  if (sum != prob_total) return false;
  for (std::uint64_t i = bitmap_bytes + 2 * nsym; i < table_bytes(nsym); ++i)
    if (p[i] != 0) return false;
  const std::uint8_t* states = p + table_bytes(nsym);
  for (unsigned l = 0; l < lanes; ++l)
    if (load_le<std::uint32_t>(states + 4 * l) < state_low) return false;
  return true;
}

// table_ok() split over 32 lanes, as the device decoders check a table with one warp: lane l's
// share of the rules (bitmap byte l, the values l, l + 32, ... below z.neg, the frequencies l,
// l + 32, ..., the padding bytes l, l + 32, ..., state l), the bits it counts and the frequencies
// it sums. The table passes table_ok() exactly when every lane's share is ok, the bits add up to
// nsym and the sums to 4096.
struct table_share {
  bool ok = true;
  std::uint32_t bits = 0, sum = 0;
};
ZIPCCL_HOST_DEVICE table_share table_lane_share(const std::uint8_t* p, std::uint64_t nsym, const zero_symbols& z,
                                                unsigned l) {
  static_assert(bitmap_bytes == lanes && states_bytes == 4 * lanes, "one bitmap byte and one state a lane");
  table_share r;
  r.bits = format::popcount8(p[l]);
  if (z.on)
    for (unsigned v = l; v < z.neg && v < symbols; v += lanes)
      if (v != z.pos && !((p[v / 8] >> (v % 8)) & 1u)) r.ok = false;
  for (std::uint64_t k = l; k < nsym; k += lanes) {
    const std::uint32_t f = load_le<std::uint16_t>(p + bitmap_bytes + 2 * k);
    if (f == 0 || f > prob_total) r.ok = false;
    else r.sum += f;
  }
  for (std::uint64_t i = bitmap_bytes + 2 * nsym + l; i < table_bytes(nsym); i += lanes)
    if (p[i] != 0) r.ok = false;
  if (load_le<std::uint32_t>(p + table_bytes(nsym) + 4 * l) < state_low) r.ok = false;
  return r;
}

// Builds the decoder's table from a table at p that passed table_ok().
ZIPCCL_HOST_DEVICE void read_table(const std::uint8_t* p, decode_table* t) {
  std::uint64_t k = 0, cum = 0;
  for (unsigned s = 0; s < symbols; ++s) {
    if (!((p[s / 8] >> (s % 8)) & 1u)) continue;
    const std::uint32_t f = load_le<std::uint16_t>(p + bitmap_bytes + 2 * k++);
    for (std::uint32_t j = 0; j < f; ++j) t->slot[cum + j] = ((f - 1u) << 20) | (j << 8) | s;
    cum += f;
  }
}

// Exact x / f and x % f for x < 2^32 and 1 <= f <= 4096 without a division: inv = ceil(2^32 / f)
// makes (x * inv) >> 32 at most one too large, which the remainder's sign corrects (without a
// branch: the correction is taken at random).
struct divisor {
  std::uint64_t inv = 0;
  std::uint32_t f = 0;
  ZIPCCL_HOST_DEVICE static divisor of(std::uint32_t f) {
    divisor d;
    d.f = f;
    d.inv = f == 0 ? 0 : ((std::uint64_t(1) << 32) + f - 1) / f;
    return d;
  }
  ZIPCCL_HOST_DEVICE void divide(std::uint32_t x, std::uint32_t* q, std::uint32_t* r) const {
    const std::uint32_t qq = static_cast<std::uint32_t>((std::uint64_t(x) * inv) >> 32);
    const std::int64_t rr = static_cast<std::int64_t>(x) - static_cast<std::int64_t>(qq) * f;
    const std::uint32_t over = static_cast<std::uint32_t>(static_cast<std::uint64_t>(rr) >> 63);
    *q = qq - over;
    *r = static_cast<std::uint32_t>(rr + static_cast<std::int64_t>(f) * over);
  }
};

// Writes the table of freq (nsym present symbols) at p, padding included.
ZIPCCL_HOST_DEVICE void write_table(const std::uint32_t* freq, std::uint64_t nsym, std::uint8_t* p) {
  for (std::uint64_t i = 0; i < table_bytes(nsym); ++i) p[i] = 0;
  std::uint64_t k = 0;
  for (unsigned s = 0; s < symbols; ++s) {
    if (freq[s] == 0) continue;
    p[s / 8] = static_cast<std::uint8_t>(p[s / 8] | (1u << (s % 8)));
    store_le<std::uint16_t>(p + bitmap_bytes + 2 * k++, static_cast<std::uint16_t>(freq[s]));
  }
}

template <class E>
ZIPCCL_HOST_DEVICE zero_symbols choose_zero_symbols(std::uint32_t* counts, std::uint64_t b, std::uint64_t n_pos,
                                                    std::uint64_t n_neg, std::uint64_t min_rests) {
  using S = split<E>;
  zero_symbols z;
  if (!zeros_pay(n_pos + n_neg, b) || b - (n_pos + n_neg) < min_rests) return z;
  counts[S::pos_zero_symbol] -= static_cast<std::uint32_t>(n_pos);
  counts[S::neg_zero_symbol] -= static_cast<std::uint32_t>(n_neg);
  unsigned found = 0;
  for (unsigned s = 0; s < symbols && found < 2; ++s) {
    if (counts[s] != 0) continue;
    if (found++ == 0) z.pos = s;
    else z.neg = s;
  }
  if (found < 2) {  // (every symbol value but one in use: keep the plain code)
    counts[S::pos_zero_symbol] += static_cast<std::uint32_t>(n_pos);
    counts[S::neg_zero_symbol] += static_cast<std::uint32_t>(n_neg);
    return zero_symbols{};
  }
  counts[z.pos] = static_cast<std::uint32_t>(n_pos);
  counts[z.neg] = static_cast<std::uint32_t>(n_neg);
  z.on = true;
  z.count = n_pos + n_neg;
  return z;
}

// The zero symbols a rANS chunk header names (modes 12 and 14), or none: table bytes 1 and 2 the
// symbols of +0.0 and -0.0, bytes 3..6 the zero count.
ZIPCCL_HOST_DEVICE zero_symbols header_zero_symbols(const std::uint8_t* table, bool on) {
  zero_symbols z;
  if (!on) return z;
  z.on = true;
  z.pos = table[1];
  z.neg = table[2];
  z.count = std::uint64_t(table[3]) | std::uint64_t(table[4]) << 8 | std::uint64_t(table[5]) << 16 |
            std::uint64_t(table[6]) << 24;
  return z;
}

ZIPCCL_HOST_DEVICE void store_header_zero_symbols(const zero_symbols& z, std::uint8_t* table) {
  if (!z.on) return;
  table[1] = static_cast<std::uint8_t>(z.pos);
  table[2] = static_cast<std::uint8_t>(z.neg);
  for (unsigned i = 0; i < 4; ++i) table[3 + i] = static_cast<std::uint8_t>(z.count >> (8 * i));
}

}  // namespace zipccl::codec_detail::rans
