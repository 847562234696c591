// The device collectives on transport::cuda_local: 8 ranks on one GPU, links modelled
// at 25, 50, 100 and 400 GB/s (5 us latency), 64 MiB of bf16 per rank, compressed beside plain in
// the same run. Needs a GPU.
//
//   build/bin/bench_cuda_collectives --benchmark_counters_tabular=true [--speeds-out=FILE]
//
// --speeds-out writes the device codec speeds it measures first (whole GPU, 64 MiB of Gaussian
// bf16) as `zipccl plan --device-speeds FILE` reads them.
//
// Rows per op, data and link: `plain` (strategy::never), `compressed` (strategy::always on each
// rank's stream alone), `pipelined` (strategy::always on a cuda::pipeline: codec kernels and
// transfers on two streams) and `adaptive` (pipelined; the cost model holds the modelled link and
// the device codec speeds this binary measures first, per rank: the GPU's speed / 8); for
// all_reduce also `compressed_entropy` and `pipelined_entropy`, codebook::entropy at the spill
// budget spill_permille_for measures on the data (counter `spill_permille`).
// Each iteration enqueues the call on every rank, a host thread each (world.run), and waits for all
// streams (manual time: wall clock). Counters: `wire_ratio` = plain bytes per ring step / bytes on
// the fixed-size wire; `speedup` = the plain row's time / this row's (from the plain row with the
// same op, data and link, run just before); `enqueue_us` = the longest host time of one rank's
// call (its rendezvous with its peers included: cuda_local matches messages on the host).
// On one GPU the 8 ranks share its SMs, so each rank codes at about an eighth of the GPU's speed:
// the speedups are those of a cluster whose GPUs code 8x slower.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include <chrono>
#include <cstdio>
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
  static std::map<std::string, std::vector<T>> tiles;  // loaded once per kind
  std::vector<T>& tile = tiles[kind];
  if (tile.empty() && kind == "real") {
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
double gpu_compress = 0, gpu_decompress = 0;   // bytes per second of the whole GPU (measured in main)

// The device codec's speed on one 64 MiB block of Gaussian bf16 (encode + pack; unpack + decode),
// best of three, timed with events.
bool measure_codec() {
  using namespace zipccl::cuda::collective_detail;
  using tuning = zipccl::cuda::default_tuning;
  const zipccl::collective_options opt;
  const auto g = geometry<C, tuning>(per_rank, opt);
  zipccl::bench::device_mem src(per_rank * 2), dst(per_rank * 2), staging(g.staging_bytes()), wire(g.total_bytes()),
      spans(g.chunks() * 8), key(8);
  if (!src.p || !dst.p || !staging.p || !wire.p || !spans.p || !key.p) return false;
  const auto v = data_of("gaussian", per_rank, 0);
  cudaMemcpy(src.p, v.data(), per_rank * 2, cudaMemcpyHostToDevice);
  cudaMemset(key.p, 0xFF, 8);
  auto* k = static_cast<unsigned long long*>(key.p);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const typename C::codebook_type cb{};
  const auto bc = coder<C, tuning>(nullptr, g, opt, cb, k, static_cast<std::uint8_t*>(staging.p),
                                   static_cast<std::uint64_t*>(spans.p));
  auto* w = static_cast<std::uint8_t*>(wire.p);
  float best_e = 1e30f, best_d = 1e30f;
  for (int rep = 0; rep < 3; ++rep) {
    float ms = 0;
    cudaEventRecord(a);
    (void)bc.encode(static_cast<const std::uint8_t*>(src.p), w, 1);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    best_e = ms < best_e ? ms : best_e;
    cudaEventRecord(a);
    (void)bc.unpack(w, 2);
    (void)bc.decode<zipccl::cuda::detail::decode_mode::store>(static_cast<std::uint8_t*>(dst.p), nullptr, nullptr, 2);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    best_d = ms < best_d ? ms : best_d;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (cudaDeviceSynchronize() != cudaSuccess) return false;
  gpu_compress = static_cast<double>(per_rank * 2) / (best_e * 1e-3);
  gpu_decompress = static_cast<double>(per_rank * 2) / (best_d * 1e-3);
  std::printf("device codec (64 MiB Gaussian bf16, whole GPU): compress %.1f GB/s, decompress %.1f GB/s\n",
              gpu_compress * 1e-9, gpu_decompress * 1e-9);
  return true;
}

// The spill budget codebook::entropy needs on the fixed-size wire for `kind` (spill_permille_for
// on one tile of it: the ranks' data repeat the tile), once per kind.
std::uint32_t entropy_budget(const std::string& kind) {
  static std::map<std::string, std::uint32_t> budgets;
  auto it = budgets.find(kind);
  if (it != budgets.end()) return it->second;
  const auto v = data_of(kind, 1 << 20, 0);
  using Y = zipccl::codec<zipccl::bf16, zipccl::codebook::entropy>;
  return budgets[kind] = zipccl::spill_permille_for<Y>(v.data(), v.size());
}

// One collective of 8 ranks on this GPU's cuda_local world. Codec: C (the analytic bf16 rows), or
// codebook::entropy at the budget entropy_budget() measures.
template <class Strategy, class Codec = C>
void bm(benchmark::State& state, which w, std::string kind, double link_gbps, bool pipelined) {
  constexpr bool packed = !std::is_same_v<Strategy, zipccl::strategy::never>;
  zipccl::collective_options opt;
  if constexpr (zipccl::codebook::is_entropy_v<typename Codec::codebook_type>) {
    opt.device_wire.spill_permille = entropy_budget(kind);
    state.counters["spill_permille"] = opt.device_wire.spill_permille;
  }
  if (std::is_same_v<Strategy, zipccl::strategy::adaptive>) {  // the device cost model of docs/design.md
    const auto g1 = zipccl::cuda::collective_detail::geometry<Codec, zipccl::cuda::default_tuning>(per_rank, opt);
    opt.model.link_bytes_per_second = link_gbps * 1e9;
    opt.model.latency_seconds = 5e-6;
    opt.model.compress_bytes_per_second = gpu_compress / ranks;
    opt.model.decompress_bytes_per_second = gpu_decompress / ranks;
    opt.model.ratio = static_cast<double>(per_rank * 2) / static_cast<double>(g1.total_bytes());
    opt.model.segment_bytes = static_cast<double>(zipccl::cuda::collective_detail::segment_elems(opt) * 2);
    opt.model.overlap = pipelined ? 1.0 : 0.0;
  }
  const std::uint64_t count = w == which::reduce_scatter ? per_rank / ranks : per_rank;  // per rank in
  const std::uint64_t in_count = w == which::reduce_scatter ? per_rank : count;
  const std::uint64_t out_count = w == which::all_gather ? count * ranks : w == which::reduce_scatter ? count : count;
  const std::uint64_t ws_bytes =
      w == which::all_gather       ? zipccl::cuda::all_gather_workspace<Codec, Strategy>(count, ranks, opt)
      : w == which::reduce_scatter ? zipccl::cuda::reduce_scatter_workspace<Codec, Strategy>(count, opt)
                                   : zipccl::cuda::all_reduce_workspace<Codec, Strategy>(count, ranks, opt);
  // (a world that cannot be made throws: reported as this row's error)
  std::unique_ptr<zipccl::transport::cuda_local_world> made;
  try {
    made = std::make_unique<zipccl::transport::cuda_local_world>(
        ranks, zipccl::transport::link_model{link_gbps * 1e9, 5e-6});
  } catch (const zipccl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  zipccl::transport::cuda_local_world& world = *made;
  std::vector<std::unique_ptr<zipccl::bench::device_mem>> in, out, ws;
  std::vector<std::unique_ptr<zipccl::cuda::pipeline>> pipes;
  std::vector<cudaStream_t> streams(ranks, nullptr);
  zipccl::status* st = nullptr;
  struct cleanup {  // on every return: the pipelines, then the status words (the streams are the world's)
    std::vector<std::unique_ptr<zipccl::cuda::pipeline>>& pipes;
    zipccl::status*& st;
    ~cleanup() {
      pipes.clear();
      cudaFree(st);
    }
  } done{pipes, st};
  if (cudaMallocManaged(&st, sizeof(zipccl::status) * ranks) != cudaSuccess) {
    state.SkipWithError("cudaMallocManaged failed");
    return;
  }
  const std::uint64_t block = w == which::all_reduce ? (count + ranks - 1) / ranks : count;
  for (int r = 0; r < ranks; ++r) streams[r] = world.stream(r);  // (what world.run hands each rank)
  for (int r = 0; r < ranks && pipelined; ++r) {
    pipes.push_back(zipccl::cuda::make_pipeline(world.rank(r), zipccl::cuda::pipeline_slots(block, opt)));
    if (!pipes.back()) {
      state.SkipWithError("no pipeline for a rank");
      return;
    }
  }
  const auto lanes_of = [&](int r) { return pipelined ? pipes[r]->on(streams[r]) : zipccl::cuda::lanes(streams[r]); };
  for (int r = 0; r < ranks; ++r) {
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
    std::vector<double> took(ranks, 0.0);
    const auto results = world.run([&](zipccl::transport::cuda_local_transport& t, cudaStream_t) {
      const int r = t.rank();
      const auto t0 = std::chrono::steady_clock::now();
      zipccl::status s;
      if (w == which::all_gather)
        s = zipccl::cuda::all_gather<Codec, Strategy>(in[r]->p, out[r]->p, count, t, ws[r]->p, ws_bytes, &st[r],
                                                      lanes_of(r), opt);
      else if (w == which::reduce_scatter)
        s = zipccl::cuda::reduce_scatter<Codec, Strategy>(in[r]->p, out[r]->p, count, zipccl::op::sum, t, ws[r]->p,
                                                          ws_bytes, &st[r], lanes_of(r), opt);
      else
        s = zipccl::cuda::all_reduce<Codec, Strategy>(in[r]->p, out[r]->p, count, zipccl::op::sum, t, ws[r]->p,
                                                      ws_bytes, &st[r], lanes_of(r), opt);
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return s;
    });
    for (zipccl::status s : results) err(s);
    enqueue = 0;
    for (double x : took) enqueue = x > enqueue ? x : enqueue;
    for (auto s : streams) cudaStreamSynchronize(s);  // (each call joins its transfer stream back)
    if (err.failed()) world.reset();  // (run ended the world: the next row starts afresh)
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
  const auto g = zipccl::cuda::collective_detail::geometry<Codec, zipccl::cuda::default_tuning>(block, opt);
  const double step_plain = static_cast<double>(block) * 2;
  if (packed) {
    if (std::is_same_v<Strategy, zipccl::strategy::always>)
      state.counters["wire_ratio"] = step_plain / static_cast<double>(g.total_bytes());
    if (plain_seconds.count(key)) state.counters["speedup"] = plain_seconds[key] / seconds;
  } else {
    plain_seconds[key] = seconds;
  }
  state.counters["enqueue_us"] = enqueue * 1e6;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in_count * 2));
}

}  // namespace

int main(int argc, char** argv) {
  std::string speeds_out;  // our own flag, taken out before Google Benchmark sees the arguments
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--speeds-out=", 13) == 0) {
      speeds_out = argv[i] + 13;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  if (!measure_codec()) {
    std::printf("the device codec could not be measured\n");
    return 1;
  }
  if (!speeds_out.empty()) {
    cudaDeviceProp prop{};
    (void)cudaGetDeviceProperties(&prop, 0);
    const zipccl::collective_options opt;
    const auto g = zipccl::cuda::collective_detail::geometry<C, zipccl::cuda::default_tuning>(per_rank, opt);
    std::FILE* f = std::fopen(speeds_out.c_str(), "w");
    bool ok = f != nullptr;
    if (ok)
      ok = std::fprintf(f,
                        "# zipccl device codec speeds: bench_cuda_collectives, 64 MiB of Gaussian bf16, whole GPU, "
                        "default options\ndevice %s\ndtype bf16\ncompress_gbps %.3f\ndecompress_gbps %.3f\n"
                        "wire_ratio %.4f\n",
                        prop.name, gpu_compress * 1e-9, gpu_decompress * 1e-9,
                        static_cast<double>(per_rank * 2) / static_cast<double>(g.total_bytes())) >= 0;
    if (f != nullptr && std::fclose(f) != 0) ok = false;
    if (!ok) {
      std::printf("cannot write %s\n", speeds_out.c_str());
      return 1;
    }
  }
  for (which w : {which::all_gather, which::reduce_scatter, which::all_reduce})
    for (const char* kind : {"gaussian", "real"})
      for (double link : {25.0, 50.0, 100.0, 400.0}) {
        const std::string base = std::string(name_of(w)) + "/" + kind + "/" + std::to_string(static_cast<int>(link)) + "GBps/";
        benchmark::RegisterBenchmark((base + "plain").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::never>(s, w, kind, link, false);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        benchmark::RegisterBenchmark((base + "compressed").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::always>(s, w, kind, link, false);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        benchmark::RegisterBenchmark((base + "pipelined").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::always>(s, w, kind, link, true);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        benchmark::RegisterBenchmark((base + "adaptive").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::adaptive>(s, w, kind, link, true);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        if (w != which::all_reduce) continue;
        // codebook::entropy on the fixed-size wire (its spill holds the rANS bodies)
        using Y = zipccl::codec<zipccl::bf16, zipccl::codebook::entropy>;
        benchmark::RegisterBenchmark((base + "compressed_entropy").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::always, Y>(s, w, kind, link, false);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
        benchmark::RegisterBenchmark((base + "pipelined_entropy").c_str(), [=](benchmark::State& s) {
          bm<zipccl::strategy::always, Y>(s, w, kind, link, true);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
