// zipccl: codebook::entropy, an entropy code for each element's exponent (rANS).
//
// Instead of a 7-entry table and 3-bit codes, each chunk carries a table of 12-bit symbol
// frequencies counted over its body, and the symbols (the exponent field of bf16 and fp32, the
// high byte of fp16) are coded with 32 interleaved rANS states, so the exponent costs close to its
// entropy rather than 3 bits plus escapes. docs/design.md ("The entropy code")
// argues the choice; docs/format.md ("rANS chunk") has the bytes; codec/rans.hpp the shared code.
//
// Where it runs: the host executor (the reference, AVX2 and AVX-512 paths, encoder and decoder),
// the host collectives (their wire carries rANS chunks and zero masks), the device executor
// (cuda::compress and cuda::decompress; cuda::block_encode and cuda::block_decode with Entropy =
// true) and the device collectives (their fixed-size wire carries the rANS bodies in its spill
// area, so they need a budget near the raw size: spill_permille_for). README.md's status table
// says which of the device paths have run on a GPU.
#pragma once

#include "../config.hpp"
#include "../format/stream.hpp"
#include "table.hpp"

namespace zipccl::codebook {

struct entropy : policy_tag {
  static constexpr codebook_kind kind = codebook_kind::entropy;
  static constexpr statistic stat = statistic::symbol_counts;
};

// Whether a policy codes with rANS rather than 3-bit codes.
template <class P>
inline constexpr bool is_entropy_v = P::stat == statistic::symbol_counts;

}  // namespace zipccl::codebook
