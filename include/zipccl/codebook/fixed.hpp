// zipccl: codebook::fixed, a table given in advance (for example calibrated on an earlier step).
//
// No per-chunk statistic is gathered: compression is a single pass. The table is stateful policy
// data, passed to compress() as the codebook argument.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../element.hpp"
#include "histogram.hpp"
#include "table.hpp"

namespace zipccl::codebook {

struct fixed : policy_tag {
  static constexpr codebook_kind kind = codebook_kind::fixed;
  static constexpr statistic stat = statistic::none;

  table entries{};  // default: the window 0..6

  constexpr fixed() {
    for (unsigned i = 0; i < format::table_size; ++i) entries.exponent[i] = static_cast<std::uint8_t>(i);
  }
  explicit constexpr fixed(const table& t) : entries(t) {}

  // The window lo .. lo+6 of biased exponent fields, clamped into E's field.
  template <class E>
  static fixed window(std::int64_t lo) {
    return fixed(window_table<E>(lo));
  }

  // The seven most frequent exponents of a sample of n elements of E (raw bit patterns).
  template <class E>
  static fixed calibrate(const typename E::bits_type* sample, std::uint64_t n) {
    std::uint32_t counts[E::exponent_count] = {};
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint32_t& c = counts[E::exponent(sample[i])];
      if (c != UINT32_MAX) ++c;
    }
    return fixed(histogram::select<E>(counts));
  }

  template <class E>
  bool valid() const {
    return valid_table<E>(entries);
  }
};

}  // namespace zipccl::codebook
