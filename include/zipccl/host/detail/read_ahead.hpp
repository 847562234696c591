// zipccl: the input a host caller codes after the chunk it hands an encoder (read_ahead). Plain
// C++: no intrinsics.
#pragma once

#include <cstdint>

namespace zipccl::host::detail {

// The input a caller codes after the chunk it passes to encode_chunk (the next chunk of the same
// compress call or collective), or none. The vector rANS encoders ask it into the cache a group's
// share at a time while they code the chunk before it, where that chunk has no zero mask (its
// elements at the offset of the group being coded), so that its first pass (the zero-group scan,
// or the symbol counts without zero groups) finds it there rather than in memory: faster
// compression of dense bf16, fp16 and fp32, with the input in cache or swept out of it before
// the call (docs/design.md, "The next chunk read ahead"). The 3-bit policies' encoders do
// not take it (it slows fp16 down more than it speeds bf16 up), nor do the scalar ones.
struct read_ahead {
  const std::uint8_t* at = nullptr;
  std::uint64_t bytes = 0;
  // The chunk (at most chunk_elems elements of elem_size bytes) from element `next` on of the
  // `end` elements at `in` that the caller codes: none from `end` on.
  static read_ahead from(const std::uint8_t* in, std::uint64_t next, std::uint64_t end, std::uint64_t chunk_elems,
                         unsigned elem_size) {
    if (next >= end) return {};
    const std::uint64_t k = end - next < chunk_elems ? end - next : chunk_elems;
    return {in + next * elem_size, k * elem_size};
  }
  // host::compress: the chunk after chunk c of the n elements at `in`, where c's part codes the
  // chunks before chunk e (chunk e on is another part's).
  static read_ahead in_part(const std::uint8_t* in, std::uint64_t c, std::uint64_t e, std::uint64_t n,
                            std::uint64_t chunk_elems, unsigned elem_size) {
    return from(in, (c + 1) * chunk_elems, e * chunk_elems < n ? e * chunk_elems : n, chunk_elems, elem_size);
  }
};

}  // namespace zipccl::host::detail
