// The device subspace codec: encode, decode, both backward passes, a Stiefel optimizer step and
// residual VQ (search and decode), in tokens per second, for a micro-batch of 8192 tokens at
// d = 4096 and r = d/4, d/8, d/16 (fp32, vocabulary 32,000), timed with CUDA events, beside a
// device-to-device copy of the micro-batch's activations (`of_copy`: the copy's time over the
// operation's, so 1.0 means as fast as moving x once). The GEMM-bound operations run twice: with
// cuBLAS's default fp32 products and with TF32 tensor cores (tf32:1). Needs a GPU; no CBLAS.
//
//   build/bin/bench_cuda_subspace --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <cstdint>
#include <random>
#include <vector>

#include <zipccl/subspace/cuda/projector.cuh>
#include <zipccl/subspace/cuda/rvq.cuh>
#include <zipccl/subspace/cuda/stiefel.cuh>

#include "cuda_timing.cuh"

namespace sc = zipccl::subspace::cuda;
using zipccl::status;

namespace {

constexpr std::size_t d = 4096, tokens = 8192, vocab = 32000;

using zipccl::bench::device_mem;
using zipccl::bench::first_error;
using zipccl::bench::time_ms;

// Gaussian values (scaled): 2^20 standard normal deviates per seed, drawn once, tiled to the size
// with a stride that breaks up the repetition, and copied.
void fill(float* dst, std::size_t n, std::uint64_t seed, double scale) {
  constexpr std::size_t tile = std::size_t(1) << 20;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> base(tile), h(n);
  for (float& v : base) v = nd(rng);
  for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<float>(scale) * base[(i * 7919) & (tile - 1)];
  cudaMemcpy(dst, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
}

double copy_ms = 0;  // one device-to-device copy of x (tokens x d floats)

struct setup {
  std::size_t r;
  device_mem x{tokens * d * 4}, a, z, xh{tokens * d * 4}, table, basis, tok{tokens * 4}, st{sizeof(status)}, da, de,
      dz, dx{tokens * d * 4};
  std::unique_ptr<device_mem> temp;
  std::size_t temp_bytes = 0;
  cublasHandle_t blas = nullptr;
  sc::anchor_view<float> anc;
  // tf32: let cuBLAS use TF32 tensor cores for the fp32 products (the caller's choice, on its handle)
  explicit setup(std::size_t rank, bool tf32 = false)
      : r(rank), a(d * rank * 4), z(tokens * rank * 4), table(vocab * rank * 4), basis(rank * d * 4), da(d * rank * 4),
        de(vocab * rank * 4), dz(tokens * rank * 4) {
    cublasCreate(&blas);
    if (tf32) cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH);
    fill(x.f(), tokens * d, 1, 1.0);
    fill(a.f(), d * r, 2, 1.0 / std::sqrt(static_cast<double>(d)));
    fill(table.f(), vocab * r, 3, 0.1);
    fill(basis.f(), r * d, 4, 1.0 / std::sqrt(static_cast<double>(d)));
    fill(xh.f(), tokens * d, 5, 1.0);
    std::vector<std::int32_t> t(tokens);
    for (std::size_t i = 0; i < tokens; ++i) t[i] = static_cast<std::int32_t>((i * 7919) % vocab);
    cudaMemcpy(tok.p, t.data(), tokens * 4, cudaMemcpyHostToDevice);
    anc = {table.f(), basis.f(), vocab, d, r};
  }
  ~setup() { cublasDestroy(blas); }
  sc::view<float> m(const device_mem& b, std::size_t rows, std::size_t cols) const { return {b.f(), rows, cols}; }
  // grows the temp storage to what a call asks for
  template <class F>
  void* temp_for(F&& query) {
    std::size_t need = 0;
    query(need);
    if (!temp || need > temp_bytes) {
      temp = std::make_unique<device_mem>(need);
      temp_bytes = need;
    }
    return temp->p;
  }
};

void report(benchmark::State& state, double ms) {
  state.SetIterationTime(ms / 1e3);
  state.counters["tokens_per_s"] = tokens / (ms / 1e3);
  if (copy_ms > 0) state.counters["of_copy"] = copy_ms / ms;
}

void bm_copy(benchmark::State& state) {
  device_mem a(tokens * d * 4), b(tokens * d * 4);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] { cudaMemcpyAsync(b.p, a.p, tokens * d * 4, cudaMemcpyDeviceToDevice); }, 20);
    state.SetIterationTime(ms / 1e3);
  }
  copy_ms = ms;
  state.counters["tokens_per_s"] = tokens / (ms / 1e3);
}

void bm_encode(benchmark::State& state) {
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  const auto* tok = static_cast<const std::int32_t*>(s.tok.p);
  auto* st = static_cast<status*>(s.st.p);
  void* t = s.temp_for([&](std::size_t& b) {
    err(sc::encode<float>(nullptr, b, s.m(s.x, tokens, d), tok, s.m(s.a, d, s.r), s.anc, s.m(s.z, tokens, s.r), st, s.blas,
                      nullptr));
  });
  std::size_t bytes = s.temp_bytes;
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] {
      err(sc::encode<float>(t, bytes, s.m(s.x, tokens, d), tok, s.m(s.a, d, s.r), s.anc, s.m(s.z, tokens, s.r), st, s.blas,
                        nullptr));
    }, 10);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

