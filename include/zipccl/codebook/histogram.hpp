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

  // counts has E::exponent_count entries.
  template <class E>
  ZIPCCL_HOST_DEVICE static table select(const std::uint32_t* counts) {
    bool taken[E::exponent_count] = {};
    table t;
    for (unsigned k = 0; k < format::table_size; ++k) {
      unsigned best = 0;
      bool found = false;
      for (unsigned e = 0; e < E::exponent_count; ++e) {
        if (taken[e]) continue;
        if (!found || counts[e] > counts[best]) {
          best = e;
          found = true;
        }
      }
      taken[best] = true;
    }
    unsigned k = 0;
    for (unsigned e = 0; e < E::exponent_count && k < format::table_size; ++e)
      if (taken[e]) t.exponent[k++] = static_cast<std::uint8_t>(e);
    return t;
  }
};

}  // namespace zipccl::codebook
