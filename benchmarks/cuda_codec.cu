// Device codec throughput, timed with CUDA events (manual time), beside a device-to-device copy of
// the same bytes as the bandwidth ceiling. Needs a GPU.
//
//   build/bin/bench_cuda_codec --benchmark_counters_tabular=true
//
// Counters: bytes_per_second counts uncompressed bytes; `of_copy` is the throughput over the
// copy's, where the copy's is also counted in bytes of input per second (so 1.0 means as fast as
// moving the data once); `ratio` is uncompressed / compressed.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <zipccl/cuda/codec.cuh>

#include "cuda_timing.cuh"
#include "support/test_data.hpp"

namespace {

using tuning = zipccl::cuda::default_tuning;

using zipccl::bench::device_mem;
using zipccl::bench::first_error;
using zipccl::bench::time_ms;

std::map<std::size_t, double> copy_rate;  // bytes of input per second of a D2D copy

// Fills a device buffer with near-Gaussian data of element type E (generated once on the host,
// repeated to the size).
template <class E>
void fill(void* dst, std::uint64_t n) {
  const auto tile = zipccl::testing::make_tensor<E>(1 << 20, 1.0);
  std::vector<typename E::bits_type> host(n);
  for (std::uint64_t i = 0; i < n; ++i) host[i] = tile[(i * 7919u) & ((1u << 20) - 1)];
  cudaMemcpy(dst, host.data(), n * sizeof(host[0]), cudaMemcpyHostToDevice);
}

void bm_copy(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) << 20;
  device_mem a(bytes), b(bytes);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms([&] { cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice); }, 10);
    state.SetIterationTime(ms / 1e3);
  }
  copy_rate[bytes] = bytes / (ms / 1e3);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["read_plus_write_TBps"] = 2.0 * bytes / (ms / 1e3) / 1e12;
}

// DecodeTuning: the decompression's block size (the stream is always the default tuning's, 8,192-
// element chunks; any tuning decodes it).
template <class Codec, bool Decompress, class DecodeTuning = tuning>
void bm_codec(benchmark::State& state) {
  using E = typename Codec::element_type;
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const std::uint64_t n = bytes / Codec::element_size;
  const std::uint64_t cap = zipccl::cuda::max_compressed_size<Codec, tuning>(n);
  device_mem in(bytes), out(cap), back(bytes), size(8), st(sizeof(zipccl::status));
  if (!in.p || !out.p || !back.p) return state.SkipWithError("cudaMalloc failed");
  fill<E>(in.p, n);
  std::size_t ct = 0, dt = 0;
  first_error err;
  err(zipccl::cuda::compress<Codec, tuning>(nullptr, ct, in.p, n, out.p, cap, static_cast<std::uint64_t*>(size.p), 0));
  err(zipccl::cuda::decompress<E, DecodeTuning>(nullptr, dt, out.p, cap, back.p, bytes, static_cast<zipccl::status*>(st.p),
                                                0));
  device_mem ctemp(ct), dtemp(dt);
  auto comp = [&] {
    err(zipccl::cuda::compress<Codec, tuning>(ctemp.p, ct, in.p, n, out.p, cap, static_cast<std::uint64_t*>(size.p), 0));
  };
  comp();
  std::uint64_t stream_bytes = 0;
  cudaMemcpy(&stream_bytes, size.p, 8, cudaMemcpyDeviceToHost);
  auto decomp = [&] {
    err(zipccl::cuda::decompress<E, DecodeTuning>(dtemp.p, dt, out.p, stream_bytes, back.p, bytes,
                                                  static_cast<zipccl::status*>(st.p), 0));
  };
  double ms = 0;
  for (auto _ : state) {
    ms = Decompress ? time_ms(decomp, 10) : time_ms(comp, 10);
    state.SetIterationTime(ms / 1e3);
  }
  if (err.failed()) return state.SkipWithError(zipccl::to_string(err.first));
  zipccl::status s = zipccl::status::corrupt;
  cudaMemcpy(&s, st.p, sizeof(s), cudaMemcpyDeviceToHost);
  if (Decompress && s != zipccl::status::success) return state.SkipWithError(zipccl::to_string(s));
  // the decoded bytes are the input's (a fast row that decodes wrongly is no figure)
  if (Decompress) {
    std::vector<unsigned char> a(bytes), b(bytes);
    cudaMemcpy(a.data(), in.p, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), back.p, bytes, cudaMemcpyDeviceToHost);
    if (a != b) return state.SkipWithError("decoded bytes differ from the input");
  }
  if (cudaGetLastError() != cudaSuccess) return state.SkipWithError("CUDA error");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["ratio"] = static_cast<double>(bytes) / static_cast<double>(stream_bytes);
  state.counters["TBps"] = bytes / (ms / 1e3) / 1e12;
  if (copy_rate.count(bytes)) state.counters["of_copy"] = bytes / (ms / 1e3) / copy_rate[bytes];
}

