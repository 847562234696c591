// zipccl: the input a host caller codes after the chunk it hands an encoder (read_ahead). Plain
// C++: no intrinsics.
#pragma once

#include <cstdint>

namespace zipccl::host::detail {

// The input a caller codes after the chunk it passes to encode_chunk (the next chunk of the same
// compress call or collective), or none. The vector rANS encoders ask it into the cache a group's
// share at a time while they code the chunk before it, where that chunk has no zero mask (its
// elements at the offset of the group being coded), so that its first pass (the zero-group scan,
// or the symbol counts without zero groups) finds it there rather than in memory: on Zen 3 (AVX2)
// 3-9% faster compression of dense bf16, fp16 and fp32, with the input in cache or swept out of
// it before the call (docs/PERFORMANCE.md, "The next chunk read ahead"). The 3-bit policies'
// encoders do not take it (bf16 1-2% faster with it, fp16 4% slower), nor do the scalar ones.
struct read_ahead {
  const std::uint8_t* at = nullptr;
  std::uint64_t bytes = 0;
  // The chunk after the one of elements [first, first + m) of `count` elements at `in`, chunks of
  // chunk_elems elements of elem_size bytes: none after the last.
  static read_ahead after(const std::uint8_t* in, std::uint64_t first, std::uint64_t m, std::uint64_t count,
                          std::uint64_t chunk_elems, unsigned elem_size) {
    const std::uint64_t next = first + m;
    if (next >= count) return {};
    const std::uint64_t k = count - next < chunk_elems ? count - next : chunk_elems;
    return {in + next * elem_size, k * elem_size};
  }
  // host::compress: the chunk after chunk c of n elements at `in`, where c's part codes the chunks
  // before chunk e (the chunk e on, another part's, is none of its business).
  static read_ahead in_part(const std::uint8_t* in, std::uint64_t c, std::uint64_t e, std::uint64_t n,
                            std::uint64_t chunk_elems, unsigned elem_size) {
    const std::uint64_t first = c * chunk_elems, end = e * chunk_elems < n ? e * chunk_elems : n;
    if (first >= n) return {};
    const std::uint64_t m = n - first < chunk_elems ? n - first : chunk_elems;
    return after(in, first, m, end, chunk_elems, elem_size);
  }
};

}  // namespace zipccl::host::detail
