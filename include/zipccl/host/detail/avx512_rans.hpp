// zipccl: AVX-512 encoder and decoder of rANS chunks (codebook::entropy), built where
// ZIPCCL_HAS_AVX512 and ZIPCCL_HAS_AVX2 hold (the kernels need AVX-512 F, BW, VBMI for the byte
// permutes and VBMI2 for the 16-bit shifts and the byte and word compress and expand).
//
// encode_rans_chunk codes one chunk, decode_rans_body decodes the rANS body of a chunk that passed
// check_chunk, decode_rans_pair decodes two dense bodies in one loop (false where either did not
// decode: then the caller decodes each alone for its status). The parts:
//   avx512_rans_common.hpp  what both kernels share (even_words);
//   avx512_rans_counts.hpp  the symbol and zero counts that the encoder's plan takes;
//   avx512_rans_encode.hpp  the encoder's kernels of a full group (encode_kernel,
//                           encode_zeros_kernel for bodies with zero symbols);
//   avx512_rans_decode.hpp  the decoder's kernels of a full group (decode_rank_kernel and
//                           decode_kernel, and their zero-symbol forms);
//   rans_group_loops.hpp    the group loops, the AVX2 path's too, with the same fall-backs to the
//                           reference's group functions.
// So the encoder's bytes and the decoder's values and statuses are codec_detail's
// (test_host_simd_avx512 compares them on AVX-512 hardware, test_host_simd_avx512_emulated on any
// x86 with AVX2).
#pragma once

#include <cstdint>

#include "../../codec/chunk_codec.hpp"
#include "../../error.hpp"
#include "../../format/chunk.hpp"
#include "avx512_rans_counts.hpp"
#include "avx512_rans_decode.hpp"
#include "avx512_rans_encode.hpp"
#include "rans_group_loops.hpp"
#include "read_ahead.hpp"

namespace zipccl::host::detail::avx512::rans_simd {

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

// Two dense rANS bodies in one loop (rans_loops::decode_pair_with): four chains of sixteen
// states in flight instead of two, which a core with room for them overlaps (docs/design.md,
// "The AVX-512 rANS kernels").
template <class E>
bool decode_rans_pair(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&m)[2],
                      const format::chunk_header (&h)[2], const codec_detail::body_shape (&body)[2],
                      std::uint8_t* const (&out)[2]) {
  return rans_loops::decode_pair_with<E, decode_kernel<E>>(chunk, m, h, body, out);
}

}  // namespace zipccl::host::detail::avx512::rans_simd
