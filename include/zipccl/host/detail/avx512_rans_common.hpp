// zipccl: what the AVX-512 rANS encoder and decoder kernels share (avx512_rans_encode.hpp,
// avx512_rans_decode.hpp): even_words, the vpermt2w indices of the 32 low words of two registers'
// 32-bit lanes. Needs the AVX-512 build (where ZIPCCL_HAS_AVX512 holds).
#pragma once

#include <cstdint>

namespace zipccl::host::detail::avx512::rans_simd {

// The 32 low words of two registers' 32-bit lanes (vpermt2w), or the even words of 64: 0, 2, .. 62.
alignas(64) inline constexpr std::uint16_t even_words[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
                                                             32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62};

}  // namespace zipccl::host::detail::avx512::rans_simd
