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

}  // namespace zipccl::format
