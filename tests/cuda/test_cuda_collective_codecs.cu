// The device collectives (gpu) with the six codecs test_cuda_collectives does not instantiate
// (every element type with every codebook policy: together the nine), on one stream and
// pipelined, for 1..8 ranks and sizes 0, 1, odd, segment boundaries and 64 MiB ([large]):
// bit-identical to the host collectives and to the plain device path. A translation unit of its
// own, so that nvcc builds the two halves of the matrix side by side.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <tuple>

#include "../support/device_collectives.cuh"

using namespace zipccl;
using namespace zipccl::testing::device_collectives;

namespace {
using more_codecs = std::tuple<codec<bf16, codebook::histogram>, codec<bf16, codebook::fixed>,
                               codec<fp16, codebook::analytic_gaussian>, codec<fp16, codebook::fixed>,
                               codec<fp32, codebook::histogram>, codec<fp32, codebook::fixed>>;
}  // namespace

TEMPLATE_LIST_TEST_CASE("every codec: device collectives equal the host collectives and the plain device path",
                        "[gpu][cuda_collective]", more_codecs) {
  CHECK(every_collective_differences<TestType>(collective_options{}) == "");
}

TEMPLATE_LIST_TEST_CASE("every codec, 64 MiB per rank: device collectives equal the host collectives",
                        "[gpu][cuda_collective][large]", more_codecs) {
  CHECK(every_collective_differences_64mib<TestType>(collective_options{}) == "");
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
