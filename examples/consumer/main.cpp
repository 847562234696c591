#include <zipccl/zipccl.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<float> x(10000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * static_cast<float>(i % 97) - 0.05f;
  using codec = zipccl::codec<zipccl::fp32, zipccl::codebook::histogram>;
  const auto stream = zipccl::host::compress<codec>(x.data(), x.size());
  const auto back = zipccl::host::decompress(stream.data(), stream.size());
  const bool same = back.size() == x.size() * sizeof(float) &&
                    std::equal(back.begin(), back.end(), reinterpret_cast<const std::uint8_t*>(x.data()));
  std::printf("consumer: %zu -> %zu bytes, %s\n", x.size() * sizeof(float), stream.size(), same ? "ok" : "MISMATCH");
  return same ? 0 : 1;
}
