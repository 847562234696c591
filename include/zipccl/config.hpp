// zipccl: configuration macros shared by every header.
//
// ZIPCCL_HOST_DEVICE marks functions that both executors call: under nvcc they become
// __host__ __device__, under a plain C++ compiler they are ordinary inline functions, so the
// format and coding logic can be unit-tested on a machine without a GPU.
#pragma once

#include <cstdint>

#define ZIPCCL_VERSION_MAJOR 0
#define ZIPCCL_VERSION_MINOR 1
#define ZIPCCL_VERSION_PATCH 0

#if defined(__CUDACC__)
#define ZIPCCL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ZIPCCL_HOST_DEVICE inline
#endif

// Host SIMD fast paths are chosen at compile time from the target flags (for example
// -march=native, or -mavx2 -mfma -mbmi -mbmi2 -mpopcnt -mavx512f -mavx512bw -mavx512vl
// -mavx512vbmi -mavx512vbmi2). ZIPCCL_DISABLE_SIMD forces the portable path, which produces the
// same bytes. As with any header-only SIMD code, every translation unit of one program that
// includes zipccl must be built with the same SIMD flags (the inline functions and templates would
// otherwise differ between them, and the linker keeps one copy).
// A translation unit may also set ZIPCCL_HAS_AVX512 itself before it includes zipccl: 0 turns the
// AVX-512 paths off; 1 without the target flags only works with intrinsics of its own (the test
// suite's tests/support/avx512_emulation.hpp, which runs the AVX-512 paths on any AVX2 machine).
// ZIPCCL_DISABLE_SIMD and nvcc turn them off whatever it says.
#if defined(ZIPCCL_DISABLE_SIMD) || defined(__CUDACC__)
#undef ZIPCCL_HAS_AVX512
#define ZIPCCL_HAS_AVX512 0
#elif defined(ZIPCCL_HAS_AVX512)
#elif defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__) && defined(__AVX512VBMI2__) && \
    defined(__BMI2__)
#define ZIPCCL_HAS_AVX512 1
#else
#define ZIPCCL_HAS_AVX512 0
#endif
// The AVX2 paths (host/detail/avx2.hpp, avx2_rans.hpp), on any x86 with AVX2, BMI1 and POPCNT: the
// 3-bit encoder and decoder where AVX-512 is missing (and of zero-mask chunks where it is present),
// and the rANS group loop (with AVX2 kernels, or AVX-512 ones where ZIPCCL_HAS_AVX512 holds too).
#if !defined(ZIPCCL_DISABLE_SIMD) && !defined(__CUDACC__) && defined(__AVX2__) && defined(__POPCNT__) && \
    defined(__BMI__)
#define ZIPCCL_HAS_AVX2 1
#else
#define ZIPCCL_HAS_AVX2 0
#endif

// Makes GCC and Clang inline a function (placed before it) or a lambda (after its parameter
// list) whatever their heuristics say: the host rANS encoder's group loop, which must see the
// caller's locals rather than references to them (host/detail/rans_group_loops.hpp). The SIMD
// paths that use it are built by those compilers only (the feature macros above are theirs).
#if defined(__GNUC__)
#define ZIPCCL_ALWAYS_INLINE __attribute__((always_inline))
#else
#define ZIPCCL_ALWAYS_INLINE
#endif

namespace zipccl {

struct version_info {
  int major, minor, patch;
};
inline constexpr version_info version{ZIPCCL_VERSION_MAJOR, ZIPCCL_VERSION_MINOR,
                                      ZIPCCL_VERSION_PATCH};

}  // namespace zipccl
