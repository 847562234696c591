// test_simd.cpp with the AVX-512 paths compiled against support/avx512_emulation.hpp (intrinsics
// as plain loops) on top of the AVX2 ones, so that every build runs those paths against the
// reference, on CPUs without AVX-512 too. The same paths with the real instructions:
// test_host_simd_avx512 (where the CPU has them).
#include "../support/avx512_emulation.hpp"

#include "test_simd.cpp"

static_assert(ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2, "test_host_simd_avx512_emulated: the AVX-512 and AVX2 paths are off");
