// zipccl: the host rANS group loops that the AVX2 and AVX-512 paths share (avx2_rans.hpp,
// avx512_rans.hpp). Plain C++: no intrinsics, no target flags; the instruction sets live in the
// kernels that the loops take as template parameters.
//
// encode_chunk_with codes one chunk (codec_detail::encode_rans_chunk's bytes), decode_body_with
// decodes the rANS body of a chunk that passed check_chunk (codec_detail::decode_rans_body's values
// and statuses) and decode_pair_with decodes two dense bodies in one loop (true where both decoded
// and ended as decode_body_with requires; on false the caller decodes each alone for its status).
// With them: plan_chunk (the chunk's rANS plan from a kernel's symbol and zero counts),
// encode_table (the encoder's per-symbol entries, which both encoders' kernels read) and the
// read-ahead of the next chunk (read_group_ahead).
//
// The loops walk the chunk's groups, the encoder's from the last, the decoder's from the first,
// and hand every full group to the kernel. Short groups, the encoder's groups once the stream
// comes near the rest sections, and the zero-symbol decoder's groups with fewer than 32 rests left
// take the reference's own group functions; a decoder group with fewer than 32 stream words left
// takes the kernel on a zero-padded copy of them (stream_tail). So the bytes, the values and the
// statuses are the reference's wherever a kernel's full group is (test_host_simd compares them).
//
// A kernel offers run (the decoder's also run_pair, and optionally pair_may_pay and pair_pays, and
// group_pair), load and store of the 32 states, and group; an encoder kernel also count and zeros
// for plan_chunk. A group may read up to 32 stream words past its cursor, and the zero-symbol
// kernels up to 32 rests; the encoder's stores may reach 16 bytes below the stream's start.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "read_ahead.hpp"

