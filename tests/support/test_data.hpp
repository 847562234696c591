// Test and benchmark data: seeded generators for near-Gaussian and heavy-tailed tensors, float
// conversions to bf16 / fp16 bit patterns, and loaders for the shared real tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <zipccl/codebook/fixed.hpp>
#include <zipccl/collective/detail/arith.hpp>
#include <zipccl/element.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define ZIPCCL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZIPCCL_TEST_SANITIZED 1
#endif
#endif
#ifndef ZIPCCL_TEST_SANITIZED
#define ZIPCCL_TEST_SANITIZED 0
#endif

namespace zipccl::testing {

// Whether this build runs under AddressSanitizer (the sanitize preset). The slowest suites then run
// a sample of their cases: every shape and code path still, fewer repetitions of each (fewer
// random mutations, one checksum setting per size, alternating along the sizes), since the sanitizer looks for reads and writes out of bounds,
// which the shapes decide; the default build runs them all.
inline constexpr bool sanitized = ZIPCCL_TEST_SANITIZED != 0;

// Round to nearest even (NaNs stay quiet): the library's own narrowing.
template <class E>
typename E::bits_type from_float(float f) {
  return collective::detail::narrow<E>(f);
}

enum class distribution { gaussian, laplace, student_t };

inline const char* distribution_name(distribution d) {
  switch (d) {
    case distribution::gaussian: return "gaussian";
    case distribution::laplace: return "laplace";
    case distribution::student_t: return "student_t";
  }
  return "?";
}

// n samples of scale * X, X from the distribution (Student-t with 4 degrees of freedom).
template <class E>
std::vector<typename E::bits_type> make_tensor(std::uint64_t n, double scale,
                                               distribution d = distribution::gaussian,
                                               std::uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> expo(1.0);
  std::student_t_distribution<double> student(4.0);
  std::bernoulli_distribution coin(0.5);
  std::vector<typename E::bits_type> v(n);
  for (auto& x : v) {
    double s = 0;
    switch (d) {
      case distribution::gaussian: s = normal(rng); break;
      case distribution::laplace: s = coin(rng) ? expo(rng) : -expo(rng); break;
      case distribution::student_t: s = student(rng); break;
    }
    x = from_float<E>(static_cast<float>(s * scale));
  }
  return v;
}

// A row-sparse gradient, as an embedding's is (the tokens absent from a batch leave their rows
// exactly zero): rows x cols elements of scale * N(0, 1), row-major, each row zero with
// probability zero_rows (its sign bits clear: +0).
template <class E>
std::vector<typename E::bits_type> make_row_sparse(std::uint64_t rows, std::uint64_t cols, double zero_rows,
                                                   double scale = 1e-3, std::uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::bernoulli_distribution zero(zero_rows);
  std::vector<typename E::bits_type> v(rows * cols, 0);
  for (std::uint64_t r = 0; r < rows; ++r) {
    if (zero(rng)) continue;
    for (std::uint64_t c = 0; c < cols; ++c) v[r * cols + c] = from_float<E>(static_cast<float>(normal(rng) * scale));
  }
  return v;
}

// An element-sparse tensor, as a ReLU layer's gradient or a top-k sparsified one is: n elements
// of scale * N(0, 1), each exactly zero with probability zero_frac, and of the zeros a fraction
// negative (-0.0: a negative value times a zero mask).
template <class E>
std::vector<typename E::bits_type> make_element_sparse(std::uint64_t n, double zero_frac, double negative = 0.5,
                                                       double scale = 1e-3, std::uint64_t seed = 42) {
  using T = typename E::bits_type;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::bernoulli_distribution zero(zero_frac), neg(negative);
  std::vector<T> v(n);
  for (auto& x : v) {
    if (zero(rng)) x = neg(rng) ? static_cast<T>(T(1) << (8 * sizeof(T) - 1)) : T(0);
    else x = from_float<E>(static_cast<float>(normal(rng) * scale));
  }
  return v;
}

// 1.0, and a value whose exponent (and fp16 high byte) differs from 1.0's: a chunk of ones with one
// rare value makes a rANS table of frequencies 4095 and 1.
template <class E>
constexpr typename E::bits_type one_value() {
  if constexpr (sizeof(typename E::bits_type) == 4) return 0x3F800000u;
  else if constexpr (std::is_same_v<E, fp16>) return 0x3C00u;
  else return 0x3F80u;
}
template <class E>
constexpr typename E::bits_type rare_value() {
  if constexpr (sizeof(typename E::bits_type) == 4) return 0x00C00001u;  // exponent 1
  else return static_cast<typename E::bits_type>(0x0C01u);                // bf16 exponent 24, fp16 exponent 3
}

template <class E>
std::vector<typename E::bits_type> random_bits(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<typename E::bits_type> v(n);
  for (auto& x : v) x = static_cast<typename E::bits_type>(rng());
  return v;
}

// Chunks of `chunk` elements (a multiple of 256), each meant for a path of the rANS encoder that
// smooth data never takes, then a short tail: 0, one value (one symbol); 1 and 2, half of the
// elements zeros that are all -0.0, then all +0.0 (zero symbols, one of them with no elements);
// 3, every other 64-element group all +0.0 and random bits between (a zero mask whose rANS body
// does not fit: zero_stored); 4, random bits (stored); 5, three groups in four all +0.0, normal
// values between (zero_rans); 6, ones with one rare value (frequencies 4095 and 1); the tail,
// 212 elements whose groups 0 and 2 and short last group (20 elements) are +0.0.
template <class E>
std::vector<typename E::bits_type> rans_edge_chunks(std::uint64_t chunk, std::uint64_t seed = 5) {
  using T = typename E::bits_type;
  const T neg0 = static_cast<T>(T(1) << (8 * sizeof(T) - 1));
  std::vector<T> v;
  const auto add = [&](const std::vector<T>& part) { v.insert(v.end(), part.begin(), part.end()); };
  add(std::vector<T>(chunk, one_value<E>()));
  auto minus = make_element_sparse<E>(chunk, 0.5, 1.0, 1e-3, seed + 1);
  auto plus = make_element_sparse<E>(chunk, 0.5, 0.0, 1e-3, seed + 2);
  add(minus);
  add(plus);
  auto masked_noise = random_bits<E>(chunk, seed + 3);
  for (std::uint64_t i = 0; i < chunk; ++i)
    if ((i / 64) % 2 == 0) masked_noise[i] = 0;
    else if (masked_noise[i] == 0 || masked_noise[i] == neg0) masked_noise[i] = 1;  // (no zero symbols)
  add(masked_noise);
  add(random_bits<E>(chunk, seed + 4));
  auto mostly_zero = make_element_sparse<E>(chunk, 0.0, 0.5, 1e-3, seed + 5);
  for (std::uint64_t i = 0; i < chunk; ++i)
    if ((i / 64) % 4 != 1) mostly_zero[i] = 0;
  add(mostly_zero);
  std::vector<T> rare(chunk, one_value<E>());
  rare[chunk / 3] = rare_value<E>();
  add(rare);
  auto tail = make_element_sparse<E>(212, 0.0, 0.5, 1e-3, seed + 6);
  for (std::uint64_t i = 0; i < 212; ++i)
    if (i < 64 || i >= 128) tail[i] = 0;
  add(tail);
  return v;
}

// Chunks that pair up: 4 * chunk + 100 elements (chunk a multiple of 256) whose chunk 1 is chunk
// 0's elements and chunk 3 chunk 2's with bits 0 and 2 flipped (elements that are or would become
// +0.0 or -0.0 left as they are). Those bits lie in every type's mantissa (and in fp16's rANS rest),
// so each pair has the same exponents, rANS symbols and zeros and codes, under every policy, to
// two chunks of one mode and size but of other bytes. Chunk 0 and the tail are near-Gaussian,
// chunk 2 random bits (stored). With `sparse`, chunk 0 has two all-zero 64-element groups and
// every 23rd element +0.0 or -0.0 (a zero mask, and rANS zero symbols in chunks of 2048), and
// chunk 2 two zero groups (zero_stored).
template <class E>
std::vector<typename E::bits_type> paired_chunks(std::uint64_t chunk, bool sparse, std::uint64_t seed) {
  using T = typename E::bits_type;
  constexpr T negative_zero = static_cast<T>(T(1) << (8 * sizeof(T) - 1));
  auto v = make_tensor<E>(4 * chunk + 100, 0.1, distribution::gaussian, seed);
  const auto noise = random_bits<E>(chunk, seed + 1);
  std::copy(noise.begin(), noise.end(), v.begin() + 2 * chunk);
  const auto zero_group = [&](std::uint64_t first) { std::fill(v.begin() + first, v.begin() + first + 64, T(0)); };
  if (sparse) {
    for (std::uint64_t g : {1u, 3u}) zero_group(64 * g);
    for (std::uint64_t i = 0; i < chunk; i += 23)
      if (v[i] != 0) v[i] = (i / 23) % 2 ? T(0) : negative_zero;
    for (std::uint64_t g : {2u, 4u}) zero_group(2 * chunk + 64 * g);
  }
  for (std::uint64_t pair : {0u, 2u})
    for (std::uint64_t i = 0; i < chunk; ++i) {
      const T a = v[pair * chunk + i], b = static_cast<T>(a ^ T(5));
      const bool zero = [](T x) { return x == 0 || x == negative_zero; }(a) || b == 0 || b == negative_zero;
      v[(pair + 1) * chunk + i] = zero ? a : b;
    }
  return v;
}

// The policy object a test passes: stateless policies are default-constructed, codebook::fixed is
// calibrated on the data it will code (as a user calibrates on an earlier step).
template <class Codec>
typename Codec::codebook_type policy_for(const typename Codec::bits_type* data, std::uint64_t n) {
  using P = typename Codec::codebook_type;
  if constexpr (std::is_same_v<P, codebook::fixed>)
    return codebook::fixed::calibrate<typename Codec::element_type>(data, n);
  else
    return P{};
}

// ../shared/data relative to the source tree, or ZIPCCL_DATA_DIR when set.
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("ZIPCCL_DATA_DIR")) return env;
#ifdef ZIPCCL_SOURCE_DIR
  return std::string(ZIPCCL_SOURCE_DIR) + "/../shared/data";
#else
  return "../shared/data";
#endif
}

struct shared_tensor {
  std::string name, dtype, kind, file;
};

// The manifest's rows for one dtype ("bf16", "fp16", "fp32"); empty when the data is absent.
inline std::vector<shared_tensor> shared_manifest(const std::string& dtype) {
  std::vector<shared_tensor> rows;
  std::ifstream in(shared_data_dir() + "/manifest.tsv");
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (header) { header = false; continue; }
    std::vector<std::string> col;
    std::size_t start = 0;
    for (std::size_t p; (p = line.find('\t', start)) != std::string::npos; start = p + 1)
      col.push_back(line.substr(start, p - start));
    col.push_back(line.substr(start));
    if (col.size() >= 5 && col[1] == dtype) rows.push_back({col[0], col[1], col[2], col[4]});
  }
  return rows;
}

template <class E>
std::vector<typename E::bits_type> load_shared(const shared_tensor& t) {
  std::ifstream in(shared_data_dir() + "/" + t.file, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<typename E::bits_type> v(raw.size() / sizeof(typename E::bits_type));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(typename E::bits_type));
  return v;
}

}  // namespace zipccl::testing
