// zipccl: the check hash of headers and chunks.
//
// A stream is hashed as a sequence of little-endian 64-bit words w_0 .. w_{k-1}:
//
//   term(j, w) = mix(w + (j + 1) * 0x9E3779B97F4A7C15)
//   hash       = mix(sum_j term(j, w_j)  xor  k)        (all arithmetic modulo 2^64)
//   mix(x)     = x ^= x >> 32; x *= 0xD6E8FEB86659FD93; x ^= x >> 32;
//                x *= 0xD6E8FEB86659FD93; x ^= x >> 32
//
// mix is a bijection, so a change to any single word always changes the hash, and the terms are
// independent of each other, so the sum can be formed in any order: a GPU block reduces it in
// parallel and gets the same value as the sequential host loop. 32-bit check fields hold
// fold32(hash) = low 32 bits xor high 32 bits.
//
// mix32 is a bijection of 32-bit values (xorshifts and odd multipliers); the place codes of
// chunks (format/chunk.hpp) are built on it so that two chunk indices never share a code.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "bytes.hpp"

namespace zipccl::format {

inline constexpr std::uint64_t hash_position_step = 0x9E3779B97F4A7C15ull;
inline constexpr std::uint64_t hash_multiplier = 0xD6E8FEB86659FD93ull;

ZIPCCL_HOST_DEVICE constexpr std::uint64_t hash_mix(std::uint64_t x) {
  x ^= x >> 32;
  x *= hash_multiplier;
  x ^= x >> 32;
  x *= hash_multiplier;
  x ^= x >> 32;
  return x;
}

ZIPCCL_HOST_DEVICE constexpr std::uint64_t hash_term(std::uint64_t j, std::uint64_t w) {
  return hash_mix(w + (j + 1) * hash_position_step);
}

ZIPCCL_HOST_DEVICE constexpr std::uint64_t hash_finish(std::uint64_t sum, std::uint64_t words) {
  return hash_mix(sum ^ words);
}

ZIPCCL_HOST_DEVICE constexpr std::uint32_t fold32(std::uint64_t h) {
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

ZIPCCL_HOST_DEVICE constexpr std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7F4A7C15u;
  x ^= x >> 15;
  x *= 0x6659FD93u;
  x ^= x >> 16;
  return x;
}

// Sum of terms of the words [first, first + count) of p, whose word 0 is word `first` of the
// hashed sequence. p must hold count * 8 bytes.
ZIPCCL_HOST_DEVICE std::uint64_t hash_sum(const std::uint8_t* p, std::uint64_t first,
                                          std::uint64_t count) {
  std::uint64_t s = 0;
  for (std::uint64_t j = 0; j < count; ++j) s += hash_term(first + j, load_le<std::uint64_t>(p + 8 * j));
  return s;
}

}  // namespace zipccl::format