namespace zipccl::host::detail::rans_loops {

namespace rans = codec_detail::rans;

// The encoders' group loops: the bytes of `ahead` at the offset of a group's first element `first`
// (a group's worth, those inside it), one prefetch a cache line (docs/design.md, "The next
// chunk read ahead"). The loops go down the chunk, so the next chunk comes in from its end.
// Chunks with a zero mask read nothing ahead (ahead_of): their loops visit only the groups outside
// zero groups, so they would bring in only part of the next chunk.
inline read_ahead ahead_of(const codec_detail::body_shape& shape, const read_ahead& ahead) {
  return shape.zero_mask == nullptr ? ahead : read_ahead{};
}
template <class E>
ZIPCCL_ALWAYS_INLINE inline void read_group_ahead(const read_ahead& ahead, std::uint64_t first) {
  constexpr std::uint64_t span = format::group_elems * format::chunk_layout<E>::elem_size;
  const std::uint64_t o = first * format::chunk_layout<E>::elem_size;
  for (std::uint64_t q = 0; q < span && o + q < ahead.bytes; q += 64)
    __builtin_prefetch(ahead.at + o + q, 0, 3);  // (a prefetcht0: the intrinsic's T0 hint)
}

// The encoder's view of the table: per symbol freq | cum << 16 and the reciprocal
// floor(2^32 / freq) (2^32 - 1 for freq 1), with which (x * rcp) >> 32 is x / freq or one less.
struct alignas(64) encode_table {
  std::uint32_t freq_cum[rans::symbols];
  std::uint32_t rcp[rans::symbols];
  // freq_cum | rcp << 32 (the AVX2 kernel's scalar lookups), twice: entry[s] and entry[s + 256],
  // so that bf16 and fp32 index it by sign and exponent (avx2::rans_simd::lookup8: one shift, no
  // mask; in zeros_encode_table's copy, entries 0 and 256 may be zp's and zn's instead)
  std::uint64_t entry[2 * rans::symbols];
  explicit encode_table(const codec_detail::rans_plan& plan) {
    for (unsigned s = 0; s < rans::symbols; ++s) {
      const std::uint32_t f = plan.freq[s];
      freq_cum[s] = f | (plan.cum[s] << 16);
      rcp[s] = f == 0 ? 0u : f == 1 ? 0xFFFFFFFFu : static_cast<std::uint32_t>((std::uint64_t(1) << 32) / f);
      entry[s] = entry[s + rans::symbols] = freq_cum[s] | (std::uint64_t(rcp[s]) << 32);
    }
  }
  // A symbol's frequency for the choice of a window: none for the symbols of skip (zero symbols,
  // which a kernel looks up apart).
  static std::uint32_t weight(const codec_detail::rans_plan& plan, unsigned v, const rans::zero_symbols* skip) {
    return skip != nullptr && skip->on && (v == skip->pos || v == skip->neg) ? 0u : plan.freq[v];
  }
  // The first of the Width consecutive values of 0..n-1 whose weights w(v) sum highest (the first
  // such window). It starts at n - Width at the latest (it reaches past n - 1 only where
  // n < Width), which the AVX-512 encoder's window tests rely on (avx512_rans_encode.hpp,
  // entries32).
  template <unsigned Width, class Weight>
  static unsigned busiest(unsigned n, Weight&& w) {
    std::uint32_t run = 0, best = 0;
    unsigned start = 0;
    for (unsigned v = 0; v < n; ++v) {
      run += w(v);
      if (v >= Width) run -= w(v - Width);
      if (run > best) best = run, start = v >= Width - 1 ? v - (Width - 1) : 0;
    }
    return start;
  }
  // Whether every value of 0..255 with a nonzero weight w(v) falls in the width values from start.
  template <class Weight>
  static bool holds_all(unsigned start, unsigned width, Weight&& w) {
    for (unsigned v = 0; v < rans::symbols; ++v)
      if ((v < start || v >= start + width) && w(v) != 0) return false;
    return true;
  }
  // Whether every symbol of weight (weight()) falls in the Width values from start.
  template <unsigned Width>
  static bool holds_all(const codec_detail::rans_plan& plan, unsigned start, const rans::zero_symbols* skip) {
    return holds_all(start, Width, [&](unsigned v) { return weight(plan, v, skip); });
  }
  // The entries of the Width consecutive symbols that hold the most of the chunk's frequency (the
  // first such window; zeros past symbol 255), for the register lookups; returns its first symbol.
  // With skip, the frequencies of its symbols do not count.
  template <unsigned Width>
  unsigned window(const codec_detail::rans_plan& plan, std::uint32_t* fc, std::uint32_t* r,
                  const rans::zero_symbols* skip = nullptr) const {
    const unsigned start = busiest<Width>(rans::symbols, [&](unsigned v) { return weight(plan, v, skip); });
    for (unsigned i = 0; i < Width; ++i) {
      const unsigned v = start + i;
      fc[i] = v < rans::symbols ? freq_cum[v] : 0u;
      r[i] = v < rans::symbols ? rcp[v] : 0u;
    }
    return start;
  }
};

// codec_detail::plan_rans_chunk with the symbol counts taken by count(in, m, shape, counts): the
// kernel's (avx2::rans_simd's count_symbols for bf16 and fp32, fp16_counts for fp16; on
// AVX-512, avx512::rans_simd::count_symbols and fp16_counts). The zeros are counted, by
// zeros(in, m, shape, &n_pos, &n_neg) (the kernel's: avx2::count_zeros, or
// avx512::rans_simd::count_zeros), only where the counts of their symbols leave room for enough
// of them to give the body zero symbols (rans::zeros_pay).
template <class E, class Count, class Zeros>
inline bool plan_chunk(const std::uint8_t* in, std::uint64_t m, const codec_detail::body_shape& shape,
                       codec_detail::rans_plan* plan, Count&& count, Zeros&& zeros) {
  using S = rans::split<E>;
  if (shape.elems == 0) return false;
  std::uint32_t counts[rans::symbols];
  count(in, m, shape, counts);
  const std::uint64_t could_be_zero =
      counts[S::pos_zero_symbol] + (S::neg_zero_symbol != S::pos_zero_symbol ? counts[S::neg_zero_symbol] : 0u);
  std::uint64_t n_pos = 0, n_neg = 0;
  if (rans::zeros_pay(could_be_zero, shape.elems)) zeros(in, m, shape, &n_pos, &n_neg);
  return codec_detail::finish_rans_plan<E>(counts, n_pos, n_neg, m, shape, plan);
}

// The encoders' hand-over to the reference's group step: for a chunk's short last group, and for
// every group once the stream comes close to the rest sections (a group pushes at most 64 bytes,
// and an AVX2 store may reach 16 bytes below the stream's start; the reference checks every word
// and, where they run out, the chunk is stored, as the reference would store it). The divisors
// are made at the first such group.
struct reference_steps {
  rans::divisor div[rans::symbols];
  bool ready = false;
  static bool needed(const codec_detail::rans_plan& plan, unsigned lanes, std::uint64_t top) {
    return lanes < rans::lanes || top < plan.stream_at + 2 * rans::lanes + 16;
  }
  const rans::divisor* divisors(const codec_detail::rans_plan& plan) {
    if (!ready)
      for (unsigned k = 0; k < rans::symbols; ++k) div[k] = rans::divisor::of(plan.freq[k]);
    ready = true;
    return div;
  }
};

// Encodes one chunk whose plan has zero symbols (codec_detail::encode_rans_chunk's bytes), full
// groups by Kernel (avx2::rans_simd::encode_zeros_kernel, or avx512::rans_simd's on AVX-512).
template <class E, class Kernel>
std::uint64_t encode_zeros_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                 const codec_detail::body_shape& shape, const codec_detail::rans_plan& plan,
                                 const read_ahead& ahead) {
  using L = format::chunk_layout<E>;
  using RL = rans::layout<E>;
  const std::uint64_t base = shape.base, nsym = plan.nsym;
  const encode_table et(plan);
  Kernel kernel(plan, et);
  reference_steps ref;
  std::uint64_t top = plan.cap;
  std::uint8_t* words = out + RL::words_offset(base, nsym);
  std::uint8_t* bytes = out + RL::bytes_offset(plan.rests, base, nsym);
  alignas(64) std::uint32_t x[rans::lanes];
  for (unsigned l = 0; l < rans::lanes; ++l) x[l] = rans::state_low;
  kernel.load(x);
  std::uint64_t at = plan.rests;  // one past the rests of the group being coded
  for (std::uint64_t g = (m + format::group_elems - 1) / format::group_elems; g-- > 0;) {
    if (codec_detail::in_zero_group(shape, g)) continue;
    const std::uint64_t first = g * format::group_elems;
    const unsigned lanes = format::group_lanes(m, g);
    if (reference_steps::needed(plan, lanes, top)) {
      kernel.store(x);
      std::uint64_t t = top, r = at;
      if (!codec_detail::encode_rans_group_zeros<E>(plan, ref.divisors(plan), in + first * L::elem_size, lanes, x, &t, words, bytes, &r,
                                                    out))
        return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
      top = t;
      at = r;
      kernel.load(x);
      continue;
    }
    std::uint64_t t = top, r = at;
    read_group_ahead<E>(ahead, first);
    kernel.group(in + first * L::elem_size, bytes, words, &r, out, &t);
    top = t;
    at = r;
  }
  kernel.store(x);
  return codec_detail::seal_rans_chunk<E>(plan, x, top, seal, out, shape);
}

