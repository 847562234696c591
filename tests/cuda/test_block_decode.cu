// cuda::block_decode (cuda/block_decode.cuh) inside a user's kernel: the example kernel of
// examples/fused_sum.cuh decodes chunk c of two streams and sums them in fp32; checked against
// the host's decode of both streams, element for element, and a corrupt chunk in one stream must
// give that chunk the status the host's decode_chunk gives it, the other chunks staying exact.
// Needs a GPU; without one it exits with the skip code 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "../../examples/fused_sum.cuh"
#include "../support/codecs.hpp"
#include "../support/cuda_test.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;
using testing::device_buffer;

namespace {

template <class E>
float host_float(typename E::bits_type b) {
  if constexpr (std::is_same_v<E, fp16>) {
    const unsigned s = b >> 15, e = (b >> 10) & 31, m = b & 1023;
    float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                     : (e == 31 ? (m ? NAN : INFINITY) : std::ldexp(static_cast<float>(m + 1024), static_cast<int>(e) - 25));
    return s ? -v : v;
  } else {
    const std::uint32_t u = std::is_same_v<E, bf16> ? static_cast<std::uint32_t>(b) << 16 : static_cast<std::uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
}

// Runs the example kernel; returns the per-chunk statuses and fills sum.
template <class E>
std::vector<status> device_sum(const std::vector<std::uint8_t>& sa, const std::vector<std::uint8_t>& sb,
                               std::uint64_t n, std::vector<float>* sum) {
  device_buffer<std::uint8_t> da(sa.size()), db(sb.size());
  da.put(sa.data(), sa.size());
  db.put(sb.data(), sb.size());
  device_buffer<float> out(n + 1);
  const std::uint64_t chunks = format::chunk_count(n, 4096);
  device_buffer<status> st(chunks + 1);
  REQUIRE(example::fused_sum<E>(sa.data(), da.p, sa.size(), sb.data(), db.p, sb.size(), out.p, n * sizeof(float), st.p,
                                nullptr) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  *sum = out.get(n);
  return st.get(chunks);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("block_decode in a user's kernel: decode and sum two streams", "[gpu]", testing::all_codecs) {
  using E = typename TestType::element_type;
  using bits = typename TestType::bits_type;
  for (bool checksum : {false, true})
    for (std::uint64_t n : {1ull, 4095ull, 4096ull, 5ull * 4096 + 333}) {
      INFO("n = " << n << " checksum " << checksum);
      const auto a = testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, n);
      auto b = testing::make_tensor<E>(n, 3.0, testing::distribution::student_t, n + 7);
      if (n > 4096) {  // one incompressible chunk of b: stored
        const auto noise = testing::random_bits<E>(4096, 5);
        std::copy(noise.begin(), noise.end(), b.begin() + 4096);
      }
      host::compress_options opt;
      opt.chunk_elems = 4096;
      opt.checksum = checksum;
      const auto sa = host::compress<TestType>(a.data(), n, opt, testing::policy_for<TestType>(a.data(), n));
      auto sb = host::compress<TestType>(b.data(), n, opt, testing::policy_for<TestType>(b.data(), n));
      std::vector<float> sum;
      auto st = device_sum<E>(sa, sb, n, &sum);
      for (std::size_t c = 0; c < st.size(); ++c) REQUIRE(st[c] == status::success);
      for (std::uint64_t i = 0; i < n; ++i) {
        const float want = host_float<E>(a[i]) + host_float<E>(b[i]);
        if (!(std::isnan(want) && std::isnan(sum[i]))) REQUIRE(sum[i] == want);
      }
      if (n < 2 * 4096) continue;
      // corrupt one byte inside chunk 1 of b: that chunk gets the host's status, the others stay exact
      format::stream_header h;
      REQUIRE(format::read_header(sb.data(), sb.size(), &h) == status::success);
      const std::uint64_t off = format::directory_entry(sb.data(), 1), end = format::chunk_end(sb.data(), h, 1);
      std::mt19937_64 rng(n);
      for (int trial = 0; trial < 20; ++trial) {
        auto bad = sb;
        bad[off + rng() % (end - off)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        std::vector<bits> host_out(4096);
        const status want = codec_detail::decode_chunk<E>(bad.data() + off, end - off, 4096, checksum,
                                                          reinterpret_cast<std::uint8_t*>(host_out.data()));
        st = device_sum<E>(sa, bad, n, &sum);
        INFO("trial " << trial);
        REQUIRE(st[1] == want);
        REQUIRE(st[0] == status::success);
        for (std::uint64_t i = 0; i < 4096; ++i) REQUIRE(sum[i] == host_float<E>(a[i]) + host_float<E>(b[i]));
      }
    }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
