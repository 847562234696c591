// zipccl: the spill budget a tensor needs on the device collectives' fixed-size wire
// (collective_options::device_wire.spill_permille; docs/format.md, "Fixed-size segments").
//
//   using C = zipccl::codec<zipccl::bf16, zipccl::codebook::entropy>;
//   opt.device_wire.spill_permille = zipccl::spill_permille_for<C>(sample, n, opt);
#pragma once

#include <cstdint>
#include <vector>

#include "../format/layout.hpp"
#include "common.hpp"
#include "detail/fixed_wire.hpp"
#include "detail/wire.hpp"

namespace zipccl {

// The spill budget (collective_options::device_wire.spill_permille) that a tensor like `sample`
// needs: the largest share of escape bytes of any of its segments, cut as the device collectives
// cut a message (their chunk, device_chunk_elems, not opt.codec's; opt's segment size), in bytes
// per 1000 elements rounded up, plus `headroom` for the next tensors' spread. 0 for an empty
// sample; never above 4000 (a stored chunk's rest always fits).
template <class Codec>
std::uint32_t spill_permille_for(const void* sample, std::uint64_t n, const collective_options& opt = {},
                                 const typename Codec::codebook_type& cb = {}, std::uint32_t headroom = 5,
                                 std::uint64_t chunk = collective::detail::device_chunk_elems) {
  using W = collective::detail::wire<Codec>;
  if (sample == nullptr || n == 0 || !format::valid_chunk_elems(chunk)) return 0;
  const std::uint64_t seg_opt = collective::detail::device_segment_elems(opt.pipeline.segment_elems);
  const std::uint64_t seg = (seg_opt + chunk - 1) / chunk * chunk;
  std::vector<std::uint8_t> fixed(W::fixed_bytes(seg < n ? seg : n, chunk) + W::spill_bytes(chunk)),
      tail(W::max_bytes(seg < n ? seg : n, chunk));
  std::uint64_t worst = 0;  // bytes per 1000 elements, rounded up
  for (std::uint64_t first = 0; first < n; first += seg) {
    const std::uint64_t m = n - first < seg ? n - first : seg;
    const std::uint64_t t =
        W::encode(cb, static_cast<const std::uint8_t*>(sample) + first * Codec::element_size, m, chunk, false,
                  collective::detail::wire_place{n, 0}, fixed.data(), tail.data());
    // the smallest p with fixed_wire::spill_bytes(m, p) >= t
    std::uint64_t p = (t * 1000 + m - 1) / m;
    while (p > 0 && collective::detail::fixed_wire<Codec>::spill_bytes(m, static_cast<std::uint32_t>(p - 1)) >= t) --p;
    worst = p > worst ? p : worst;
  }
  const std::uint64_t want = worst + headroom;
  return static_cast<std::uint32_t>(want < 4000 ? want : 4000);
}

}  // namespace zipccl
