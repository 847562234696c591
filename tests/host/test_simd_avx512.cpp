// test_simd.cpp built for AVX-512 (tests/CMakeLists.txt: ZIPCCL_AVX512_FLAGS, so
// ZIPCCL_HAS_AVX512 holds): the AVX-512 paths against the reference. support/cpu_gate_main.cpp
// skips the run on CPUs without those features.
#include "test_simd.cpp"

// the flags must turn on the paths this build exists to check
static_assert(ZIPCCL_HAS_AVX512, "test_host_simd_avx512: ZIPCCL_AVX512_FLAGS did not enable the AVX-512 path");
static_assert(ZIPCCL_HAS_AVX2, "test_host_simd_avx512: ZIPCCL_AVX512_FLAGS did not enable the AVX2 paths");
