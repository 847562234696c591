// The host collectives over transport::mpi: compressed versus plain in the same run, on real
// processes. On one machine Open MPI moves the bytes through shared memory, a link far faster than
// the codec, so this records where compression stops paying.
//
//   mpirun -np 4 build/bin/bench_mpi_collectives [--benchmark_filter=...]
//
// Every rank runs every benchmark with the same fixed iteration count (so that the ranks stay in
// step); an iteration's time is the slowest rank's, agreed with MPI_Allreduce; rank 0 reports.
// `speedup` = the plain row's time / this row's, measured just before in the same run. The
// adaptive rows run calibrate() first (untimed) and report the path its model predicts.
#include <mpi.h>

#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/transport/mpi.hpp>

#include "support/test_data.hpp"

using namespace zipccl;

namespace {

using C = codec<bf16, codebook::analytic_gaussian>;
enum class which { all_gather, reduce_scatter, all_reduce, all_to_all };
const char* name_of(which w) {
  return w == which::all_gather ? "all_gather" : w == which::reduce_scatter ? "reduce_scatter"
                                             : w == which::all_reduce     ? "all_reduce"
                                                                          : "all_to_all";
}

std::map<std::string, double> plain_seconds;

template <class Strategy>
void bm(benchmark::State& state, which w, std::uint64_t n) {
  transport::mpi t(MPI_COMM_WORLD);
  const int ranks = t.size(), r = t.rank();
  const auto in = testing::make_tensor<bf16>(n, 0.01, testing::distribution::gaussian, static_cast<std::uint64_t>(r));
  const std::uint64_t count = w == which::reduce_scatter ? n / ranks : n;
  // all_to_all: n / ranks elements to every rank
  std::vector<std::uint64_t> counts(ranks, n / ranks), displs(ranks);
  for (int p = 0; p < ranks; ++p) displs[p] = static_cast<std::uint64_t>(p) * (n / ranks);
  collective_options opt;
  if (std::is_same_v<Strategy, strategy::adaptive>) {
    if (calibrate<C>(&opt.model, t, in.data(), std::min<std::uint64_t>(count, 1u << 20)) != status::success)
      return state.SkipWithError("calibrate failed");
    const std::uint64_t bytes = count * 2;
    state.counters["predicted_compress"] =
        (w == which::reduce_scatter ? opt.model.reduce_scatter(bytes, ranks)
         : w == which::all_to_all   ? opt.model.all_to_all(n / ranks * 2, ranks)
                                    : opt.model.all_gather(w == which::all_reduce ? bytes / ranks : bytes, ranks))
            .compress;
    state.counters["model_link_GBps"] = opt.model.link_bytes_per_second / 1e9;
  }
  std::vector<std::uint8_t> ws(w == which::all_gather       ? all_gather_workspace<C, Strategy>(count, ranks, opt)
                               : w == which::reduce_scatter ? reduce_scatter_workspace<C, Strategy>(count, opt)
                               : w == which::all_reduce     ? all_reduce_workspace<C, Strategy>(count, ranks, opt)
                                                            : all_to_all_workspace<C, Strategy>(counts.data(), counts.data(), ranks, opt));
  std::vector<std::uint16_t> out(w == which::all_gather ? count * ranks : n);
  bool ok = true;
  double total = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    status s;
    if (w == which::all_gather)
      s = all_gather<C, Strategy>(in.data(), out.data(), count, t, ws.data(), ws.size(), opt);
    else if (w == which::reduce_scatter)
      s = reduce_scatter<C, Strategy>(in.data(), out.data(), count, op::sum, t, ws.data(), ws.size(), opt);
    else if (w == which::all_reduce)
      s = all_reduce<C, Strategy>(in.data(), out.data(), count, op::sum, t, ws.data(), ws.size(), opt);
    else
      s = all_to_all<C, Strategy>(in.data(), counts.data(), displs.data(), out.data(), counts.data(), displs.data(), t,
                                  ws.data(), ws.size(), opt);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
    MPI_Allreduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(slowest);
    total += slowest;
    ok = ok && s == status::success;
  }
  if (!ok) return state.SkipWithError("collective failed");
  const std::string key = std::string(name_of(w)) + "/" + std::to_string(n);
  const double mean = total / static_cast<double>(state.iterations());
  if (std::is_same_v<Strategy, strategy::never>) plain_seconds[key] = mean;
  else if (plain_seconds.count(key)) state.counters["speedup"] = plain_seconds[key] / mean;
  state.counters["GBps_per_rank"] = static_cast<double>(count * 2) / mean / 1e9;
}

// Reports nothing: the ranks other than 0 run the benchmarks in step but stay quiet.
class quiet_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (which w : {which::all_gather, which::reduce_scatter, which::all_reduce, which::all_to_all})
    for (std::uint64_t n : {std::uint64_t{1} << 16, std::uint64_t{1} << 20, std::uint64_t{4} << 20}) {
      const std::string base = std::string(name_of(w)) + "/elems:" + std::to_string(n);
      const int iters = n >= (1u << 20) ? 10 : 50;
      benchmark::RegisterBenchmark((base + "/plain").c_str(), bm<strategy::never>, w, n)
          ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((base + "/compressed").c_str(), bm<strategy::always>, w, n)
          ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((base + "/adaptive").c_str(), bm<strategy::adaptive>, w, n)
          ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMillisecond);
    }
  benchmark::Initialize(&argc, argv);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    quiet_reporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
