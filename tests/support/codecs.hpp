// The element type x codebook policy combinations every codec test runs over.
#pragma once

#include <tuple>

#include <zipccl/codec/codec.hpp>

namespace zipccl::testing {

using all_codecs = std::tuple<
    codec<bf16, codebook::analytic_gaussian>, codec<bf16, codebook::histogram>, codec<bf16, codebook::fixed>,
    codec<fp16, codebook::analytic_gaussian>, codec<fp16, codebook::histogram>, codec<fp16, codebook::fixed>,
    codec<fp32, codebook::analytic_gaussian>, codec<fp32, codebook::histogram>, codec<fp32, codebook::fixed>>;

// All of the above and the rANS policy (codebook::entropy), which every executor and collective
// takes; its tests on the device collectives' fixed-size wire (tests/cuda/
// test_cuda_collective_entropy.cu) set a spill budget for its rANS bodies.
using host_codecs = std::tuple<
    codec<bf16, codebook::analytic_gaussian>, codec<bf16, codebook::histogram>, codec<bf16, codebook::fixed>,
    codec<bf16, codebook::entropy>,
    codec<fp16, codebook::analytic_gaussian>, codec<fp16, codebook::histogram>, codec<fp16, codebook::fixed>,
    codec<fp16, codebook::entropy>,
    codec<fp32, codebook::analytic_gaussian>, codec<fp32, codebook::histogram>, codec<fp32, codebook::fixed>,
    codec<fp32, codebook::entropy>>;

}  // namespace zipccl::testing
