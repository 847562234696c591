// zipccl: rANS chunks decoded one chunk per warp (cuda::decompress with tuning<..., RansWarps > 0>).
//
// A rANS chunk's 32 coding lanes form one serial chain of 32-wide steps (codec/rans.hpp), so a
// decoder's parallelism is the number of chunks it decodes at once. cuda::block_decode gives a
// chunk a whole block, of which one warp decodes while the others wait at the pass barriers; with
// its 16 KiB slot table and staging, an SM of sm_90 holds 4 such decoding warps (docs/design.md,
// "rANS on the device"). Here every warp decodes a chunk of its own, with no block barrier: its
// table takes 5 KiB of shared memory (a symbol byte per slot and a word per symbol: two lookups a
// step instead of one), the stream words and rests are read where they lie (consecutive, so
// mostly from L1) and each step's 32 elements are stored straight to the output.
//
// The chunk's checks run before, in decode_kernel<E, Threads, true>: its block_decode, built
// without rANS, checks the header, the mask, the check value, the padding, the table and the
// states, and reports unsupported_mode for a rANS chunk that passed them, which that kernel then
// leaves to this one. What only decoding can find (a stream or rests that run out or are left
// over, a lane that does not end at 2^16) is found here: the same rules and the same status
// (corrupt) as the host's decode_rans_body and block_decode.
//
// The encoder's warp step lives here too (rans_encode_groups, block_encode's walk). Nothing here
// needs CUB or a CUDA header beyond the warp intrinsics, so that the host tests can run it on a
// warp of 32 host threads (tests/support/warp_emulation.hpp, test_warp_rans.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../codec/chunk_codec.hpp"
#include "../../codec/rans.hpp"
#include "../../element.hpp"
#include "../../format/chunk.hpp"

