// The subspace codec's host building blocks: the Stiefel optimizer keeps A orthonormal, the
// backward passes match finite differences, encode/decode is the exact projection, and bad shapes
// or token ids are errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <zipccl/subspace/anchor.hpp>
#include <zipccl/subspace/projector.hpp>
#include <zipccl/subspace/stiefel.hpp>

#include "../support/subspace_data.hpp"

using namespace zipccl;
using namespace zipccl::subspace;

namespace {

#if defined(OPENBLAS_VERSION)
// The matrices here are small: OpenBLAS's threads would only cost time.
const bool one_blas_thread = [] {
  openblas_set_num_threads(1);
  return true;
}();
#endif

template <class T>
matrix<T> gaussian(std::size_t r, std::size_t c, std::uint64_t seed, double scale = 1.0) {
  return testing::gaussian_matrix<T>(r, c, seed, scale);
}
std::vector<std::int32_t> tokens(std::size_t n, int vocab, std::uint64_t seed) {
  return testing::token_ids(n, vocab, seed);
}

}  // namespace

TEMPLATE_TEST_CASE("A stays on the Stiefel manifold over 10,000 steps", "[subspace][host]", float, double) {
  using T = TestType;
  const std::size_t d = 64, r = 8;
  for (retraction how : {retraction::polar, retraction::qr}) {
    matrix<T> a = random_orthonormal<T>(d, r, 7);
    stiefel_options o;
    o.lr = 0.02;
    o.retract = how;
    stiefel_optimizer<T> opt(d, r, o);
    const int steps = how == retraction::polar ? 10000 : 2000;
    T worst = 0;
    for (int s = 0; s < steps; ++s) {
      const matrix<T> g = gaussian<T>(d, r, 1000 + static_cast<std::uint64_t>(s));
      REQUIRE(opt.step(&a, g) == status::success);
      const T e = orthogonality_error(a);
      worst = e > worst ? e : worst;
    }
    INFO("retraction " << (how == retraction::polar ? "polar" : "qr") << ", worst ||A^T A - I|| " << worst);
    CHECK(worst <= T(1e-5));
  }
}

TEST_CASE("the Riemannian gradient is tangent, and steps descend", "[subspace][host]") {
  const std::size_t d = 32, r = 4;
  const matrix<double> a = random_orthonormal<double>(d, r, 3);
  const matrix<double> g = gaussian<double>(d, r, 4);
  matrix<double> rg;
  REQUIRE(riemannian_gradient(a, g, &rg) == status::success);
  // tangent at A: A^T rg + rg^T A = 0
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < r; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < d; ++k) s += a(k, i) * rg(k, j) + rg(k, i) * a(k, j);
      CHECK(std::abs(s) < 1e-12);
    }
  // minimising -trace(A^T M) for a fixed M approaches the polar factor of M
  const matrix<double> m = gaussian<double>(d, r, 5);
  matrix<double> best = m;
  REQUIRE(polar(&best, 100, 1e-13, true) == status::success);
  auto objective = [&](const matrix<double>& x) {
    double s = 0;
    for (std::size_t i = 0; i < x.v.size(); ++i) s -= x.v[i] * m.v[i];
    return s;
  };
  matrix<double> x = random_orthonormal<double>(d, r, 6);
  stiefel_options o;
  o.lr = 0.05;
  stiefel_optimizer<double> opt(d, r, o);
  const double start = objective(x);
  matrix<double> neg_m = m;
  for (double& v : neg_m.v) v = -v;
  for (int s = 0; s < 300; ++s) REQUIRE(opt.step(&x, neg_m) == status::success);
  CHECK(objective(x) < start);
  CHECK(objective(x) - objective(best) < 0.05 * std::abs(objective(best)));
}

