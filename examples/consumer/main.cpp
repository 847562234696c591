#include <zipccl/zipccl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#if defined(CONSUMER_SUBSPACE)
#include <zipccl/subspace/projector.hpp>
#endif

int main() {
  std::vector<float> x(10000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * static_cast<float>(i % 97) - 0.05f;
  using codec = zipccl::codec<zipccl::fp32, zipccl::codebook::histogram>;
  const auto stream = zipccl::host::compress<codec>(x.data(), x.size());
  const auto back = zipccl::host::decompress(stream.data(), stream.size());
  const bool same = back.size() == x.size() * sizeof(float) &&
                    std::equal(back.begin(), back.end(), reinterpret_cast<const std::uint8_t*>(x.data()));
  std::printf("consumer: %zu -> %zu bytes, %s\n", x.size() * sizeof(float), stream.size(), same ? "ok" : "MISMATCH");
#if defined(CONSUMER_SUBSPACE)
  // a rank-4 projection of 16-dim rows there and back: x_hat is x's projection, so projecting it
  // again changes nothing
  namespace ss = zipccl::subspace;
  const ss::matrix<float> a = ss::random_orthonormal<float>(16, 4, 1);
  ss::matrix<float> rows(8, 16), z, xh, z2;
  for (std::size_t i = 0; i < rows.v.size(); ++i) rows.v[i] = x[i];
  const bool ok = ss::encode(rows, nullptr, a, nullptr, &z) == zipccl::status::success &&
                  ss::decode(z, nullptr, a, nullptr, &xh) == zipccl::status::success &&
                  ss::encode(xh, nullptr, a, nullptr, &z2) == zipccl::status::success;
  float worst = 0;
  for (std::size_t i = 0; ok && i < z.v.size(); ++i) worst = std::max(worst, std::abs(z.v[i] - z2.v[i]));
  std::printf("consumer: subspace round trip %s (max change %g)\n", ok && worst < 1e-5f ? "ok" : "FAILED", worst);
  if (!ok || worst >= 1e-5f) return 1;
#endif
  return same ? 0 : 1;
}