namespace zipccl::cuda::detail {

// rans::table_ok by one warp (all 32 lanes call it; all get the answer): each lane checks its
// share (rans::table_lane_share) and the warp adds up the bits and the frequencies.
__device__ inline bool warp_table_ok(const std::uint8_t* p, std::uint64_t nsym, const codec_detail::rans::zero_symbols& z) {
  constexpr unsigned full = 0xFFFFFFFFu;
  codec_detail::rans::table_share r = codec_detail::rans::table_lane_share(p, nsym, z, threadIdx.x % 32);
#pragma unroll
  for (int d = 16; d > 0; d /= 2) {
    r.bits += __shfl_xor_sync(full, r.bits, d);
    r.sum += __shfl_xor_sync(full, r.sum, d);
  }
  return __all_sync(full, r.ok) && r.bits == nsym && r.sum == codec_detail::rans::prob_total;
}

// One group of a rANS body, for the 32 lanes of a warp (every lane calls it; both device
// decoders use it): each live lane steps its state x with step(x), which returns the symbol and
// advances x before renormalisation; the lanes that carry a rest (with zero symbols: not the
// zeros) take rests j, j + 1, ... in lane order, as join(symbol, k) -> the element (k < b); the
// lanes whose state fell below 2^16 take stream words next, next + 1, ... in lane order, from the
// word `ahead` that lane r loaded for rank r (stream word next + r, or 0 past n_words). A stream
// or rests that run out set bad. Returns this lane's element (0 for a lane that is not live).
// Zeros: false where the chunk has no zero symbols (zero.on is false), which drops their tests;
// Count: the counters' type (32 bits where the caller knows a chunk's words and rests fit).
template <class E, bool Zeros = true, class Count, class Step, class Join>
__device__ __forceinline__ typename E::bits_type rans_group(std::uint32_t& x, bool live,
                                                            const codec_detail::rans::zero_symbols& zero,
                                                            std::uint32_t ahead, Count n_words, Count b, Count& next,
                                                            Count& j, bool& bad, Step&& step, Join&& join) {
  namespace rans = codec_detail::rans;
  using S = rans::split<E>;
  constexpr unsigned full = 0xFFFFFFFFu;
  const unsigned below = (1u << (threadIdx.x % 32)) - 1u;  // the lanes before this one
  typename E::bits_type v = 0;
  std::uint32_t sym = 0;
  bool need = false;
  if (live) {
    sym = step(x);
    need = x < rans::state_low;
  }
  const bool is_pos = Zeros && zero.on && sym == zero.pos, is_neg = Zeros && zero.on && sym == zero.neg;
  const unsigned resters = __ballot_sync(full, live && !is_pos && !is_neg);
  if (live) {
    const Count k = j + static_cast<unsigned>(__popc(resters & below));
    if (is_pos || is_neg) v = is_pos ? typename E::bits_type(0) : S::negative_zero;
    else if (k >= b) bad = true;  // the rests ran out
    else v = join(sym, k);
  }
  const unsigned takers = __ballot_sync(full, need);
  const unsigned rank = static_cast<unsigned>(__popc(takers & below));
  const std::uint32_t word = __shfl_sync(full, ahead, static_cast<int>(rank));
  if (need) {
    if (next + rank >= n_words) bad = true;  // the stream ran out
    else x = (x << 16) | word;
  }
  next += static_cast<unsigned>(__popc(takers));
  j += static_cast<unsigned>(__popc(resters));
  return v;
}

// The groups [g0, g1) of a rANS body coded backwards by the 32 lanes of a warp, every lane
// calling it (block_encode's walk, a pass of its staging at a time, and test_warp_rans on the
// host): element(i) gives element i of the chunk (i < m; asked for by live lanes only), mask the
// chunk's zero mask (null: none; its groups are skipped), zero its zero symbols, freq, cum and inv
// its table (inv: rans::divisor's reciprocals). x is this lane's state, at one past the rests of
// the groups coded so far (they are placed downwards, in lane order within a group), top the bytes
// of stream below the last word pushed (each group's words land just below it, the highest
// pushing lane's first). With bytes, words and stream null it only counts. Returns false (in every
// lane) at the first group whose words would not fit in top bytes: the reference then stores the
// chunk. The same bytes as codec_detail's encode_rans_group.
template <class E, class Element>
__device__ __forceinline__ bool rans_encode_groups(Element&& element, std::uint64_t g0, std::uint64_t g1, std::uint64_t m,
                                                   const std::uint8_t* mask, const codec_detail::rans::zero_symbols& zero,
                                                   const std::uint32_t* freq, const std::uint32_t* cum,
                                                   const std::uint64_t* inv, std::uint32_t& x, std::uint64_t& at,
                                                   std::uint64_t& top, std::uint8_t* bytes, std::uint8_t* words,
                                                   std::uint8_t* stream) {
  namespace rans = codec_detail::rans;
  using RS = rans::split<E>;
  using bits_type = typename E::bits_type;
  constexpr unsigned full = 0xFFFFFFFFu;
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t g = g1; g-- > g0;) {
    if (mask != nullptr && format::zero_bit(mask, g * format::group_elems / format::zero_group_elems)) continue;
    const unsigned lanes = format::group_lanes(m, g);
    const bool live = lane < lanes;
    const bits_type e = live ? element(g * format::group_elems + lane) : bits_type(0);
    const std::uint32_t sym = zero.on ? RS::symbol(e, zero) : RS::symbol(e);
    const std::uint32_t f = live ? freq[sym] : 0u;
    // the lanes with a rest (with zero symbols: not the zeros) take places in lane order
    const bool rest = live && !(zero.on && RS::is_zero(e));
    const unsigned resters = __ballot_sync(full, rest);
    at -= static_cast<unsigned>(__popc(resters));
    if (bytes != nullptr && rest) {
      const std::uint64_t k = at + static_cast<unsigned>(__popc(resters & ((1u << lane) - 1u)));
      bytes[k] = static_cast<std::uint8_t>(RS::byte(e));
      if constexpr (RS::word_bytes != 0)
        format::store_le<std::uint16_t>(words + 2 * k, static_cast<std::uint16_t>(RS::word(e)));
    }
    const bool push = live && std::uint64_t(x) >= (std::uint64_t(f) << 20);
    const unsigned pushers = __ballot_sync(full, push);
    const std::uint64_t n = 2ull * static_cast<unsigned>(__popc(pushers));
    if (n > top) return false;  // (warp-uniform) the stream would reach into the rest sections
    if (push && stream != nullptr) {
      const unsigned above = __popc(lane == 31 ? 0u : pushers >> (lane + 1));  // pushed before this one
      format::store_le<std::uint16_t>(stream + top - 2 * (above + 1), static_cast<std::uint16_t>(x & 0xFFFFu));
    }
    top -= n;
    if (push) x >>= 16;
    if (live) {
      rans::divisor d;
      d.f = f;
      d.inv = inv[sym];
      std::uint32_t q, rem;
      d.divide(x, &q, &rem);
      x = (q << rans::prob_bits) + rem + cum[sym];
    }
  }
  return true;
}