void bm_decode(benchmark::State& state) {
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  const auto* tok = static_cast<const std::int32_t*>(s.tok.p);
  auto* st = static_cast<status*>(s.st.p);
  void* t = s.temp_for([&](std::size_t& b) {
    err(sc::decode<float>(nullptr, b, s.m(s.z, tokens, s.r), tok, s.m(s.a, d, s.r), s.anc, s.m(s.xh, tokens, d), st, s.blas,
                      nullptr));
  });
  std::size_t bytes = s.temp_bytes;
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] {
      err(sc::decode<float>(t, bytes, s.m(s.z, tokens, s.r), tok, s.m(s.a, d, s.r), s.anc, s.m(s.xh, tokens, d), st, s.blas,
                        nullptr));
    }, 10);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

void bm_backward(benchmark::State& state) {  // both sides: decode_backward then encode_backward
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  const auto* tok = static_cast<const std::int32_t*>(s.tok.p);
  auto* st = static_cast<status*>(s.st.p);
  auto run = [&](void* t, std::size_t& b) {
    err(sc::decode_backward<float>(t, b, s.m(s.z, tokens, s.r), tok, s.m(s.a, d, s.r), s.anc, s.m(s.xh, tokens, d),
                               s.m(s.dz, tokens, s.r), s.m(s.da, d, s.r), s.m(s.de, vocab, s.r), st, s.blas, nullptr));
    std::size_t b2 = b;
    err(sc::encode_backward<float>(t, b2, s.m(s.x, tokens, d), tok, s.m(s.a, d, s.r), s.anc, s.m(s.dz, tokens, s.r),
                               s.m(s.dx, tokens, d), s.m(s.da, d, s.r), s.m(s.de, vocab, s.r), st, s.blas, nullptr));
    if (t == nullptr) b = b > b2 ? b : b2;
  };
  void* t = s.temp_for([&](std::size_t& b) { run(nullptr, b); });
  std::size_t bytes = s.temp_bytes;
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] { run(t, bytes); }, 10);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

void bm_optimizer_step(benchmark::State& state) {  // one step per micro-batch
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  sc::stiefel_optimizer<float> opt(d, s.r);
  auto* st = static_cast<status*>(s.st.p);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] { err(opt.step(s.m(s.a, d, s.r), s.m(s.da, d, s.r), st, s.blas, nullptr)); }, 5);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

// residual VQ of z: groups of 4 numbers, 4 rounds of 256 codewords (r bytes a token: half of bf16)
zipccl::subspace::rvq_shape vq_shape(std::size_t r) { return {r, r / 4, 4, 256}; }

void bm_rvq_encode(benchmark::State& state) {
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  const auto shape = vq_shape(s.r);
  device_mem words(shape.words() * shape.sub() * 4), idx(tokens * shape.groups * shape.rounds * 2);
  fill(words.f(), shape.words() * shape.sub(), 6, 0.05);
  fill(s.z.f(), tokens * s.r, 7, 0.1);
  const sc::rvq_book_view<float> book{words.f(), shape};
  auto* out = static_cast<std::uint16_t*>(idx.p);
  void* t = s.temp_for([&](std::size_t& b) { err(sc::rvq_encode<float>(nullptr, b, book, s.m(s.z, tokens, s.r), out, nullptr)); });
  std::size_t bytes = s.temp_bytes;
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] { err(sc::rvq_encode<float>(t, bytes, book, s.m(s.z, tokens, s.r), out, nullptr)); }, 5);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

void bm_rvq_decode(benchmark::State& state) {
  first_error err;
  setup s(d / static_cast<std::size_t>(state.range(0)), state.range(1) != 0);
  const auto shape = vq_shape(s.r);
  device_mem words(shape.words() * shape.sub() * 4), idx(tokens * shape.groups * shape.rounds * 2);
  fill(words.f(), shape.words() * shape.sub(), 6, 0.05);
  cudaMemset(idx.p, 0, tokens * shape.groups * shape.rounds * 2);
  const sc::rvq_book_view<float> book{words.f(), shape};
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] {
      err(sc::rvq_decode<float>(book, static_cast<const std::uint16_t*>(idx.p), tokens, s.m(s.z, tokens, s.r),
                            static_cast<status*>(s.st.p), nullptr));
    }, 10);
    report(state, ms);
  }
  if (err.failed()) state.SkipWithError(zipccl::to_string(err.first));
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

BENCHMARK(bm_copy)->UseManualTime()->Iterations(3);
// args: d / r, and 1 for TF32 products (the GEMM-bound operations only)
#define ZIPCCL_RATIOS(f) \
  BENCHMARK(f)->ArgNames({"ratio", "tf32"})->ArgsProduct({{4, 8, 16}, {0}})->UseManualTime()->Iterations(3)
#define ZIPCCL_RATIOS_TF32(f) \
  BENCHMARK(f)->ArgNames({"ratio", "tf32"})->ArgsProduct({{4, 8, 16}, {0, 1}})->UseManualTime()->Iterations(3)
ZIPCCL_RATIOS_TF32(bm_encode);
ZIPCCL_RATIOS_TF32(bm_decode);
ZIPCCL_RATIOS_TF32(bm_backward);
ZIPCCL_RATIOS_TF32(bm_optimizer_step);
ZIPCCL_RATIOS(bm_rvq_encode);
ZIPCCL_RATIOS(bm_rvq_decode);

int main(int argc, char** argv) {
  if (!have_gpu()) {
    std::fprintf(stderr, "bench_cuda_subspace: no CUDA device\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
