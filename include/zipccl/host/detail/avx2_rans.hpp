// zipccl: AVX2 encoder and decoder of rANS chunks (codebook::entropy), on x86 CPUs with AVX2.
//
// encode_rans_chunk codes one chunk, decode_rans_body decodes the rANS body of a chunk that passed
// check_chunk, decode_rans_pair decodes two dense bodies in one loop (false where either did not
// decode: then the caller decodes each alone for its status). The encoder's bytes and the
// decoder's values and statuses are codec_detail's (test_host_simd compares them). The parts:
//   avx2_rans_common.hpp  the lane-mask and rest tables and the state loads both kernels share;
//   avx2_rans_counts.hpp  the symbol counts that the encoder's plan takes (count_symbols for bf16
//                         and fp32, fp16_counts for fp16);
//   avx2_rans_encode.hpp  the encoder's kernels of a full group (encode_kernel,
//                         encode_zeros_kernel for bodies with zero symbols);
//   avx2_rans_decode.hpp  the decoder's kernels of a full group (decode_rank_kernel and
//                         decode_kernel, and their zero-symbol forms);
//   rans_group_loops.hpp  the group loops (rans_loops::encode_chunk_with, decode_body_with,
//                         decode_pair_with), which take a full group's kernel as a parameter, give
//                         the short and final groups to the reference's group functions, and
//                         serve avx512_rans.hpp too.
// Needs AVX2, BMI1 and POPCNT (chunk_dispatch.hpp includes it where ZIPCCL_HAS_AVX2 holds).
#pragma once

#include <cstdint>

#include "../../codec/chunk_codec.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "avx2_rans_common.hpp"
#include "avx2_rans_counts.hpp"
#include "avx2_rans_decode.hpp"
#include "avx2_rans_encode.hpp"
#include "rans_group_loops.hpp"
#include "read_ahead.hpp"

namespace zipccl::host::detail::avx2::rans_simd {

template <class E>
std::uint64_t encode_rans_chunk(const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal, std::uint8_t* out,
                                const codec_detail::body_shape& shape, const read_ahead& ahead = {}) {
  return rans_loops::encode_chunk_with<E, encode_kernel<E>, encode_zeros_kernel<E>>(in, m, seal, out, shape, ahead);
}

template <class E>
status decode_rans_body(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                        const codec_detail::body_shape& body, std::uint8_t* out) {
  return rans_loops::decode_body_with<E, decode_kernel<E>, decode_zeros_kernel<E>>(chunk, m, h, body, out);
}

template <class E>
bool decode_rans_pair(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  return rans_loops::decode_pair_with<E, decode_kernel<E>>(chunk, m, h, body, out);
}

}  // namespace zipccl::host::detail::avx2::rans_simd
