// zipccl: one chunk encoded or decoded, whatever its mode, for every executor: code_chunk picks
// the body's shape and the policy's coder (3-bit: group_coder.hpp; rANS: rans_chunk.hpp),
// decode_chunk checks the chunk (chunk_checks.hpp) and hands its body to the mode's decoder.
// These are the reference: the host executor calls them directly (its SIMD paths are checked
// byte for byte against them); the device kernels call the per-lane pieces.
#pragma once

#include <cstdint>

#include "../codebook/table.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../format/chunk.hpp"
#include "chunk_body.hpp"
#include "chunk_checks.hpp"
#include "group_coder.hpp"
#include "rans.hpp"
#include "rans_chunk.hpp"

namespace zipccl::codec_detail {

// The whole reference encoder for one chunk: its shape (zero mask or not), the policy's table
// over the body, the body coded or stored. Returns the chunk's size.
template <class E, class Policy>
ZIPCCL_HOST_DEVICE std::uint64_t code_chunk(const Policy& policy, const std::uint8_t* in, std::uint64_t m,
                                            format::chunk_seal seal, bool zero_masks, std::uint8_t* out) {
  const body_shape shape = plan_body<E>(in, m, zero_masks, out);
  if constexpr (Policy::stat == codebook::statistic::symbol_counts) {
    (void)policy;
    return encode_rans_chunk<E>(in, m, seal, out, shape);
  } else {
    const codebook::table t = choose_table<E>(policy, in, m, shape);
    return encode_chunk<E>(in, m, t, seal, out, shape);
  }
}

// Decodes one validated-span chunk of m elements into out (m elements, any alignment).
template <class E>
ZIPCCL_HOST_DEVICE status decode_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m,
                                       format::chunk_seal seal, std::uint8_t* out) {
  format::chunk_header h;
  body_shape body;
  const status st = check_chunk<E>(chunk, span, m, seal, &h, &body);
  if (st != status::success) return st;
  if (format::mode_is_stored(h.mode)) {
    decode_stored_body<E>(chunk, m, body, out);
    return status::success;
  }
  if (format::mode_is_rans(h.mode)) {
#if defined(__CUDA_ARCH__)
    // not in one device thread: its 16 KiB slot table would sit in local memory. The device
    // decodes rANS in cuda::block_decode<E, Threads, true> (one warp of a block per chunk), which
    // cuda::decompress uses, or with tuning<..., RansWarps > 0> in cuda/detail/warp_rans.cuh
    // (every warp a chunk of its own).
    return rans::table_ok(chunk + rans::layout<E>::table_offset(body.base), h.table[0] + 1u, header_zero_symbols(h))
               ? status::unsupported_mode
               : status::corrupt;
#else
    return decode_rans_body<E>(chunk, m, h, body, out);
#endif
  }
  return decode_coded_body<E>(chunk, m, h, body, out);
}

}  // namespace zipccl::codec_detail