// The end of a run of kernel turns that starts at group g (a kernel turn) of a body of shape
// `body` with `left` stream words unread: full groups, each with at least 32 words left whatever
// the groups before it take (at most 32 each), up to the next zero group.
ZIPCCL_ALWAYS_INLINE inline std::uint64_t kernel_run_end(const codec_detail::body_shape& body, std::uint64_t m,
                                                         std::uint64_t g, std::uint64_t left) {
  return codec_detail::next_zero_group(body, g + 1, std::min<std::uint64_t>(m / format::group_elems, g + left / rans::lanes));
}

// A body's last stream words, where fewer than 32 are left (`left`, from word `next` on), copied
// and padded with zeros to 32 words. A kernel group reads at most 32 words from its cursor on (the
// AVX2 kernels 16 bytes from up to 24 words on, the AVX-512 ones 64 bytes from the cursor): from
// the stream itself it could read past the chunk's end, from this copy (cursor 0, one copy a
// group) it stays inside. The groups that decode the last words (bf16 takes about five words a
// group, so about its last six) take the kernel this way rather than the reference's slower
// steps. A group that takes more than `left` words
// (a corrupt stream: the reference would run out) ends with its cursor past `left`, which the
// caller tests.
struct stream_tail {
  alignas(64) std::uint8_t words[2 * rans::lanes];
  stream_tail(const std::uint8_t* stream, std::uint64_t next, std::uint64_t left) {
    assert(left < rans::lanes);
    std::memset(words, 0, sizeof words);
    std::memcpy(words, stream + 2 * next, 2 * left);
  }
};

