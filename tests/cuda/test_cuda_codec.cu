// Device executor (cuda/compress.cuh, cuda/decompress.cuh) against the host executor: the same
// bytes for every element type x codebook x size class, streams decoded across executors,
// corrupt and truncated input reported without out-of-bounds writes, and CUDA graph capture.
// Needs a GPU; without one it exits with the skip code 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include <zipccl/cuda/codec.cuh>

#include "../support/codecs.hpp"
#include "../support/cuda_test.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;

#define CUDA_OK(x) REQUIRE((x) == cudaSuccess)

namespace {

using tuning = zipccl::cuda::default_tuning;
constexpr std::uint32_t chunk = tuning::chunk_elems;

using testing::device_buffer;

template <class Codec>
std::vector<std::uint8_t> device_compress(const void* host_in, std::uint64_t n, bool checksum,
                                          const typename Codec::codebook_type& cb) {
  const std::uint64_t bytes_in = n * Codec::element_size;
  device_buffer<std::uint8_t> in(bytes_in), out(zipccl::cuda::max_compressed_size<Codec, tuning>(n));
  device_buffer<std::uint64_t> size(1);
  in.put(static_cast<const std::uint8_t*>(host_in), bytes_in);
  std::size_t temp_bytes = 0;
  REQUIRE(zipccl::cuda::compress<Codec, tuning>(nullptr, temp_bytes, in.p, n, out.p, out.n, size.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  zipccl::cuda::compress_options opt;
  opt.checksum = checksum;
  REQUIRE(zipccl::cuda::compress<Codec, tuning>(temp.p, temp_bytes, in.p, n, out.p, out.n, size.p, 0, opt, cb) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const std::uint64_t bytes = size.get(1)[0];
  REQUIRE(bytes <= out.n);
  return out.get(bytes);
}

// Decodes a stream on the device; returns the status and fills `back` (n elements).
template <class E>
status device_decompress(const std::vector<std::uint8_t>& stream, std::size_t len, std::uint64_t n,
                         std::vector<std::uint8_t>* back) {
  const std::size_t out_bytes = n * sizeof(typename E::bits_type);
  device_buffer<std::uint8_t> in(stream.size()), out(out_bytes + 256);
  device_buffer<status> st(1);
  device_buffer<std::uint64_t> count(1);
  in.put(stream.data(), stream.size());
  CUDA_OK(cudaMemset(out.p, 0xEE, out_bytes + 256));
  std::size_t temp_bytes = 0;
  REQUIRE(zipccl::cuda::decompress<E, tuning>(nullptr, temp_bytes, in.p, len, out.p, out_bytes, st.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  REQUIRE(zipccl::cuda::decompress<E, tuning>(temp.p, temp_bytes, in.p, len, out.p, out_bytes, st.p, 0, count.p) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto all = out.get(out_bytes + 256);
  for (std::size_t i = out_bytes; i < all.size(); ++i) REQUIRE(all[i] == 0xEE);  // nothing past the output
  back->assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(out_bytes));
  const status s = st.get(1)[0];
  if (s == status::success) CHECK(count.get(1)[0] == n);
  return s;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("device streams equal host streams byte for byte", "[gpu]", testing::all_codecs) {
  using E = typename TestType::element_type;
  for (bool checksum : {false, true})
    for (std::uint64_t n : {0ull, 1ull, 1001ull, chunk - 1ull, 1ull * chunk, chunk + 1ull, 5ull * chunk + 77}) {
      INFO("n = " << n << " checksum " << checksum);
      auto v = testing::make_tensor<E>(n, 0.02, testing::distribution::student_t, n + 1);
      if (n > 3 * chunk) {  // one incompressible chunk: stored
        const auto noise = testing::random_bits<E>(chunk, 9);
        std::copy(noise.begin(), noise.end(), v.begin() + chunk);
      }
      const auto policy = testing::policy_for<TestType>(v.data(), n);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      opt.checksum = checksum;
      const auto host_stream = host::compress<TestType>(v.data(), n, opt, policy);
      const auto dev_stream = device_compress<TestType>(v.data(), n, checksum, policy);
      REQUIRE(dev_stream.size() == host_stream.size());
      REQUIRE(dev_stream == host_stream);
      // the device decodes the host's stream, and one with the host's default chunk size
      std::vector<std::uint8_t> back;
      REQUIRE(device_decompress<E>(host_stream, host_stream.size(), n, &back) == status::success);
      REQUIRE((n == 0 || std::memcmp(back.data(), v.data(), back.size()) == 0));
      const auto big_chunks = host::compress<TestType>(v.data(), n, {}, policy);
      REQUIRE(device_decompress<E>(big_chunks, big_chunks.size(), n, &back) == status::success);
      REQUIRE((n == 0 || std::memcmp(back.data(), v.data(), back.size()) == 0));
    }
}

TEMPLATE_LIST_TEST_CASE("device decoder reports corrupt and truncated input", "[gpu]", testing::all_codecs) {
  using E = typename TestType::element_type;
  const std::uint64_t n = 3 * chunk + 500;
  const auto v = testing::make_tensor<E>(n, 0.5, testing::distribution::gaussian, 3);
  const auto policy = testing::policy_for<TestType>(v.data(), n);
  for (bool checksum : {false, true}) {
    host::compress_options opt;
    opt.chunk_elems = chunk;
    opt.checksum = checksum;
    const auto s = host::compress<TestType>(v.data(), n, opt, policy);
    std::vector<std::uint8_t> back, ref(n * sizeof(typename TestType::bits_type));
    for (std::size_t len : {std::size_t(0), std::size_t(7), std::size_t(47), std::size_t(100), s.size() / 2, s.size() - 1})
      CHECK(device_decompress<E>(s, len, n, &back) != status::success);
    std::mt19937_64 rng(checksum);
    for (int trial = 0; trial < 200; ++trial) {
      auto bad = s;
      bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      const status dev = device_decompress<E>(bad, bad.size(), n, &back);
      const status hst = host::decompress(bad.data(), bad.size(), ref.data(), ref.size());
      INFO("trial " << trial);
      REQUIRE((dev == status::success) == (hst == status::success));
      if (dev == status::success) REQUIRE(back == ref);
    }
    // wrong element type, too small an output
    using other = std::conditional_t<std::is_same_v<E, fp32>, bf16, fp32>;
    CHECK(device_decompress<other>(s, s.size(), n / 2, &back) != status::success);
  }
}

TEMPLATE_LIST_TEST_CASE("batched calls: mixed sizes in one launch, a status per tensor", "[gpu]",
                        testing::all_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  const std::vector<std::uint64_t> sizes = {5000, 0, 1, 3ull * chunk + 17, 100, chunk, 2 * chunk - 1};
  std::vector<std::vector<T>> tensors;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    tensors.push_back(testing::make_tensor<E>(sizes[i], 0.01 * (i + 1), testing::distribution::laplace, i));
  // one policy for the whole batch: calibrated on the largest tensor for codebook::fixed
  const auto policy = testing::policy_for<TestType>(tensors[3].data(), tensors[3].size());
  std::vector<std::unique_ptr<device_buffer<std::uint8_t>>> ins, outs;
  device_buffer<std::uint64_t> sizes_dev(sizes.size());
  std::vector<zipccl::cuda::compress_item> items(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ins.push_back(std::make_unique<device_buffer<std::uint8_t>>(sizes[i] * sizeof(T)));
    ins.back()->put(reinterpret_cast<const std::uint8_t*>(tensors[i].data()), sizes[i] * sizeof(T));
    const std::uint64_t cap = zipccl::cuda::max_compressed_size<TestType, tuning>(sizes[i]);
    outs.push_back(std::make_unique<device_buffer<std::uint8_t>>(cap));
    items[i] = {ins.back()->p, sizes[i], outs.back()->p, cap, sizes_dev.p + i};
  }
  device_buffer<zipccl::cuda::compress_item> items_dev(items.size());
  items_dev.put(items.data(), items.size());
  std::size_t temp_bytes = 0;
  REQUIRE(zipccl::cuda::compress_batch<TestType, tuning>(nullptr, temp_bytes, items.data(), items_dev.p,
                                                         static_cast<std::uint32_t>(items.size()), 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  REQUIRE(zipccl::cuda::compress_batch<TestType, tuning>(temp.p, temp_bytes, items.data(), items_dev.p,
                                                         static_cast<std::uint32_t>(items.size()), 0, {}, policy) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto stream_sizes = sizes_dev.get(sizes.size());
  host::compress_options opt;
  opt.chunk_elems = chunk;
  std::vector<zipccl::cuda::decompress_item> ditems(sizes.size());
  std::vector<std::unique_ptr<device_buffer<std::uint8_t>>> backs;
  std::uint64_t max_in = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("tensor " << i << " of " << sizes[i] << " elements");
    const auto host_stream = host::compress<TestType>(tensors[i].data(), sizes[i], opt, policy);
    REQUIRE(stream_sizes[i] == host_stream.size());
    REQUIRE(outs[i]->get(stream_sizes[i]) == host_stream);
    backs.push_back(std::make_unique<device_buffer<std::uint8_t>>(sizes[i] * sizeof(T) + 1));
    ditems[i] = {outs[i]->p, stream_sizes[i], backs.back()->p, sizes[i] * sizeof(T)};
    max_in = std::max<std::uint64_t>(max_in, stream_sizes[i]);
  }
  // corrupt tensor 3's stream on the device: only its status may report it
  std::uint8_t flip = 0;
  CUDA_OK(cudaMemcpy(&flip, outs[3]->p + stream_sizes[3] / 2, 1, cudaMemcpyDeviceToHost));
  flip ^= 0x24;
  CUDA_OK(cudaMemcpy(outs[3]->p + stream_sizes[3] / 2, &flip, 1, cudaMemcpyHostToDevice));
  ditems[5].out_capacity -= 1;  // too small an output for tensor 5
  device_buffer<zipccl::cuda::decompress_item> ditems_dev(ditems.size());
  ditems_dev.put(ditems.data(), ditems.size());
  device_buffer<status> statuses(ditems.size());
  std::size_t dtemp_bytes = 0;
  REQUIRE(zipccl::cuda::decompress_batch<E, tuning>(nullptr, dtemp_bytes, ditems_dev.p,
                                                    static_cast<std::uint32_t>(ditems.size()), max_in, statuses.p,
                                                    0) == status::success);
  device_buffer<std::uint8_t> dtemp(dtemp_bytes);
  REQUIRE(zipccl::cuda::decompress_batch<E, tuning>(dtemp.p, dtemp_bytes, ditems_dev.p,
                                                    static_cast<std::uint32_t>(ditems.size()), max_in, statuses.p,
                                                    0) == status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto st = statuses.get(ditems.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("tensor " << i);
    if (i == 5) {
      CHECK(st[i] == status::buffer_too_small);
    } else if (i == 3) {
      // a flipped payload byte without checksums may decode to a well-formed wrong value
      if (st[i] == status::success) CHECK(backs[i]->get(sizes[i] * sizeof(T)) != std::vector<std::uint8_t>(
                                              reinterpret_cast<const std::uint8_t*>(tensors[i].data()),
                                              reinterpret_cast<const std::uint8_t*>(tensors[i].data() + sizes[i])));
    } else {
      REQUIRE(st[i] == status::success);
      const auto back = backs[i]->get(sizes[i] * sizeof(T));
      REQUIRE((sizes[i] == 0 || std::memcmp(back.data(), tensors[i].data(), back.size()) == 0));
    }
  }
}

TEST_CASE("device compress and decompress under CUDA graph capture", "[gpu]") {
  using C = codec<bf16, codebook::histogram>;
  const std::uint64_t n = 10 * chunk + 3;
  const auto v = testing::make_tensor<bf16>(n, 1.0);
  device_buffer<std::uint8_t> in(n * 2), out(zipccl::cuda::max_compressed_size<C, tuning>(n)), back(n * 2);
  device_buffer<std::uint64_t> size(1);
  device_buffer<status> st(1);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * 2);
  std::size_t ct = 0, dt = 0;
  REQUIRE(zipccl::cuda::compress<C, tuning>(nullptr, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
  REQUIRE(zipccl::cuda::decompress<bf16, tuning>(nullptr, dt, out.p, out.n, back.p, n * 2, st.p, 0) == status::success);
  device_buffer<std::uint8_t> ctemp(ct), dtemp(dt);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  REQUIRE(zipccl::cuda::compress<C, tuning>(ctemp.p, ct, in.p, n, out.p, out.n, size.p, stream) == status::success);
  // the stream's exact size is only known on the device: decode with the buffer's capacity
  REQUIRE(zipccl::cuda::decompress<bf16, tuning>(dtemp.p, dt, out.p, out.n, back.p, n * 2, st.p, stream) == status::success);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK(st.get(1)[0] == status::success);
  const auto result = back.get(n * 2);
  CHECK(std::memcmp(result.data(), v.data(), n * 2) == 0);
  const auto stream_bytes = out.get(size.get(1)[0]);
  CHECK(stream_bytes == host::compress<C>(v.data(), n, host::compress_options{chunk, false, 1}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("one GiB of bf16 on the device", "[gpu][large]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  const std::uint64_t n = 1ull << 29;
  std::vector<std::uint16_t> v(n);
  const auto tile = testing::make_tensor<bf16>(1 << 20, 0.01);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = tile[(i * 7919) & ((1 << 20) - 1)];
  const auto dev = device_compress<C>(v.data(), n, false, {});
  host::compress_options opt;
  opt.chunk_elems = chunk;
  opt.threads = 8;
  const auto hst = host::compress<C>(v.data(), n, opt);
  REQUIRE(dev == hst);
  std::vector<std::uint8_t> back;
  REQUIRE(device_decompress<bf16>(dev, dev.size(), n, &back) == status::success);
  REQUIRE(std::memcmp(back.data(), v.data(), n * 2) == 0);
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
