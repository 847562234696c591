// zipccl: element types and their bit layouts.
//
// An element type is a tag struct describing an IEEE-style binary floating-point format by its
// bit fields. The codec separates every value into its exponent field (which it codes) and the
// rest, sign and mantissa, which it stores raw as `rest = sign << mantissa_bits | mantissa`.
// Nothing here needs a GPU or the CUDA headers: values travel as their bit patterns.
#pragma once

#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace zipccl {

// The wire-format identifier of an element type (docs/format.md, header byte 6).
enum class dtype : std::uint8_t { bf16 = 1, fp16 = 2, fp32 = 3 };

namespace detail {
template <class Bits, int ExponentBits, int MantissaBits, dtype Id>
struct float_layout {
  using bits_type = Bits;
  static constexpr int total_bits = 8 * static_cast<int>(sizeof(Bits));
  static constexpr int exponent_bits = ExponentBits;
  static constexpr int mantissa_bits = MantissaBits;
  static constexpr int rest_bits = 1 + MantissaBits;  // sign and mantissa
  static constexpr dtype id = Id;
  static constexpr std::uint32_t exponent_count = 1u << ExponentBits;
  static constexpr std::uint32_t exponent_mask = exponent_count - 1u;
  static constexpr std::uint32_t mantissa_mask = (1u << MantissaBits) - 1u;
  static_assert(total_bits == 1 + ExponentBits + MantissaBits, "layout must fill the word");

  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t exponent(bits_type b) {
    return (static_cast<std::uint32_t>(b) >> MantissaBits) & exponent_mask;
  }
  ZIPCCL_HOST_DEVICE static constexpr std::uint32_t rest(bits_type b) {
    const std::uint32_t v = static_cast<std::uint32_t>(b);
    return ((v >> (total_bits - 1)) << MantissaBits) | (v & mantissa_mask);
  }
  ZIPCCL_HOST_DEVICE static constexpr bits_type join(std::uint32_t exponent, std::uint32_t rest) {
    const std::uint32_t sign = (rest >> MantissaBits) & 1u;
    return static_cast<bits_type>((sign << (total_bits - 1)) | (exponent << MantissaBits) |
                                  (rest & mantissa_mask));
  }
};
}  // namespace detail

// bfloat16: 1 sign, 8 exponent, 7 mantissa bits. The rest is exactly one byte.
struct bf16 : detail::float_layout<std::uint16_t, 8, 7, dtype::bf16> {
  static constexpr const char* name = "bf16";
};
// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits. The rest is 11 bits: a byte plus three
// bit planes (docs/format.md).
struct fp16 : detail::float_layout<std::uint16_t, 5, 10, dtype::fp16> {
  static constexpr const char* name = "fp16";
};
// IEEE binary32: 1 sign, 8 exponent, 23 mantissa bits. The rest is 24 bits: a 16-bit word and a
// byte.
struct fp32 : detail::float_layout<std::uint32_t, 8, 23, dtype::fp32> {
  static constexpr const char* name = "fp32";
};

template <class T>
struct is_element : std::bool_constant<std::is_same_v<T, bf16> || std::is_same_v<T, fp16> ||
                                       std::is_same_v<T, fp32>> {};
template <class T>
inline constexpr bool is_element_v = is_element<T>::value;

ZIPCCL_HOST_DEVICE constexpr const char* dtype_name(dtype d) {
  switch (d) {
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
    case dtype::fp32: return "fp32";
  }
  return "unknown";
}
ZIPCCL_HOST_DEVICE constexpr unsigned dtype_size(dtype d) {
  return d == dtype::fp32 ? 4u : (d == dtype::bf16 || d == dtype::fp16) ? 2u : 0u;
}

// Calls f(E{}) with the element tag for a runtime dtype; returns false for an unknown id.
template <class F>
bool visit_dtype(dtype d, F&& f) {
  switch (d) {
    case dtype::bf16: f(bf16{}); return true;
    case dtype::fp16: f(fp16{}); return true;
    case dtype::fp32: f(fp32{}); return true;
  }
  return false;
}

}  // namespace zipccl
