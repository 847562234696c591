// The README's quick start: compress a bf16 tensor, check its header, decompress it.
#include <zipccl/zipccl.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

int main() {
  // 1 Mi near-Gaussian bf16 values (the top 16 bits of float32 values, truncated)
  std::vector<std::uint16_t> grad(1 << 20);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (auto& g : grad) {
    const float f = normal(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    g = static_cast<std::uint16_t>(bits >> 16);
  }

  using codec = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
  std::vector<std::uint8_t> stream(zipccl::host::max_compressed_size<codec>(grad.size()));
  std::uint64_t bytes = 0;
  zipccl::status s = zipccl::host::compress<codec>(grad.data(), grad.size(), stream.data(), stream.size(), &bytes);
  if (s != zipccl::status::success) return std::printf("compress: %s\n", zipccl::to_string(s)), 1;

  zipccl::host::stream_info info;
  s = zipccl::host::read_header(stream.data(), bytes, &info);  // type and count, without decoding
  if (s != zipccl::status::success) return std::printf("read_header: %s\n", zipccl::to_string(s)), 1;

  std::vector<std::uint16_t> back(info.count);
  s = zipccl::host::decompress(stream.data(), bytes, back.data(), back.size() * sizeof(std::uint16_t));
  if (s != zipccl::status::success) return std::printf("decompress: %s\n", zipccl::to_string(s)), 1;

  std::printf("%llu bf16 values: %llu -> %llu bytes (%.3fx), bit-exact: %s\n",
              static_cast<unsigned long long>(info.count), static_cast<unsigned long long>(grad.size() * 2),
              static_cast<unsigned long long>(bytes), 2.0 * grad.size() / bytes, back == grad ? "yes" : "no");
  return back == grad ? 0 : 1;
}