template <class E>
struct warp_rans {
  using bits_type = typename E::bits_type;

  // One warp's tables: the symbol of each slot, and per symbol its frequency (bits 16..28) and
  // its first slot (bits 0..11).
  struct storage {
    std::uint32_t entry[codec_detail::rans::symbols];
    std::uint8_t symbol[codec_detail::rans::prob_total];
  };

  // Decodes the rANS chunk at `chunk` (m elements; it passed the checks above) into out (any
  // alignment). All 32 lanes of the warp call it, with the same arguments; all get the same
  // answer: whether the chunk decoded (false: corrupt).
  __device__ static bool decode(storage& s, const std::uint8_t* chunk, std::uint64_t m, std::uint8_t* out) {
    namespace rans = codec_detail::rans;
    using S = rans::split<E>;
    using RL = rans::layout<E>;
    constexpr unsigned full = 0xFFFFFFFFu;
    const unsigned lane = threadIdx.x % 32;
    const unsigned below = (1u << lane) - 1u;  // the lanes before this one

    const format::chunk_header h = format::read_chunk_header(chunk);
    format::zero_mask_summary z;
    if (format::mode_has_zero_mask(h.mode)) {  // the mask's zero elements: one byte a lane or so
      const std::uint8_t* mask = chunk + format::chunk_header_bytes;
      std::uint32_t zero = 0;
      for (std::uint64_t i = lane; i < format::zero_mask_bytes(m); i += 32)
        zero += static_cast<std::uint32_t>(format::zero_mask_byte_elems(m, i, mask[i]));
#pragma unroll
      for (int d = 16; d > 0; d /= 2) zero += __shfl_xor_sync(full, zero, d);  // at most m < 2^32
      z.zero_elems = zero;
    }
    const codec_detail::body_shape body = codec_detail::chunk_body<E>(h, m, z, chunk);
    const rans::zero_symbols zero = codec_detail::header_zero_symbols(h);
    const std::uint64_t nsym = h.table[0] + 1u, n_words = h.escapes, b = rans::rests_of(body.elems, zero);
    const std::uint8_t* table = chunk + RL::table_offset(body.base);

    // the tables: lane l looks at symbol 32q + l of each 32-symbol slice of the bitmap; the
    // present ones take their frequencies in order and their first slots from a warp scan, and the
    // warp fills each one's slots together
    __syncwarp();  // every lane is done with the previous chunk's tables
    {
      std::uint32_t k0 = 0, cum0 = 0;
      for (unsigned q = 0; q < rans::symbols / 32; ++q) {
        const unsigned sym = 32 * q + lane;
        const bool present = ((table[sym / 8] >> (sym % 8)) & 1u) != 0;
        const unsigned have = __ballot_sync(full, present);
        const std::uint32_t f =
            present ? format::load_le<std::uint16_t>(table + rans::bitmap_bytes + 2 * (k0 + __popc(have & below))) : 0u;
        std::uint32_t incl = f;
#pragma unroll
        for (unsigned d = 1; d < 32; d *= 2) {
          const std::uint32_t o = __shfl_up_sync(full, incl, d);
          if (lane >= d) incl += o;
        }
        const std::uint32_t cum = cum0 + incl - f;
        if (present) s.entry[sym] = (f << 16) | cum;
        for (unsigned left = have; left != 0; left &= left - 1u) {
          const int from = __ffs(left) - 1;
          const std::uint32_t fs = __shfl_sync(full, f, from), cs = __shfl_sync(full, cum, from);
          for (std::uint32_t j = lane; j < fs && cs + j < rans::prob_total; j += 32)  // (bounded: see below)
            s.symbol[cs + j] = static_cast<std::uint8_t>(32 * q + from);
        }
        k0 += static_cast<std::uint32_t>(__popc(have));
        cum0 += __shfl_sync(full, incl, 31);
      }
      // decode_kernel checked the table (frequencies 1..4096 summing to 4096), so this holds; the
      // fill's bound and this test keep a table that somehow did not from writing past the warp's
      // storage or decoding from a partial table
      if (cum0 != rans::prob_total || k0 != nsym) return false;  // (the same in every lane)
    }
    __syncwarp();

    const std::uint8_t* words = chunk + RL::words_offset(body.base, nsym);
    const std::uint8_t* bytes = chunk + RL::bytes_offset(b, body.base, nsym);
    const std::uint8_t* stream = chunk + RL::stream_offset(b, body.base, nsym);
    const bool stream_aligned = is_aligned(stream, 2), words_aligned = is_aligned(words, 2);
    const bool out_aligned = is_aligned(out, sizeof(bits_type));
    std::uint32_t x = format::load_le<std::uint32_t>(chunk + RL::states_offset(body.base, nsym) + 4 * lane);
    // A chunk has at most 2^24 elements (format::valid_chunk_elems), each of which takes at most
    // one stream word and one rest: the counters, the group index and the bounds fit 32 bits (a
    // chunk past that, which the checks do not let through, is refused here all the same).
    if (m > (std::uint64_t{1} << 31) || n_words > m || b > m) return false;
    const std::uint32_t words_in = static_cast<std::uint32_t>(n_words), rests_in = static_cast<std::uint32_t>(b);
    std::uint32_t next = 0, j = 0;  // the next stream word, the next rest
    bool bad = false;
    const std::uint32_t groups = static_cast<std::uint32_t>((m + format::group_elems - 1) / format::group_elems);
    const std::uint32_t full_groups = static_cast<std::uint32_t>(m / format::group_elems);
    const bool masked = body.zero_mask != nullptr;
    // the groups, with and without the tests of zero symbols
    const auto run = [&](auto zeros) {
      constexpr bool Zeros = decltype(zeros)::value;
      for (std::uint32_t g = 0; g < groups; ++g) {
        const bool live = g < full_groups || lane < static_cast<unsigned>(m % format::group_elems);
        bits_type v = 0;
        if (!masked || !codec_detail::in_zero_group(body, g)) {
          // the word this lane would hand over if rank `lane` of the renormalising lanes
          const std::uint32_t ahead = next + lane < words_in ? u16_at(stream + 2 * (next + lane), stream_aligned) : 0u;
          v = rans_group<E, Zeros>(
              x, live, zero, ahead, words_in, rests_in, next, j, bad,
              [&](std::uint32_t& y) {
                const std::uint32_t slot = y & (rans::prob_total - 1u);
                const std::uint32_t sym = s.symbol[slot], e = s.entry[sym];
                y = (e >> 16) * (y >> rans::prob_bits) + slot - (e & 0xFFFFu);
                return sym;
              },
              [&](std::uint32_t sym, std::uint32_t k) {
                std::uint32_t word = 0;
                if constexpr (S::word_bytes != 0) word = u16_at(words + 2 * k, words_aligned);
                return S::join(sym, __ldg(bytes + k), word);
              });
        }
        if (live) {  // (this lane's element of the group)
          std::uint8_t* o = out + (std::uint64_t{g} * format::group_elems + lane) * sizeof(bits_type);
          if (out_aligned) *reinterpret_cast<bits_type*>(o) = v;
          else format::store_le<bits_type>(o, v);
        }
      }
    };
    if (zero.on) run(std::true_type{});
    else run(std::false_type{});
    // words or rests left over, or a lane off 2^16
    if (next != words_in || j != rests_in || x != rans::state_low) bad = true;
    return !__any_sync(full, bad);
  }

 private:
  __device__ __forceinline__ static bool is_aligned(const void* p, std::uintptr_t a) {
    return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
  }
  // A 16-bit little-endian word of the (read-only) chunk.
  __device__ __forceinline__ static std::uint32_t u16_at(const std::uint8_t* p, bool aligned) {
    if (aligned) return __ldg(reinterpret_cast<const unsigned short*>(p));
    return static_cast<std::uint32_t>(__ldg(p)) | (static_cast<std::uint32_t>(__ldg(p + 1)) << 8);
  }
};

}  // namespace zipccl::cuda::detail