// Decodes the body of a chunk with zero symbols that passed check_chunk (codec_detail::
// decode_rans_body's values and statuses), full groups by Kernel (avx2::rans_simd::
// decode_zeros_kernel, or avx512::rans_simd's on AVX-512).
template <class E, class Kernel>
status decode_zeros_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                         const codec_detail::body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  const codec_detail::rans_sections<E> sec(chunk, h, body);
  const rans::zero_symbols& z = sec.zero;
  const std::uint64_t rests = sec.rests, n_words = sec.n_words;
  const std::uint8_t *words = sec.words, *bytes = sec.bytes, *stream = sec.stream;
  alignas(64) rans::decode_table t;
  alignas(64) std::uint32_t x[rans::lanes];
  if (!sec.start(&t, x)) return status::corrupt;
  // (Kernel::run picks the kernel for the table and runs the loop with it, by value and inlined)
  return Kernel::run(t, z, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    kernel.load(x);
    std::uint64_t next = 0, j = 0;  // the next stream word; the next rest
    for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      if (codec_detail::in_zero_group(body, g)) {
        std::memset(out + first * L::elem_size, 0, lanes * L::elem_size);
        continue;
      }
      // fewer than 32 rests left (or a short group): the reference's steps, which check every
      // word and rest
      std::uint64_t n = next, r = j;
      if (lanes < rans::lanes || rests - j < rans::lanes) {
        kernel.store(x);
        if (!codec_detail::decode_rans_group_zeros<E>(t, z, lanes, x, words, bytes, &r, rests, stream, n_words, &n,
                                                      out + first * L::elem_size))
          return status::corrupt;
        kernel.load(x);
      } else if (n_words - next < rans::lanes) {
        // fewer than 32 words left: the kernel from a copy of them
        const stream_tail last(stream, next, n_words - next);
        std::uint64_t k = 0;
        kernel.group(bytes, words, &r, last.words, &k, out + first * L::elem_size);
        if (k > n_words - next) return status::corrupt;
        n = next + k;
      } else {
        // the run of kernel groups from g on (each takes at most 32 words and 32 rests), in a
        // loop without a call
        const std::uint64_t end = std::min(kernel_run_end(body, m, g, n_words - next), g + (rests - j) / rans::lanes);
        for (;;) {
          kernel.group(bytes, words, &r, stream, &n, out + g * format::group_elems * L::elem_size);
          if (g + 1 == end) break;
          ++g;
        }
      }
      next = n;
      j = r;
    }
    if (j != rests || next != n_words) return status::corrupt;
    kernel.store(x);
    for (unsigned l = 0; l < rans::lanes; ++l)
      if (x[l] != rans::state_low) return status::corrupt;
    return status::success;
  });
}

