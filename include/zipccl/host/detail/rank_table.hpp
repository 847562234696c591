// zipccl: a rANS decoding table as ranks (rank_table), the form in which the vector rank decoders
// (avx2_rans.hpp's for AVX2, avx512_rans.hpp's for AVX-512) find a slot's symbol without a
// gather or a scalar load per lane. Plain C++: no intrinsics.
#pragma once

#include <cstdint>

#include "../../codec/rans.hpp"

namespace zipccl::host::detail {

// A decoding table as ranks, for the rank decoders: the symbols of a table in slot order (rank
// r is the r-th symbol present, whose slots are [cum[r], cum[r] + freq[r])), and the way from a
// slot to its rank without a gather. The 4096 slots fall in 128 buckets of 32. For each bucket,
// `coarse` holds the rank of its first slot and `bound` the offset of the one symbol boundary
// inside it (32 where there is none): a slot's rank is coarse, plus one from bound on. A bucket
// with two or more boundaries inside (a crowded bucket: rare symbols at the ends of a table, or
// of each sign's half of an fp16 table) has coarse = 0x80 | i, and its slots' exact ranks in
// `fine`, bytes 32i..32i+31. Tables of up to 128 symbols and 16 crowded buckets are held (`fits`
// says which rank kernel takes one); the slot-table kernels take the others.
struct rank_table {
  static constexpr unsigned max_ranks = 128, buckets = 128, bucket_slots = codec_detail::rans::prob_total / buckets, max_crowded = 16;
  alignas(64) std::uint8_t coarse[buckets], bound[buckets], fine[max_crowded * bucket_slots], sym[max_ranks];
  alignas(64) std::uint16_t freq[max_ranks], cum[max_ranks];
  unsigned ranks = 0, crowded = 0;
  bool held = false;
  // (with limit, a table of more than limit symbols is refused as soon as that shows, for a
  // decoder whose rank kernels take no more)
  explicit rank_table(const codec_detail::rans::decode_table& t, unsigned limit = max_ranks) {
    using T = codec_detail::rans::decode_table;
    std::uint32_t start[max_ranks + 1];  // (cum, and prob_total after the last rank)
    unsigned n = 0;
    for (std::uint32_t s = 0; s < codec_detail::rans::prob_total; ++n) {
      if (n == max_ranks || n == limit) return;
      const std::uint32_t e = t.slot[s];
      start[n] = s;
      sym[n] = static_cast<std::uint8_t>(T::symbol(e));
      freq[n] = static_cast<std::uint16_t>(T::freq(e));
      cum[n] = static_cast<std::uint16_t>(s);
      s += T::freq(e);
    }
    start[n] = codec_detail::rans::prob_total;
    for (unsigned r = n; r < max_ranks; ++r) freq[r] = cum[r] = 0, sym[r] = 0;
    unsigned fines = 0;
    for (unsigned b = 0, r = 0; b < buckets; ++b) {
      const std::uint32_t lo = b * bucket_slots, hi = lo + bucket_slots;
      while (start[r + 1] <= lo) ++r;  // (r: the rank of slot lo; start[n] is past every slot)
      const bool one = r + 1 < n && start[r + 1] < hi;
      if (!one || r + 2 == n || start[r + 2] >= hi) {  // at most one boundary inside
        coarse[b] = static_cast<std::uint8_t>(r);
        bound[b] = static_cast<std::uint8_t>(one ? start[r + 1] - lo : bucket_slots);
        continue;
      }
      if (fines == max_crowded) return;
      coarse[b] = static_cast<std::uint8_t>(0x80u | fines);
      bound[b] = static_cast<std::uint8_t>(bucket_slots);
      for (unsigned j = 0, q = r; j < bucket_slots; ++j) {
        while (start[q + 1] <= lo + j) ++q;
        fine[fines * bucket_slots + j] = static_cast<std::uint8_t>(q);
      }
      ++fines;
    }
    for (unsigned i = fines * bucket_slots; i < max_crowded * bucket_slots; ++i) fine[i] = 0;
    ranks = n, crowded = fines, held = true;
  }
  // The rank of symbol v, or 0xFFFF (no rank) where the table has no such symbol (a zero symbol
  // of a body without zeros of that sign).
  unsigned rank_of(std::uint32_t v) const {
    for (unsigned r = 0; r < ranks; ++r)
      if (sym[r] == v) return r;
    return 0xFFFFu;
  }
  // Whether the AVX-512 decode_rank_kernel<E, Ranks, Pairs> takes this table: at most Ranks
  // symbols and 4 Pairs crowded buckets.
  bool fits(unsigned max_ranks_, unsigned pairs) const { return holds(max_ranks_, 4 * pairs); }
  // Whether it has at most max_ranks_ symbols and max_crowded_ crowded buckets (the AVX2
  // decode_rank_kernel<E, Crowded> takes a table that holds(32, Crowded)).
  bool holds(unsigned max_ranks_, unsigned max_crowded_) const {
    return held && ranks <= max_ranks_ && crowded <= max_crowded_;
  }
};

}  // namespace zipccl::host::detail
