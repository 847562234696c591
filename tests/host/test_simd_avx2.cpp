// test_simd.cpp with the AVX2 paths alone (tests/CMakeLists.txt: ZIPCCL_AVX2_FLAGS, and the
// AVX-512 paths turned off here), so that the AVX2 kernels are checked against the reference on
// AVX-512 machines too, where test_host_simd (-march=native) runs the AVX-512 kernels in their
// place. support/cpu_gate_main.cpp skips the run on CPUs without AVX2.
#define ZIPCCL_HAS_AVX512 0

#include "test_simd.cpp"

static_assert(ZIPCCL_HAS_AVX2 && !ZIPCCL_HAS_AVX512, "test_host_simd_avx2: the AVX2 paths are off, or the AVX-512 ones on");