// Encodes one chunk (codec_detail::encode_rans_chunk's bytes), full groups by Kernel and, in
// bodies with zero symbols, by ZerosKernel (avx2::rans_simd's encode_kernel and
// encode_zeros_kernel, or avx512::rans_simd's on AVX-512).
template <class E, class Kernel, class ZerosKernel>
std::uint64_t encode_chunk_with(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                const codec_detail::body_shape& shape, const read_ahead& ahead) {
  using L = format::chunk_layout<E>;
  using RL = rans::layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  codec_detail::rans_plan plan;
  if (!plan_chunk<E>(in, m, shape, &plan, Kernel::count, Kernel::zeros))
    return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
  const read_ahead next = ahead_of(shape, ahead);
  // a body with zero symbols (rans::zeros_pay)
  if (plan.zero.on) return encode_zeros_chunk<E, ZerosKernel>(in, m, seal, out, shape, plan, next);
  const std::uint64_t b = shape.elems, base = shape.base, nsym = plan.nsym;
  const encode_table et(plan);
  // (Kernel::run picks the kernel for the chunk's plan and runs the loop with it; the kernel by
  // value, a local whose states can stay in registers, which the stores to out cannot alias; the
  // loop inlined, so that it reads this function's locals, not references to them that every
  // store to out would make it reload)
  return Kernel::run(plan, et, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    reference_steps ref;
    std::uint64_t top = plan.cap;
    std::uint8_t* words = out + RL::words_offset(base, nsym);
    std::uint8_t* bytes = out + RL::bytes_offset(b, base, nsym);
    alignas(64) std::uint32_t x[rans::lanes];
    for (unsigned l = 0; l < rans::lanes; ++l) x[l] = rans::state_low;
    kernel.load(x);
    std::uint64_t at = b;
    for (std::uint64_t g = (m + format::group_elems - 1) / format::group_elems; g-- > 0;) {
      if (codec_detail::in_zero_group(shape, g)) continue;
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      at -= lanes;
      if (reference_steps::needed(plan, lanes, top)) {  // (the short last group comes first)
        kernel.store(x);
        std::uint64_t t = top;  // (top itself never has its address taken: it stays in a register)
        if (!codec_detail::encode_rans_group<E>(plan, ref.divisors(plan), in + first * L::elem_size, lanes, x, &t,
                                                words + at * W, bytes + at, out))
          return codec_detail::write_stored_chunk<E>(in, m, seal, out, shape);
        top = t;
        kernel.load(x);
        continue;
      }
      std::uint64_t t = top;
      read_group_ahead<E>(next, first);
      kernel.group(in + first * L::elem_size, bytes + at, words + at * W, out, &t);
      top = t;
    }
    kernel.store(x);
    return codec_detail::seal_rans_chunk<E>(plan, x, top, seal, out, shape);
  });
}

// Who decodes group g of a dense rANS body of m elements with `left` stream words still unread:
// nobody (a zero group's elements are zeros), the reference's steps (a short group), the vector
// kernel from a copy of the last words (fewer than 32 left: tail_group), or the vector kernel.
enum class group_turn { none, zeros, reference, tail, kernel };
ZIPCCL_ALWAYS_INLINE inline group_turn turn_of(const codec_detail::body_shape& body, std::uint64_t m, std::uint64_t g, std::uint64_t left) {
  if (codec_detail::in_zero_group(body, g)) return group_turn::zeros;
  if (format::group_lanes(m, g) < rans::lanes) return group_turn::reference;
  return left < rans::lanes ? group_turn::tail : group_turn::kernel;
}

// A tail turn: a full group of a dense body of sections s by kernel k from a copy of the stream's
// last words (stream_tail), its stream and rest cursors *n and *j advanced. False where it took
// more words than were left (a corrupt stream).
template <class E, class Kernel>
ZIPCCL_ALWAYS_INLINE inline bool tail_group(Kernel& k, const codec_detail::rans_sections<E>& s, std::uint64_t* n,
                                            std::uint64_t* j, std::uint8_t* out) {
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const std::uint64_t left = s.n_words - *n, at = *j;
  const stream_tail last(s.stream, *n, left);
  std::uint64_t taken = 0;
  k.group(s.bytes + at, s.words + at * W, last.words, &taken, out);
  if (taken > left) return false;
  *n += taken, *j = at + rans::lanes;
  return true;
}

