// Host codec throughput and ratio, single-threaded, side by side with zstd and memcpy.
//
//   build/bin/bench_host_codec --benchmark_min_time=0.5
//   build/bin/bench_host_codec --benchmark_filter=symbol_counts   (AVX2 builds: the rANS symbol counts alone)
//
// Counters: bytes_per_second counts input bytes (uncompressed size for both directions);
// `ratio` is uncompressed / compressed; `of_memcpy` is the throughput as a fraction of a plain
// memcpy of the same buffer measured in the same process; `bound` is the exponent-entropy bound
// and `of_ideal` the ratio as a fraction of an ideal 3-bit 7-entry code on the same chunks.
#include <benchmark/benchmark.h>
#if ZIPCCL_BENCH_ZSTD
#include <zstd.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <zipccl/collective/detail/fixed_wire.hpp>
#include <zipccl/collective/spill_budget.hpp>
#include <zipccl/zipccl.hpp>

#include "support/test_data.hpp"

using namespace zipccl;

namespace {

constexpr std::uint64_t gaussian_bytes = 32ull << 20;

struct dataset {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> pieces;  // element counts of the tensors, compressed one by one
  host::exponent_stats stats;
};

// One synthetic tensor as a dataset of one piece.
template <class E>
dataset one_tensor(const std::vector<typename E::bits_type>& v) {
  dataset r;
  r.bytes.resize(v.size() * sizeof(v[0]));
  std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
  r.pieces = {v.size()};
  r.stats = host::analyze<E>(r.bytes.data(), v.size());
  return r;
}

template <class E>
const dataset& gaussian() {
  static const dataset d = one_tensor<E>(testing::make_tensor<E>(gaussian_bytes / sizeof(typename E::bits_type), 1.0,
                                                                 testing::distribution::gaussian, 1));
  return d;
}

// A row-sparse gradient (testing::make_row_sparse): 8192 rows of 1024 elements, `percent` of the
// rows exactly zero, as an embedding's gradient is (issue 13's sparse case; ZipNN and zstd side by
// side in scripts/compare_peers.py).
template <class E>
const dataset& row_sparse(int percent) {
  static std::map<int, dataset> cache;
  auto it = cache.find(percent);
  if (it != cache.end()) return it->second;
  return cache.emplace(percent, one_tensor<E>(testing::make_row_sparse<E>(8192, 1024, percent / 100.0, 1e-3, 5)))
      .first->second;
}

// An element-sparse gradient (testing::make_element_sparse): 8 Mi elements, `percent` of them
// exactly zero, half of those -0.0, as a gradient through a ReLU or a top-k mask is (rANS: zero
// symbols).
template <class E>
const dataset& element_sparse(int percent) {
  static std::map<int, dataset> cache;
  auto it = cache.find(percent);
  if (it != cache.end()) return it->second;
  return cache.emplace(percent, one_tensor<E>(testing::make_element_sparse<E>(8u << 20, percent / 100.0, 0.5, 1e-3, 6)))
      .first->second;
}

// All shared tensors of one kind (weight, gradient, adam_m, activation), each its own stream.
template <class E>
const dataset& shared(const std::string& kind) {
  static std::map<std::string, dataset> cache;
  auto it = cache.find(kind);
  if (it != cache.end()) return it->second;
  dataset r;
  for (const auto& t : testing::shared_manifest(E::name)) {
    if (t.kind != kind) continue;
    const auto v = testing::load_shared<E>(t);
    const std::size_t at = r.bytes.size();
    r.bytes.resize(at + v.size() * sizeof(v[0]));
    std::memcpy(r.bytes.data() + at, v.data(), v.size() * sizeof(v[0]));
    r.pieces.push_back(v.size());
  }
  std::uint64_t n = r.bytes.size() / sizeof(typename E::bits_type);
  if (n) {
    // the ideal code is computed per tensor, as the tensors are compressed
    double ideal_bits = 0, entropy_bits = 0;
    std::uint64_t off = 0;
    for (std::uint64_t m : r.pieces) {
      const auto s = host::analyze<E>(r.bytes.data() + off * sizeof(typename E::bits_type), m);
      ideal_bits += E::total_bits * static_cast<double>(m) / s.ideal_3bit_ratio;
      entropy_bits += (E::rest_bits + s.entropy_bits) * static_cast<double>(m);
      off += m;
    }
    r.stats.count = n;
    r.stats.ideal_3bit_ratio = E::total_bits * static_cast<double>(n) / ideal_bits;
    r.stats.entropy_bound_ratio = E::total_bits * static_cast<double>(n) / entropy_bits;
  }
  return cache.emplace(kind, std::move(r)).first->second;
}

double memcpy_bandwidth(std::size_t bytes) {
  static std::map<std::size_t, double> cache;
  auto it = cache.find(bytes);
  if (it != cache.end()) return it->second;
  std::vector<std::uint8_t> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int rep = 0; rep < 30; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return cache[bytes] = best;
}

void finish(benchmark::State& state, const dataset& d, std::uint64_t compressed) {
  const double raw = static_cast<double>(d.bytes.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(d.bytes.size()));
  state.counters["ratio"] = raw / static_cast<double>(compressed);
  state.counters["bound"] = d.stats.entropy_bound_ratio;
  state.counters["of_ideal"] = raw / static_cast<double>(compressed) / d.stats.ideal_3bit_ratio;
  state.counters["of_memcpy"] = benchmark::Counter(raw / memcpy_bandwidth(d.bytes.size()),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

template <class Codec>
typename Codec::codebook_type policy_for(const dataset& d) {
  return testing::policy_for<Codec>(reinterpret_cast<const typename Codec::bits_type*>(d.bytes.data()),
                                    d.bytes.size() / Codec::element_size);
}

template <class Codec>
std::vector<std::uint8_t> compress_all(const dataset& d, std::vector<std::uint64_t>* sizes) {
  const auto policy = policy_for<Codec>(d);
  std::vector<std::uint8_t> out;
  std::uint64_t off = 0;
  for (std::uint64_t m : d.pieces) {
    const auto s = host::compress<Codec>(d.bytes.data() + off * Codec::element_size, m, {}, policy);
    out.insert(out.end(), s.begin(), s.end());
    sizes->push_back(s.size());
    off += m;
  }
  return out;
}

template <class Codec>
void bm_compress(benchmark::State& state, const dataset* d) {
  if (d->bytes.empty()) return state.SkipWithError("no data (../shared/data missing)");
  const auto policy = policy_for<Codec>(*d);
  std::vector<std::uint8_t> out(host::max_compressed_size<Codec>(d->bytes.size() / Codec::element_size) +
                                64 * d->pieces.size());
  std::uint64_t total = 0;
  status failed = status::success;
  for (auto _ : state) {
    total = 0;
    std::uint64_t off = 0;
    for (std::uint64_t m : d->pieces) {
      std::uint64_t bytes = 0;
      const status s = host::compress<Codec>(d->bytes.data() + off * Codec::element_size, m, out.data() + total,
                                             out.size() - total, &bytes, {}, policy);
      if (s != status::success) failed = s;
      total += bytes;
      off += m;
    }
    benchmark::DoNotOptimize(out.data());
  }
  if (failed != status::success) return state.SkipWithError(to_string(failed));
  finish(state, *d, total);
}

template <class Codec>
void bm_decompress(benchmark::State& state, const dataset* d) {
  if (d->bytes.empty()) return state.SkipWithError("no data (../shared/data missing)");
  std::vector<std::uint64_t> sizes;
  const auto stream = compress_all<Codec>(*d, &sizes);
  std::vector<std::uint8_t> back(d->bytes.size());
  for (auto _ : state) {
    std::uint64_t in = 0, out = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      if (host::decompress(stream.data() + in, sizes[k], back.data() + out, back.size() - out) != status::success)
        return state.SkipWithError("decompress failed");
      in += sizes[k];
      out += d->pieces[k] * Codec::element_size;
    }
    benchmark::DoNotOptimize(back.data());
  }
  if (back != d->bytes) return state.SkipWithError("round trip mismatch");
  finish(state, *d, stream.size());
}

#if ZIPCCL_BENCH_ZSTD
void bm_zstd_compress(benchmark::State& state, const dataset* d, int level) {
  if (d->bytes.empty()) return state.SkipWithError("no data (../shared/data missing)");
  std::vector<std::uint8_t> out(ZSTD_compressBound(d->bytes.size()));
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = ZSTD_compress(out.data(), out.size(), d->bytes.data(), d->bytes.size(), level);
    benchmark::DoNotOptimize(out.data());
  }
  finish(state, *d, bytes);
}

void bm_zstd_decompress(benchmark::State& state, const dataset* d, int level) {
  if (d->bytes.empty()) return state.SkipWithError("no data (../shared/data missing)");
  std::vector<std::uint8_t> z(ZSTD_compressBound(d->bytes.size())), back(d->bytes.size());
  z.resize(ZSTD_compress(z.data(), z.size(), d->bytes.data(), d->bytes.size(), level));
  for (auto _ : state) {
    ZSTD_decompress(back.data(), back.size(), z.data(), z.size());
    benchmark::DoNotOptimize(back.data());
  }
  finish(state, *d, z.size());
}
#endif

// The device collectives' fixed-size wire (collective/detail/fixed_wire.hpp) over the whole data
// as one bucket, cut as the device collectives cut it (8,192-element chunks, 2^18-element
// segments), at the spill budget spill_permille_for() measures on the same data (untimed).
// Counters: `ratio` of the fixed-size wire, `variable` of the variable-size wire of the host
// collectives (fixed section + the escapes there are), `permille` the budget, `cost` = 1 -
// ratio / variable.
template <class Codec>
void bm_fixed_wire(benchmark::State& state, const dataset* d) {
  using W = collective::detail::wire<Codec>;
  using F = collective::detail::fixed_wire<Codec>;
  collective_options opt;
  opt.codec.chunk_elems = 8192;
  const std::uint64_t n = d->bytes.size() / Codec::element_size, chunk = opt.codec.chunk_elems;
  const std::uint64_t seg = opt.pipeline.segment_elems;
  const auto policy = policy_for<Codec>(*d);
  const std::uint32_t permille = spill_permille_for<Codec>(d->bytes.data(), n, opt, policy);
  std::vector<std::uint8_t> out(F::segment_bytes(seg, chunk, permille) * (n / seg + 1)), scratch(F::scratch_bytes(chunk));
  std::uint64_t fixed_total = 0, variable_total = 0;
  {
    std::vector<std::uint8_t> fixed(W::fixed_bytes(seg, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(seg, chunk));
    for (std::uint64_t first = 0; first < n; first += seg) {
      const std::uint64_t m = std::min(seg, n - first);
      variable_total += 16 + W::fixed_bytes(m, chunk) +
                        W::encode(policy, d->bytes.data() + first * Codec::element_size, m, chunk, false,
                                  collective::detail::wire_place{}, fixed.data(), tail.data());
      fixed_total += F::segment_bytes(m, chunk, permille);
    }
  }
  for (auto _ : state) {
    std::uint8_t* at = out.data();
    for (std::uint64_t first = 0, s = 0; first < n; first += seg, ++s) {
      const std::uint64_t m = std::min(seg, n - first);
      if (F::encode(policy, d->bytes.data() + first * Codec::element_size, m, chunk, false, n, s, permille, at,
                    scratch.data()) != status::success) {
        state.SkipWithError("wire_overflow at the measured budget");
        return;
      }
      at += F::segment_bytes(m, chunk, permille);
    }
    benchmark::DoNotOptimize(out.data());
  }
  finish(state, *d, fixed_total);
  state.counters["variable"] = static_cast<double>(d->bytes.size()) / static_cast<double>(variable_total);
  state.counters["permille"] = permille;
  state.counters["cost"] = 1.0 - state.counters["ratio"] / state.counters["variable"];
}

void bm_memcpy(benchmark::State& state, const dataset* d) {
  std::vector<std::uint8_t> out(d->bytes.size());
  for (auto _ : state) {
    std::memcpy(out.data(), d->bytes.data(), d->bytes.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, *d, d->bytes.size());
}

#if ZIPCCL_HAS_AVX2
// The AVX2 rANS encoder's symbol counts alone (bf16, fp32), over the dataset's elements in chunks of
// the default size, as plan_chunk takes them: the window of byte counters (count_symbols), or the
// eight partial tables it hands over to (byte_histogram; docs/design.md, "The
// AVX2 rANS kernels").
template <class E, bool Window>
void bm_symbol_counts(benchmark::State& state, const dataset* d) {
  const std::uint64_t n = d->bytes.size() / sizeof(typename E::bits_type), chunk = format::default_chunk_elems;
  std::uint32_t counts[codec_detail::rans::symbols];
  for (auto _ : state) {
    for (std::uint64_t first = 0; first < n; first += chunk) {
      const std::uint64_t m = std::min(chunk, n - first);
      const std::uint8_t* in = d->bytes.data() + first * sizeof(typename E::bits_type);
      if constexpr (Window) host::detail::avx2::rans_simd::count_symbols<E>(in, m, codec_detail::dense_body(m), counts);
      else host::detail::avx2::byte_histogram<E, false>(in, m, codec_detail::dense_body(m), counts, codec_detail::rans::symbols);
      benchmark::DoNotOptimize(counts);
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(d->bytes.size()));
}
#endif

template <class E>
void register_for(const std::string& label, const dataset& d) {
  const std::string p = std::string(E::name) + "/" + label + "/";
  auto reg = [&](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark((p + name).c_str(), fn)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  using A = codec<E, codebook::analytic_gaussian>;
  using H = codec<E, codebook::histogram>;
  using F = codec<E, codebook::fixed>;
  using R = codec<E, codebook::entropy>;
  reg("memcpy", [&d](benchmark::State& s) { bm_memcpy(s, &d); });
  reg("compress/analytic", [&d](benchmark::State& s) { bm_compress<A>(s, &d); });
  reg("compress/histogram", [&d](benchmark::State& s) { bm_compress<H>(s, &d); });
  reg("compress/fixed", [&d](benchmark::State& s) { bm_compress<F>(s, &d); });
  reg("compress/entropy", [&d](benchmark::State& s) { bm_compress<R>(s, &d); });
  reg("decompress/analytic", [&d](benchmark::State& s) { bm_decompress<A>(s, &d); });
  reg("decompress/histogram", [&d](benchmark::State& s) { bm_decompress<H>(s, &d); });
  reg("decompress/fixed", [&d](benchmark::State& s) { bm_decompress<F>(s, &d); });
  reg("decompress/entropy", [&d](benchmark::State& s) { bm_decompress<R>(s, &d); });
  reg("fixed_wire/analytic", [&d](benchmark::State& s) { bm_fixed_wire<A>(s, &d); });
  reg("fixed_wire/histogram", [&d](benchmark::State& s) { bm_fixed_wire<H>(s, &d); });
  reg("fixed_wire/entropy", [&d](benchmark::State& s) { bm_fixed_wire<R>(s, &d); });
#if ZIPCCL_HAS_AVX2
  if constexpr (!std::is_same_v<E, fp16>) {
    reg("symbol_counts/window", [&d](benchmark::State& s) { bm_symbol_counts<E, true>(s, &d); });
    reg("symbol_counts/tables", [&d](benchmark::State& s) { bm_symbol_counts<E, false>(s, &d); });
  }
#endif
#if ZIPCCL_BENCH_ZSTD
  for (int level : {1, 3}) {
    reg("zstd" + std::to_string(level) + "/compress", [&d, level](benchmark::State& s) { bm_zstd_compress(s, &d, level); });
    reg("zstd" + std::to_string(level) + "/decompress", [&d, level](benchmark::State& s) { bm_zstd_decompress(s, &d, level); });
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  register_for<bf16>("gaussian", gaussian<bf16>());
  register_for<fp16>("gaussian", gaussian<fp16>());
  register_for<fp32>("gaussian", gaussian<fp32>());
  for (int percent : {70, 80, 95}) register_for<bf16>("sparse" + std::to_string(percent), row_sparse<bf16>(percent));
  for (int percent : {50, 90}) register_for<bf16>("zeros" + std::to_string(percent), element_sparse<bf16>(percent));
  for (const char* kind : {"weight", "gradient", "adam_m", "activation"}) {
    register_for<bf16>(kind, shared<bf16>(kind));
    register_for<fp16>(kind, shared<fp16>(kind));
    register_for<fp32>(kind, shared<fp32>(kind));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
