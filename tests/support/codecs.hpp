// The element type x codebook policy combinations every codec test runs over.
#pragma once

#include <tuple>

#include <zipccl/codec/codec.hpp>

namespace zipccl::testing {

using all_codecs = std::tuple<
    codec<bf16, codebook::analytic_gaussian>, codec<bf16, codebook::histogram>, codec<bf16, codebook::fixed>,
    codec<fp16, codebook::analytic_gaussian>, codec<fp16, codebook::histogram>, codec<fp16, codebook::fixed>,
    codec<fp32, codebook::analytic_gaussian>, codec<fp32, codebook::histogram>, codec<fp32, codebook::fixed>>;

// The codecs the stream executors (host and device) and the host collectives take: all of the
// above and the rANS policy (codebook::entropy), which the device collectives do not take yet.
using host_codecs = std::tuple<
    codec<bf16, codebook::analytic_gaussian>, codec<bf16, codebook::histogram>, codec<bf16, codebook::fixed>,
    codec<bf16, codebook::entropy>,
    codec<fp16, codebook::analytic_gaussian>, codec<fp16, codebook::histogram>, codec<fp16, codebook::fixed>,
    codec<fp16, codebook::entropy>,
    codec<fp32, codebook::analytic_gaussian>, codec<fp32, codebook::histogram>, codec<fp32, codebook::fixed>,
    codec<fp32, codebook::entropy>>;

}  // namespace zipccl::testing
