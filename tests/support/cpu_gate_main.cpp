// main() for a test built for CPU features this machine may lack (ZIPCCL_GATE_FEATURES, a
// comma-separated list of __builtin_cpu_supports names): without them the test exits with the
// skip code 77 before any of its code runs, so a build for AVX-512 is checked for errors on every
// machine and run on the ones that have it. This file itself is built for the baseline CPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {
bool supports(const std::string& name) {
  // __builtin_cpu_supports takes a string literal only: the names the gated tests use
  if (name == "avx2") return __builtin_cpu_supports("avx2");
  if (name == "bmi2") return __builtin_cpu_supports("bmi2");
  if (name == "avx512f") return __builtin_cpu_supports("avx512f");
  if (name == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (name == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (name == "avx512vbmi") return __builtin_cpu_supports("avx512vbmi");
  if (name == "avx512vbmi2") return __builtin_cpu_supports("avx512vbmi2");
  std::fprintf(stderr, "cpu_gate_main: unknown feature '%s'\n", name.c_str());
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string list = ZIPCCL_GATE_FEATURES;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, end - at);
    if (!supports(name)) {
      std::printf("this CPU lacks %s: skipped (the test was built, not run)\n", name.c_str());
      return 77;
    }
    at = end + 1;
  }
  return Catch::Session().run(argc, argv);
}
