// zipccl example: decode two compressed bf16 tensors and sum them inside one kernel of your own
// (examples/fused_sum.cuh, built on zipccl::cuda::block_decode). Needs a GPU to run; CI builds it.
//
//   build/bin/zipccl_cuda_fused_sum
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "fused_sum.cuh"

namespace {
float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}
}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to run\n");
    return 0;
  }
  using codec = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
  const std::size_t n = 1 << 20;
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 0.02f);
  std::vector<std::uint16_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = float_to_bf16(g(rng)), b[i] = float_to_bf16(g(rng));
  zipccl::host::compress_options opt;
  opt.chunk_elems = 4096;  // the kernel's shared tile holds one chunk
  const auto sa = zipccl::host::compress<codec>(a.data(), n, opt);
  const auto sb = zipccl::host::compress<codec>(b.data(), n, opt);
  zipccl::format::stream_header hs[2];
  if (zipccl::format::read_header(sa.data(), sa.size(), &hs[0]) != zipccl::status::success ||
      zipccl::format::read_header(sb.data(), sb.size(), &hs[1]) != zipccl::status::success)
    return std::printf("read_header failed\n"), 1;

  std::uint8_t *da = nullptr, *db = nullptr;
  float* out = nullptr;
  zipccl::status* st = nullptr;
  const std::size_t chunks = (n + opt.chunk_elems - 1) / opt.chunk_elems;
  if (cudaMalloc(&da, sa.size()) != cudaSuccess || cudaMalloc(&db, sb.size()) != cudaSuccess ||
      cudaMalloc(&out, n * sizeof(float)) != cudaSuccess || cudaMalloc(&st, chunks * sizeof(zipccl::status)) != cudaSuccess)
    return std::printf("cudaMalloc failed\n"), 1;
  cudaMemcpy(da, sa.data(), sa.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db, sb.data(), sb.size(), cudaMemcpyHostToDevice);
  const zipccl::status s = example::fused_sum<zipccl::bf16>(sa.data(), da, sa.size(), sb.data(), db, sb.size(), out,
                                                            n * sizeof(float), st, nullptr);
  if (s != zipccl::status::success) return std::printf("fused_sum: %s\n", zipccl::to_string(s)), 1;
  std::vector<float> sum(n);
  std::vector<zipccl::status> statuses(chunks);
  cudaMemcpy(sum.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(statuses.data(), st, chunks * sizeof(zipccl::status), cudaMemcpyDeviceToHost);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += sum[i] != bf16_to_float(a[i]) + bf16_to_float(b[i]);
  for (zipccl::status x : statuses) wrong += x != zipccl::status::success;
  // every chunk passed: the chunks must also be the ones each header was sealed with
  wrong += zipccl::format::check_digest(sa.data(), hs[0]) != zipccl::status::success;
  wrong += zipccl::format::check_digest(sb.data(), hs[1]) != zipccl::status::success;
  std::printf("%zu bf16 elements, two streams of %zu and %zu bytes (ratio %.3f), summed on the GPU: %s\n", n,
              sa.size(), sb.size(), 2.0 * n / sa.size(), wrong ? "MISMATCH" : "exact");
  cudaFree(da), cudaFree(db), cudaFree(out), cudaFree(st);
  return wrong ? 1 : 0;
}