// Decodes a dense rANS body (no zero symbols) whose sections are sec, table t and states x (read
// by sec.start), full groups by Kernel: codec_detail::decode_rans_body's values and statuses.
template <class E, class Kernel>
status decode_dense_body(const codec_detail::rans_sections<E>& sec, const rans::decode_table& t, std::uint32_t* x,
                         std::uint64_t m, const codec_detail::body_shape& body, std::uint8_t* out) {
  using L = format::chunk_layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const std::uint64_t n_words = sec.n_words;
  const std::uint8_t *words = sec.words, *bytes = sec.bytes, *stream = sec.stream;
  // (Kernel::run picks the kernel for the table and runs the loop with it, by value and inlined,
  // as encode_chunk_with's)
  return Kernel::run(t, [&](auto kernel) ZIPCCL_ALWAYS_INLINE {
    kernel.load(x);
    std::uint64_t next = 0, j = 0;
    for (std::uint64_t g = 0; g * format::group_elems < m; ++g) {
      const std::uint64_t first = g * format::group_elems;
      const unsigned lanes = format::group_lanes(m, g);
      const group_turn turn = turn_of(body, m, g, n_words - next);
      if (turn == group_turn::zeros) {
        std::memset(out + first * L::elem_size, 0, lanes * L::elem_size);
        continue;
      }
      std::uint64_t n = next;  // (next itself never has its address taken: it stays in a register)
      if (turn == group_turn::tail) {
        std::uint64_t k = j;
        if (!tail_group<E>(kernel, sec, &n, &k, out + first * L::elem_size)) return status::corrupt;
        j = k;
      } else if (turn == group_turn::reference) {
        kernel.store(x);
        if (!codec_detail::decode_rans_group<E>(t, lanes, x, words + j * W, bytes + j, stream, n_words, &n,
                                                out + first * L::elem_size))
          return status::corrupt;
        kernel.load(x);
        j += lanes;
      } else {
        // the run of kernel groups from g on, in a loop without a call, so that the kernel's
        // tables and constants stay in registers
        const std::uint64_t end = kernel_run_end(body, m, g, n_words - next);
        for (;;) {
          kernel.group(bytes + j, words + j * W, stream, &n, out + g * format::group_elems * L::elem_size);
          j += rans::lanes;
          if (g + 1 == end) break;
          ++g;
        }
      }
      next = n;
    }
    if (next != n_words) return status::corrupt;
    kernel.store(x);
    for (unsigned l = 0; l < rans::lanes; ++l)
      if (x[l] != rans::state_low) return status::corrupt;
    return status::success;
  });
}

// Decodes the rANS body of a chunk that passed check_chunk (codec_detail::decode_rans_body's
// values and statuses), full groups by Kernel and, in bodies with zero symbols, by ZerosKernel
// (avx2::rans_simd's decode_kernel and decode_zeros_kernel, or avx512::rans_simd's on AVX-512).
template <class E, class Kernel, class ZerosKernel>
status decode_body_with(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                        const codec_detail::body_shape& body, std::uint8_t* out) {
  if (format::mode_has_zero_symbols(h.mode)) return decode_zeros_body<E, ZerosKernel>(chunk, m, h, body, out);
  const codec_detail::rans_sections<E> sec(chunk, h, body);
  alignas(64) rans::decode_table t;
  alignas(64) std::uint32_t x[rans::lanes];
  if (!sec.start(&t, x)) return status::corrupt;
  return decode_dense_body<E, Kernel>(sec, t, x, m, body, out);
}

