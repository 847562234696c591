// Device executor (cuda/compress.cuh, cuda/decompress.cuh) against the host executor: the same
// bytes for every element type x codebook x size class, streams decoded across executors,
// corrupt and truncated input reported with the host's status and without out-of-bounds writes,
// temp storage at odd addresses, the pinned size copy, launch-error attribution, batches with one
// large tensor among many small ones, and CUDA graph capture.
// Needs a GPU; without one it exits with the skip code 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <random>
#include <vector>

#include <zipccl/cuda/codec.cuh>

#include "../support/codecs.hpp"
#include "../support/cuda_test.cuh"
#include "../support/stream_tools.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

#define CUDA_OK(x) REQUIRE((x) == cudaSuccess)

namespace {

using tuning = zipccl::cuda::default_tuning;
constexpr std::uint32_t chunk = tuning::chunk_elems;

using testing::device_buffer;

template <class Codec, class T = tuning>
std::vector<std::uint8_t> device_compress(const void* host_in, std::uint64_t n, bool checksum,
                                          const typename Codec::codebook_type& cb, bool zero_groups = true) {
  const std::uint64_t bytes_in = n * Codec::element_size;
  device_buffer<std::uint8_t> in(bytes_in), out(zipccl::cuda::max_compressed_size<Codec, T>(n));
  device_buffer<std::uint64_t> size(1);
  in.put(static_cast<const std::uint8_t*>(host_in), bytes_in);
  std::size_t temp_bytes = 0;
  REQUIRE(zipccl::cuda::compress<Codec, T>(nullptr, temp_bytes, in.p, n, out.p, out.n, size.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  zipccl::cuda::compress_options opt;
  opt.checksum = checksum;
  opt.zero_groups = zero_groups;
  REQUIRE(zipccl::cuda::compress<Codec, T>(temp.p, temp_bytes, in.p, n, out.p, out.n, size.p, 0, opt, cb) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const std::uint64_t bytes = size.get(1)[0];
  REQUIRE(bytes <= out.n);
  return out.get(bytes);
}

// The rANS chunks decoded one per warp (detail/warp_rans.cuh), blocks of 4 warps.
using rans_warps = zipccl::cuda::tuning<256, 32, 4>;
template <class T>
struct type_tag {
  using type = T;
};

// Tuning T without the decoder by warps: what its cases decode with when it is off.
template <class T>
using by_blocks = zipccl::cuda::tuning<T::threads, T::items_per_thread>;

// Decodes a stream on the device with blocks of tuning T; returns the status and fills `back` (n
// elements). With the decoder by warps off (testing::rans_warps_on), a tuning with RansWarps > 0
// decodes by blocks of its size instead.
template <class E, class T>
status decompress_with(const std::vector<std::uint8_t>& stream, std::size_t len, std::uint64_t n,
                       std::vector<std::uint8_t>* back) {
  if constexpr (T::rans_warps > 0)
    if (!testing::rans_warps_on())
      return decompress_with<E, by_blocks<T>>(stream, len, n, back);
  const std::size_t out_bytes = n * sizeof(typename E::bits_type);
  device_buffer<std::uint8_t> in(stream.size()), out(out_bytes + 256);
  device_buffer<status> st(1);
  device_buffer<std::uint64_t> count(1);
  CUDA_OK(cudaMemset(count.p, 0xAB, sizeof(std::uint64_t)));
  in.put(stream.data(), stream.size());
  CUDA_OK(cudaMemset(out.p, 0xEE, out_bytes + 256));
  std::size_t temp_bytes = 0;
  REQUIRE(zipccl::cuda::decompress<E, T>(nullptr, temp_bytes, in.p, len, out.p, out_bytes, st.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  REQUIRE(zipccl::cuda::decompress<E, T>(temp.p, temp_bytes, in.p, len, out.p, out_bytes, st.p, 0, count.p) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto all = out.get(out_bytes + 256);
  for (std::size_t i = out_bytes; i < all.size(); ++i) REQUIRE(all[i] == 0xEE);  // nothing past the output
  back->assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(out_bytes));
  const status s = st.get(1)[0];
  if (s == status::success) CHECK(count.get(1)[0] == n);
  else CHECK(count.get(1)[0] == 0xABABABABABABABABull);  // the count only after a whole decode
  return s;
}

// decompress_with<E, T>; with the default tuning, the stream is decoded with rans_warps too, which
// must give the same status and, on success, the same elements: every test that decodes with the
// default tuning checks both rANS decoders.
template <class E, class T = tuning>
status device_decompress(const std::vector<std::uint8_t>& stream, std::size_t len, std::uint64_t n,
                         std::vector<std::uint8_t>* back) {
  const status s = decompress_with<E, T>(stream, len, n, back);
  if constexpr (std::is_same_v<T, tuning>) {
    if (!testing::rans_warps_on()) return s;
    std::vector<std::uint8_t> by_warps;
    const status w = decompress_with<E, rans_warps>(stream, len, n, &by_warps);
    INFO("default tuning " << to_string(s) << ", rANS by warps " << to_string(w));
    CHECK(w == s);
    if (s == status::success && w == status::success) CHECK(by_warps == *back);
  }
  return s;
}

// `trials` single damaged bytes of stream s (n elements), the check values repaired every other
// trial: the device (tuning T) reports the host's status, and the host's values where both succeed.
template <class E, class T = tuning>
void damaged_bytes_as_host(const std::vector<std::uint8_t>& s, std::uint64_t n, int trials, std::uint64_t seed) {
  std::vector<std::uint8_t> back, ref(n * sizeof(typename E::bits_type));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    auto bad = s;
    bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    if (trial % 2 == 0) testing::repair_hashes(bad);
    const status h = host::decompress_as<E>(bad.data(), bad.size(), ref.data(), ref.size());
    INFO("trial " << trial << " host " << to_string(h));
    const status d = device_decompress<E, T>(bad, bad.size(), n, &back);
    CHECK(d == h);
    if (d == status::success && h == status::success) CHECK(back == ref);
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("device streams equal host streams byte for byte", "[gpu]", testing::host_codecs) {
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

TEMPLATE_LIST_TEST_CASE("with the checksum, the device reports swapped and transplanted chunks as the host does",
                        "[gpu][binding]", testing::host_codecs) {
  using E = typename TestType::element_type;
  for (bool sparse : {false, true}) {
    INFO("sparse " << sparse);
    const auto v = testing::paired_chunks<E>(chunk, sparse, 23);
    const std::uint64_t n = v.size();
    const auto policy = testing::policy_for<TestType>(v.data(), n);
    host::compress_options opt;
    opt.chunk_elems = chunk;
    opt.checksum = true;
    const auto host_stream = host::compress<TestType>(v.data(), n, opt, policy);
    REQUIRE(format::load_le<std::uint16_t>(host_stream.data() + 4) == 4);
    REQUIRE(device_compress<TestType>(v.data(), n, true, policy) == host_stream);  // place codes and digest
    // the donor: each pair's chunks exchanged (the same places and sizes, their own checks)
    auto w = v;
    std::swap_ranges(w.begin(), w.begin() + chunk, w.begin() + chunk);
    std::swap_ranges(w.begin() + 2 * chunk, w.begin() + 3 * chunk, w.begin() + 3 * chunk);
    const auto donor = host::compress<TestType>(w.data(), n, opt, policy);
    std::vector<std::vector<std::uint8_t>> bad = {testing::swap_chunks(host_stream, 0, 1),
                                                  testing::swap_chunks(host_stream, 2, 3),
                                                  testing::transplant(host_stream, donor, 0),
                                                  testing::transplant(host_stream, donor, 3)};
    std::vector<std::uint8_t> back, ref(n * sizeof(typename E::bits_type));
    for (std::size_t k = 0; k < bad.size(); ++k) {
      INFO("mutation " << k);
      REQUIRE(!bad[k].empty());
      REQUIRE(host::decompress_as<E>(bad[k].data(), bad[k].size(), ref.data(), ref.size()) ==
              status::checksum_mismatch);
      CHECK(device_decompress<E>(bad[k], bad[k].size(), n, &back) == status::checksum_mismatch);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("zero groups: the device writes and reads the host's zero masks", "[gpu][zero]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  const std::uint64_t n = 5 * chunk + 77;
  std::vector<std::vector<T>> inputs;
  inputs.push_back(testing::make_row_sparse<E>(n / 128 + 1, 128, 0.8, 1e-3, 41));  // zero_coded chunks
  inputs.back().resize(n);
  inputs.push_back(std::vector<T>(n, 0));  // zero_stored chunks with empty bodies
  auto mixed = testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, 43);
  const auto noise = testing::random_bits<E>(chunk, 44);
  std::copy(noise.begin(), noise.end(), mixed.begin() + chunk);  // chunk 1 stored: zero_stored below
  for (std::uint64_t i = 0; i < n; ++i)
    if ((i / 64) % 3 == 1 || i >= 4 * chunk) mixed[i] = 0;  // whole groups; the last chunks all zero
  inputs.push_back(mixed);
  auto ragged = testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, 45);
  std::fill(ragged.begin() + 5, ragged.begin() + 64 * 50 + 3, T(0));  // zeros not aligned to groups
  std::fill(ragged.end() - 77, ragged.end(), T(0));                   // a short zero group at the end
  inputs.push_back(ragged);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (bool checksum : {false, true}) {
      const auto& v = inputs[k];
      INFO("input " << k << " checksum " << checksum);
      const auto policy = testing::policy_for<TestType>(v.data(), n);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      opt.checksum = checksum;
      const auto host_stream = host::compress<TestType>(v.data(), n, opt, policy);
      const auto modes = testing::chunk_modes(host_stream);
      CHECK(modes[2] + modes[3] + modes[6] > 0);
      const auto dev_stream = device_compress<TestType>(v.data(), n, checksum, policy);
      REQUIRE(dev_stream == host_stream);
      opt.zero_groups = false;
      REQUIRE(device_compress<TestType>(v.data(), n, checksum, policy, false) ==
              host::compress<TestType>(v.data(), n, opt, policy));
      std::vector<std::uint8_t> back, ref(n * sizeof(T));
      REQUIRE(device_decompress<E>(host_stream, host_stream.size(), n, &back) == status::success);
      REQUIRE(std::memcmp(back.data(), v.data(), back.size()) == 0);
      const auto big_chunks = host::compress<TestType>(v.data(), n, {}, policy);  // 65,536-element masks
      REQUIRE(device_decompress<E>(big_chunks, big_chunks.size(), n, &back) == status::success);
      REQUIRE(std::memcmp(back.data(), v.data(), back.size()) == 0);
      // damaged headers and masks (hashes repaired, so the rules behind them are reached) and damaged
      // bodies: the host's status every time
      std::mt19937_64 rng(k * 2 + checksum);
      for (int trial = 0; trial < 200; ++trial) {
        auto bad = host_stream;
        const std::uint64_t c = rng() % format::chunk_count(n, chunk);
        const std::uint64_t off = format::directory_entry(bad.data(), c);
        const std::uint64_t end = c + 1 < format::chunk_count(n, chunk) ? format::directory_entry(bad.data(), c + 1)
                                                                        : bad.size();
        const std::uint64_t pos = off + (trial % 2 == 0 ? rng() % std::min<std::uint64_t>(48, end - off)
                                                        : rng() % (end - off));
        bad[pos] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        if (trial % 4 < 2) testing::repair_hashes(bad);
        INFO("trial " << trial << " chunk " << c << " byte " << pos - off);
        CHECK(device_decompress<E>(bad, bad.size(), n, &back) ==
              host::decompress_as<E>(bad.data(), bad.size(), ref.data(), ref.size()));
      }
      // a zero mask in a version 1 stream is corrupt on both executors
      auto v1 = host_stream;
      testing::set_version(v1, 1);
      CHECK(device_decompress<E>(v1, v1.size(), n, &back) == status::corrupt);
      CHECK(host::decompress_as<E>(v1.data(), v1.size(), ref.data(), ref.size()) == status::corrupt);
    }
}

TEMPLATE_TEST_CASE("rANS streams (codebook::entropy): the device decodes the host's bytes and finds its errors",
                   "[gpu][rans]", bf16, fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using bits_type = typename E::bits_type;
  const std::uint64_t n = 3 * chunk + 100;
  auto v = testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, 51);
  std::fill(v.begin() + chunk, v.begin() + chunk + 640, bits_type(0));  // chunk 1: zero_rans
  for (bool checksum : {false, true}) {
    host::compress_options opt;
    opt.chunk_elems = chunk;
    opt.checksum = checksum;
    const auto s = host::compress<C>(v.data(), n, opt);
    REQUIRE(testing::chunk_modes(s)[4] >= 1);
    REQUIRE(testing::chunk_modes(s)[6] == 1);
    // the device encoder writes the host's bytes (here too, so that the sanitizers run it)
    REQUIRE(device_compress<C>(v.data(), n, checksum, {}) == s);
    std::vector<std::uint8_t> back, ref(n * sizeof(bits_type));
    REQUIRE(device_decompress<E>(s, s.size(), n, &back) == status::success);
    REQUIRE(std::memcmp(back.data(), v.data(), n * sizeof(bits_type)) == 0);
    // one symbol (frequency 4096: the states never move) and a lone rare one (frequency 1)
    {
      std::vector<bits_type> flat(n, testing::one_value<E>());
      flat[n / 3] = testing::rare_value<E>();
      const auto f = host::compress<C>(flat.data(), n, opt);
      REQUIRE(device_decompress<E>(f, f.size(), n, &back) == status::success);
      REQUIRE(std::memcmp(back.data(), flat.data(), n * sizeof(bits_type)) == 0);
    }
    // a table that breaks its rules (frequencies summing to 4097) is corrupt on both executors
    {
      auto bad = s;
      const std::uint64_t off = format::directory_entry(bad.data(), 0);
      REQUIRE(bad[off] == static_cast<std::uint8_t>(format::chunk_mode::rans));
      const std::uint64_t f0 = off + 16 + codec_detail::rans::bitmap_bytes;
      format::store_le<std::uint16_t>(bad.data() + f0, format::load_le<std::uint16_t>(bad.data() + f0) + 1);
      testing::repair_hashes(bad);
      CHECK(host::decompress_as<E>(bad.data(), bad.size(), ref.data(), ref.size()) == status::corrupt);
      CHECK(device_decompress<E>(bad, bad.size(), n, &back) == status::corrupt);
      // by warps, a chunk that failed its checks is never decoded: its output keeps the fill (with
      // the decoder by warps off, decompress_with decodes by blocks, which promise no such thing)
      REQUIRE(decompress_with<E, rans_warps>(bad, bad.size(), n, &back) == status::corrupt);
      if (testing::rans_warps_on())
        CHECK(std::all_of(back.begin(), back.begin() + chunk * sizeof(bits_type), [](std::uint8_t x) { return x == 0xEE; }));
    }
    INFO("checksum " << checksum);
    damaged_bytes_as_host<E>(s, n, 100, 52);
  }
}

// rANS by warps with more chunks than warps (12,000 chunks of 1,024 elements: more than the
// resident warps of rans_warps_kernel<E, 4> on any current GPU), so that warps decode chunk after
// chunk in the same shared memory; then several damaged chunks at once (the tails of some, where
// the rANS stream words and the padding lie, and the check value of one), so that both kernels
// find failures and the lowest failing chunk's status must win, as on the host.
TEMPLATE_TEST_CASE("rANS by warps: every warp decodes many chunks; with several bad chunks, the host's status",
                   "[gpu][rans-warps]", bf16, fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using bits_type = typename E::bits_type;
  constexpr std::uint32_t small = 1024;
  const std::uint64_t chunks = 12000, n = chunks * small - 33;
  auto v = testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, 61);
  for (std::uint64_t c = 7; c < chunks; c += 97)  // zero groups in some chunks (zero_rans)
    std::fill(v.begin() + c * small + 128, v.begin() + c * small + 384, bits_type(0));
  for (bool checksum : {false, true}) {
    INFO("checksum " << checksum);
    host::compress_options opt;
    opt.chunk_elems = small;
    opt.checksum = checksum;
    const auto s = host::compress<C>(v.data(), n, opt);
    // nearly every chunk rANS, the zero groups' chunks zero_rans (bf16, fp32) or zero_stored (fp16,
    // whose 1,024-element rANS chunks barely pay: 11,875 rans, 124 zero_stored and 1 stored here)
    const auto modes = testing::chunk_modes(s);
    REQUIRE(modes[4] + modes[6] >= chunks - chunks / 50);
    REQUIRE(modes[2] + modes[6] >= 100);
    std::vector<std::uint8_t> back, ref(n * sizeof(bits_type));
    REQUIRE(device_decompress<E>(s, s.size(), n, &back) == status::success);  // by blocks and by warps
    REQUIRE(std::memcmp(back.data(), v.data(), back.size()) == 0);
    REQUIRE(decompress_with<E, zipccl::cuda::tuning<64, 32, 1>>(s, s.size(), n, &back) == status::success);
    REQUIRE(std::memcmp(back.data(), v.data(), back.size()) == 0);
    std::mt19937_64 rng(62 + checksum);
    for (int trial = 0; trial < 12; ++trial) {
      auto bad = s;
      const int tails = 1 + trial % 3;
      for (int k = 0; k < tails; ++k) {  // a byte among the last 24 of a chunk (not the last chunk)
        const std::uint64_t c = rng() % (chunks - 1);
        const std::uint64_t end = format::directory_entry(bad.data(), c + 1);
        bad[end - 1 - rng() % 24] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      }
      if (trial % 2 == 0) {  // and a chunk's check value
        const std::uint64_t c = rng() % chunks;
        bad[format::directory_entry(bad.data(), c) + format::chunk_check_field + rng() % 4] ^= 0x5A;
      }
      const status h = host::decompress_as<E>(bad.data(), bad.size(), ref.data(), ref.size());
      INFO("trial " << trial << " host " << to_string(h));
      REQUIRE(h != status::success);
      CHECK(device_decompress<E>(bad, bad.size(), n, &back) == h);
      CHECK(decompress_with<E, zipccl::cuda::tuning<64, 32, 1>>(bad, bad.size(), n, &back) == h);
    }
  }
}

TEMPLATE_TEST_CASE("rANS zero symbols: the device writes and reads the host's bytes", "[gpu][rans][zero]", bf16, fp16,
                   fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using bits_type = typename E::bits_type;
  const std::uint64_t n = 3 * chunk + 100;
  std::vector<std::vector<bits_type>> inputs;
  inputs.push_back(testing::make_element_sparse<E>(n, 0.5, 0.5, 1e-3, 71));   // modes 12
  inputs.push_back(testing::make_element_sparse<E>(n, 0.97, 0.2, 1e-3, 72));  // mostly zero
  auto rows = testing::make_row_sparse<E>(n / 128 + 1, 128, 0.6, 1e-3, 73);  // modes 14
  rows.resize(n);
  for (std::uint64_t i = 0; i < n; i += 3) rows[i] = (i / 3) % 2 ? bits_type(0) : codec_detail::rans::split<E>::negative_zero;
  inputs.push_back(rows);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (bool checksum : {false, true}) {
      const auto& v = inputs[k];
      INFO("input " << k << " checksum " << checksum);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      opt.checksum = checksum;
      const auto s = host::compress<C>(v.data(), n, opt);
      REQUIRE(testing::zero_symbol_chunks(s) >= 1);
      REQUIRE(device_compress<C>(v.data(), n, checksum, {}) == s);
      std::vector<std::uint8_t> back, ref(n * sizeof(bits_type));
      REQUIRE(device_decompress<E>(s, s.size(), n, &back) == status::success);
      REQUIRE(std::memcmp(back.data(), v.data(), n * sizeof(bits_type)) == 0);
      const auto big_chunks = host::compress<C>(v.data(), n, {}, {});
      REQUIRE(device_decompress<E>(big_chunks, big_chunks.size(), n, &back) == status::success);
      REQUIRE(std::memcmp(back.data(), v.data(), n * sizeof(bits_type)) == 0);
      // damaged bytes (the zero symbols' header bytes among them), hashes repaired or not: the
      // host's status, and its values where both succeed
      std::mt19937_64 rng(74 + k);
      for (int trial = 0; trial < 200; ++trial) {
        auto bad = s;
        const std::uint64_t c = rng() % format::chunk_count(n, chunk);
        const std::uint64_t off = format::directory_entry(bad.data(), c);
        const std::uint64_t pos = trial % 2 == 0 ? off + 1 + rng() % 7 : rng() % bad.size();
        bad[pos] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        if (trial % 4 < 2) testing::repair_hashes(bad);
        const status h = host::decompress_as<E>(bad.data(), bad.size(), ref.data(), ref.size());
        INFO("trial " << trial << " host " << to_string(h));
        const status d = device_decompress<E>(bad, bad.size(), n, &back);
        CHECK(d == h);
        if (d == status::success && h == status::success) CHECK(back == ref);
      }
    }
}

// A stream decodes with any tuning's blocks (bench_cuda_codec times the rANS decoder with blocks
// of 64 and 128 threads, and by warps): the default tuning's streams (8,192-element chunks) through
// blocks of 64 and 128 threads and through 64-thread blocks whose rANS chunks go one per warp to
// blocks of one warp, every policy, with stored chunks, zero groups, rANS zero symbols and
// checksums, damaged bytes (the host's status and values), and batches.
template <class E, class T>
void decodes_with_blocks_of(const std::vector<std::uint8_t>& s, std::uint64_t n, const void* want) {
  std::vector<std::uint8_t> back;
  REQUIRE(device_decompress<E, T>(s, s.size(), n, &back) == status::success);
  REQUIRE((n == 0 || std::memcmp(back.data(), want, back.size()) == 0));
  damaged_bytes_as_host<E, T>(s, n, 24, T::threads + T::rans_warps + s.size());
}

// A batch of two tensors (streams sa and sb of a and b) decoded with tuning T.
template <class E, class T, class V>
void batch_decodes_with(const std::vector<std::uint8_t>& sa, const V& a, const std::vector<std::uint8_t>& sb,
                        const V& b) {
  if constexpr (T::rans_warps > 0)  // (as decompress_with: by blocks of its size, with the decoder by warps off)
    if (!testing::rans_warps_on())
      return batch_decodes_with<E, by_blocks<T>>(sa, a, sb, b);
  using bits_type = typename E::bits_type;
  device_buffer<std::uint8_t> ia(sa.size()), ib(sb.size()), oa(a.size() * sizeof(bits_type)),
      ob(b.size() * sizeof(bits_type));
  ia.put(sa.data(), sa.size());
  ib.put(sb.data(), sb.size());
  const std::vector<zipccl::cuda::decompress_item> items = {{ia.p, sa.size(), oa.p, oa.n}, {ib.p, sb.size(), ob.p, ob.n}};
  device_buffer<zipccl::cuda::decompress_item> items_dev(items.size());
  items_dev.put(items.data(), items.size());
  device_buffer<status> st(items.size());
  std::size_t temp_bytes = 0;
  const std::uint64_t max_in = std::max(sa.size(), sb.size());
  REQUIRE(zipccl::cuda::decompress_batch<E, T>(nullptr, temp_bytes, items_dev.p, 2, max_in, st.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(temp_bytes);
  REQUIRE(zipccl::cuda::decompress_batch<E, T>(temp.p, temp_bytes, items_dev.p, 2, max_in, st.p, 0) == status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto statuses = st.get(2);
  REQUIRE(statuses[0] == status::success);
  REQUIRE(statuses[1] == status::success);
  REQUIRE(std::memcmp(oa.get(oa.n).data(), a.data(), oa.n) == 0);
  REQUIRE(std::memcmp(ob.get(ob.n).data(), b.data(), ob.n) == 0);
}

// The paths of the device's rANS encoder that smooth data never takes (testing::rans_edge_chunks,
// whose modes test_simd.cpp checks on the host): a one-symbol chunk, zero symbols of one sign
// only, a masked chunk whose body does not fit (zero_stored), random bits, a table of 4095 and 1,
// a short masked tail. Byte for byte the host's; decoded by blocks and by warps.
TEMPLATE_TEST_CASE("rANS edge chunks: the device writes the host's bytes and reads them", "[gpu][rans]", bf16, fp16,
                   fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using bits_type = typename E::bits_type;
  const auto v = testing::rans_edge_chunks<E>(chunk);
  const std::uint64_t n = v.size();
  for (bool checksum : {false, true}) {
    INFO("checksum " << checksum);
    host::compress_options opt;
    opt.chunk_elems = chunk;
    opt.checksum = checksum;
    const auto s = host::compress<C>(v.data(), n, opt);
    const auto modes = testing::chunk_modes(s);  // (mode & 7)
    REQUIRE(modes[0] == 1);
    REQUIRE(modes[2] == 2);
    REQUIRE(modes[4] == 4);
    REQUIRE(modes[6] == 1);
    REQUIRE(testing::zero_symbol_chunks(s) == 2);
    CHECK(device_compress<C>(v.data(), n, checksum, {}) == s);
    std::vector<std::uint8_t> back;
    REQUIRE(device_decompress<E>(s, s.size(), n, &back) == status::success);
    CHECK(std::memcmp(back.data(), v.data(), n * sizeof(bits_type)) == 0);
  }
}

// fp16 bodies of 32,768 elements or more take sampled counts (codec_detail::rans::counts_from_sample;
// the default tuning's 8,192-element chunks never do): blocks of 1024 threads, 40,960-element
// chunks, write the host's bytes for Gaussian data, element-sparse data (zero symbols), masked
// chunks whose bodies fall on either side of the threshold (38,400 elements, where the sample
// counts the chunk's groups, not the body's, and 20,480), and a tensor whose symbols 1..25 only
// groups outside the sample have (each of them must keep a frequency); the host decodes them.
TEST_CASE("rANS fp16 sampled counts: 40,960-element chunks write the host's bytes", "[gpu][rans]") {
  using C = codec<fp16, codebook::entropy>;
  using big = zipccl::cuda::tuning<1024, 40>;
  constexpr std::uint64_t m = big::chunk_elems;
  static_assert(m == 40960 && codec_detail::rans::samples_counts<fp16>(m - m / 16) &&
                    !codec_detail::rans::samples_counts<fp16>(m / 2),
                "the test's chunks: a masked body that samples and one that does not");
  std::vector<std::vector<std::uint16_t>> inputs;
  inputs.push_back(testing::make_tensor<fp16>(3 * m + 1000, 0.02, testing::distribution::gaussian, 11));
  inputs.push_back(testing::make_element_sparse<fp16>(2 * m, 0.3, 0.5, 0.02, 12));
  auto rows = testing::make_tensor<fp16>(2 * m, 0.02, testing::distribution::gaussian, 13);
  for (std::uint64_t i = 0; i < m; ++i)  // chunk 0: every 16th row of 128 zero; chunk 1: every other
    if ((i / 128) % 16 == 3) rows[i] = 0;
  for (std::uint64_t i = m; i < 2 * m; ++i)
    if ((i / 128) % 2 == 1) rows[i] = 0;
  inputs.push_back(rows);
  std::vector<std::uint16_t> rare(m);
  std::mt19937_64 rng(14);
  unsigned next = 1;
  for (std::uint64_t i = 0; i < m; ++i) {
    const bool outside = !codec_detail::rans::sampled_group(i / format::group_elems);
    if (outside && i % 8 == 3) rare[i] = rng() % 2 ? 0 : 0x8000;
    else if (outside && i % 97 == 5 && next <= 25) rare[i] = static_cast<std::uint16_t>((next++ << 8) | 0x11u);
    else rare[i] = static_cast<std::uint16_t>(((50u + rng() % 8) << 8) | (rng() & 0xFFu) | (rng() % 2 ? 0x8000u : 0u));
  }
  inputs.push_back(rare);
  for (const auto& v : inputs) {
    const std::uint64_t n = v.size();
    for (bool checksum : {false, true}) {
      INFO("n = " << n << " checksum " << checksum);
      host::compress_options opt;
      opt.chunk_elems = static_cast<std::uint32_t>(m);
      opt.checksum = checksum;
      const auto s = host::compress<C>(v.data(), n, opt);
      if (&v == &inputs[2])  // (the masked chunks)
        for (std::uint64_t c : {0u, 1u})
          REQUIRE(format::mode_has_zero_mask(format::read_chunk_header(s.data() + format::directory_entry(s.data(), c)).mode));
      CHECK(device_compress<C, big>(v.data(), n, checksum, {}) == s);
      std::vector<std::uint16_t> back(n);
      REQUIRE(host::decompress_as<fp16>(s.data(), s.size(), back.data(), n * sizeof(std::uint16_t)) == status::success);
      CHECK(back == v);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("decoder blocks of 64 and 128 threads, and rANS by warps, decode the default tuning's streams",
                        "[gpu][tuning]", testing::host_codecs) {
  using E = typename TestType::element_type;
  using bits_type = typename TestType::bits_type;
  using t64 = zipccl::cuda::tuning<64, 32>;
  using t128 = zipccl::cuda::tuning<128, 32>;
  using t64_warp = zipccl::cuda::tuning<64, 32, 1>;
  const std::uint64_t n = 5 * chunk + 77;
  std::vector<std::vector<bits_type>> inputs;
  inputs.push_back(testing::make_tensor<E>(n, 0.02, testing::distribution::student_t, 91));
  const auto noise = testing::random_bits<E>(chunk, 92);  // one stored chunk
  std::copy(noise.begin(), noise.end(), inputs.back().begin() + chunk);
  inputs.push_back(testing::make_tensor<E>(n, 0.02, testing::distribution::gaussian, 93));
  std::fill(inputs.back().begin() + 2 * chunk, inputs.back().begin() + 2 * chunk + 4096, bits_type(0));  // zero groups
  if constexpr (codebook::is_entropy_v<typename TestType::codebook_type>)
    inputs.push_back(testing::make_element_sparse<E>(n, 0.6, 0.5, 1e-3, 94));  // zero symbols
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (bool checksum : {false, true}) {
      INFO("input " << k << " checksum " << checksum);
      const auto& v = inputs[k];
      const auto policy = testing::policy_for<TestType>(v.data(), n);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      opt.checksum = checksum;
      const auto s = host::compress<TestType>(v.data(), n, opt, policy);
      if (k == 0) REQUIRE(testing::chunk_modes(s)[0] >= 1);
      decodes_with_blocks_of<E, t64>(s, n, v.data());
      decodes_with_blocks_of<E, t128>(s, n, v.data());
      decodes_with_blocks_of<E, t64_warp>(s, n, v.data());
    }
  // a batch of two tensors (the second one short) through blocks of 64 threads, and by warps
  const auto& a = inputs[0];
  const std::vector<bits_type> b(inputs[1].begin(), inputs[1].begin() + 1000);
  host::compress_options opt;
  opt.chunk_elems = chunk;
  const auto sa = host::compress<TestType>(a.data(), n, opt, testing::policy_for<TestType>(a.data(), n));
  const auto sb = host::compress<TestType>(b.data(), b.size(), opt, testing::policy_for<TestType>(b.data(), b.size()));
  batch_decodes_with<E, t64>(sa, a, sb, b);
  batch_decodes_with<E, t64_warp>(sa, a, sb, b);
}

TEMPLATE_LIST_TEST_CASE("device decoder reports corrupt and truncated input", "[gpu]", testing::host_codecs) {
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
    // the same status as the host's decompress_as<E>, not merely a failure
    auto host_status = [&](const std::vector<std::uint8_t>& bytes, std::size_t len, std::size_t capacity) {
      return host::decompress_as<E>(bytes.data(), len, ref.data(), capacity);
    };
    for (std::size_t len : {std::size_t(0), std::size_t(7), std::size_t(47), std::size_t(100), s.size() / 2, s.size() - 1}) {
      INFO("length " << len);
      const status dev = device_decompress<E>(s, len, n, &back);
      CHECK(dev != status::success);
      CHECK(dev == host_status(s, len, ref.size()));
    }
    std::mt19937_64 rng(checksum);
    for (int trial = 0; trial < 300; ++trial) {
      auto bad = s;
      bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      if (trial >= 200) bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);  // two faults
      const status dev = device_decompress<E>(bad, bad.size(), n, &back);
      const status hst = host_status(bad, bad.size(), ref.size());
      INFO("trial " << trial);
      REQUIRE(dev == hst);
      if (dev == status::success) REQUIRE(back == ref);
    }
    // chunk 1's check value wrong, every later chunk's mode invalid: the lowest failing chunk's
    // status (checksum_mismatch), as on the host, whichever block finishes first
    {
      auto bad = s;
      format::stream_header h;
      REQUIRE(format::read_header(bad.data(), bad.size(), &h) == status::success);
      bad[format::directory_entry(bad.data(), 1) + format::chunk_check_field] ^= 1;
      for (std::uint64_t c = 2; c < h.chunks; ++c) bad[format::directory_entry(bad.data(), c)] = 7;
      REQUIRE(host_status(bad, bad.size(), ref.size()) == status::checksum_mismatch);
      for (int rep = 0; rep < 5; ++rep) REQUIRE(device_decompress<E>(bad, bad.size(), n, &back) == status::checksum_mismatch);
    }
    // wrong element type, too small an output: the host's codes
    using other = std::conditional_t<std::is_same_v<E, fp32>, bf16, fp32>;
    CHECK(device_decompress<other>(s, s.size(), n / 2, &back) == status::type_mismatch);
    {
      std::vector<std::uint8_t> small;
      const std::size_t cap = ref.size() - 1;
      device_buffer<std::uint8_t> in(s.size()), out(cap + 1);
      device_buffer<status> st(1);
      in.put(s.data(), s.size());
      std::size_t tb = 0;
      REQUIRE(zipccl::cuda::decompress<E, tuning>(nullptr, tb, in.p, s.size(), out.p, cap, st.p, 0) == status::success);
      device_buffer<std::uint8_t> temp(tb);
      REQUIRE(zipccl::cuda::decompress<E, tuning>(temp.p, tb, in.p, s.size(), out.p, cap, st.p, 0) == status::success);
      CUDA_OK(cudaDeviceSynchronize());
      CHECK(st.get(1)[0] == status::buffer_too_small);
      CHECK(host_status(s, s.size(), cap) == status::buffer_too_small);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("batched calls: mixed sizes in one launch, a status per tensor", "[gpu]",
                        testing::host_codecs) {
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
  // decoded with the default tuning and with rANS by warps
  auto decode_with = [&](auto tag) {
    using DT = typename decltype(tag)::type;
    device_buffer<status> statuses(ditems.size());
    std::size_t dtemp_bytes = 0;
    REQUIRE(zipccl::cuda::decompress_batch<E, DT>(nullptr, dtemp_bytes, ditems_dev.p,
                                                  static_cast<std::uint32_t>(ditems.size()), max_in, statuses.p, 0) ==
            status::success);
    device_buffer<std::uint8_t> dtemp(dtemp_bytes);
    REQUIRE(zipccl::cuda::decompress_batch<E, DT>(dtemp.p, dtemp_bytes, ditems_dev.p,
                                                  static_cast<std::uint32_t>(ditems.size()), max_in, statuses.p, 0) ==
            status::success);
    CUDA_OK(cudaDeviceSynchronize());
    const auto st = statuses.get(ditems.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      INFO("tensor " << i << ", rANS warps " << DT::rans_warps);
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
  };
  decode_with(type_tag<tuning>{});
  if (testing::rans_warps_on()) decode_with(type_tag<rans_warps>{});
}

// One launch sequence captured and replayed: the histogram policy through the default decoder, and
// rANS through the decoder by warps (four launches).
template <class C, class DecodeTuning>
struct captured {
  using codec_type = C;
  using decode_tuning = DecodeTuning;
};
using captured_histogram = captured<codec<bf16, codebook::histogram>, tuning>;
using captured_rans_by_warps = captured<codec<bf16, codebook::entropy>, rans_warps>;

TEMPLATE_TEST_CASE("device compress and decompress under CUDA graph capture", "[gpu]", captured_histogram,
                   captured_rans_by_warps) {
  using C = typename TestType::codec_type;
  using DT = typename TestType::decode_tuning;
  if (testing::skips_rans_warps(DT::rans_warps)) return;
  const std::uint64_t n = 10 * chunk + 3;
  const auto v = testing::make_tensor<bf16>(n, 1.0);
  device_buffer<std::uint8_t> in(n * 2), out(zipccl::cuda::max_compressed_size<C, tuning>(n)), back(n * 2);
  device_buffer<std::uint64_t> size(1);
  device_buffer<status> st(1);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * 2);
  std::size_t ct = 0, dt = 0;
  REQUIRE(zipccl::cuda::compress<C, tuning>(nullptr, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
  REQUIRE(zipccl::cuda::decompress<bf16, DT>(nullptr, dt, out.p, out.n, back.p, n * 2, st.p, 0) == status::success);
  device_buffer<std::uint8_t> ctemp(ct), dtemp(dt);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  REQUIRE(zipccl::cuda::compress<C, tuning>(ctemp.p, ct, in.p, n, out.p, out.n, size.p, stream) == status::success);
  // the stream's exact size is only known on the device: decode with the buffer's capacity
  REQUIRE(zipccl::cuda::decompress<bf16, DT>(dtemp.p, dt, out.p, out.n, back.p, n * 2, st.p, stream) == status::success);
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

TEMPLATE_LIST_TEST_CASE("temp storage at any address: offsets 1, 4 and 8 from an allocation", "[gpu]",
                        testing::all_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  const std::uint64_t n = 7 * chunk + 123;
  const auto v = testing::make_tensor<E>(n, 0.3, testing::distribution::gaussian, 11);
  const auto policy = testing::policy_for<TestType>(v.data(), n);
  host::compress_options opt;
  opt.chunk_elems = chunk;
  const auto want = host::compress<TestType>(v.data(), n, opt, policy);
  device_buffer<std::uint8_t> in(n * sizeof(T)), out(zipccl::cuda::max_compressed_size<TestType, tuning>(n)),
      back(n * sizeof(T));
  device_buffer<std::uint64_t> size(1);
  device_buffer<status> st(2);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * sizeof(T));
  for (std::size_t offset : {1u, 4u, 8u}) {
    INFO("offset " << offset);
    std::size_t ct = 0, dt = 0, bt = 0;
    REQUIRE(zipccl::cuda::compress<TestType, tuning>(nullptr, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
    REQUIRE(zipccl::cuda::decompress<E, tuning>(nullptr, dt, out.p, out.n, back.p, back.n, st.p, 0) == status::success);
    zipccl::cuda::decompress_item item{out.p, want.size(), back.p, n * sizeof(T)};
    device_buffer<zipccl::cuda::decompress_item> item_dev(1);
    item_dev.put(&item, 1);
    REQUIRE(zipccl::cuda::decompress_batch<E, tuning>(nullptr, bt, item_dev.p, 1, want.size(), st.p + 1, 0) ==
            status::success);
    device_buffer<std::uint8_t> pool(std::max({ct, dt, bt}) + offset);
    CUDA_OK(cudaMemset(out.p, 0, out.n));
    REQUIRE(zipccl::cuda::compress<TestType, tuning>(pool.p + offset, ct, in.p, n, out.p, out.n, size.p, 0, {}, policy) ==
            status::success);
    CUDA_OK(cudaDeviceSynchronize());
    REQUIRE(out.get(size.get(1)[0]) == want);
    REQUIRE(zipccl::cuda::decompress<E, tuning>(pool.p + offset, dt, out.p, want.size(), back.p, back.n, st.p, 0) ==
            status::success);
    CUDA_OK(cudaDeviceSynchronize());
    REQUIRE(st.get(1)[0] == status::success);
    REQUIRE(std::memcmp(back.get(n * sizeof(T)).data(), v.data(), n * sizeof(T)) == 0);
    CUDA_OK(cudaMemset(back.p, 0, back.n));
    REQUIRE(zipccl::cuda::decompress_batch<E, tuning>(pool.p + offset, bt, item_dev.p, 1, want.size(), st.p + 1, 0) ==
            status::success);
    CUDA_OK(cudaDeviceSynchronize());
    REQUIRE(st.get(2)[1] == status::success);
    REQUIRE(std::memcmp(back.get(n * sizeof(T)).data(), v.data(), n * sizeof(T)) == 0);
    // one byte short of what this address needs (cudaMalloc aligns to 256, so the slack used is
    // 256 - offset) is an argument error, never a fault
    std::size_t short_bytes = ct - offset;
    CHECK(zipccl::cuda::compress<TestType, tuning>(pool.p + offset, short_bytes, in.p, n, out.p, out.n, size.p, 0, {},
                                                   policy) == status::invalid_argument);
  }
}

TEST_CASE("the size copy to the host needs pinned memory, and is captured into a graph", "[gpu]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  const std::uint64_t n = 3 * chunk + 5;
  const auto v = testing::make_tensor<bf16>(n, 1.0);
  device_buffer<std::uint8_t> in(n * 2), out(zipccl::cuda::max_compressed_size<C, tuning>(n));
  device_buffer<std::uint64_t> size(1);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * 2);
  std::size_t ct = 0;
  REQUIRE(zipccl::cuda::compress<C, tuning>(nullptr, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(ct);
  std::uint64_t pageable = 0;
  CHECK(zipccl::cuda::compress<C, tuning>(temp.p, ct, in.p, n, out.p, out.n, size.p, 0, {}, {}, &pageable) ==
        status::invalid_argument);
  std::uint64_t* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, sizeof(std::uint64_t)));
  *pinned = 0;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  REQUIRE(zipccl::cuda::compress<C, tuning>(temp.p, ct, in.p, n, out.p, out.n, size.p, stream, {}, {}, pinned) ==
          status::success);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto want = host::compress<C>(v.data(), n, host::compress_options{chunk, false, 1});
  CHECK(*pinned == want.size());
  CHECK(size.get(1)[0] == want.size());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
}

namespace {
__global__ void no_op_kernel() {}
}  // namespace

TEST_CASE("launch errors: a caller's earlier error is neither cleared nor blamed; a failure keeps its CUDA error",
          "[gpu]") {
  using C = codec<bf16, codebook::histogram>;
  const std::uint64_t n = 2 * chunk;
  const auto v = testing::make_tensor<bf16>(n, 1.0);
  device_buffer<std::uint8_t> in(n * 2), out(zipccl::cuda::max_compressed_size<C, tuning>(n));
  device_buffer<std::uint64_t> size(1);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * 2);
  std::size_t ct = 0;
  REQUIRE(zipccl::cuda::compress<C, tuning>(nullptr, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
  device_buffer<std::uint8_t> temp(ct);
  // the caller's own bad launch (too many threads: a non-sticky error; CUDA 13 names it
  // cudaErrorInvalidValue, older runtimes cudaErrorInvalidConfiguration: whichever it is)
  no_op_kernel<<<1, 4096>>>();
  const cudaError_t callers = cudaPeekAtLastError();
  REQUIRE(callers != cudaSuccess);
  REQUIRE(zipccl::cuda::compress<C, tuning>(temp.p, ct, in.p, n, out.p, out.n, size.p, 0) == status::success);
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError() == callers);  // still the caller's to see
  CHECK(cudaGetLastError() == cudaSuccess);
  // work on the legacy stream while another stream captures in global mode is refused by CUDA:
  // the call reports cuda_error and keeps the runtime's code and the failing step
  zipccl::cuda::clear_last_error();
  cudaStream_t capturing;
  CUDA_OK(cudaStreamCreate(&capturing));  // a blocking stream: the legacy stream may not be used meanwhile
  CUDA_OK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  const status s = zipccl::cuda::compress<C, tuning>(temp.p, ct, in.p, n, out.p, out.n, size.p, 0);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(capturing, &graph);
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  CHECK(s == status::cuda_error);
  const zipccl::cuda::failure f = zipccl::cuda::last_error();
  CHECK(f.cuda != cudaSuccess);
  CHECK(std::string(f.step).find("cuda::compress") == 0);
  CHECK(zipccl::cuda::last_error_string().find(cudaGetErrorName(f.cuda)) != std::string::npos);
  cudaStreamDestroy(capturing);
  CUDA_OK(cudaDeviceSynchronize());
}

TEST_CASE("decompress_batch: one large tensor among a thousand small ones", "[gpu]") {
  using C = codec<bf16, codebook::histogram>;
  std::vector<std::uint64_t> sizes(1000, 300);
  sizes[517] = 40 * chunk + 9;
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::vector<std::uint16_t>> tensors;
  host::compress_options opt;
  opt.chunk_elems = chunk;
  std::uint64_t max_in = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    tensors.push_back(testing::make_tensor<bf16>(sizes[i], 0.01, testing::distribution::gaussian, i));
    streams.push_back(host::compress<C>(tensors.back().data(), sizes[i], opt));
    max_in = std::max<std::uint64_t>(max_in, streams.back().size());
  }
  std::vector<std::unique_ptr<device_buffer<std::uint8_t>>> ins, outs;
  std::vector<zipccl::cuda::decompress_item> items;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ins.push_back(std::make_unique<device_buffer<std::uint8_t>>(streams[i].size()));
    ins.back()->put(streams[i].data(), streams[i].size());
    outs.push_back(std::make_unique<device_buffer<std::uint8_t>>(sizes[i] * 2));
    items.push_back({ins.back()->p, streams[i].size(), outs.back()->p, sizes[i] * 2});
  }
  device_buffer<zipccl::cuda::decompress_item> items_dev(items.size());
  items_dev.put(items.data(), items.size());
  device_buffer<status> st(items.size());
  device_buffer<std::uint64_t> counts(items.size());
  std::size_t tb = 0;
  const auto count = static_cast<std::uint32_t>(items.size());
  REQUIRE(zipccl::cuda::decompress_batch<bf16, tuning>(nullptr, tb, items_dev.p, count, max_in, st.p, 0, counts.p) ==
          status::success);
  device_buffer<std::uint8_t> temp(tb);
  REQUIRE(zipccl::cuda::decompress_batch<bf16, tuning>(temp.p, tb, items_dev.p, count, max_in, st.p, 0, counts.p) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto statuses = st.get(items.size());
  const auto got_counts = counts.get(items.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(statuses[i] == status::success);
    REQUIRE(got_counts[i] == sizes[i]);
    REQUIRE(std::memcmp(outs[i]->get(sizes[i] * 2).data(), tensors[i].data(), sizes[i] * 2) == 0);
  }
}

// max_in_bytes of 2^64 - 1 ("no bound") over a batch whose grid bound then saturates at 2^64 - 1:
// with rANS by one-warp blocks, a grid of that bound / 1 + 1 blocks would wrap to 0 (from 24
// tensors on), and the launch would fail after the validation was enqueued.
using one_warp_blocks = zipccl::cuda::tuning<64, 32, 1>;
TEMPLATE_TEST_CASE("decompress_batch with max_in_bytes 2^64 - 1: every tuning decodes, none launches an empty grid",
                   "[gpu][rans-warps]", one_warp_blocks, rans_warps, tuning) {
  using T = TestType;
  if (testing::skips_rans_warps(T::rans_warps)) return;
  using C = codec<bf16, codebook::entropy>;
  const std::uint64_t n = 3 * chunk + 5;
  const auto v = testing::make_tensor<bf16>(n, 0.02, testing::distribution::gaussian, 91);
  host::compress_options opt;
  opt.chunk_elems = chunk;
  const auto s = host::compress<C>(v.data(), n, opt);
  const std::uint32_t count = 40;  // (about 2^59.4 chunks a tensor could hold, times 40: past 2^64)
  device_buffer<std::uint8_t> in(s.size()), out(count * n * 2);
  in.put(s.data(), s.size());
  std::vector<zipccl::cuda::decompress_item> items;
  for (std::uint32_t i = 0; i < count; ++i) items.push_back({in.p, s.size(), out.p + i * n * 2, n * 2});
  device_buffer<zipccl::cuda::decompress_item> items_dev(count);
  items_dev.put(items.data(), count);
  device_buffer<status> st(count);
  std::size_t tb = 0;
  const std::uint64_t unbounded = ~0ull;
  REQUIRE(zipccl::cuda::decompress_batch<bf16, T>(nullptr, tb, items_dev.p, count, unbounded, st.p, 0) ==
          status::success);
  device_buffer<std::uint8_t> temp(tb);
  REQUIRE(zipccl::cuda::decompress_batch<bf16, T>(temp.p, tb, items_dev.p, count, unbounded, st.p, 0) ==
          status::success);
  CUDA_OK(cudaDeviceSynchronize());
  const auto statuses = st.get(count);
  const auto back = out.get(count * n * 2);
  for (std::uint32_t i = 0; i < count; ++i) {
    INFO("tensor " << i);
    REQUIRE(statuses[i] == status::success);
    REQUIRE(std::memcmp(back.data() + i * n * 2, v.data(), n * 2) == 0);
  }
}

// Small enough for compute-sanitizer (scripts/gpu-check.sh runs it under initcheck, racecheck and
// memcheck): a stream whose first chunk is corrupt, so blocks stop early, and one that is whole.
TEST_CASE("decoder blocks that stop early: block-wide decisions, nothing uninitialised", "[gpu][sanitize]") {
  using C = codec<bf16, codebook::histogram>;
  const std::uint64_t n = 16 * chunk + 100;
  const auto v = testing::make_tensor<bf16>(n, 0.05);
  host::compress_options opt;
  opt.chunk_elems = chunk;
  opt.checksum = true;
  const auto good = host::compress<C>(v.data(), n, opt);
  std::vector<std::uint8_t> back;
  REQUIRE(device_decompress<bf16>(good, good.size(), n, &back) == status::success);
  REQUIRE(std::memcmp(back.data(), v.data(), n * 2) == 0);
  auto bad = good;
  format::stream_header h;
  REQUIRE(format::read_header(bad.data(), bad.size(), &h) == status::success);
  bad[format::directory_entry(bad.data(), 0) + 40] ^= 0x10;  // chunk 0's body: checksum mismatch
  REQUIRE(device_decompress<bf16>(bad, bad.size(), n, &back) == status::checksum_mismatch);
  bad = good;
  bad[format::directory_entry(bad.data(), 0)] = 9;  // chunk 0's mode: corrupt
  REQUIRE(device_decompress<bf16>(bad, bad.size(), n, &back) == status::corrupt);
}

// Small enough for compute-sanitizer (scripts/gpu-check.sh runs the [sanitize] cases under memcheck
// and racecheck): the decoder by warps (blocks of 4) with a few more chunks than one wave of its
// warps holds, as this GPU reports it, so that some warps decode a second chunk in the shared
// memory of their first (the hazard a missing __syncwarp would leave); then a stream word damaged
// in a second-round chunk, which passes every check before the warps and fails in the warp's own
// decode, and with it one in a first-round chunk.
TEST_CASE("rANS by warps, small: some warps decode a second chunk, and damaged chunks fail as on the host",
          "[gpu][sanitize][rans-warps]") {
  constexpr int W = rans_warps::rans_warps;
  if (testing::skips_rans_warps(W)) return;
  using C = codec<bf16, codebook::entropy>;
  int device = 0, sms = 0, per_sm = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, zipccl::cuda::detail::rans_warps_kernel<bf16, W>,
                                                        32 * W, 0));
  const std::uint64_t wave = std::uint64_t(per_sm) * std::uint64_t(sms) * W;  // warps in one wave
  constexpr std::uint32_t small = 1024;  // (rANS pays on 1,024 bf16 elements; not on 256)
  const std::uint64_t chunks = wave + wave / 16 + 1, n = chunks * small - 5;
  INFO(wave << " warps in a wave, " << chunks << " chunks");
  const auto v = testing::make_tensor<bf16>(n, 0.02, testing::distribution::gaussian, 95);
  host::compress_options opt;
  opt.chunk_elems = small;
  const auto s = host::compress<C>(v.data(), n, opt);
  REQUIRE(testing::chunk_modes(s)[4] >= chunks - chunks / 50);  // (mode 4: rans)
  std::vector<std::uint8_t> back, ref(n * 2);
  REQUIRE(decompress_with<bf16, rans_warps>(s, s.size(), n, &back) == status::success);
  REQUIRE(std::memcmp(back.data(), v.data(), n * 2) == 0);
  auto bad = s;
  for (const std::uint64_t c : {chunks - 2, wave / 3}) {
    // (the middle word of chunk c's rANS stream: the chunk passes its checks, its states do not end
    // where they must)
    const std::uint64_t off = format::directory_entry(bad.data(), c), end = format::directory_entry(bad.data(), c + 1);
    REQUIRE(bad[off] == static_cast<std::uint8_t>(format::chunk_mode::rans));
    format::chunk_header ch;
    codec_detail::body_shape body;
    REQUIRE(codec_detail::check_chunk<bf16>(bad.data() + off, end - off, small, false, &ch, &body) == status::success);
    const codec_detail::rans_sections<bf16> sec(bad.data() + off, ch, body);
    REQUIRE(sec.n_words >= 2);
    bad[static_cast<std::size_t>(sec.stream - bad.data()) + 2 * (sec.n_words / 2)] ^= 0x21;
    const status h = host::decompress_as<bf16>(bad.data(), bad.size(), ref.data(), ref.size());
    INFO("chunk " << c << " damaged, host " << to_string(h));
    REQUIRE(h == status::corrupt);
    CHECK(decompress_with<bf16, rans_warps>(bad, bad.size(), n, &back) == h);
  }
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
