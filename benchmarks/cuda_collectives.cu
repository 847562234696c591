// The device collectives on transport::cuda_local: 8 ranks as 8 streams of one GPU, links modelled
// at 25, 50, 100 and 400 GB/s (5 us latency), 64 MiB of bf16 per rank, compressed beside plain in
// the same run. Needs a GPU.
//
//   build/bin/bench_cuda_collectives --benchmark_counters_tabular=true
//
// Each iteration enqueues the call on every rank from one host thread and waits for all streams
// (manual time: wall clock). Counters: `wire_ratio` = plain bytes per ring step / bytes on the
// fixed-size wire; `speedup` = the plain row's time / this row's (set on compressed rows, from
// the plain row with the same op, data and link, run just before); `enqueue_us` = host time to
// enqueue one rank's call. On one GPU the 8 ranks share its SMs, so each rank codes at about an
// eighth of the GPU's speed: the speedups are those of a cluster whose GPUs code 8x slower.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdlib>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zipccl/cuda/collective.cuh>
#include <zipccl/transport/cuda_local.cuh>

#include "cuda_timing.cuh"
#include "support/test_data.hpp"

namespace {

using C = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
using T = C::bits_type;
constexpr int ranks = 8;
constexpr std::uint64_t per_rank = 32ull << 20;  // elements: 64 MiB of bf16

enum class which { all_gather, reduce_scatter, all_reduce };
const char* name_of(which w) {
  return w == which::all_gather ? "all_gather" : w == which::reduce_scatter ? "reduce_scatter" : "all_reduce";
}

// Gaussian bf16, or the shared tensors (all kinds of bf16) tiled to the size.
std::vector<T> data_of(const std::string& kind, std::uint64_t n, int rank) {
  std::vector<T> tile;
  if (kind == "real") {
    for (const auto& t : zipccl::testing::shared_manifest("bf16")) {
      const auto v = zipccl::testing::load_shared<zipccl::bf16>(t);
      tile.insert(tile.end(), v.begin(), v.end());
    }
  }
  if (tile.empty()) tile = zipccl::testing::make_tensor<zipccl::bf16>(1 << 20, 0.02, zipccl::testing::distribution::gaussian, 9);
  std::vector<T> v(n);
  const std::uint64_t shift = static_cast<std::uint64_t>(rank) * 7919;
  for (std::uint64_t i = 0; i < n; ++i) v[i] = tile[(i + shift) % tile.size()];
  return v;
}

std::map<std::string, double> plain_seconds;  // op/data/link -> the plain row's time

template <class Strategy>
void bm(benchmark::State& state, which w, std::string kind, double link_gbps) {
  constexpr bool packed = std::is_same_v<Strategy, zipccl::strategy::always>;
  const zipccl::collective_options opt;
  const std::uint64_t count = w == which::reduce_scatter ? per_rank / ranks : per_rank;  // per rank in
  const std::uint64_t in_count = w == which::reduce_scatter ? per_rank : count;
  const std::uint64_t out_count = w == which::all_gather ? count * ranks : w == which::reduce_scatter ? count : count;
  const std::uint64_t ws_bytes =
      w == which::all_gather       ? zipccl::cuda::all_gather_workspace<C, Strategy>(count, ranks, opt)
      : w == which::reduce_scatter ? zipccl::cuda::reduce_scatter_workspace<C, Strategy>(count, opt)
                                   : zipccl::cuda::all_reduce_workspace<C, Strategy>(count, ranks, opt);
  zipccl::transport::cuda_local_world world(ranks, zipccl::transport::link_model{link_gbps * 1e9, 5e-6});
  std::vector<std::unique_ptr<zipccl::bench::device_mem>> in, out, ws;
  std::vector<cudaStream_t> streams(ranks);
  zipccl::status* st = nullptr;
  if (cudaMallocManaged(&st, sizeof(zipccl::status) * ranks) != cudaSuccess) {
    state.SkipWithError("cudaMallocManaged failed");
    return;
  }
  for (int r = 0; r < ranks; ++r) {
    cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    in.emplace_back(new zipccl::bench::device_mem(in_count * 2));
    out.emplace_back(new zipccl::bench::device_mem(out_count * 2));
    ws.emplace_back(new zipccl::bench::device_mem(ws_bytes));
    if (!in.back()->p || !out.back()->p || !ws.back()->p) {
      state.SkipWithError("out of device memory");
      return;
    }
    const auto v = data_of(kind, in_count, r);
    cudaMemcpy(in.back()->p, v.data(), in_count * 2, cudaMemcpyHostToDevice);
  }
  double enqueue = 0;
  auto once = [&] {
    zipccl::bench::first_error err;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < ranks; ++r) {
      auto& t = world.rank(r);
      if (w == which::all_gather)
        err(zipccl::cuda::all_gather<C, Strategy>(in[r]->p, out[r]->p, count, t, ws[r]->p, ws_bytes, &st[r], streams[r], opt));
      else if (w == which::reduce_scatter)
        err(zipccl::cuda::reduce_scatter<C, Strategy>(in[r]->p, out[r]->p, count, zipccl::op::sum, t, ws[r]->p, ws_bytes,
                                                      &st[r], streams[r], opt));
      else
        err(zipccl::cuda::all_reduce<C, Strategy>(in[r]->p, out[r]->p, count, zipccl::op::sum, t, ws[r]->p, ws_bytes,
                                                  &st[r], streams[r], opt));
    }
    enqueue = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / ranks;
    for (auto s : streams) cudaStreamSynchronize(s);
    for (int r = 0; r < ranks; ++r) err(st[r]);
    return err;
  };
  if (once().failed()) {  // warm up, and the first failure is reported instead of a figure
    state.SkipWithError("a call failed");
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto err = once();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (err.failed()) {
      state.SkipWithError(zipccl::to_string(err.first));
      break;
    }
    state.SetIterationTime(seconds);
  }
  const std::string key = std::string(name_of(w)) + "/" + kind + "/" + std::to_string(link_gbps);
  const auto g = zipccl::cuda::collective_detail::geometry<C, zipccl::cuda::default_tuning>(
      w == which::all_reduce ? (count + ranks - 1) / ranks : count, opt);
  const double step_plain = static_cast<double>(w == which::all_reduce ? (count + ranks - 1) / ranks : count) * 2;
  if (packed) {
    state.counters["wire_ratio"] = step_plain / static_cast<double>(g.total_bytes());
    if (plain_seconds.count(key)) state.counters["speedup"] = plain_seconds[key] / seconds;
  } else {
    plain_seconds[key] = seconds;
  }
  state.counters["enqueue_us"] = enqueue * 1e6;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in_count * 2));
  for (auto s : streams) cudaStreamDestroy(s);
  cudaFree(st);
}

}  // namespace

int main(int argc, char** argv) {
  // 8 ranks on one GPU: a hardware queue each (before the first CUDA call; cuda_local.cuh)
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  for (which w : {which::all_gather, which::reduce_scatter, which::all_reduce})
    for (const char* kind : {"gaussian", "real"})
      for (double link : {25.0, 50.0, 100.0, 400.0}) {
        const std::string base = std::string(name_of(w)) + "/" + kind + "/" + std::to_string(static_cast<int>(link)) + "GBps/";
        benchmark::RegisterBenchmark((base + "plain").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::never>(s, w, kind, link);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        benchmark::RegisterBenchmark((base + "compressed").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::always>(s, w, kind, link);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
