// main() for a test built for CPU features this machine may lack (ZIPCCL_GATE_FEATURES, a
// comma-separated list of __builtin_cpu_supports names, exactly the -m flags the test is built
// with): without them the process exits with the skip code 77 before any of the test's code runs,
// so a build for AVX-512 is checked for errors on every machine and run on the ones that have it.
// This file is built for the baseline CPU, and the check runs from a constructor of the highest
// priority, before the static initializers of the test's own translation unit (Catch's test
// registrations), and calls no C++ library code that the test's objects could also define.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace {
// __builtin_cpu_supports takes a string literal only: the names the gated tests use.
int supports(const char* name, std::size_t len) {
#define ZIPCCL_GATE(feature) \
  if (len == sizeof(feature) - 1 && std::strncmp(name, feature, len) == 0) return __builtin_cpu_supports(feature);
  ZIPCCL_GATE("avx2")
  ZIPCCL_GATE("fma")
  ZIPCCL_GATE("bmi")
  ZIPCCL_GATE("bmi2")
  ZIPCCL_GATE("popcnt")
  ZIPCCL_GATE("avx512f")
  ZIPCCL_GATE("avx512bw")
  ZIPCCL_GATE("avx512vl")
  ZIPCCL_GATE("avx512dq")
  ZIPCCL_GATE("avx512vbmi")
  ZIPCCL_GATE("avx512vbmi2")
#undef ZIPCCL_GATE
  std::fprintf(stderr, "cpu_gate_main: unknown feature '%.*s' in ZIPCCL_GATE_FEATURES\n", static_cast<int>(len), name);
  _exit(1);  // a misspelt name fails the test rather than skipping it for ever
}

__attribute__((constructor(101))) void gate() {
  __builtin_cpu_init();
  const char* list = ZIPCCL_GATE_FEATURES;
  for (const char* at = list; *at != '\0';) {
    const char* end = std::strchr(at, ',');
    const std::size_t len = end ? static_cast<std::size_t>(end - at) : std::strlen(at);
    if (!supports(at, len)) {
      std::printf("this CPU lacks %.*s: skipped (the test was built, not run)\n", static_cast<int>(len), at);
      std::fflush(stdout);
      _exit(77);
    }
    at += len + (end ? 1 : 0);
  }
}
}  // namespace

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
