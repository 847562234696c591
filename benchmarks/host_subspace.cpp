// The host subspace codec: encode, decode, both backward passes, a Stiefel optimizer step and
// residual VQ, in tokens per second, for d = 1024 and r = d/4, d/8, d/16 (one thread of OpenBLAS,
// one micro-batch of 2048 tokens).
//
//   build/bin/bench_host_subspace
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include <zipccl/subspace/anchor.hpp>
#include <zipccl/subspace/projector.hpp>
#include <zipccl/subspace/rvq.hpp>
#include <zipccl/subspace/stiefel.hpp>

#include "support/subspace_data.hpp"

using namespace zipccl::subspace;

namespace {

constexpr std::size_t d = 1024, tokens = 2048, vocab = 256;

matrix<float> gaussian(std::size_t r, std::size_t c, std::uint64_t seed) {
  return zipccl::testing::gaussian_matrix<float>(r, c, seed);
}

struct setup {
  std::size_t r;
  matrix<float> x, a, z, xh;
  std::vector<std::int32_t> tok;
  anchor_table<float> anc;
  explicit setup(std::size_t rank)
      : r(rank), x(gaussian(tokens, d, 1)), a(random_orthonormal<float>(d, rank, 2)), tok(tokens),
        anc(vocab, d, rank, 3) {
    for (std::size_t i = 0; i < tokens; ++i) tok[i] = static_cast<std::int32_t>(i % vocab);
    anc.table() = gaussian(vocab, rank, 4);
    zipccl::throw_if_error(encode(x, tok.data(), a, &anc, &z), "bench_host_subspace: encode");
    zipccl::throw_if_error(decode(z, tok.data(), a, &anc, &xh), "bench_host_subspace: decode");
  }
};

void per_token(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * tokens));
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * tokens),
                                                      benchmark::Counter::kIsRate);
}

void bm_encode(benchmark::State& state) {
  setup s(d / static_cast<std::size_t>(state.range(0)));
  matrix<float> z;
  for (auto _ : state) benchmark::DoNotOptimize(encode(s.x, s.tok.data(), s.a, &s.anc, &z));
  per_token(state);
}
void bm_decode(benchmark::State& state) {
  setup s(d / static_cast<std::size_t>(state.range(0)));
  matrix<float> xh;
  for (auto _ : state) benchmark::DoNotOptimize(decode(s.z, s.tok.data(), s.a, &s.anc, &xh));
  per_token(state);
}
void bm_backward(benchmark::State& state) {  // both sides: decode_backward then encode_backward
  setup s(d / static_cast<std::size_t>(state.range(0)));
  matrix<float> dz, dx, da(d, s.r), de(vocab, s.r);
  for (auto _ : state) {
    benchmark::DoNotOptimize(decode_backward(s.z, s.tok.data(), s.a, &s.anc, s.xh, &dz, &da, &de));
    benchmark::DoNotOptimize(encode_backward(s.x, s.tok.data(), s.a, &s.anc, dz, &dx, &da, &de));
  }
  per_token(state);
}
void bm_optimizer_step(benchmark::State& state) {  // one step per micro-batch
  setup s(d / static_cast<std::size_t>(state.range(0)));
  stiefel_optimizer<float> opt(d, s.r);
  const matrix<float> g = gaussian(d, s.r, 5);
  for (auto _ : state) benchmark::DoNotOptimize(opt.step(&s.a, g));
  per_token(state);
}
// residual VQ, trained a little: range(1) groups (0: groups of 4 numbers, as the training
// example), range(2) rounds, 256 codewords
void bm_rvq_encode(benchmark::State& state) {
  setup s(d / static_cast<std::size_t>(state.range(0)));
  const std::size_t groups = state.range(1) ? static_cast<std::size_t>(state.range(1)) : s.r / 4;
  rvq_learner<float> vq(rvq_shape{s.r, groups, static_cast<std::size_t>(state.range(2)), 256}, {});
  if (vq.learn(s.z) != zipccl::status::success) return state.SkipWithError("rvq learn failed");
  for (int i = 0; i < 64; ++i) vq.next_sync();
  std::vector<std::uint16_t> idx;
  for (auto _ : state) benchmark::DoNotOptimize(vq.encode(s.z, &idx));
  per_token(state);
}

}  // namespace

BENCHMARK(bm_encode)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_decode)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_backward)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_optimizer_step)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_rvq_encode)->Args({8, 4, 2})->Args({8, 0, 4})->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
#if defined(OPENBLAS_VERSION)
  openblas_set_num_threads(1);
#endif
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
