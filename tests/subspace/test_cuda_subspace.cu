// The device subspace codec (subspace/cuda/) against the host executor: encode, decode and both
// backward passes, the Stiefel optimizer's steps, the residual-VQ search and decode, and the
// errors (shapes, token ids, indices, a non-finite gradient). Needs a GPU; without one it exits
// with the skip code 77. CI builds it for sm_80 and sm_90 either way.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <zipccl/subspace/anchor.hpp>
#include <zipccl/subspace/cuda/projector.cuh>
#include <zipccl/subspace/cuda/rvq.cuh>
#include <zipccl/subspace/cuda/stiefel.cuh>
#include <zipccl/subspace/projector.hpp>
#include <zipccl/subspace/rvq.hpp>
#include <zipccl/subspace/stiefel.hpp>

#include "../support/cuda_test.cuh"
#include "../support/subspace_data.hpp"

using namespace zipccl;
namespace ss = zipccl::subspace;
namespace sc = zipccl::subspace::cuda;
using testing::device_buffer;

namespace {

struct blas_handle {
  cublasHandle_t h = nullptr;
  blas_handle() { REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~blas_handle() { cublasDestroy(h); }
};

// A device copy of a host matrix.
template <class T>
struct dmat {
  std::size_t rows, cols;
  device_buffer<T> buf;
  explicit dmat(const ss::matrix<T>& m) : rows(m.rows), cols(m.cols), buf(m.v.size()) { buf.put(m.data(), m.v.size()); }
  dmat(std::size_t r, std::size_t c) : rows(r), cols(c), buf(r * c) {
    REQUIRE(cudaMemset(buf.p, 0, r * c * sizeof(T)) == cudaSuccess);
  }
  sc::view<T> v() { return {buf.p, rows, cols}; }
  ss::matrix<T> get() const {
    ss::matrix<T> m(rows, cols);
    m.v = buf.get(rows * cols);
    return m;
  }
};

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-4 : 1e-10;
}

// max |a - b| relative to max(1, max |b|)
template <class T>
double rel_diff(const ss::matrix<T>& a, const ss::matrix<T>& b) {
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  double diff = 0, scale = 1;
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.v[i]) - b.v[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.v[i])));
  }
  return diff / scale;
}

status device_status(const device_buffer<status>& st) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return st.get(1)[0];
}

// A temp buffer sized by the call's own query.
template <class F>
status with_temp(F&& call) {
  std::size_t bytes = 0;
  REQUIRE(call(nullptr, bytes) == status::success);
  REQUIRE(bytes >= 16);
  device_buffer<unsigned char> temp(bytes);
  return call(temp.p, bytes);
}

template <class T>
struct problem {
  std::size_t n, d = 96, r = 12, vocab = 50;
  ss::matrix<T> x, a, dxh;
  std::vector<std::int32_t> tok;
  ss::anchor_table<T> anc;
  explicit problem(std::size_t rows)
      : n(rows), x(testing::gaussian_matrix<T>(n, d, 1)), a(ss::random_orthonormal<T>(d, r, 2)),
        dxh(testing::gaussian_matrix<T>(n, d, 3)), tok(testing::token_ids(n, static_cast<int>(vocab), 4)),
        anc(vocab, d, r, 5) {
    anc.table() = testing::gaussian_matrix<T>(vocab, r, 6);
  }
};

}  // namespace

