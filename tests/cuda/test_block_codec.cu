// The block-level collectives inside a user's kernel.
//   cuda::block_encode: a kernel codes every chunk into a fixed slot; each chunk's bytes equal the
//     host's encode_chunk for the same elements and policy, and block_decode reads them back.
//   cuda::block_decode: the example kernel of examples/fused_sum.cuh decodes chunk c of two
//     streams and sums them in fp32; checked against the host's decode of both streams, element
//     for element, and a corrupt chunk in one stream must give that chunk the status the host's
//     decode_chunk gives it, the other chunks staying exact.
// Needs a GPU; without one it exits with the skip code 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include <zipccl/cuda/block_encode.cuh>
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

constexpr int threads = 128, items = 16;  // 2,048-element chunks
constexpr std::uint64_t chunk_elems = threads * items;

// Chunk c of in (n elements) coded into slot c of out (stored_bytes(chunk_elems) apart), then
// decoded back into back; sizes[c] and statuses[c] per chunk.
template <class E, class Policy>
__global__ void __launch_bounds__(threads) slot_codec(Policy policy, const std::uint8_t* in, std::uint64_t n,
                                                      bool checksum, std::uint8_t* out, std::uint64_t* sizes,
                                                      std::uint8_t* back, status* statuses) {
  using encoder = zipccl::cuda::block_encode<E, Policy, threads, items>;
  using decoder = zipccl::cuda::block_decode<E, threads>;
  using L = format::chunk_layout<E>;
  __shared__ typename encoder::TempStorage etmp;
  __shared__ typename decoder::TempStorage dtmp;
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t m = format::chunk_elements(n, chunk_elems, c);
  typename encoder::runs_type v;
  encoder::load(in + c * chunk_elems * L::elem_size, m, v);
  encoder enc(etmp, policy);
  const std::uint64_t size = enc.plan(v, m);
  std::uint8_t* slot = out + c * L::stored_bytes(chunk_elems);
  enc.write(v, m, slot, checksum);
  if (threadIdx.x == 0) sizes[c] = size;
  const status s = decoder(dtmp).decode(slot, size, m, checksum, back + c * chunk_elems * L::elem_size);
  if (threadIdx.x == 0) statuses[c] = s;
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

TEMPLATE_LIST_TEST_CASE("block_encode in a user's kernel: the host's chunk bytes, read back by block_decode", "[gpu]",
                        testing::all_codecs) {
  using E = typename TestType::element_type;
  using Policy = typename TestType::codebook_type;
  using L = format::chunk_layout<E>;
  for (bool sparse : {false, true})
  for (bool checksum : {false, true})
    for (std::uint64_t n : std::initializer_list<std::uint64_t>{1, 31, 33, 100, chunk_elems - 1, chunk_elems, 6 * chunk_elems + 1000}) {
      INFO("n = " << n << " checksum " << checksum << " sparse " << sparse);
      auto v = testing::make_tensor<E>(n, 0.5, testing::distribution::laplace, 3 * n);
      if (n > 2 * chunk_elems) {  // one incompressible chunk: stored
        const auto noise = testing::random_bits<E>(chunk_elems, 13);
        std::copy(noise.begin(), noise.end(), v.begin() + chunk_elems);
      }
      if (sparse)  // zero rows of 128 (zero_coded and zero_stored chunks), a zero tail, an all-zero last chunk
        for (std::uint64_t i = 0; i < n; ++i)
          if ((i / 128) % 3 != 0 || i + 40 >= n || i >= 6 * chunk_elems) v[i] = 0;
      const Policy policy = testing::policy_for<TestType>(v.data(), n);
      const std::uint64_t chunks = format::chunk_count(n, chunk_elems), slot = L::stored_bytes(chunk_elems);
      device_buffer<std::uint8_t> in(n * L::elem_size), out(chunks * slot), back(n * L::elem_size + 1);
      device_buffer<std::uint64_t> sizes(chunks);
      device_buffer<status> st(chunks);
      in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * L::elem_size);
      slot_codec<E, Policy><<<static_cast<unsigned>(chunks), threads>>>(policy, in.p, n, checksum, out.p, sizes.p, back.p,
                                                                       st.p);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const auto dev = out.get(chunks * slot);
      const auto dev_sizes = sizes.get(chunks);
      const auto statuses = st.get(chunks);
      std::vector<std::uint8_t> want(slot);
      for (std::uint64_t c = 0; c < chunks; ++c) {
        INFO("chunk " << c);
        const std::uint64_t m = format::chunk_elements(n, chunk_elems, c);
        const auto* src = reinterpret_cast<const std::uint8_t*>(v.data()) + c * chunk_elems * L::elem_size;
        const std::uint64_t size = codec_detail::code_chunk<E>(policy, src, m, checksum, true, want.data());
        REQUIRE(dev_sizes[c] == size);
        REQUIRE(std::memcmp(dev.data() + c * slot, want.data(), size) == 0);
        REQUIRE(statuses[c] == status::success);
      }
      REQUIRE(std::memcmp(back.get(n * L::elem_size).data(), v.data(), n * L::elem_size) == 0);
    }
}

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
      // corrupt one byte inside chunk 1 (stored) or chunk 2 (coded) of b: that chunk gets the
      // host's status, chunk 0 stays exact
      format::stream_header h;
      REQUIRE(format::read_header(sb.data(), sb.size(), &h) == status::success);
      std::mt19937_64 rng(n);
      for (int trial = 0; trial < 60; ++trial) {
        const std::uint64_t target = trial < 20 ? 1 : 2;
        const std::uint64_t off = format::directory_entry(sb.data(), target);
        const std::uint64_t end = format::chunk_end(sb.data(), h, target);
        auto bad = sb;
        bad[off + rng() % (end - off)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        std::vector<bits> host_out(4096);
        const status want = codec_detail::decode_chunk<E>(bad.data() + off, end - off, 4096, format::reader_seal(h, target),
                                                          reinterpret_cast<std::uint8_t*>(host_out.data()));
        st = device_sum<E>(sa, bad, n, &sum);
        INFO("trial " << trial);
        REQUIRE(st[target] == want);
        REQUIRE(st[0] == status::success);
        for (std::uint64_t i = 0; i < 4096; ++i) REQUIRE(sum[i] == host_float<E>(a[i]) + host_float<E>(b[i]));
      }
    }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