// A gradient bucket: one large tensor (state.range(0) MiB) among 1,000 tensors of 4 KiB, through
// compress_batch / decompress_batch in one call each. `TBps` counts all the bucket's bytes;
// compare with bf16/histogram at the large tensor's size alone (a batch spreads its chunks, not
// its tensors, over the grid).
template <bool Decompress>
void bm_bucket(benchmark::State& state) {
  using Codec = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
  const std::uint64_t large = (static_cast<std::uint64_t>(state.range(0)) << 20) / 2, small = 2048;
  const std::uint32_t count = 1001;
  std::vector<std::uint64_t> n(count, small);
  n[500] = large;
  std::uint64_t in_total = 0, cap_total = 0;
  for (std::uint64_t k : n) in_total += k * 2, cap_total += zipccl::cuda::max_compressed_size<Codec, tuning>(k);
  device_mem in(in_total), out(cap_total), back(in_total), sizes(8 * count), st(sizeof(zipccl::status) * count),
      items_mem(sizeof(zipccl::cuda::compress_item) * count), ditems_mem(sizeof(zipccl::cuda::decompress_item) * count);
  if (!in.p || !out.p || !back.p) return state.SkipWithError("cudaMalloc failed");
  fill<zipccl::bf16>(in.p, in_total / 2);
  std::vector<zipccl::cuda::compress_item> items(count);
  std::uint64_t io = 0, oo = 0;
  auto* sizes_p = static_cast<std::uint64_t*>(sizes.p);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t cap = zipccl::cuda::max_compressed_size<Codec, tuning>(n[i]);
    items[i] = {static_cast<char*>(in.p) + io, n[i], static_cast<char*>(out.p) + oo, cap, sizes_p + i};
    io += n[i] * 2;
    oo += cap;
  }
  cudaMemcpy(items_mem.p, items.data(), sizeof(items[0]) * count, cudaMemcpyHostToDevice);
  const auto* items_dev = static_cast<const zipccl::cuda::compress_item*>(items_mem.p);
  first_error err;
  std::size_t ct = 0, dt = 0;
  err(zipccl::cuda::compress_batch<Codec, tuning>(nullptr, ct, items.data(), items_dev, count, 0));
  device_mem ctemp(ct);
  auto comp = [&] { err(zipccl::cuda::compress_batch<Codec, tuning>(ctemp.p, ct, items.data(), items_dev, count, 0)); };
  comp();
  std::vector<std::uint64_t> stream_bytes(count);
  cudaMemcpy(stream_bytes.data(), sizes.p, 8 * count, cudaMemcpyDeviceToHost);
  std::vector<zipccl::cuda::decompress_item> ditems(count);
  std::uint64_t max_in = 0, compressed = 0;
  io = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    ditems[i] = {items[i].out, stream_bytes[i], static_cast<char*>(back.p) + io, n[i] * 2};
    io += n[i] * 2;
    max_in = std::max(max_in, stream_bytes[i]);
    compressed += stream_bytes[i];
  }
  cudaMemcpy(ditems_mem.p, ditems.data(), sizeof(ditems[0]) * count, cudaMemcpyHostToDevice);
  const auto* ditems_dev = static_cast<const zipccl::cuda::decompress_item*>(ditems_mem.p);
  auto* statuses = static_cast<zipccl::status*>(st.p);
  err(zipccl::cuda::decompress_batch<zipccl::bf16, tuning>(nullptr, dt, ditems_dev, count, max_in, statuses, 0));
  device_mem dtemp(dt);
  auto decomp = [&] {
    err(zipccl::cuda::decompress_batch<zipccl::bf16, tuning>(dtemp.p, dt, ditems_dev, count, max_in, statuses, 0));
  };
  double ms = 0;
  for (auto _ : state) {
    ms = Decompress ? time_ms(decomp, 10) : time_ms(comp, 10);
    state.SetIterationTime(ms / 1e3);
  }
  if (err.failed()) return state.SkipWithError(zipccl::to_string(err.first));
  std::vector<zipccl::status> got(count);
  cudaMemcpy(got.data(), st.p, sizeof(zipccl::status) * count, cudaMemcpyDeviceToHost);
  for (zipccl::status s : got)
    if (Decompress && s != zipccl::status::success) return state.SkipWithError(zipccl::to_string(s));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in_total));
  state.counters["ratio"] = static_cast<double>(in_total) / static_cast<double>(compressed);
  state.counters["TBps"] = in_total / (ms / 1e3) / 1e12;
}