TEMPLATE_TEST_CASE("device encode and decode match the host", "[gpu][subspace]", float, double) {
  using T = TestType;
  blas_handle blas;
  cudaStream_t stream = nullptr;
  device_buffer<status> st(1);
  for (bool with_anchor : {false, true})
    for (std::size_t n : {0, 1, 37, 1000}) {
      CAPTURE(with_anchor, n);
      problem<T> p(n);
      const ss::anchor_table<T>* anc = with_anchor ? &p.anc : nullptr;
      ss::matrix<T> z, xh;
      REQUIRE(ss::encode(p.x, p.tok.data(), p.a, anc, &z) == status::success);
      REQUIRE(ss::decode(z, p.tok.data(), p.a, anc, &xh) == status::success);

      dmat<T> x(p.x), a(p.a), table(p.anc.table()), basis(p.anc.basis()), dz(n, p.r), dxh(n, p.d);
      device_buffer<std::int32_t> tok(n);
      tok.put(p.tok.data(), n);
      sc::anchor_view<T> av;
      if (with_anchor) av = {table.buf.p, basis.buf.p, p.vocab, p.d, p.r};
      REQUIRE(with_temp([&](void* t, std::size_t& b) {
                return sc::encode<T>(t, b, x.v(), tok.p, a.v(), av, dz.v(), st.p, blas.h, stream);
              }) == status::success);
      REQUIRE(device_status(st) == status::success);
      CHECK(rel_diff(dz.get(), z) <= tolerance<T>());
      REQUIRE(with_temp([&](void* t, std::size_t& b) {
                return sc::decode<T>(t, b, dz.v(), tok.p, a.v(), av, dxh.v(), st.p, blas.h, stream);
              }) == status::success);
      REQUIRE(device_status(st) == status::success);
      CHECK(rel_diff(dxh.get(), xh) <= tolerance<T>());
    }
}

TEMPLATE_TEST_CASE("device backward passes match the host", "[gpu][subspace]", float, double) {
  using T = TestType;
  blas_handle blas;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  device_buffer<status> st(1);
  for (bool with_anchor : {false, true})
    for (std::size_t n : {1, 300}) {
      CAPTURE(with_anchor, n);
      problem<T> p(n);
      const ss::anchor_table<T>* anc = with_anchor ? &p.anc : nullptr;
      ss::matrix<T> z;
      REQUIRE(ss::encode(p.x, p.tok.data(), p.a, anc, &z) == status::success);
      // both sides accumulate into gradients that already hold something
      const ss::matrix<T> da0 = testing::gaussian_matrix<T>(p.d, p.r, 7), de0 = testing::gaussian_matrix<T>(p.vocab, p.r, 8);
      ss::matrix<T> dz_h, dx_h, da_h = da0, de_h = de0;
      REQUIRE(ss::decode_backward(z, p.tok.data(), p.a, anc, p.dxh, &dz_h, &da_h, with_anchor ? &de_h : nullptr) ==
              status::success);
      REQUIRE(ss::encode_backward(p.x, p.tok.data(), p.a, anc, dz_h, &dx_h, &da_h, with_anchor ? &de_h : nullptr) ==
              status::success);

      dmat<T> x(p.x), a(p.a), table(p.anc.table()), basis(p.anc.basis()), zd(z), dxh(p.dxh), dz(n, p.r), dx(n, p.d),
          da(da0), de(de0);
      device_buffer<std::int32_t> tok(n);
      tok.put(p.tok.data(), n);
      sc::anchor_view<T> av;
      if (with_anchor) av = {table.buf.p, basis.buf.p, p.vocab, p.d, p.r};
      REQUIRE(with_temp([&](void* t, std::size_t& b) {
                return sc::decode_backward<T>(t, b, zd.v(), tok.p, a.v(), av, dxh.v(), dz.v(), da.v(), de.v(), st.p,
                                              blas.h, stream);
              }) == status::success);
      REQUIRE(device_status(st) == status::success);
      CHECK(rel_diff(dz.get(), dz_h) <= tolerance<T>());
      REQUIRE(with_temp([&](void* t, std::size_t& b) {
                return sc::encode_backward<T>(t, b, x.v(), tok.p, a.v(), av, dz.v(), dx.v(), da.v(), de.v(), st.p,
                                              blas.h, stream);
              }) == status::success);
      REQUIRE(device_status(st) == status::success);
      CHECK(rel_diff(dx.get(), dx_h) <= tolerance<T>());
      CHECK(rel_diff(da.get(), da_h) <= tolerance<T>());
      CHECK(rel_diff(de.get(), de_h) <= tolerance<T>());  // untouched without an anchor
    }
  cudaStreamDestroy(stream);
}

