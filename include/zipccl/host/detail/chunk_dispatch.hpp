// zipccl: chooses, per element type and build flags, the host code path for one chunk.
// Every path produces exactly the bytes of the reference in codec/chunk_codec.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../codebook/analytic_gaussian.hpp"
#include "../../codebook/entropy.hpp"
#include "../../codebook/fixed.hpp"
#include "../../codebook/histogram.hpp"
#include "../../codec/chunk_codec.hpp"
#include "../../config.hpp"
#include "read_ahead.hpp"
#if ZIPCCL_HAS_AVX512
#include "avx512.hpp"
#endif
#if ZIPCCL_HAS_AVX2
#include "avx2.hpp"
#include "avx2_rans.hpp"
#endif
#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
#include "avx512_rans.hpp"
#endif

namespace zipccl::host::detail {

// The vector rANS path: 16-lane AVX-512 kernels where they are built, else 8-lane AVX2 ones.
#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
namespace rans_vector = avx512::rans_simd;
#elif ZIPCCL_HAS_AVX2
namespace rans_vector = avx2::rans_simd;
#endif

// Codes one chunk; with zero_masks, a chunk whose zero groups pay for their mask is written in a
// zero_* mode (format::chunk_layout::zero_mask_pays). `ahead`: the input the caller codes next
// (read_ahead), which the vector rANS encoders ask into the cache while they code this chunk (the
// 3-bit policies' encoders and the scalar ones take no read-ahead).
template <class E, class Policy>
std::uint64_t encode_chunk(const Policy& policy, const std::uint8_t* in, std::uint64_t m, format::chunk_seal seal,
                           bool zero_masks, std::uint8_t* out, [[maybe_unused]] const read_ahead& ahead = {}) {
#if ZIPCCL_HAS_AVX2
  const codec_detail::body_shape shape =
      codec_detail::plan_body<E>(in, m, zero_masks, out, avx2::zero_group_test{format::chunk_layout<E>::elem_size});
#else
  const codec_detail::body_shape shape = codec_detail::plan_body<E>(in, m, zero_masks, out);
#endif
  if constexpr (codebook::is_entropy_v<Policy>) {
    (void)policy;
#if ZIPCCL_HAS_AVX2
    return rans_vector::encode_rans_chunk<E>(in, m, seal, out, shape, ahead);
#else
    return codec_detail::encode_rans_chunk<E>(in, m, seal, out, shape);
#endif
  } else {
    [[maybe_unused]] constexpr bool known = std::is_same_v<Policy, codebook::analytic_gaussian> ||
                                            std::is_same_v<Policy, codebook::histogram> ||
                                            std::is_same_v<Policy, codebook::fixed>;
#if ZIPCCL_HAS_AVX512
    // the AVX-512 path codes dense chunks; chunks with a zero mask take the AVX2 one
    if constexpr (known)
      if (shape.zero_mask == nullptr) return avx512::encode_chunk<E>(policy, in, m, seal, out);
#endif
#if ZIPCCL_HAS_AVX2
    if constexpr (known) return avx2::encode_chunk<E>(policy, in, m, seal, out, shape);
#endif
    const codebook::table t = codec_detail::choose_table<E>(policy, in, m, shape);
    return codec_detail::encode_chunk<E>(in, m, t, seal, out, shape);
  }
}

template <class E>
status decode_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                    std::uint8_t* out) {
#if ZIPCCL_HAS_AVX512
  // the AVX-512 path decodes stored and coded chunks
  if (span < format::chunk_header_bytes || chunk[0] <= 1u) return avx512::decode_chunk<E>(chunk, span, m, seal, out);
#endif
#if ZIPCCL_HAS_AVX2
  // the AVX2 paths decode coded chunks, and the AVX2 or AVX-512 ones rANS chunks, with or without
  // a zero mask, after the reference's checks
  if (span >= format::chunk_header_bytes && chunk[0] != 0u && chunk[0] != 2u) {
    format::chunk_header h;
    codec_detail::body_shape body;
    const status st = codec_detail::check_chunk<E>(chunk, span, m, seal, &h, &body);
    if (st != status::success) return st;
    if (format::mode_is_rans(h.mode)) return rans_vector::decode_rans_body<E>(chunk, m, h, body, out);
    return avx2::decode_coded_body<E>(chunk, m, h, body, out);
  }
#endif
  // stored chunks: the reference
  return codec_detail::decode_chunk<E>(chunk, span, m, seal, out);
}

// Two chunks, each decoded as decode_chunk decodes it (same values, same statuses in st). Where
// both are dense rANS chunks and the vector rANS kernels are built, their bodies are decoded by
// rans_vector::decode_rans_pair (two 16 KiB decode tables on the stack): in one loop where the
// kernels pay for it (AVX-512 always; AVX2 where both tables take the rank decoder), else one
// after the other; when either fails, one by one here.
template <class E>
void decode_chunk_pair(const std::uint8_t* const (&chunk)[2], const std::uint64_t (&span)[2],
                       const std::uint64_t (&m)[2], const format::chunk_seal (&seal)[2], std::uint8_t* const (&out)[2],
                       status (&st)[2]) {
#if ZIPCCL_HAS_AVX2
  const auto dense_rans = [&](int c) {
    return span[c] >= format::chunk_header_bytes &&
           (chunk[c][0] == static_cast<std::uint8_t>(format::chunk_mode::rans) ||
            chunk[c][0] == static_cast<std::uint8_t>(format::chunk_mode::zero_rans));
  };
  if (dense_rans(0) && dense_rans(1)) {
    format::chunk_header h[2];
    codec_detail::body_shape body[2];
    if (codec_detail::check_chunk<E>(chunk[0], span[0], m[0], seal[0], &h[0], &body[0]) == status::success &&
        codec_detail::check_chunk<E>(chunk[1], span[1], m[1], seal[1], &h[1], &body[1]) == status::success &&
        rans_vector::decode_rans_pair<E>(chunk, m, h, body, out)) {
      st[0] = st[1] = status::success;
      return;
    }
  }
#endif
  for (int c = 0; c < 2; ++c) st[c] = decode_chunk<E>(chunk[c], span[c], m[c], seal[c], out[c]);
}

}  // namespace zipccl::host::detail
