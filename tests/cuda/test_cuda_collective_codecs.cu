// The device collectives (gpu) with the six codecs test_cuda_collectives does not instantiate
// (every element type with every codebook policy: together the nine), on one stream and
// pipelined, for 1..8 ranks and sizes 0, 1, odd and segment boundaries: bit-identical to the host
// collectives and to the plain device path. A translation unit of its own, so that nvcc builds
// the two halves of the matrix side by side.
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
  collective_options opt;
  opt.pipeline.segment_elems = 16384;
  for (int n : {1, 2, 3, 4, 8}) {
    for (std::uint64_t count : {0ull, 1ull, 12345ull, 16384ull, 3ull * 16384 + 1}) {
      for (int which = 0; which < 3; ++which) {
        const op reduction = which == 2 && n == 3 ? op::avg : op::sum;
        INFO(name_of(which) << ", " << n << " ranks, count " << count);
        CHECK(check_every_path<TestType>(which, n, count, reduction, opt) == "");
      }
    }
  }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
