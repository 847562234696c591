// zipccl: the rANS body of the rans and zero_rans chunk modes (codebook::entropy), shared by
// every executor. docs/FORMAT.md ("rANS chunk") is the normative description.
//
// Each element splits into an 8-bit symbol, entropy coded, and a rest that travels raw:
//   bf16  symbol = exponent field (bits 7..14)     rest byte = sign << 7 | mantissa
//   fp16  symbol = high byte (sign, exponent, mantissa bits 9..8)   rest byte = low byte
//   fp32  symbol = exponent field (bits 23..30)    rest word = bits 0..15, rest byte = bits 16..22
//                                                   and the sign in bit 7
// Body of b elements at `base`:
//   table: 32-byte symbol bitmap, then a u16 frequency per symbol present, ascending (each
//   1..4096, sum 4096), zeros to 16 bytes | states: 32 x u32 | words (fp32: b x u16) | bytes (b) |
//   stream: W x u16
// The table and states come first so that the chunk check covers them even without the checksum
// flag (as it covers a 3-bit chunk's table in its header).
// Element i of the body belongs to lane i % 32. A decoder starts lane l at states[l] and walks the
// elements in order: slot = x & 4095, the symbol s whose [cum, cum + freq) holds slot,
// x = freq * (x >> 12) + slot - cum, and when x < 2^16 it shifts in the next stream word. After the
// last element every lane's state is 2^16 and every word has been read; anything else is corrupt.
// At most one word per element is read, so lanes that renormalise in the same step of 32 take
// consecutive words in lane order, which a vector unit or a warp does in one step.
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
  while (sum > prob_total) {  // at most 255 rounds: only symbols rounded up to 1 overshoot
    unsigned big = 0;
    for (unsigned s = 1; s < symbols; ++s)
      if (freq[s] > freq[big]) big = s;
    --freq[big];
    --sum;
  }
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
// bits, every frequency 1..4096, their sum 4096, zero padding, every state at least 2^16. Every
// decoder checks these before it decodes (a device decoder built without rANS checks them before
// it reports unsupported_mode).
ZIPCCL_HOST_DEVICE bool table_ok(const std::uint8_t* p, std::uint64_t nsym) {
  std::uint64_t bits = 0, sum = 0;
  for (std::uint64_t i = 0; i < bitmap_bytes; ++i) bits += format::popcount8(p[i]);
  if (bits != nsym) return false;
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

}  // namespace zipccl::codec_detail::rans