TEST_CASE("device projector: bad shapes, token ids and temp sizes are errors", "[gpu][subspace][sanitize]") {
  using T = float;
  blas_handle blas;
  device_buffer<status> st(1);
  problem<T> p(64);
  dmat<T> x(p.x), a(p.a), table(p.anc.table()), basis(p.anc.basis()), z(p.n, p.r), xh(p.n, p.d);
  std::vector<std::int32_t> bad = p.tok;
  bad[17] = static_cast<std::int32_t>(p.vocab);
  bad[40] = -1;
  device_buffer<std::int32_t> tok(p.n);
  tok.put(bad.data(), p.n);
  const sc::anchor_view<T> av{table.buf.p, basis.buf.p, p.vocab, p.d, p.r};
  std::size_t bytes = 0;
  REQUIRE(sc::encode<T>(nullptr, bytes, x.v(), tok.p, a.v(), av, z.v(), st.p, blas.h, nullptr) == status::success);
  device_buffer<unsigned char> temp(bytes);
  // token ids out of range: reported on the device
  REQUIRE(sc::encode<T>(temp.p, bytes, x.v(), tok.p, a.v(), av, z.v(), st.p, blas.h, nullptr) == status::success);
  CHECK(device_status(st) == status::invalid_argument);
  REQUIRE(sc::decode<T>(temp.p, bytes, z.v(), tok.p, a.v(), av, xh.v(), st.p, blas.h, nullptr) == status::success);
  CHECK(device_status(st) == status::invalid_argument);
  // argument errors: returned at once
  std::size_t small = bytes - 1;
  CHECK(sc::encode<T>(temp.p, small, x.v(), tok.p, a.v(), av, z.v(), st.p, blas.h, nullptr) == status::invalid_argument);
  sc::view<T> wrong = z.v();
  wrong.cols += 1;
  CHECK(sc::encode<T>(temp.p, bytes, x.v(), tok.p, a.v(), av, wrong, st.p, blas.h, nullptr) == status::invalid_argument);
  sc::anchor_view<T> other = av;
  other.dim = p.d + 1;
  CHECK(sc::encode<T>(temp.p, bytes, x.v(), tok.p, a.v(), other, z.v(), st.p, blas.h, nullptr) == status::invalid_argument);
  CHECK(sc::encode<T>(temp.p, bytes, x.v(), nullptr, a.v(), av, z.v(), st.p, blas.h, nullptr) == status::invalid_argument);
  CHECK(sc::encode<T>(temp.p, bytes, x.v(), tok.p, a.v(), av, z.v(), nullptr, blas.h, nullptr) == status::invalid_argument);
  CHECK(sc::decode<T>(temp.p, bytes, z.v(), tok.p, x.v(), av, xh.v(), st.p, blas.h, nullptr) == status::invalid_argument);
}