TEST_CASE("encode then decode is the exact projection", "[subspace][host]") {
  const std::size_t n = 50, d = 32, r = 6;
  const matrix<double> x = gaussian<double>(n, d, 11);
  const matrix<double> a = random_orthonormal<double>(d, r, 12);
  const auto tok = tokens(n, 20, 13);
  anchor_table<double> anc(20, d, r, 99);
  anc.table() = gaussian<double>(20, r, 14);
  for (const anchor_table<double>* an : {static_cast<const anchor_table<double>*>(nullptr),
                                         static_cast<const anchor_table<double>*>(&anc)}) {
    matrix<double> z, xh;
    REQUIRE(encode(x, tok.data(), a, an, &z) == status::success);
    REQUIRE(decode(z, tok.data(), a, an, &xh) == status::success);
    // x_hat = (x - c) A A^T + c, c the anchor
    matrix<double> c(n, d);
    if (an != nullptr) REQUIRE(an->gather(tok.data(), n, &c) == status::success);
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t j = 0; j < d; ++j) {
        double v = c(t, j);
        for (std::size_t k = 0; k < r; ++k) {
          double zk = 0;
          for (std::size_t i = 0; i < d; ++i) zk += (x(t, i) - c(t, i)) * a(i, k);
          v += zk * a(j, k);
        }
        CHECK(xh(t, j) == Approx(v).margin(1e-12));
      }
  }
  // the anchor basis has orthonormal rows, the same for the same seed, another for another seed
  const anchor_table<double> same(20, d, r, 99), other(20, d, r, 100);
  CHECK(same.basis().v == anc.basis().v);
  CHECK(other.basis().v != anc.basis().v);
  matrix<double> pt(d, r);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < d; ++j) pt(j, i) = anc.basis()(i, j);
  CHECK(orthogonality_error(pt) < 1e-12);
}

