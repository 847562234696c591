// zipccl: codec<Element, Codebook>, the compile-time composition of an element type and a
// codebook policy. It carries no state of its own; a stateful policy (codebook::fixed) is passed
// to the executors as an argument.
#pragma once

#include "../codebook/analytic_gaussian.hpp"
#include "../codebook/entropy.hpp"
#include "../codebook/fixed.hpp"
#include "../codebook/histogram.hpp"
#include "../codebook/table.hpp"
#include "../element.hpp"
#include "../format/chunk.hpp"

namespace zipccl {

template <class Element, class Codebook = codebook::analytic_gaussian>
struct codec {
  static_assert(is_element_v<Element>,
                "zipccl::codec: Element must be zipccl::bf16, zipccl::fp16 or zipccl::fp32");
  static_assert(codebook::is_policy_v<Codebook>,
                "zipccl::codec: Codebook must be a codebook policy (codebook::analytic_gaussian, "
                "codebook::histogram, codebook::fixed, codebook::entropy, or a type derived from codebook::policy_tag "
                "with the same members)");
  using element_type = Element;
  using codebook_type = Codebook;
  using bits_type = typename Element::bits_type;
  using layout = format::chunk_layout<Element>;
  static constexpr dtype type = Element::id;
  static constexpr unsigned element_size = sizeof(bits_type);
};

}  // namespace zipccl
