// zipccl: little-endian loads and stores at any alignment, for host and device code.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"

#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
#error "zipccl's wire format is little-endian and this implementation assumes a little-endian host"
#endif

namespace zipccl::format {

template <class T>
ZIPCCL_HOST_DEVICE T load_le(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
ZIPCCL_HOST_DEVICE void store_le(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

ZIPCCL_HOST_DEVICE constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) {
  return (v + (a - 1)) / a * a;
}

// The index of the lowest / highest set bit of v (v != 0), for host and device code.
ZIPCCL_HOST_DEVICE unsigned lowest_bit(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__ffs(v) - 1);
#else
  return static_cast<unsigned>(__builtin_ctz(v));
#endif
}
ZIPCCL_HOST_DEVICE unsigned highest_bit(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return 31u - static_cast<unsigned>(__clz(v));
#else
  return 31u - static_cast<unsigned>(__builtin_clz(v));
#endif
}

}  // namespace zipccl::format
