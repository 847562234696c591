// Host collectives over transport::local with a link model: compressed versus plain in the same
// run, 4 ranks (threads), links from 0.25 to 16 GB/s with 5 us latency.
//
//   build/bin/bench_host_collectives --benchmark_min_time=0.1
//
// Counters: `wire_ratio` = plain bytes on the wire / compressed bytes on the wire (both counted by
// the transport); `speedup` = the plain benchmark's time / this one's (set on the compressed rows,
// from the plain row with the same op, data and link, measured just before). The adaptive rows
// calibrate the cost model on the simulated links first (untimed) and report the path it predicts
// (`predicted_compress`, 1 = compressed). The 4 rank threads share the machine's cores: on fewer
// than 4, coding runs slower than on 4 cores of its own, so the speedups are conservative.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <map>
#include <type_traits>
#include <string>
#include <vector>

#include <zipccl/collective.hpp>

#include "support/test_data.hpp"

using namespace zipccl;

namespace {

using C = codec<bf16, codebook::analytic_gaussian>;
constexpr int ranks = 4;

enum class which { all_gather, reduce_scatter, all_reduce, all_to_all };
const char* name_of(which w) {
  return w == which::all_gather       ? "all_gather"
         : w == which::reduce_scatter ? "reduce_scatter"
         : w == which::all_reduce     ? "all_reduce"
                                      : "all_to_all";
}

// all_to_all: rank r sends uneven blocks (1, 2 or 3 times n / (3 ranks) elements) to the ranks, as
// MoE dispatch does: 3/4 of its n elements or less.
struct a2a_counts {
  std::vector<std::uint64_t> sc, sd, rc, rd;
  std::uint64_t recv_total = 0;
};
std::uint64_t a2a_count(int from, int to, std::uint64_t n) { return n / (3 * ranks) * (1 + (from + to) % 3); }
a2a_counts a2a_for(int r, std::uint64_t n) {
  a2a_counts c;
  std::uint64_t s = 0;
  for (int p = 0; p < ranks; ++p) {
    c.sc.push_back(a2a_count(r, p, n));
    c.sd.push_back(s);
    s += c.sc.back();
    c.rc.push_back(a2a_count(p, r, n));
    c.rd.push_back(c.recv_total);
    c.recv_total += c.rc.back();
  }
  return c;
}

struct dataset {
  std::string name;
  std::vector<std::vector<std::uint16_t>> per_rank;  // ranks x elements
};

dataset gaussian(std::uint64_t n) {
  dataset d{"gaussian", {}};
  for (int r = 0; r < ranks; ++r) d.per_rank.push_back(testing::make_tensor<bf16>(n, 0.01, testing::distribution::gaussian, r));
  return d;
}

// The shared real gradients, concatenated, each rank a rotation of them.
dataset gradients() {
  dataset d{"gradients", {}};
  std::vector<std::uint16_t> all;
  for (const auto& t : testing::shared_manifest("bf16"))
    if (t.kind == "gradient") {
      const auto v = testing::load_shared<bf16>(t);
      all.insert(all.end(), v.begin(), v.end());
    }
  for (int r = 0; r < ranks && !all.empty(); ++r) {
    std::vector<std::uint16_t> v(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) v[i] = all[(i + r * all.size() / ranks) % all.size()];
    d.per_rank.push_back(std::move(v));
  }
  return d;
}

// The plain rows' wire bytes and mean seconds, by op / data / link, for the compressed rows.
std::map<std::string, std::pair<std::uint64_t, double>> plain;

template <class Strategy>
void bm(benchmark::State& state, const dataset* d, which w, double gbps) {
  if (d->per_rank.empty()) return state.SkipWithError("no data (../shared/data missing)");
  const std::uint64_t n = d->per_rank[0].size();
  const std::uint64_t count = w == which::reduce_scatter ? n / ranks : n;
  transport::local_world world(ranks, {gbps * 1e9, 5e-6});
  std::vector<std::vector<std::uint8_t>> ws(ranks), out(ranks);
  std::vector<a2a_counts> a2a;
  for (int r = 0; r < ranks; ++r) {
    a2a.push_back(a2a_for(r, n));
    ws[r].resize(w == which::all_gather       ? all_gather_workspace<C, Strategy>(count, ranks)
                 : w == which::reduce_scatter ? reduce_scatter_workspace<C, Strategy>(count)
                 : w == which::all_reduce     ? all_reduce_workspace<C, Strategy>(count, ranks)
                                              : all_to_all_workspace<C, Strategy>(a2a[r].sc.data(), a2a[r].rc.data(), ranks));
    out[r].resize((w == which::all_gather ? count * ranks : w == which::all_to_all ? a2a[r].recv_total : count) * 2);
  }
  std::uint64_t wire = 0;
  double total_seconds = 0;
  bool ok = true;
  // strategy::adaptive: calibrate the cost model on this world first (not timed)
  std::vector<collective_options> opts(ranks);
  if (std::is_same_v<Strategy, strategy::adaptive>) {
    world.run([&](transport::local_transport& t) {
      const auto r = static_cast<std::size_t>(t.rank());
      if (calibrate<C>(&opts[r].model, t, d->per_rank[r].data(), std::min<std::uint64_t>(count, 1u << 20)) !=
          status::success)
        ok = false;
    });
    state.counters["model_link_GBps"] = opts[0].model.link_bytes_per_second / 1e9;
    state.counters["model_latency_us"] = opts[0].model.latency_seconds * 1e6;
    state.counters["model_ratio"] = opts[0].model.ratio;
    state.counters["model_overlap"] = opts[0].model.overlap;
    state.counters["model_c_GBps"] = opts[0].model.compress_bytes_per_second / 1e9;
    state.counters["model_d_GBps"] = opts[0].model.decompress_bytes_per_second / 1e9;
    state.counters["predicted_compress"] =
        (w == which::reduce_scatter ? opts[0].model.reduce_scatter(count * 2, ranks)
         : w == which::all_to_all   ? opts[0].model.all_to_all(2 * n / (3 * ranks) * 2, ranks)
                                    : opts[0].model.all_gather((w == which::all_reduce ? count / ranks : count) * 2, ranks))
            .compress;
  }
  for (auto _ : state) {
    world.reset();
    const auto t0 = std::chrono::steady_clock::now();
    world.run([&](transport::local_transport& t) {
      const auto r = static_cast<std::size_t>(t.rank());
      const void* in = d->per_rank[r].data();
      status s;
      const collective_options& o = opts[r];
      if (w == which::all_gather)
        s = all_gather<C, Strategy>(in, out[r].data(), count, t, ws[r].data(), ws[r].size(), o);
      else if (w == which::reduce_scatter)
        s = reduce_scatter<C, Strategy>(in, out[r].data(), count, op::sum, t, ws[r].data(), ws[r].size(), o);
      else if (w == which::all_reduce)
        s = all_reduce<C, Strategy>(in, out[r].data(), count, op::sum, t, ws[r].data(), ws[r].size(), o);
      else
        s = all_to_all<C, Strategy>(in, a2a[r].sc.data(), a2a[r].sd.data(), out[r].data(), a2a[r].rc.data(),
                                    a2a[r].rd.data(), t, ws[r].data(), ws[r].size(), o);
      if (s != status::success) ok = false;
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(secs);
    total_seconds += secs;
    wire = world.total_bytes();
  }
  if (!ok) return state.SkipWithError("collective failed");
  const std::string key = std::string(name_of(w)) + "/" + d->name + "/" + std::to_string(gbps);
  const double mean = total_seconds / static_cast<double>(state.iterations());
  state.counters["wire_MB"] = static_cast<double>(wire) / 1e6;
  if (std::is_same_v<Strategy, strategy::never>) {
    plain[key] = {wire, mean};
  } else if (plain.count(key)) {
    state.counters["wire_ratio"] = static_cast<double>(plain[key].first) / static_cast<double>(wire);
    state.counters["speedup"] = plain[key].second / mean;
  }
}

}  // namespace

int main(int argc, char** argv) {
  static const dataset g = gaussian(4u << 20);  // 8 MB of bf16 per rank
  static const dataset real = gradients();
  for (which w : {which::all_gather, which::reduce_scatter, which::all_reduce, which::all_to_all})
    for (const dataset* d : {&g, &real})
      for (double gbps : {0.25, 1.0, 4.0, 16.0}) {
        const std::string base = std::string(name_of(w)) + "/" + d->name + "/link_GBps:" + std::to_string(gbps).substr(0, 4);
        benchmark::RegisterBenchmark((base + "/plain").c_str(), bm<strategy::never>, d, w, gbps)
            ->UseManualTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark((base + "/compressed").c_str(), bm<strategy::always>, d, w, gbps)
            ->UseManualTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark((base + "/adaptive").c_str(), bm<strategy::adaptive>, d, w, gbps)
            ->UseManualTime()->Unit(benchmark::kMillisecond);
      }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