TEST_CASE("the backward passes match finite differences", "[subspace][host]") {
  // L = 0.5 ||x_hat - y||^2 through encode and decode, in double
  const std::size_t n = 12, d = 10, r = 3;
  const int vocab = 5;
  const matrix<double> x = gaussian<double>(n, d, 21), y = gaussian<double>(n, d, 22);
  const matrix<double> a = gaussian<double>(d, r, 23);  // any A: the formulas do not need A^T A = I
  const auto tok = tokens(n, vocab, 24);
  anchor_table<double> anc(vocab, d, r, 7);
  anc.table() = gaussian<double>(vocab, r, 25);
  auto loss = [&](const matrix<double>& xx, const matrix<double>& aa, const anchor_table<double>& an) {
    matrix<double> z, xh;
    REQUIRE(encode(xx, tok.data(), aa, &an, &z) == status::success);
    REQUIRE(decode(z, tok.data(), aa, &an, &xh) == status::success);
    double s = 0;
    for (std::size_t i = 0; i < xh.v.size(); ++i) s += 0.5 * (xh.v[i] - y.v[i]) * (xh.v[i] - y.v[i]);
    return s;
  };
  // analytic: forward, then the receiver's and the sender's backward passes
  matrix<double> z, xh, dz, dx;
  REQUIRE(encode(x, tok.data(), a, &anc, &z) == status::success);
  REQUIRE(decode(z, tok.data(), a, &anc, &xh) == status::success);
  matrix<double> dxh = xh;
  for (std::size_t i = 0; i < dxh.v.size(); ++i) dxh.v[i] -= y.v[i];
  matrix<double> da(d, r), de(vocab, r);
  REQUIRE(decode_backward(z, tok.data(), a, &anc, dxh, &dz, &da, &de) == status::success);
  REQUIRE(encode_backward(x, tok.data(), a, &anc, dz, &dx, &da, &de) == status::success);
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.v.size(); i += 7) {
    matrix<double> p = x, m = x;
    p.v[i] += h;
    m.v[i] -= h;
    CHECK(dx.v[i] == Approx((loss(p, a, anc) - loss(m, a, anc)) / (2 * h)).epsilon(1e-6).margin(1e-7));
  }
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    matrix<double> p = a, m = a;
    p.v[i] += h;
    m.v[i] -= h;
    CHECK(da.v[i] == Approx((loss(x, p, anc) - loss(x, m, anc)) / (2 * h)).epsilon(1e-6).margin(1e-7));
  }
  for (std::size_t i = 0; i < de.v.size(); ++i) {
    anchor_table<double> p = anc, m = anc;
    p.table().v[i] += h;
    m.table().v[i] -= h;
    CHECK(de.v[i] == Approx((loss(x, a, p) - loss(x, a, m)) / (2 * h)).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("multiply is op(a) op(b) + beta c, and refuses shapes that do not fit", "[subspace][host]") {
  const matrix<double> a = gaussian<double>(5, 3, 11), b = gaussian<double>(4, 3, 12);
  matrix<double> c;
  REQUIRE(multiply(a, false, b, true, &c) == status::success);  // 5x3 * (4x3)^T
  REQUIRE(c.rows == 5);
  REQUIRE(c.cols == 4);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      double want = 0;
      for (std::size_t l = 0; l < 3; ++l) want += a(i, l) * b(j, l);
      CHECK(std::abs(c(i, j) - want) < 1e-12);
    }
  const matrix<double> before = c;
  REQUIRE(multiply(a, false, b, true, &c, 2.0) == status::success);  // c = a b^T + 2 c = 3 a b^T
  for (std::size_t i = 0; i < c.v.size(); ++i) CHECK(std::abs(c.v[i] - 3 * before.v[i]) < 1e-12);
  matrix<double> wrong(4, 4);
  CHECK(multiply(a, false, b, false, &c) == status::invalid_argument);  // 5x3 * 4x3
  CHECK(multiply(a, false, b, true, &wrong, 1.0) == status::invalid_argument);  // c of the wrong shape
  CHECK(wrong.rows == 4);
  CHECK(multiply(a, false, b, true, static_cast<matrix<double>*>(nullptr)) == status::invalid_argument);
}

TEST_CASE("multiply refuses an output that is an input, and takes an inner dimension of 0", "[subspace][host]") {
  matrix<double> a = gaussian<double>(4, 4, 21), b = gaussian<double>(4, 4, 22);
  const matrix<double> a0 = a, b0 = b;
  CHECK(multiply(a, false, b, false, &a) == status::invalid_argument);  // would overwrite its own input
  CHECK(multiply(a, false, b, true, &b, 1.0) == status::invalid_argument);
  CHECK(a.v == a0.v);
  CHECK(b.v == b0.v);
  // 3x0 * 0x2: beta * c, zeros with beta 0
  const matrix<float> x(3, 0), y(0, 2);
  matrix<float> c(3, 2, 5.0f);
  REQUIRE(multiply(x, false, y, false, &c, 2.0) == status::success);  // a double beta for float matrices
  CHECK(c.v == std::vector<float>(6, 10.0f));
  REQUIRE(multiply(x, false, y, false, &c) == status::success);
  CHECK(c.rows == 3);
  CHECK(c.cols == 2);
  CHECK(c.v == std::vector<float>(6, 0.0f));
  matrix<float> empty;
  REQUIRE(multiply(matrix<float>(0, 3), false, matrix<float>(3, 4), false, &empty) == status::success);
  CHECK(empty.rows == 0);
  CHECK(empty.cols == 4);
  // transposed operands with a zero dimension: (3x0)^T * 3x2 is 0x2; 2x0 * (5x0)^T is 2x5 of zeros
  matrix<float> t;
  REQUIRE(multiply(matrix<float>(3, 0), true, matrix<float>(3, 2), false, &t) == status::success);
  CHECK(t.rows == 0);
  CHECK(t.cols == 2);
  matrix<float> z(2, 5, 1.0f);
  REQUIRE(multiply(matrix<float>(2, 0), false, matrix<float>(5, 0), true, &z, 3.0f) == status::success);
  CHECK(z.v == std::vector<float>(10, 3.0f));
  // an empty product with beta != 0 needs c of the empty shape too
  matrix<float> wrong(1, 4);
  CHECK(multiply(matrix<float>(0, 3), false, matrix<float>(3, 4), false, &wrong, 1.0) == status::invalid_argument);
  matrix<float> right(0, 4);
  CHECK(multiply(matrix<float>(0, 3), false, matrix<float>(3, 4), false, &right, 1.0) == status::success);
}

TEST_CASE("bad shapes and token ids are errors", "[subspace][host]") {
  const matrix<float> a = random_orthonormal<float>(16, 4, 1);
  const matrix<float> x = gaussian<float>(3, 16, 2);
  anchor_table<float> anc(10, 16, 4, 3);
  matrix<float> z, out;
  std::vector<std::int32_t> tok = {1, 2, 3};
  CHECK(encode(gaussian<float>(3, 15, 2), tok.data(), a, &anc, &z) == status::invalid_argument);  // d differs
  CHECK(encode(x, tok.data(), a, nullptr, static_cast<matrix<float>*>(nullptr)) == status::invalid_argument);
  const anchor_table<float> wrong_dim(10, 8, 4, 3);
  CHECK(encode(x, tok.data(), a, &wrong_dim, &z) == status::invalid_argument);
  tok[1] = 10;  // out of range
  CHECK(encode(x, tok.data(), a, &anc, &z) == status::invalid_argument);
  tok[1] = -1;
  CHECK(encode(x, tok.data(), a, &anc, &z) == status::invalid_argument);
  tok[1] = 2;
  REQUIRE(encode(x, tok.data(), a, &anc, &z) == status::success);
  CHECK(decode(gaussian<float>(3, 5, 4), tok.data(), a, &anc, &out) == status::invalid_argument);  // r differs
  matrix<float> dz, da(16, 3);
  CHECK(decode_backward(z, tok.data(), a, &anc, gaussian<float>(3, 16, 5), &dz, &da, nullptr) ==
        status::invalid_argument);  // dA of the wrong shape
  // a bad id in a backward pass: an error, and neither gradient is touched
  {
    matrix<float> dx, ga = gaussian<float>(16, 4, 8), ge = gaussian<float>(10, 4, 9);
    const matrix<float> ga0 = ga, ge0 = ge, dzz = gaussian<float>(3, 4, 10);
    std::vector<std::int32_t> bad = {1, 11, 3};
    CHECK(encode_backward(x, bad.data(), a, &anc, dzz, &dx, &ga, &ge) == status::invalid_argument);
    CHECK(decode_backward(z, bad.data(), a, &anc, gaussian<float>(3, 16, 5), &dz, &ga, &ge) ==
          status::invalid_argument);
    CHECK(ga.v == ga0.v);
    CHECK(ge.v == ge0.v);
    matrix<float> de_wrong(9, 4);  // not V x r
    CHECK(encode_backward(x, tok.data(), a, &anc, dzz, &dx, &ga, &de_wrong) == status::invalid_argument);
    CHECK(decode_backward(z, tok.data(), a, &anc, gaussian<float>(3, 16, 5), &dz, &ga, &de_wrong) ==
          status::invalid_argument);
    CHECK(ga.v == ga0.v);
  }
  stiefel_optimizer<float> opt(16, 4);
  matrix<float> g = gaussian<float>(16, 4, 6);
  g.v[5] = std::nanf("");
  matrix<float> aa = a;
  CHECK(opt.step(&aa, g) == status::invalid_argument);
  CHECK(aa.v == a.v);  // untouched
  CHECK(opt.step(&aa, gaussian<float>(16, 3, 7)) == status::invalid_argument);
  matrix<float> wide(3, 5);
  CHECK(polar(&wide) == status::invalid_argument);
  CHECK(qr_retract(&wide) == status::invalid_argument);
}

#include <zipccl/subspace/rvq.hpp>

namespace {
// Codes from a mixture of 12 clusters in `dim` dimensions, micro-batch `step`.
matrix<float> clustered(std::size_t n, std::size_t dim, std::uint64_t step) {
  static const matrix<float> centres = gaussian<float>(12, dim, 77, 1.0);
  std::mt19937_64 rng(1000 + step);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  matrix<float> z(n, dim);
  for (std::size_t t = 0; t < n; ++t) {
    const std::size_t c = rng() % 12;
    for (std::size_t j = 0; j < dim; ++j) z(t, j) = centres(c, j) + noise(rng);
  }
  return z;
}
}  // namespace

TEST_CASE("residual VQ: the receiver's codebooks stay bit-identical through thousands of syncs",
          "[subspace][rvq][host]") {
  const rvq_shape shape{8, 2, 2, 16};  // z of 8 numbers, 2 groups of 4, 2 rounds, 16 codewords
  rvq_options o;
  o.slice = 4;
  o.seed = 3;
  rvq_learner<float> sender(shape, o);
  rvq_book<float> receiver(shape, o.seed);  // the same seeded start
  REQUIRE(receiver.values() == sender.mirror().values());
  std::uint64_t synced_bytes = 0;
  double first_err = -1, last_err = -1;
  for (int step = 0; step < 3000; ++step) {
    const matrix<float> z = clustered(64, 8, static_cast<std::uint64_t>(step));
    std::vector<std::uint16_t> idx;
    REQUIRE(sender.encode(z, &idx) == status::success);
    matrix<float> at_receiver, at_sender;
    REQUIRE(receiver.decode(idx.data(), z.rows, &at_receiver) == status::success);
    REQUIRE(sender.mirror().decode(idx.data(), z.rows, &at_sender) == status::success);
    REQUIRE(std::memcmp(at_receiver.data(), at_sender.data(), at_sender.v.size() * sizeof(float)) == 0);
    double err = 0, all = 0;
    for (std::size_t i = 0; i < z.v.size(); ++i) {
      err += (z.v[i] - at_receiver.v[i]) * (z.v[i] - at_receiver.v[i]);
      all += z.v[i] * z.v[i];
    }
    if (step == 0) first_err = err / all;
    last_err = err / all;
    REQUIRE(sender.learn(z) == status::success);
    const rvq_sync<float> s = sender.next_sync();
    CHECK(s.which.size() <= o.slice);
    synced_bytes += s.bytes();
    REQUIRE(apply_sync(s, &receiver) == status::success);
    REQUIRE(std::memcmp(receiver.values().data(), sender.mirror().values().data(),
                        receiver.values().size() * sizeof(float)) == 0);
  }
  INFO("relative error first " << first_err << ", last " << last_err << "; " << synced_bytes << " bytes synced");
  CHECK(last_err < 0.05);
  CHECK(last_err < first_err / 10);
  // no full codebook travelled: every sync is a slice
  CHECK(o.slice * shape.sub() < shape.words() * shape.sub());
}

TEST_CASE("residual VQ rejects bad syncs, indices and shapes", "[subspace][rvq][host]") {
  const rvq_shape shape{8, 2, 2, 16};
  rvq_book<float> book(shape, 1);
  const auto before = book.values();
  rvq_sync<float> bad;
  bad.which = {5, 64};  // 64 >= 2 * 2 * 16 words
  bad.values.assign(2 * shape.sub(), 1.0f);
  CHECK(apply_sync(bad, &book) == status::invalid_argument);
  CHECK(book.values() == before);  // unchanged, also the valid first entry
  bad.which = {5};
  CHECK(apply_sync(bad, &book) == status::invalid_argument);  // values of two words for one
  std::vector<std::uint16_t> idx(1 * 2 * 2, 0);
  idx[3] = 16;
  matrix<float> z;
  CHECK(book.decode(idx.data(), 1, &z) == status::invalid_argument);
  CHECK(book.encode(gaussian<float>(3, 7, 1), &idx) == status::invalid_argument);  // 7 numbers, not 8
  CHECK_FALSE((rvq_shape{10, 3, 1, 16}.valid()));  // 10 does not split into 3 groups
  rvq_learner<float> learner(rvq_shape{10, 3, 1, 16}, {});
  CHECK(learner.learn(gaussian<float>(4, 10, 2)) == status::invalid_argument);
}
