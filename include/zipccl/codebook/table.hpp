// zipccl: the 7-entry exponent table every coded chunk carries, and what policies have in common.
//
// A codebook policy chooses, for each chunk, the seven exponent field values that get the codes
// 1..7; every other exponent is escaped (code 0) and stored raw. A policy states which per-chunk
// statistic it needs, so that an executor gathers exactly that while it loads the chunk:
//   - statistic::none           no pass over the data (codebook::fixed)
//   - statistic::exponent_mean  a sum and a count of exponent fields (codebook::analytic_gaussian)
//   - statistic::histogram      a count per exponent value (codebook::histogram)
//   - statistic::symbol_counts  a count per rANS symbol (codebook::entropy: no 7-entry table at
//                               all; the chunk carries a frequency table instead)
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"
#include "../format/chunk.hpp"
#include "../format/stream.hpp"

namespace zipccl::codebook {

enum class statistic { none, exponent_mean, histogram, symbol_counts };

// The exponents that codes 1..7 stand for, in code order.
struct table {
  std::uint8_t exponent[format::table_size] = {};
};

// A 256-entry map from exponent field to code (0 = escape).
ZIPCCL_HOST_DEVICE void make_code_lut(const table& t, std::uint8_t lut[256]) {
  for (unsigned e = 0; e < 256; ++e) lut[e] = 0;
  for (unsigned i = format::table_size; i-- > 0;) lut[t.exponent[i]] = static_cast<std::uint8_t>(i + 1);
}

// True when every entry is a valid exponent of E and no entry repeats.
template <class E>
ZIPCCL_HOST_DEVICE bool valid_table(const table& t) {
  for (unsigned i = 0; i < format::table_size; ++i) {
    if (t.exponent[i] >= E::exponent_count) return false;
    for (unsigned j = 0; j < i; ++j)
      if (t.exponent[j] == t.exponent[i]) return false;
  }
  return true;
}

// A contiguous window lo .. lo+6, with lo clamped so that the window fits E's exponent field.
template <class E>
ZIPCCL_HOST_DEVICE table window_table(std::int64_t lo) {
  const std::int64_t top = static_cast<std::int64_t>(E::exponent_count) - format::table_size;
  lo = lo < 0 ? 0 : (lo > top ? top : lo);
  table t;
  for (unsigned i = 0; i < format::table_size; ++i) t.exponent[i] = static_cast<std::uint8_t>(lo + i);
  return t;
}

// Policies derive from this tag; is_policy_v checks the interface.
struct policy_tag {};

template <class P>
inline constexpr bool is_policy_v = std::is_base_of_v<policy_tag, P>;

}  // namespace zipccl::codebook
