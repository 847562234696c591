// Seeded random matrices and token ids for the subspace codec's tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <zipccl/subspace/stiefel.hpp>

namespace zipccl::testing {

template <class T>
subspace::matrix<T> gaussian_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  subspace::matrix<T> m(rows, cols);
  for (T& e : m.v) e = static_cast<T>(nd(rng));
  return m;
}

inline std::vector<std::int32_t> token_ids(std::size_t n, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& v : t) v = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return t;
}

}  // namespace zipccl::testing