template <class Codec>
void register_codec(const std::string& name, const std::vector<long>& sizes_mib) {
  for (long mib : sizes_mib) {
    benchmark::RegisterBenchmark((name + "/compress").c_str(), bm_codec<Codec, false>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
    benchmark::RegisterBenchmark((name + "/decompress").c_str(), bm_codec<Codec, true>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 0;
  }
  using namespace zipccl;
  const std::vector<long> all = {1, 4, 16, 64, 256, 1024}, one = {4, 256};
  for (long mib : all)
    benchmark::RegisterBenchmark("copy", bm_copy)->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  register_codec<codec<bf16, codebook::analytic_gaussian>>("bf16/analytic", all);
  register_codec<codec<bf16, codebook::histogram>>("bf16/histogram", all);
  register_codec<codec<bf16, codebook::fixed>>("bf16/fixed", one);
  register_codec<codec<fp16, codebook::analytic_gaussian>>("fp16/analytic", one);
  register_codec<codec<fp16, codebook::histogram>>("fp16/histogram", one);
  register_codec<codec<fp32, codebook::analytic_gaussian>>("fp32/analytic", one);
  register_codec<codec<fp32, codebook::histogram>>("fp32/histogram", one);
  register_codec<codec<bf16, codebook::entropy>>("bf16/entropy", one);
  register_codec<codec<fp16, codebook::entropy>>("fp16/entropy", one);
  register_codec<codec<fp32, codebook::entropy>>("fp32/entropy", one);
  // The rANS decoder's block size: one warp of each block decodes a chunk, so smaller blocks put
  // more decoding warps on an SM, whose registers bound the blocks it holds (docs/design.md,
  // "rANS on the device")
  for (long mib : {4L, 256L}) {
    benchmark::RegisterBenchmark("bf16/entropy/decompress_threads64",
                                 bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<64, 32>>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
    benchmark::RegisterBenchmark("bf16/entropy/decompress_threads128",
                                 bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<128, 32>>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  }
  // rANS chunks one per warp (tuning<..., RansWarps>, detail/warp_rans.cuh): every warp of a block
  // decodes a chunk of its own; blocks of 4 warps for each type, and of 2 and 8 for bf16
  for (long mib : {4L, 256L}) {
    benchmark::RegisterBenchmark("bf16/entropy/decompress_warps4",
                                 bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<256, 32, 4>>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
    benchmark::RegisterBenchmark("fp16/entropy/decompress_warps4",
                                 bm_codec<codec<fp16, codebook::entropy>, true, zipccl::cuda::tuning<256, 32, 4>>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
    benchmark::RegisterBenchmark("fp32/entropy/decompress_warps4",
                                 bm_codec<codec<fp32, codebook::entropy>, true, zipccl::cuda::tuning<256, 32, 4>>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  }
  benchmark::RegisterBenchmark("bf16/entropy/decompress_warps2",
                               bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<256, 32, 2>>)
      ->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  benchmark::RegisterBenchmark("bf16/entropy/decompress_warps8",
                               bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<256, 32, 8>>)
      ->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  // the checking kernel before the warps has blocks of Threads threads: with 64, more chunks are
  // checked at once (per chunk it is a short chain of dependent steps: header, hash, padding,
  // table), if registers rather than the chain bound it
  benchmark::RegisterBenchmark("bf16/entropy/decompress_warps4_threads64",
                               bm_codec<codec<bf16, codebook::entropy>, true, zipccl::cuda::tuning<64, 32, 4>>)
      ->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  for (long mib : {64L, 256L}) {
    benchmark::RegisterBenchmark("bucket_1000x4KiB_plus_large/compress", bm_bucket<false>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
    benchmark::RegisterBenchmark("bucket_1000x4KiB_plus_large/decompress", bm_bucket<true>)
        ->Arg(mib)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(3);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
