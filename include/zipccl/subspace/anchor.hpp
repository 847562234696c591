// zipccl: the per-token anchor of the subspace codec, anchor[tok] = E[tok] P.
//
// E (V x r) is trainable; P (r x d) has orthonormal rows and is generated from a seed that sender
// and receiver share, so it is never sent. Gaussian entries (splitmix64, Box-Muller) are
// orthonormalised row by row with modified Gram-Schmidt: the same seed gives the same P on every
// machine (IEEE arithmetic, no library random generator involved).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../error.hpp"
#include "detail/blas.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

namespace detail {
inline std::uint64_t splitmix64(std::uint64_t* s) {
  std::uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// A standard normal deviate from two uniform ones (Box-Muller), in double.
inline double normal(std::uint64_t* s) {
  const double u1 = (static_cast<double>(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = static_cast<double>(splitmix64(s) >> 11) / 9007199254740992.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
}  // namespace detail

// A d x r matrix with orthonormal columns drawn from `seed` (the transpose of an anchor basis, or a
// fixed random projection).
template <class T>
matrix<T> random_orthonormal(std::size_t d, std::size_t r, std::uint64_t seed) {
  matrix<T> m(d, r);
  std::uint64_t s = seed;
  for (T& e : m.v) e = static_cast<T>(detail::normal(&s));
  // fails only for r > d (Gaussian columns are independent): a caller's error
  throw_if_error(qr_retract(&m), "zipccl::subspace::random_orthonormal (needs r <= d)");
  return m;
}

template <class T>
class anchor_table {
 public:
  anchor_table(std::size_t vocab, std::size_t d, std::size_t r, std::uint64_t seed)
      : vocab_(vocab), d_(d), r_(r), seed_(seed), e_(vocab, r), p_(r, d) {
    const matrix<T> pt = random_orthonormal<T>(d, r, seed ^ 0xA5C3D1E2F4B60789ull);
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < d; ++j) p_(i, j) = pt(j, i);
  }

  std::size_t vocab() const { return vocab_; }
  std::size_t dim() const { return d_; }
  std::size_t rank() const { return r_; }
  std::uint64_t seed() const { return seed_; }
  matrix<T>& table() { return e_; }  // E, V x r: trainable
  const matrix<T>& table() const { return e_; }
  const matrix<T>& basis() const { return p_; }  // P, r x d: fixed by the seed

  // out (n x r) = E[tok]; invalid_argument for a token id outside [0, V).
  status rows(const std::int32_t* tok, std::size_t n, matrix<T>* out) const {
    if (out == nullptr || (tok == nullptr && n != 0)) return status::invalid_argument;
    matrix<T> e(n, r_);
    for (std::size_t t = 0; t < n; ++t) {
      if (tok[t] < 0 || static_cast<std::size_t>(tok[t]) >= vocab_) return status::invalid_argument;
      for (std::size_t k = 0; k < r_; ++k) e(t, k) = e_(static_cast<std::size_t>(tok[t]), k);
    }
    *out = std::move(e);
    return status::success;
  }

  // out (n x d) = E[tok] P; invalid_argument for a token id outside [0, V).
  status gather(const std::int32_t* tok, std::size_t n, matrix<T>* out) const {
    if (out == nullptr) return status::invalid_argument;
    matrix<T> e;
    const status s = rows(tok, n, &e);
    if (s != status::success) return s;
    *out = matrix<T>(n, d_);
    detail::gemm<T>(false, false, n, d_, r_, T(1), e.data(), r_, p_.data(), d_, T(0), out->data(), d_);
    return status::success;
  }

  // dE[tok[t]] += scale * g[t] for every t (g: n x r, gradients already in E's coordinates).
  // Checks every id before it adds anything.
  status scatter_rows(const std::int32_t* tok, std::size_t n, const matrix<T>& g, T scale, matrix<T>* de) const {
    if (de == nullptr || de->rows != vocab_ || de->cols != r_ || g.rows != n || g.cols != r_ ||
        (tok == nullptr && n != 0))
      return status::invalid_argument;
    for (std::size_t t = 0; t < n; ++t)
      if (tok[t] < 0 || static_cast<std::size_t>(tok[t]) >= vocab_) return status::invalid_argument;
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t k = 0; k < r_; ++k) (*de)(static_cast<std::size_t>(tok[t]), k) += scale * g(t, k);
    return status::success;
  }

  // dE[tok[t]] += scale * g[t] P^T for every t (g: n x d; dE: V x r).
  status scatter_gradient(const std::int32_t* tok, std::size_t n, const matrix<T>& g, T scale, matrix<T>* de) const {
    if (g.rows != n || g.cols != d_) return status::invalid_argument;
    matrix<T> gp(n, r_);
    detail::gemm<T>(false, true, n, r_, d_, T(1), g.data(), d_, p_.data(), d_, T(0), gp.data(), r_);
    return scatter_rows(tok, n, gp, scale, de);
  }

 private:
  std::size_t vocab_, d_, r_;
  std::uint64_t seed_;
  matrix<T> e_, p_;
};

}  // namespace zipccl::subspace