// Group g of a dense rANS body by the reference's steps, its stream and rest cursors *n and *j
// advanced on success (decode_pair_with passes copies of its cursors, which stay in registers).
template <class E>
bool reference_group(const codec_detail::rans_sections<E>& s, const rans::decode_table& t, std::uint64_t m,
                     std::uint64_t g, std::uint32_t* x, std::uint64_t* n, std::uint64_t* j, std::uint8_t* out) {
  constexpr unsigned W = rans::split<E>::word_bytes;
  const unsigned lanes = format::group_lanes(m, g);
  std::uint64_t next = *n;
  const std::uint64_t at = *j;
  if (!codec_detail::decode_rans_group<E>(t, lanes, x, s.words + at * W, s.bytes + at, s.stream, s.n_words, &next, out))
    return false;
  *n = next, *j = at + lanes;
  return true;
}

// Whether kernel class K says, by K::pair_may_pay(nsym_a, nsym_b) and K::pair_pays(ta, tb), when
// two bodies pay for one loop.
template <class K, class = void>
struct has_pair_pays : std::false_type {};
template <class K>
struct has_pair_pays<K, std::void_t<decltype(&K::pair_pays), decltype(&K::pair_may_pay)>> : std::true_type {};

// A full group of each of two chunks by kernels ka and kb: by the kernel's group_pair where it
// has one (which interleaves the two), else one after the other.
template <class K, class = void>
struct has_group_pair : std::false_type {};
template <class K>
struct has_group_pair<K, std::void_t<decltype(&K::group_pair)>> : std::true_type {};
template <class K>
ZIPCCL_ALWAYS_INLINE inline void pair_group(K& ka, K& kb, const std::uint8_t* const (&bytes)[2],
                                            const std::uint8_t* const (&words)[2], const std::uint8_t* const (&stream)[2],
                                            std::uint64_t* const (&next)[2], std::uint8_t* const (&out)[2]) {
  if constexpr (has_group_pair<K>::value) {
    K::group_pair(ka, kb, bytes, words, stream, next, out);
  } else {
    ka.group(bytes[0], words[0], stream[0], next[0], out[0]);
    kb.group(bytes[1], words[1], stream[1], next[1], out[1]);
  }
}

