// zipccl: element arithmetic of the host reductions: exact widening to float, round-to-nearest-even
// narrowing, and the one accumulation step every path uses (so plain and compressed rings give
// bit-identical results).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../element.hpp"

namespace zipccl::collective::detail {

inline float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

template <class E>
float widen(typename E::bits_type b) {
  if constexpr (std::is_same_v<E, fp32>) {
    return bits_to_float(b);
  } else if constexpr (std::is_same_v<E, bf16>) {
    return bits_to_float(static_cast<std::uint32_t>(b) << 16);
  } else {
    const std::uint32_t sign = (b & 0x8000u) << 16, e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
    if (e == 0x1F) return bits_to_float(sign | 0x7F800000u | (m << 13));               // inf, nan
    if (e != 0) return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));            // normal
    const float v = std::ldexp(static_cast<float>(m), -24);                             // subnormal
    return sign ? -v : v;
  }
}

template <class E>
typename E::bits_type narrow(float f) {
  const std::uint32_t x = float_to_bits(f);
  if constexpr (std::is_same_v<E, fp32>) {
    return x;
  } else if constexpr (std::is_same_v<E, bf16>) {
    if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
    return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
  } else {
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const float a = std::fabs(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7E00u);
    if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (a < 6.103515625e-05f)
      return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(a * 16777216.0f)));
    std::uint32_t h = ((((x >> 23) & 0xFFu) - 112u) << 10) | ((x & 0x7FFFFFu) >> 13);
    const std::uint32_t rem = x & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
}

}  // namespace zipccl::collective::detail
