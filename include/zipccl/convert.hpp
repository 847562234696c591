// zipccl: conversions between float and the element types' bits, as the reductions do them:
// to_float is exact; to_bits rounds to nearest even, overflows to infinity and makes every NaN
// the type's canonical quiet NaN (so host and device give the same bits).
//
//   std::uint16_t b = zipccl::to_bits<zipccl::bf16>(0.1f);
//   float f = zipccl::to_float<zipccl::bf16>(b);
#pragma once

#include "collective/detail/arith.hpp"
#include "config.hpp"
#include "element.hpp"

namespace zipccl {

template <class E>
ZIPCCL_HOST_DEVICE typename E::bits_type to_bits(float f) {
  return collective::detail::narrow<E>(f);
}

template <class E>
ZIPCCL_HOST_DEVICE float to_float(typename E::bits_type b) {
  return collective::detail::widen<E>(b);
}

}  // namespace zipccl
