// zipccl: the histogram policy's table from a partial count, for the host's vector paths
// (avx2.hpp, avx512.hpp). For bf16 and fp32 the analytic policy's mean locates the bulk of a
// chunk's exponents; the paths count eleven bins around it (the analytic window, two below and two
// above) and the zero bin with compares, which is cheaper than a full histogram. When everything
// outside those bins adds up to less than the seventh largest counted bin, no outside exponent can
// enter the top seven (nor tie with it), and the counted bins give exactly the reference's table;
// otherwise the paths count the full histogram.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../codebook/analytic_gaussian.hpp"
#include "../../codebook/histogram.hpp"
#include "../../codebook/table.hpp"
#include "../../format/layout.hpp"

namespace zipccl::host::detail::histogram_bins {

inline constexpr int bins = 11;

// The first exponent of the bins, from the sum and count of the exponents the analytic policy
// counts (clamped so that the bins stay inside 1 .. exponent_count - 1).
template <class E>
int first_bin(std::uint64_t sum, std::uint64_t count) {
  constexpr int top = static_cast<int>(E::exponent_count) - bins;
  const int lo = codebook::analytic_gaussian::select<E>(sum, count).exponent[0];
  return lo - 2 < 1 ? 1 : (lo - 2 > top ? top : lo - 2);
}

// The table from the zero bin's count and the bins' (near[j] for exponent base + j) over `total`
// elements; false when they do not decide it (count the full histogram then).
template <class E>
bool select(std::uint64_t zero, const std::uint64_t* near, int base, std::uint64_t total, codebook::table* t) {
  std::uint32_t counts[E::exponent_count] = {};
  std::uint64_t inside = zero;
  counts[0] = static_cast<std::uint32_t>(zero);
  for (int j = 0; j < bins; ++j) {
    counts[base + j] = static_cast<std::uint32_t>(near[j]);
    inside += near[j];
  }
  *t = codebook::histogram::select<E>(counts);
  std::uint32_t seventh = UINT32_MAX;
  for (unsigned k = 0; k < format::table_size; ++k) seventh = std::min(seventh, counts[t->exponent[k]]);
  return total - inside < seventh;
}

}  // namespace zipccl::host::detail::histogram_bins
