// zipccl: codebook::histogram, the exact seven most frequent exponents of each chunk.
//
// Ties are broken towards the smaller exponent value and the table is written in ascending
// exponent order, so every executor produces the same table from the same counts.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../element.hpp"
#include "table.hpp"

namespace zipccl::codebook {

struct histogram : policy_tag {
  static constexpr codebook_kind kind = codebook_kind::histogram;
  static constexpr statistic stat = statistic::histogram;

  // The order in which bins are taken: larger count first, then smaller exponent. Every executor
  // ranks bins by this key (the device takes the seven largest keys with warp reductions).
  ZIPCCL_HOST_DEVICE static constexpr std::uint64_t rank_key(std::uint64_t count, unsigned e) {
    return (count << 8) | (255u - e);
  }
  ZIPCCL_HOST_DEVICE static constexpr unsigned key_exponent(std::uint64_t key) {
    return 255u - static_cast<unsigned>(key & 0xFFu);
  }

  // counts has E::exponent_count entries.
  template <class E>
  ZIPCCL_HOST_DEVICE static table select(const std::uint32_t* counts) {
    bool taken[E::exponent_count] = {};
    for (unsigned k = 0; k < format::table_size; ++k) {
      std::uint64_t best = 0;
      for (unsigned e = 0; e < E::exponent_count; ++e)
        if (!taken[e] && rank_key(counts[e], e) > best) best = rank_key(counts[e], e);
      taken[key_exponent(best)] = true;
    }
    return table_from_taken<E>(taken);
  }

  // The table of the taken exponents, in ascending order.
  template <class E>
  ZIPCCL_HOST_DEVICE static table table_from_taken(const bool* taken) {
    table t;
    unsigned k = 0;
    for (unsigned e = 0; e < E::exponent_count && k < format::table_size; ++e)
      if (taken[e]) t.exponent[k++] = static_cast<std::uint8_t>(e);
    return t;
  }
};

}  // namespace zipccl::codebook