// Two dense rANS bodies (no zero symbols) of chunks that passed check_chunk, decoded in one loop
// of groups, a full group of each by its own Kernel: the two chunks' states are independent, so
// the core overlaps one chunk's chain of gather, multiply and refill with the other's, where one
// chunk's 32 lanes give it only two chains (AVX-512) that wait on each other's latency. Where the
// kernel says the pair does not pay (has_pair_pays: the AVX2 kernel, unless both tables take one
// rank class), the two bodies are decoded one after the other by the single loop instead. True
// when both bodies decoded and ended as decode_body_with requires (same values out); false when
// either did not, and then the caller decodes each on its own for its status.
template <class E, class Kernel>
bool decode_pair_with(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  using L = format::chunk_layout<E>;
  constexpr unsigned W = rans::split<E>::word_bytes;  // (no words section for bf16, fp16)
  const codec_detail::rans_sections<E> sa(chunk[0], h[0], body[0]), sb(chunk[1], h[1], body[1]);
  alignas(64) rans::decode_table ta, tb;
  alignas(64) std::uint32_t xa[rans::lanes], xb[rans::lanes];
  // (a kernel whose pair loop is slower than two single loops for some tables says so: then
  // the two bodies are decoded one after the other, by the single loop)
  if constexpr (has_pair_pays<Kernel>::value)
    if (!Kernel::pair_may_pay(sa.nsym, sb.nsym))
      return sa.start(&ta, xa) && decode_dense_body<E, Kernel>(sa, ta, xa, m[0], body[0], out[0]) == status::success &&
             sb.start(&ta, xb) && decode_dense_body<E, Kernel>(sb, ta, xb, m[1], body[1], out[1]) == status::success;
  if (!sa.start(&ta, xa) || !sb.start(&tb, xb)) return false;
  if constexpr (has_pair_pays<Kernel>::value)
    if (!Kernel::pair_pays(ta, tb))
      return decode_dense_body<E, Kernel>(sa, ta, xa, m[0], body[0], out[0]) == status::success &&
             decode_dense_body<E, Kernel>(sb, tb, xb, m[1], body[1], out[1]) == status::success;
  return Kernel::run_pair(ta, tb, [&](auto ka, auto kb) ZIPCCL_ALWAYS_INLINE {
    bool ok = true;
    ka.load(xa), kb.load(xb);
    // (the cursors are locals whose address is never taken, only their copies': they stay in
    // registers, where a store of decoded values could otherwise alias them)
    std::uint64_t na = 0, nb = 0, ja = 0, jb = 0;
    const std::uint64_t ga = (m[0] + format::group_elems - 1) / format::group_elems;
    const std::uint64_t gb = (m[1] + format::group_elems - 1) / format::group_elems;
    for (std::uint64_t g = 0; ok && g < std::max(ga, gb); ++g) {
      const std::uint64_t at = g * format::group_elems * L::elem_size;
      const group_turn a = g < ga ? turn_of(body[0], m[0], g, sa.n_words - na) : group_turn::none;
      const group_turn b = g < gb ? turn_of(body[1], m[1], g, sb.n_words - nb) : group_turn::none;
      if (a == group_turn::kernel && b == group_turn::kernel) {
        // the run of groups that both decode by their kernels, in a loop without a call (the
        // kernels' tables and constants stay in registers)
        const std::uint64_t end =
            std::min(kernel_run_end(body[0], m[0], g, sa.n_words - na), kernel_run_end(body[1], m[1], g, sb.n_words - nb));
        std::uint64_t n0 = na, n1 = nb;
        for (;;) {
          const std::uint64_t o = g * format::group_elems * L::elem_size;
          pair_group(ka, kb, {sa.bytes + ja, sb.bytes + jb}, {sa.words + ja * W, sb.words + jb * W}, {sa.stream, sb.stream},
                     {&n0, &n1}, {out[0] + o, out[1] + o});
          ja += rans::lanes, jb += rans::lanes;
          if (g + 1 == end) break;
          ++g;
        }
        na = n0, nb = n1;
        continue;
      }
      if (a == group_turn::kernel) {
        std::uint64_t n = na;
        ka.group(sa.bytes + ja, sa.words + ja * W, sa.stream, &n, out[0] + at);
        na = n, ja += rans::lanes;
      }
      if (b == group_turn::kernel) {
        std::uint64_t n = nb;
        kb.group(sb.bytes + jb, sb.words + jb * W, sb.stream, &n, out[1] + at);
        nb = n, jb += rans::lanes;
      }
      if (a == group_turn::tail) {
        std::uint64_t n = na, j = ja;
        ok = tail_group<E>(ka, sa, &n, &j, out[0] + at);
        na = n, ja = j;
      }
      if (ok && b == group_turn::tail) {
        std::uint64_t n = nb, j = jb;
        ok = tail_group<E>(kb, sb, &n, &j, out[1] + at);
        nb = n, jb = j;
      }
      if (a == group_turn::zeros) std::memset(out[0] + at, 0, format::group_lanes(m[0], g) * L::elem_size);
      if (b == group_turn::zeros) std::memset(out[1] + at, 0, format::group_lanes(m[1], g) * L::elem_size);
      // (a group by the reference's steps: the states through their arrays, the cursors as copies)
      if (a == group_turn::reference) {
        std::uint64_t n = na, j = ja;
        ka.store(xa);
        ok = reference_group<E>(sa, ta, m[0], g, xa, &n, &j, out[0] + at);
        ka.load(xa);
        na = n, ja = j;
      }
      if (ok && b == group_turn::reference) {
        std::uint64_t n = nb, j = jb;
        kb.store(xb);
        ok = reference_group<E>(sb, tb, m[1], g, xb, &n, &j, out[1] + at);
        kb.load(xb);
        nb = n, jb = j;
      }
    }
    if (ok) {
      ka.store(xa), kb.store(xb);
      ok = na == sa.n_words && nb == sb.n_words;
      for (unsigned l = 0; ok && l < rans::lanes; ++l) ok = xa[l] == rans::state_low && xb[l] == rans::state_low;
    }
    return ok;
  });
}

}  // namespace zipccl::host::detail::rans_loops
