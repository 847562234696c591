// zipccl: codebook::analytic_gaussian, the 7-exponent window derived from one statistic.
//
// Model. Let x ~ N(0, s^2) and e = floor(log2 |x|) (the unbiased exponent of a normal value).
// The probability that e = k is P(2^k <= |x| < 2^(k+1)), a smooth bump in k about 3.5 binades
// wide around log2 s. Two facts follow, both checked numerically over every fractional part of
// log2 s (the derivation and the table are in docs/format.md):
//   1. the mean exponent is E[e] = log2 s - 1.417 (to 0.001), independent of the fractional part
//      of log2 s, so the sample mean of the exponent fields estimates log2 s without a histogram;
//   2. the 7-binade window with the largest mass starts at lo = floor(E[e] - 3.3) (in biased field
//      units): it is the optimal window at every scale within 0.0001 of coverage, and it covers
//      96.97% (worst fractional part) to 97.87% (best) of the elements.
// So each chunk's window is lo = floor(mean - 3.3), computed in exact integer arithmetic as
// floor((10 * sum - 33 * count) / (10 * count)), then clamped into the exponent field. Integer
// sums make host and device pick the same window whatever the order of the reduction.
//
// The mean is taken over finite values. For bf16 and fp32 values with a zero exponent field are
// left out: there they are nearly always exact zeros (ReLU outputs, padding), whose field value 0
// says nothing about the scale. For fp16 they are kept: its subnormal range starts at 6e-5 and
// holds real data.
//
// Zeros. Where the values left out of the mean (bf16, fp32: zero fields, and infinities and NaNs)
// are more than 1/32 of those counted, field 0 takes the place of the window's top entry: the
// top binade holds about 1.5% of a Gaussian's values, so zeros that frequent (element-sparse
// gradients, ReLU outputs) would otherwise be escapes, a byte each on top of their 3-bit code.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"
#include "table.hpp"

namespace zipccl::codebook {

struct analytic_gaussian : policy_tag {
  static constexpr codebook_kind kind = codebook_kind::analytic_gaussian;
  static constexpr statistic stat = statistic::exponent_mean;

  // Whether a value with exponent field e enters the mean.
  template <class E>
  ZIPCCL_HOST_DEVICE static constexpr bool counts(std::uint32_t e) {
    if constexpr (std::is_same_v<E, fp16>) return e < E::exponent_mask;
    else return e != 0 && e < E::exponent_mask;
  }

  // The window from the sum and count of the counted exponent fields.
  template <class E>
  ZIPCCL_HOST_DEVICE static table select(std::uint64_t sum, std::uint64_t count) {
    if (count == 0) return window_table<E>(0);
    const std::int64_t num = 10 * static_cast<std::int64_t>(sum) - 33 * static_cast<std::int64_t>(count);
    const std::int64_t den = 10 * static_cast<std::int64_t>(count);
    std::int64_t lo = num / den;
    if (num % den != 0 && num < 0) --lo;  // floor, not truncation
    return window_table<E>(lo);
  }
  // The same for a body of `body` elements, of which `count` entered the mean (the rest: bf16 and
  // fp32 zero fields, infinities, NaNs): with more than count / 32 of those, field 0 replaces the
  // window's top entry (code 1 is field 0, codes 2..7 the window's lower six).
  template <class E>
  ZIPCCL_HOST_DEVICE static table select(std::uint64_t sum, std::uint64_t count, std::uint64_t body) {
    table t = select<E>(sum, count);
    if constexpr (!std::is_same_v<E, fp16>) {
      if (body > count && (body - count) * 32 > count && t.exponent[0] != 0) {
        for (unsigned i = format::table_size - 1; i > 0; --i) t.exponent[i] = t.exponent[i - 1];
        t.exponent[0] = 0;
      }
    }
    return t;
  }
};

}  // namespace zipccl::codebook
