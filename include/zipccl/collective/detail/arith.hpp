// zipccl: element arithmetic of the host reductions: exact widening to float, round-to-nearest-even
// narrowing, and the one accumulation step every path uses (so plain and compressed rings give
// bit-identical results).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../element.hpp"

namespace zipccl::collective::detail {

ZIPCCL_HOST_DEVICE float bits_to_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}
ZIPCCL_HOST_DEVICE std::uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}
// Round to nearest, ties to even (the default rounding mode on the host; rintf on the device).
ZIPCCL_HOST_DEVICE float round_even(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::nearbyint(x);
#endif
}

// Exact: every bf16, fp16 and fp32 value is a float.
template <class E>
ZIPCCL_HOST_DEVICE float widen(typename E::bits_type b) {
  if constexpr (std::is_same_v<E, fp32>) {
    return bits_to_float(b);
  } else if constexpr (std::is_same_v<E, bf16>) {
    return bits_to_float(static_cast<std::uint32_t>(b) << 16);
  } else {
    const std::uint32_t sign = (b & 0x8000u) << 16, e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
    if (e == 0x1F) return bits_to_float(sign | 0x7F800000u | (m << 13));       // inf, nan
    if (e != 0) return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));    // normal
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;           // subnormal: m * 2^-24
    return sign ? -v : v;
  }
}

// Round to nearest even, overflow to infinity. Every NaN becomes the type's canonical quiet NaN
// (0x7FC00000, 0x7FC0, 0x7E00): CPUs and GPUs give NaNs of different sign and payload for the
// same float operation, and the reductions must give the same bits on both.
template <class E>
ZIPCCL_HOST_DEVICE typename E::bits_type narrow(float f) {
  const std::uint32_t x = float_to_bits(f);
  const bool nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
  if constexpr (std::is_same_v<E, fp32>) {
    return nan ? 0x7FC00000u : x;
  } else if constexpr (std::is_same_v<E, bf16>) {
    if (nan) return static_cast<std::uint16_t>(0x7FC0u);
    return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
  } else {
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const float a = bits_to_float(x & 0x7FFFFFFFu);
    if (nan) return static_cast<std::uint16_t>(0x7E00u);
    if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (a < 6.103515625e-05f) return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(round_even(a * 16777216.0f)));
    std::uint32_t h = ((((x >> 23) & 0xFFu) - 112u) << 10) | ((x & 0x7FFFFFu) >> 13);
    const std::uint32_t rem = x & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
}

// One step of every reduction, on every path and executor: narrow(widen(a) + widen(b)).
template <class E>
ZIPCCL_HOST_DEVICE typename E::bits_type add(typename E::bits_type a, typename E::bits_type b) {
  return narrow<E>(widen<E>(a) + widen<E>(b));
}
// The average's last step: narrow(widen(a) / ranks).
template <class E>
ZIPCCL_HOST_DEVICE typename E::bits_type divide_by(typename E::bits_type a, int ranks) {
  return narrow<E>(widen<E>(a) / static_cast<float>(ranks));
}

}  // namespace zipccl::collective::detail
