// The shared per-chunk codec (codec/chunk_codec.hpp) run on the device, one thread per chunk,
// against the host executor: the same bytes out of the encoder, the same values out of the
// decoder, the same statuses on corrupt chunks. Needs a GPU; without one it exits with the skip
// code 77 (ctest reports it as skipped). CI builds it for sm_80 and sm_90 either way.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/cuda_test.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;

#define CUDA_REQUIRE(x) REQUIRE((x) == cudaSuccess)

namespace {

template <class E, class Policy>
__global__ void encode_chunks(Policy policy, const std::uint8_t* in, std::uint64_t n, std::uint32_t chunk,
                              bool checksum, std::uint8_t* out, std::uint64_t* sizes) {
  using L = format::chunk_layout<E>;
  const std::uint64_t c = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x;
  if (c >= format::chunk_count(n, chunk)) return;
  const std::uint64_t m = format::chunk_elements(n, chunk, c);
  const std::uint8_t* src = in + c * chunk * L::elem_size;
  const codebook::table t = codec_detail::choose_table<E>(policy, src, m);
  sizes[c] = codec_detail::encode_chunk<E>(src, m, t, checksum, out + c * L::stored_bytes(chunk));
}

template <class E>
__global__ void decode_chunks(const std::uint8_t* in, const std::uint64_t* offsets, std::uint64_t total,
                              std::uint64_t n, std::uint32_t chunk, bool checksum, std::uint8_t* out,
                              status* statuses) {
  using L = format::chunk_layout<E>;
  const std::uint64_t c = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x;
  const std::uint64_t chunks = format::chunk_count(n, chunk);
  if (c >= chunks) return;
  const std::uint64_t end = c + 1 < chunks ? offsets[c + 1] : total;
  statuses[c] = codec_detail::decode_chunk<E>(in + offsets[c], end - offsets[c], format::chunk_elements(n, chunk, c),
                                              checksum, out + c * chunk * L::elem_size);
}

using testing::device_buffer;

}  // namespace

TEMPLATE_LIST_TEST_CASE("device chunk codec matches the host executor byte for byte", "[gpu]",
                        testing::all_codecs) {
  using E = typename TestType::element_type;
  using L = typename TestType::layout;
  const std::uint32_t chunk = 4096;
  for (bool checksum : {false, true})
    for (std::uint64_t n : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 100000ull}) {
      auto v = testing::make_tensor<E>(n, 0.01, testing::distribution::gaussian, n);
      if (n > 9000) {
        const auto noise = testing::random_bits<E>(chunk, 3);
        std::copy(noise.begin(), noise.end(), v.begin() + chunk);
      }
      const auto policy = testing::policy_for<TestType>(v.data(), n);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      opt.checksum = checksum;
      const auto stream = host::compress<TestType>(v.data(), n, opt, policy);
      const std::uint64_t chunks = format::chunk_count(n, chunk);
      INFO("n = " << n << " checksum " << checksum);

      // encode on the device, chunk by chunk, and compare with the host stream's chunks
      device_buffer<std::uint8_t> d_in(n * L::elem_size), d_out(chunks * L::stored_bytes(chunk));
      device_buffer<std::uint64_t> d_sizes(chunks);
      CUDA_REQUIRE(cudaMemcpy(d_in.p, v.data(), n * L::elem_size, cudaMemcpyHostToDevice));
      if (chunks) {
        encode_chunks<E><<<unsigned((chunks + 63) / 64), 64>>>(policy, d_in.p, n, chunk, checksum, d_out.p, d_sizes.p);
        CUDA_REQUIRE(cudaDeviceSynchronize());
      }
      std::vector<std::uint8_t> dev(chunks * L::stored_bytes(chunk));
      std::vector<std::uint64_t> sizes(chunks);
      CUDA_REQUIRE(cudaMemcpy(dev.data(), d_out.p, dev.size(), cudaMemcpyDeviceToHost));
      CUDA_REQUIRE(cudaMemcpy(sizes.data(), d_sizes.p, chunks * 8, cudaMemcpyDeviceToHost));
      std::vector<std::uint64_t> offsets(chunks);
      for (std::uint64_t c = 0; c < chunks; ++c) {
        offsets[c] = format::directory_entry(stream.data(), c);
        const std::uint64_t end = c + 1 < chunks ? format::directory_entry(stream.data(), c + 1) : stream.size();
        REQUIRE(sizes[c] == end - offsets[c]);
        REQUIRE(std::memcmp(dev.data() + c * L::stored_bytes(chunk), stream.data() + offsets[c], sizes[c]) == 0);
      }

      // decode the host stream on the device, then a corrupted copy
      device_buffer<std::uint8_t> d_stream(stream.size()), d_back(n * L::elem_size);
      device_buffer<std::uint64_t> d_off(chunks);
      device_buffer<status> d_status(chunks);
      for (int pass = 0; pass < 2; ++pass) {
        auto s = stream;
        if (pass == 1 && chunks) s[offsets[0] + 20] ^= 0x40;  // a plane bit of chunk 0
        CUDA_REQUIRE(cudaMemcpy(d_stream.p, s.data(), s.size(), cudaMemcpyHostToDevice));
        CUDA_REQUIRE(cudaMemcpy(d_off.p, offsets.data(), chunks * 8, cudaMemcpyHostToDevice));
        if (chunks) {
          decode_chunks<E><<<unsigned((chunks + 63) / 64), 64>>>(d_stream.p, d_off.p, s.size(), n, chunk, checksum,
                                                                 d_back.p, d_status.p);
          CUDA_REQUIRE(cudaDeviceSynchronize());
        }
        std::vector<status> st(chunks);
        std::vector<typename E::bits_type> back(n);
        CUDA_REQUIRE(cudaMemcpy(st.data(), d_status.p, chunks * sizeof(status), cudaMemcpyDeviceToHost));
        CUDA_REQUIRE(cudaMemcpy(back.data(), d_back.p, n * L::elem_size, cudaMemcpyDeviceToHost));
        std::vector<std::uint8_t> ref(n * L::elem_size);
        const status host_status = host::decompress(s.data(), s.size(), ref.data(), ref.size());
        bool all_ok = true;
        for (status x : st) all_ok = all_ok && x == status::success;
        CHECK(all_ok == (host_status == status::success));
        if (pass == 0) REQUIRE((n == 0 || std::memcmp(back.data(), v.data(), n * L::elem_size) == 0));
      }
    }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
