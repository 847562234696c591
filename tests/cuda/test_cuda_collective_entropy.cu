// The device collectives (gpu) with codebook::entropy, whose chunks travel on the fixed-size wire
// with only their header and zero-mask room in place and the rANS body in the spill area: the
// device writes that wire byte for byte as the host reference and reads it alike (intact and
// damaged), every collective is bit-identical to the host collectives and the plain device path
// (sizes up to 64 MiB per rank: [large]), and a budget too small for the bodies is wire_overflow
// on both ends. A translation unit of its own, so that nvcc builds it beside the other collective
// tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <tuple>

#include "../support/device_collectives.cuh"

using namespace zipccl;
using namespace zipccl::testing::device_collectives;

namespace {
using entropy_codecs = std::tuple<codec<bf16, codebook::entropy>, codec<fp16, codebook::entropy>,
                                  codec<fp32, codebook::entropy>>;
// Room for any chunk, stored ones included.
constexpr std::uint32_t roomy = 4000;
}  // namespace

TEMPLATE_LIST_TEST_CASE("entropy: the device writes the fixed-size wire byte for byte as the host reference",
                        "[gpu][cuda_collective][fixed_wire][rans]", entropy_codecs) {
  collective_options opt;
  opt.device_wire.spill_permille = roomy;
  check_fixed_wire_bytes<TestType>(opt);
  // four rows of 512 in five all zero: chunks with zero masks, whose span the fixed part's mask
  // gives (the last, shorter chunk of a segment included)
  check_fixed_wire_bytes<TestType>(opt, true);
}

TEMPLATE_LIST_TEST_CASE("entropy: device collectives equal the host collectives and the plain device path",
                        "[gpu][cuda_collective][rans]", entropy_codecs) {
  collective_options opt;
  opt.device_wire.spill_permille = roomy;
  CHECK(every_collective_differences<TestType>(opt) == "");
}

TEMPLATE_LIST_TEST_CASE("entropy, 64 MiB per rank: device collectives equal the host collectives",
                        "[gpu][cuda_collective][rans][large]", entropy_codecs) {
  collective_options opt;
  opt.device_wire.spill_permille = roomy;
  CHECK(every_collective_differences_64mib<TestType>(opt) == "");
}

TEST_CASE("entropy at the default spill budget is wire_overflow on every rank, never a wrong value",
          "[gpu][cuda_collective][rans]") {
  using C = codec<bf16, codebook::entropy>;
  collective_options opt;  // spill_permille 40: far too little for rANS bodies
  for (bool pipelined : {false, true}) {
    INFO("pipelined " << pipelined);
    ranks_on_gpu g(2);
    cuda_local_world world(2, world_options());
    (void)on_device<C, strategy::always>(2, 2, 40000, op::sum, opt, g, world, pipelined);
    for (int r = 0; r < 2; ++r) CHECK(g.statuses[r] == status::wire_overflow);
  }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
