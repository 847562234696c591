// zipccl: the shape of a residual-VQ codebook set and the nearest-codeword measure, shared by the
// host codec (rvq.hpp) and the device search (cuda/rvq.cuh); no BLAS needed.
#pragma once

#include <cstddef>

#include "../config.hpp"

namespace zipccl::subspace {

namespace detail {
// The squared distance between a residual and a codeword of `sub` numbers, in double: the one
// nearest-codeword measure both executors use (the device search in cuda/rvq.cuh calls it too).
template <class T>
ZIPCCL_HOST_DEVICE double rvq_distance(const T* res, const T* word, std::size_t sub) {
  double dist = 0;
  for (std::size_t j = 0; j < sub; ++j) {
    const double e = static_cast<double>(res[j]) - static_cast<double>(word[j]);
    dist += e * e;
  }
  return dist;
}
}  // namespace detail

// dim numbers per token in `groups` groups of sub() = dim / groups, `rounds` residual rounds,
// `codewords` words per codebook (at most 65,536: indices are 16-bit).
struct rvq_shape {
  std::size_t dim = 0, groups = 1, rounds = 1, codewords = 256;
  ZIPCCL_HOST_DEVICE std::size_t sub() const { return groups ? dim / groups : 0; }
  ZIPCCL_HOST_DEVICE std::size_t words() const { return groups * rounds * codewords; }
  ZIPCCL_HOST_DEVICE bool valid() const {
    return dim > 0 && groups > 0 && rounds > 0 && codewords > 1 && codewords <= 65536 && dim % groups == 0;
  }
  ZIPCCL_HOST_DEVICE bool operator==(const rvq_shape& o) const {
    return dim == o.dim && groups == o.groups && rounds == o.rounds && codewords == o.codewords;
  }
};

}  // namespace zipccl::subspace
