// zipccl: exponent statistics of a tensor, and the ratios they imply.
//
// Used by the `zipccl inspect` tool, the demo and the benchmarks; useful on its own to decide
// whether a tensor is worth compressing.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../codebook/histogram.hpp"
#include "../element.hpp"
#include "../format/bytes.hpp"
#include "../format/stream.hpp"
#include "../format/zero_mask.hpp"

namespace zipccl::host {

struct exponent_stats {
  std::vector<std::uint64_t> histogram;  // E::exponent_count bins
  std::uint64_t count = 0;
  double entropy_bits = 0;  // Shannon entropy of the exponent field, bits per element
  // Ratio bound of any code that stores sign and mantissa raw and codes exponents at entropy.
  double entropy_bound_ratio = 0;
  // Ratio of an ideal 3-bit, 7-entry code on the same chunks: every chunk uses its own seven most
  // frequent exponents, escapes cost one raw exponent field each, and there are no headers.
  double ideal_3bit_ratio = 0;
  // Elements in all-zero 64-element groups (format::zero_group_elems), which a version 2 stream
  // leaves out of a chunk's body where the mask pays.
  std::uint64_t zero_group_elems = 0;
};

// Statistics of n elements of E at `data` (any alignment), with chunks of chunk_elems elements.
template <class E>
exponent_stats analyze(const void* data, std::uint64_t n,
                       std::uint32_t chunk_elems = format::default_chunk_elems) {
  using bits_type = typename E::bits_type;
  exponent_stats s;
  s.histogram.assign(E::exponent_count, 0);
  s.count = n;
  const auto* p = static_cast<const std::uint8_t*>(data);
  double ideal_bits = 0;
  std::vector<std::uint32_t> chunk(E::exponent_count);
  for (std::uint64_t first = 0; first < n; first += chunk_elems) {
    const std::uint64_t m = n - first < chunk_elems ? n - first : chunk_elems;
    std::fill(chunk.begin(), chunk.end(), 0u);
    for (std::uint64_t i = first; i < first + m; ++i)
      ++chunk[E::exponent(format::load_le<bits_type>(p + i * sizeof(bits_type)))];
    const codebook::table t = codebook::histogram::select<E>(chunk.data());
    std::uint64_t covered = 0;
    for (unsigned k = 0; k < format::table_size; ++k) covered += chunk[t.exponent[k]];
    ideal_bits += static_cast<double>(m) * (E::rest_bits + 3) + static_cast<double>(m - covered) * E::exponent_bits;
    for (unsigned e = 0; e < E::exponent_count; ++e) s.histogram[e] += chunk[e];
    for (std::uint64_t g = 0; g < format::zero_groups(m); ++g) {
      const std::uint64_t k = format::zero_group_size(m, g);
      if (format::all_zero_bits(p + (first + g * format::zero_group_elems) * sizeof(bits_type), k, sizeof(bits_type)))
        s.zero_group_elems += k;
    }
  }
  if (n == 0) return s;
  for (std::uint64_t c : s.histogram) {
    if (c == 0) continue;
    const double q = static_cast<double>(c) / static_cast<double>(n);
    s.entropy_bits -= q * std::log2(q);
  }
  const double raw_bits = static_cast<double>(E::total_bits);
  s.entropy_bound_ratio = raw_bits / (E::rest_bits + s.entropy_bits);
  s.ideal_3bit_ratio = raw_bits * static_cast<double>(n) / ideal_bits;
  return s;
}

}  // namespace zipccl::host