TEMPLATE_TEST_CASE("device Stiefel steps match the host and keep A orthonormal", "[gpu][subspace]", float, double) {
  using T = TestType;
  blas_handle blas;
  device_buffer<status> st(1);
  const std::size_t d = 64, r = 8;
  ss::stiefel_options o;
  o.lr = 0.02;
  ss::matrix<T> a_host = ss::random_orthonormal<T>(d, r, 7);
  ss::stiefel_optimizer<T> host(d, r, o);
  sc::stiefel_optimizer<T> dev(d, r, o);
  dmat<T> a(a_host);
  // the same 50 steps on both executors
  for (int s = 0; s < 50; ++s) {
    const ss::matrix<T> g = testing::gaussian_matrix<T>(d, r, 1000 + static_cast<std::uint64_t>(s));
    REQUIRE(host.step(&a_host, g) == status::success);
    dmat<T> gd(g);
    REQUIRE(dev.step(a.v(), gd.v(), st.p, blas.h, nullptr) == status::success);
  }
  REQUIRE(device_status(st) == status::success);
  CHECK(rel_diff(a.get(), a_host) <= (std::is_same_v<T, float> ? 1e-3 : 1e-9));
  // 10,000 steps: ||A^T A - I|| stays within 1e-5
  dmat<T> g(d, r);
  T worst = 0;
  for (int s = 0; s < 10000; ++s) {
    const ss::matrix<T> gh = testing::gaussian_matrix<T>(d, r, 5000 + static_cast<std::uint64_t>(s));
    g.buf.put(gh.data(), gh.v.size());
    REQUIRE(dev.step(a.v(), g.v(), st.p, blas.h, nullptr) == status::success);
    if (s % 100 == 99) worst = std::max(worst, ss::orthogonality_error(a.get()));
  }
  REQUIRE(device_status(st) == status::success);
  INFO("worst ||A^T A - I|| " << worst);
  CHECK(worst <= T(1e-5));
  // a gradient with a NaN: an error on the device, A and the momentum unchanged
  const ss::matrix<T> before = a.get(), m_before = [&] {
    ss::matrix<T> m(d, r);
    REQUIRE(cudaMemcpy(m.data(), dev.momentum().data, d * r * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return m;
  }();
  ss::matrix<T> nan_g = testing::gaussian_matrix<T>(d, r, 9);
  nan_g(3, 2) = std::numeric_limits<T>::quiet_NaN();
  g.buf.put(nan_g.data(), nan_g.v.size());
  REQUIRE(dev.step(a.v(), g.v(), st.p, blas.h, nullptr) == status::success);
  CHECK(device_status(st) == status::invalid_argument);
  CHECK(a.get().v == before.v);
  ss::matrix<T> m_after(d, r);
  REQUIRE(cudaMemcpy(m_after.data(), dev.momentum().data, d * r * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(m_after.v == m_before.v);
  // argument errors
  dmat<T> wrong(d, r + 1);
  CHECK(dev.step(wrong.v(), g.v(), st.p, blas.h, nullptr) == status::invalid_argument);
  ss::stiefel_options qr = o;
  qr.retract = ss::retraction::qr;
  sc::stiefel_optimizer<T> no_qr(d, r, qr);
  CHECK(no_qr.step(a.v(), g.v(), st.p, blas.h, nullptr) == status::invalid_argument);
  CHECK_THROWS_AS(sc::stiefel_optimizer<T>(4, 8), zipccl::error);
}

namespace {
__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
}  // namespace

TEST_CASE("a caller's handle is left as it was: device pointer mode, TF32, another stream, a workspace",
          "[gpu][subspace]") {
  using T = float;
  blas_handle blas;
  cudaStream_t own, call;
  REQUIRE(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&call, cudaStreamNonBlocking) == cudaSuccess);
  device_buffer<unsigned char> workspace(4 << 20);
  REQUIRE(cublasSetStream(blas.h, own) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetWorkspace(blas.h, workspace.p, 4 << 20) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetPointerMode(blas.h, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetMathMode(blas.h, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS);
  const sc::blas_context ctx(blas.h, workspace.p, 4 << 20);
  auto handle_unchanged = [&] {
    cudaStream_t s = nullptr;
    cublasPointerMode_t pm;
    cublasMath_t mm;
    REQUIRE(cublasGetStream(blas.h, &s) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasGetPointerMode(blas.h, &pm) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasGetMathMode(blas.h, &mm) == CUBLAS_STATUS_SUCCESS);
    CHECK(s == own);
    CHECK(pm == CUBLAS_POINTER_MODE_DEVICE);
    CHECK(mm == CUBLAS_TF32_TENSOR_OP_MATH);
  };
  device_buffer<status> st(1);
  problem<T> p(300);
  ss::matrix<T> z, xh;
  REQUIRE(ss::encode(p.x, p.tok.data(), p.a, &p.anc, &z) == status::success);
  REQUIRE(ss::decode(z, p.tok.data(), p.a, &p.anc, &xh) == status::success);
  dmat<T> x(p.x), a(p.a), table(p.anc.table()), basis(p.anc.basis()), dz(p.n, p.r), dxh(p.n, p.d);
  device_buffer<std::int32_t> tok(p.n);
  tok.put(p.tok.data(), p.n);
  const sc::anchor_view<T> av{table.buf.p, basis.buf.p, p.vocab, p.d, p.r};
  // temp storage at offsets 1, 4 and 8 from an allocation; the projections follow the handle's
  // TF32 mode (a looser tolerance)
  for (std::size_t offset : {1u, 4u, 8u}) {
    CAPTURE(offset);
    std::size_t eb = 0, db = 0;
    REQUIRE(sc::encode<T>(nullptr, eb, x.v(), tok.p, a.v(), av, dz.v(), st.p, ctx, call) == status::success);
    REQUIRE(sc::decode<T>(nullptr, db, dz.v(), tok.p, a.v(), av, dxh.v(), st.p, ctx, call) == status::success);
    device_buffer<unsigned char> pool(std::max(eb, db) + offset);
    REQUIRE(sc::encode<T>(pool.p + offset, eb, x.v(), tok.p, a.v(), av, dz.v(), st.p, ctx, call) == status::success);
    REQUIRE(device_status(st) == status::success);
    CHECK(rel_diff(dz.get(), z) <= 5e-3);
    REQUIRE(sc::decode<T>(pool.p + offset, db, dz.v(), tok.p, a.v(), av, dxh.v(), st.p, ctx, call) == status::success);
    REQUIRE(device_status(st) == status::success);
    CHECK(rel_diff(dxh.get(), xh) <= 5e-3);
    handle_unchanged();
  }
  // the optimizer runs in full fp32 whatever the handle says: 2,000 steps stay orthonormal to 1e-5
  const std::size_t d = 64, r = 8;
  ss::stiefel_options o;
  o.lr = 0.02;
  sc::stiefel_optimizer<T> opt(d, r, o);
  dmat<T> ad(ss::random_orthonormal<T>(d, r, 7)), g(d, r);
  T worst = 0;
  for (int s = 0; s < 2000; ++s) {
    const ss::matrix<T> gh = testing::gaussian_matrix<T>(d, r, 7000 + static_cast<std::uint64_t>(s));
    REQUIRE(cudaStreamSynchronize(call) == cudaSuccess);
    g.buf.put(gh.data(), gh.v.size());
    REQUIRE(opt.step(ad.v(), g.v(), st.p, ctx, call) == status::success);
    if (s % 100 == 99) {
      REQUIRE(cudaStreamSynchronize(call) == cudaSuccess);
      worst = std::max(worst, ss::orthogonality_error(ad.get()));
    }
  }
  REQUIRE(device_status(st) == status::success);
  INFO("worst ||A^T A - I|| with a TF32 handle " << worst);
  CHECK(worst <= T(1e-5));
  handle_unchanged();
  // a plain handle converts to a blas_context too
  REQUIRE(cublasSetStream(blas.h, call) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(opt.step(ad.v(), g.v(), st.p, blas.h, call) == status::success);
  REQUIRE(device_status(st) == status::success);
  cudaStreamDestroy(own);
  cudaStreamDestroy(call);
}

TEMPLATE_TEST_CASE("a first Stiefel step on a non-blocking stream sees a zero momentum", "[gpu][subspace]", float,
                   double) {
  using T = TestType;
  const std::size_t d = 64, r = 8;
  {  // leave garbage where the optimizer's buffer will likely be allocated
    void* junk = nullptr;
    REQUIRE(cudaMalloc(&junk, 8 * d * r * sizeof(T) + 4096) == cudaSuccess);
    REQUIRE(cudaMemset(junk, 0xFF, 8 * d * r * sizeof(T) + 4096) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cudaFree(junk);
  }
  blas_handle blas;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  device_buffer<status> st(1);
  ss::stiefel_options o;
  o.lr = 0.05;
  o.momentum = 0.9;
  ss::stiefel_optimizer<T> host(d, r, o);
  ss::matrix<T> a_host = ss::random_orthonormal<T>(d, r, 3);
  dmat<T> a(a_host);
  const ss::matrix<T> gh = testing::gaussian_matrix<T>(d, r, 4);
  dmat<T> g(gh);
  // the legacy stream busy for ~0.1 s: work the constructor put there would still be pending
  spin<<<1, 1>>>(200000000);
  sc::stiefel_optimizer<T> dev(d, r, o);
  REQUIRE(dev.step(a.v(), g.v(), st.p, blas.h, stream) == status::success);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(host.step(&a_host, gh) == status::success);
  REQUIRE(st.get(1)[0] == status::success);
  CHECK(rel_diff(a.get(), a_host) <= (std::is_same_v<T, float> ? 1e-4 : 1e-10));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // a first step under graph capture is refused (its reset would replay with the graph)
  sc::stiefel_optimizer<T> fresh(d, r, o);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const status captured = fresh.step(a.v(), g.v(), st.p, blas.h, stream);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  if (graph) cudaGraphDestroy(graph);
  CHECK(captured == status::invalid_argument);
  REQUIRE(fresh.reset(stream) == status::success);  // then capturing works
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const status after_reset = fresh.step(a.v(), g.v(), st.p, blas.h, stream);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  if (graph) cudaGraphDestroy(graph);
  CHECK(after_reset == status::success);
  cudaStreamDestroy(stream);
}

TEMPLATE_TEST_CASE("device residual VQ matches the host's indices and values", "[gpu][subspace][rvq]", float, double) {
  using T = TestType;
  device_buffer<status> st(1);
  for (const ss::rvq_shape shape : {ss::rvq_shape{16, 4, 2, 64}, ss::rvq_shape{32, 4, 4, 256}, ss::rvq_shape{12, 1, 3, 1000}}) {
    CAPTURE(shape.dim, shape.groups, shape.rounds, shape.codewords);
    ss::rvq_options o;
    o.seed = 11;
    ss::rvq_learner<T> learner(shape, o);
    for (int step = 0; step < 5; ++step)
      REQUIRE(learner.learn(testing::gaussian_matrix<T>(500, shape.dim, 20 + static_cast<std::uint64_t>(step))) ==
              status::success);
    const ss::rvq_book<T>& book = learner.master();
    const ss::matrix<T> z = testing::gaussian_matrix<T>(777, shape.dim, 99);
    std::vector<std::uint16_t> idx_h;
    REQUIRE(book.encode(z, &idx_h) == status::success);
    ss::matrix<T> zh_h;
    REQUIRE(book.decode(idx_h.data(), z.rows, &zh_h) == status::success);

    device_buffer<T> words(book.values().size());
    words.put(book.values().data(), book.values().size());
    const sc::rvq_book_view<T> bv{words.p, shape};
    dmat<T> zd(z), zh(z.rows, shape.dim);
    device_buffer<std::uint16_t> idx(idx_h.size());
    REQUIRE(with_temp([&](void* t, std::size_t& b) { return sc::rvq_encode<T>(t, b, bv, zd.v(), idx.p, nullptr); }) ==
            status::success);
    const std::vector<std::uint16_t> idx_d = idx.get(idx_h.size());
    std::size_t same = 0;
    for (std::size_t i = 0; i < idx_h.size(); ++i) same += idx_h[i] == idx_d[i];
    INFO(same << " of " << idx_h.size() << " indices as on the host");
    CHECK(same >= idx_h.size() * 999 / 1000);
    // decode of the host's indices gives the host's values, bit for bit
    idx.put(idx_h.data(), idx_h.size());
    REQUIRE(sc::rvq_decode<T>(bv, idx.p, z.rows, zh.v(), st.p, nullptr) == status::success);
    REQUIRE(device_status(st) == status::success);
    CHECK(zh.get().v == zh_h.v);
    // an index out of range is an error
    std::vector<std::uint16_t> bad = idx_h;
    bad[5] = static_cast<std::uint16_t>(shape.codewords);
    idx.put(bad.data(), bad.size());
    REQUIRE(sc::rvq_decode<T>(bv, idx.p, z.rows, zh.v(), st.p, nullptr) == status::success);
    CHECK(device_status(st) == status::invalid_argument);
    CHECK(sc::rvq_decode<T>(bv, idx.p, z.rows + 1, zh.v(), st.p, nullptr) == status::invalid_argument);
  }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
