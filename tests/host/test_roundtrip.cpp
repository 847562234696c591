// Host executor: bit-exact round trips for every element type x codebook policy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/stream_tools.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

namespace {

// Compresses and decompresses n elements read from `src` (any alignment); returns the stream size.
template <class Codec>
std::uint64_t round_trip(const void* src, std::uint64_t n, const host::compress_options& opt = {},
                         std::size_t out_shift = 0) {
  using T = typename Codec::bits_type;
  std::vector<T> aligned(n);
  if (n) std::memcpy(aligned.data(), src, n * sizeof(T));
  const auto policy = testing::policy_for<Codec>(aligned.data(), n);
  const std::uint64_t bound = host::max_compressed_size<Codec>(n, opt.chunk_elems);
  std::vector<std::uint8_t> stream(bound + 16);
  std::uint64_t bytes = 0;
  REQUIRE(host::compress<Codec>(src, n, stream.data() + out_shift, bound, &bytes, opt, policy) == status::success);
  REQUIRE(bytes <= bound);
  host::stream_info info;
  REQUIRE(host::read_header(stream.data() + out_shift, bytes, &info) == status::success);
  CHECK(info.count == n);
  CHECK(info.type == Codec::type);
  CHECK(info.codebook == Codec::codebook_type::kind);
  CHECK(info.compressed_bytes == bytes);
  std::vector<std::uint8_t> back(n * sizeof(T) + 16, 0xEE);
  std::uint64_t count = 0;
  REQUIRE(host::decompress(stream.data() + out_shift, bytes, back.data() + out_shift, n * sizeof(T), &count) ==
          status::success);
  CHECK(count == n);
  REQUIRE((n == 0 || std::memcmp(back.data() + out_shift, src, n * sizeof(T)) == 0));
  // nothing written past the output
  for (std::size_t i = out_shift + n * sizeof(T); i < back.size(); ++i) REQUIRE(back[i] == 0xEE);
  return bytes;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every 16-bit pattern and fp32 special values round-trip", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  if constexpr (sizeof(T) == 2) {
    std::vector<T> all(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<T>(i);
    for (std::uint32_t chunk : {256u, 65536u}) {
      host::compress_options opt;
      opt.chunk_elems = chunk;
      round_trip<TestType>(all.data(), all.size(), opt);
    }
  } else {
    const std::vector<T> special = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                    0xFFC00001u, 0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x00800000u,
                                    0x7F7FFFFFu, 0xFF7FFFFFu, 0x3F800000u, 0x7FFFFFFFu, 0xFFFFFFFFu};
    round_trip<TestType>(special.data(), special.size());
    std::vector<T> mixed = testing::make_tensor<E>(4096, 1.0);
    for (std::size_t i = 0; i < mixed.size(); i += 7) mixed[i] = special[i % special.size()];
    round_trip<TestType>(mixed.data(), mixed.size());
  }
}

TEMPLATE_LIST_TEST_CASE("ten million random fp32 bit patterns round-trip", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  if constexpr (std::is_same_v<E, fp32>) {
    const auto v = testing::random_bits<E>(10'000'000, 2024);
    host::compress_options opt;
    opt.threads = 2;
    const std::uint64_t bytes = round_trip<TestType>(v.data(), v.size(), opt);
    // uniformly random bits do not compress: every chunk is stored, exactly at the bound
    CHECK(bytes == host::max_compressed_size<TestType>(v.size()));
  }
}

TEMPLATE_LIST_TEST_CASE("distributions and scales from 1e-8 to 1e4 round-trip", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  for (auto d : {testing::distribution::gaussian, testing::distribution::laplace, testing::distribution::student_t})
    for (int k = -8; k <= 4; ++k) {
      const auto v = testing::make_tensor<E>(20000, std::pow(10.0, k), d, 1000 + k);
      INFO(testing::distribution_name(d) << " scale 1e" << k);
      host::compress_options opt;
      opt.chunk_elems = 4096;
      const std::uint64_t bytes = round_trip<TestType>(v.data(), v.size(), opt);
      CHECK(bytes <= host::max_compressed_size<TestType>(v.size(), opt.chunk_elems));
    }
}

TEMPLATE_LIST_TEST_CASE("row-sparse gradients (70-95% of the rows zero) round-trip bit for bit", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  for (double zero_rows : {0.7, 0.8, 0.95, 1.0}) {
    const auto v = testing::make_row_sparse<E>(300, 128, zero_rows, 1e-3, 17);
    std::uint64_t zeros = 0;
    for (std::uint64_t r = 0; r < 300; ++r) {
      bool all = true;
      for (std::uint64_t c = 0; c < 128; ++c) all = all && v[r * 128 + c] == 0;
      zeros += all ? 1 : 0;
    }
    INFO("zero rows " << zero_rows << ": " << zeros << " of 300");
    CHECK(std::abs(static_cast<double>(zeros) / 300 - zero_rows) < 0.08);  // the generator keeps its promise
    host::compress_options opt;
    opt.chunk_elems = 4096;
    const std::uint64_t bytes = round_trip<TestType>(v.data(), v.size(), opt);
    CHECK(bytes <= host::max_compressed_size<TestType>(v.size(), opt.chunk_elems));
    opt.zero_groups = false;
    const std::uint64_t dense = round_trip<TestType>(v.data(), v.size(), opt);
    CHECK(bytes < dense);
  }
}

TEMPLATE_LIST_TEST_CASE("zero groups: the mask pays on row-sparse data and costs nothing elsewhere",
                        "[host][roundtrip][zero]", testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  // an embedding gradient: 4096 rows of 128, 80% of them zero
  const auto v = testing::make_row_sparse<E>(4096, 128, 0.8, 1e-3, 23);
  const auto policy = testing::policy_for<TestType>(v.data(), v.size());
  const auto s = host::compress<TestType>(v.data(), v.size(), {}, policy);
  const double ratio = double(v.size() * sizeof(T)) / double(s.size());
  const auto modes = testing::chunk_modes(s);
  INFO("ratio " << ratio << "; chunks stored/coded/zero_stored/zero_coded " << modes[0] << "/" << modes[1] << "/"
                << modes[2] << "/" << modes[3]);
  // every chunk leaves its zero rows out, and none falls back to raw (issue 13)
  constexpr bool rans = codebook::is_entropy_v<typename TestType::codebook_type>;
  constexpr unsigned zero_coded = rans ? 6u : 3u;
  CHECK(modes[0] + modes[1] + modes[2] + modes[4] == 0);
  CHECK(modes[zero_coded] == format::chunk_count(v.size(), format::default_chunk_elems));
  if constexpr (std::is_same_v<E, bf16>) CHECK(ratio >= 5.0);
  if constexpr (std::is_same_v<E, fp16>) CHECK(ratio >= 4.0);
  if constexpr (std::is_same_v<E, fp32>) CHECK(ratio >= 4.0);
  std::vector<T> back(v.size());
  REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
  REQUIRE(back == v);

  // dense data: no chunk takes a mask, and the stream is the one zero_groups = false writes
  const auto d = testing::make_tensor<E>(100000, 0.02, testing::distribution::gaussian, 29);
  host::compress_options off;
  off.zero_groups = false;
  const auto p2 = testing::policy_for<TestType>(d.data(), d.size());
  const auto with = host::compress<TestType>(d.data(), d.size(), {}, p2);
  const auto without = host::compress<TestType>(d.data(), d.size(), off, p2);
  CHECK(with == without);

  // a lone zero group in a large chunk pays for the mask (128 bytes at 65,536 elements, and 16 of
  // slack) only where its elements' fixed part is larger: fp32 (216 bytes), not bf16 (88) or fp16
  // (112)
  using L = typename TestType::layout;
  auto one = d;
  std::fill(one.begin(), one.begin() + 64, T(0));
  const auto lone = host::compress<TestType>(one.data(), one.size(), {}, p2);
  CHECK(L::zero_mask_pays(65536, 64) == std::is_same_v<E, fp32>);
  CHECK(testing::chunk_modes(lone)[zero_coded] == (L::zero_mask_pays(65536, 64) ? 1u : 0u));
  // and zeros that are not aligned to whole groups stay in the body
  auto ragged = d;
  std::fill(ragged.begin() + 1, ragged.begin() + 64 * 40 - 1, T(0));
  const auto r = host::compress<TestType>(ragged.data(), ragged.size(), {}, p2);
  REQUIRE(host::decompress(r.data(), r.size(), back.data(), ragged.size() * sizeof(T)) == status::success);
  REQUIRE(std::equal(ragged.begin(), ragged.end(), back.begin()));
  CHECK(testing::chunk_modes(r)[zero_coded] == 1);  // 38 whole zero groups in chunk 0

  // all-zero tensors, every chunk size: each chunk is its header and mask
  for (std::uint64_t n : {1ull, 63ull, 64ull, 65ull, 4096ull, 65536ull + 1})
    for (std::uint32_t chunk : {256u, 65536u}) {
      INFO("zeros n " << n << " chunk " << chunk);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      const std::vector<T> z(n, 0);
      const std::uint64_t bytes = round_trip<TestType>(z.data(), n, opt);
      CHECK(bytes <= format::min_compressed_size<E>(n, chunk, false));
    }
}

TEMPLATE_TEST_CASE("element-sparse data: the 3-bit policies code zeros instead of falling back to raw",
                   "[host][roundtrip][zero]", bf16, fp32) {
  using E = TestType;
  using T = typename E::bits_type;
  for (double zero_frac : {0.1, 0.5, 0.9}) {
    const auto v = testing::make_element_sparse<E>(200000, zero_frac, 0.0, 1e-3, 65);  // +0 only
    INFO("zeros " << zero_frac);
    for (int policy = 0; policy < 2; ++policy) {
      const auto s = policy == 0 ? host::compress<codec<E, codebook::analytic_gaussian>>(v.data(), v.size())
                                 : host::compress<codec<E, codebook::histogram>>(v.data(), v.size());
      const auto modes = testing::chunk_modes(s);
      INFO((policy == 0 ? "analytic" : "histogram"));
      CHECK(modes[0] == 0);  // no chunk stored
      // a zero costs its 3-bit code and its rest: 11 bits (bf16), 27 (fp32), as every element; the
      // escapes of the window's misses (3-5% of the other values) add at most 4% of the raw size
      const double fixed = std::is_same_v<E, bf16> ? 11.0 / 16 : 27.0 / 32;
      CHECK(double(s.size()) < (fixed + 0.04) * double(v.size() * sizeof(T)));
      std::vector<T> back(v.size());
      REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
      REQUIRE(back == v);
    }
  }
}

TEMPLATE_TEST_CASE("zero symbols: +0.0 and -0.0 cost no rest bytes in rANS chunks", "[host][roundtrip][zero]", bf16,
                   fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using T = typename E::bits_type;
  using RS = codec_detail::rans::split<E>;
  const T neg0 = RS::negative_zero;
  // element-sparse tensors (ReLU or top-k gradients): zeros scattered, not in whole groups; every
  // chunk takes zero symbols, the stream is version 3, and the ratio grows with the zeros as the
  // rests they no longer carry say it should
  for (double zero_frac : {0.3, 0.5, 0.9, 0.99})
    for (double negative : {0.0, 0.5, 1.0}) {
      INFO("zeros " << zero_frac << " negative " << negative);
      const auto v = testing::make_element_sparse<E>(200000, zero_frac, negative, 1e-3, 61);
      const auto s = host::compress<C>(v.data(), v.size());
      CHECK(format::load_le<std::uint16_t>(s.data() + 4) == 3);
      CHECK(testing::zero_symbol_chunks(s) == format::chunk_count(v.size(), format::default_chunk_elems));
      std::vector<T> back(v.size());
      REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
      REQUIRE(back == v);
      // the size is the symbols' entropy (zeros as two symbols of their own) and the non-zero
      // elements' rests, within 1% and the chunks' tables, states and headers
      std::map<std::uint32_t, double> count;
      double live = 0;
      for (const T x : v) {
        ++count[x == 0 ? 256u : x == neg0 ? 257u : RS::symbol(x)];
        live += RS::is_zero(x) ? 0 : 1;
      }
      double bits = 0;
      for (const auto& [sym, c] : count) bits -= c * std::log2(c / double(v.size()));
      const double bound = bits / 8 + live * (RS::word_bytes + 1);
      INFO("size " << s.size() << " entropy and rests " << bound);
      CHECK(double(s.size()) < 1.01 * bound + 4 * 800);
      if (zero_frac == 0.9 && negative == 0.5) CHECK(double(v.size() * sizeof(T)) / double(s.size()) >= 5.0);
    }

  // the rule: from rans::min_zero_elems zeros (and 1/64 of the body) on, and only then
  host::compress_options opt;
  opt.chunk_elems = 2048;
  auto d = testing::make_tensor<E>(2048, 0.02, testing::distribution::gaussian, 62);
  REQUIRE(std::count(d.begin(), d.end(), T(0)) == 0);
  for (std::uint64_t zeros : {codec_detail::rans::min_zero_elems - 1, codec_detail::rans::min_zero_elems}) {
    auto x = d;
    for (std::uint64_t i = 0; i < zeros; ++i) x[7 + 31 * i] = i % 2 ? neg0 : T(0);  // never a whole group
    const auto s = host::compress<C>(x.data(), x.size(), opt);
    INFO("zeros " << zeros);
    CHECK(testing::zero_symbol_chunks(s) == (zeros >= codec_detail::rans::min_zero_elems ? 1u : 0u));
    CHECK(format::load_le<std::uint16_t>(s.data() + 4) == (zeros >= codec_detail::rans::min_zero_elems ? 3 : 2));
    std::vector<T> back(x.size());
    REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
    REQUIRE(back == x);
  }

  // and the share: at least 1/64 of a 65,536-element body
  auto big = testing::make_tensor<E>(65536, 0.02, testing::distribution::gaussian, 66);
  REQUIRE(std::count(big.begin(), big.end(), T(0)) == 0);
  for (std::uint64_t zeros : {1023u, 1024u}) {
    auto x = big;
    for (std::uint64_t i = 0; i < zeros; ++i) x[5 + 61 * i] = i % 3 ? T(0) : neg0;
    const auto s = host::compress<C>(x.data(), x.size());
    INFO("zeros " << zeros << " of 65536");
    CHECK(testing::zero_symbol_chunks(s) == (zeros >= 1024 ? 1u : 0u));
    std::vector<T> back(x.size());
    REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
    REQUIRE(back == x);
  }

  // the zero symbols are the two smallest values no other element has: with subnormals (exponent
  // 0 and a mantissa) and every exponent but two in use, those two; with all but one, no zero
  // symbols
  for (unsigned free_values : {1u, 2u}) {
    constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 8;
    std::vector<T> x;
    for (unsigned sym = 0; sym < 256; ++sym) {
      if (sym == 77 || (free_values == 2 && sym == 200)) continue;
      x.push_back(static_cast<T>((T(sym) << shift) | T(1)));  // never a zero
    }
    while (x.size() < 1968) x.push_back(static_cast<T>((T(120) << shift) | T(x.size() % 64 + 1)));  // so rANS pays
    for (int k = 0; k < 80; ++k) x.push_back(k % 3 ? T(0) : neg0);
    const auto s = host::compress<C>(x.data(), x.size(), opt);
    INFO("free symbol values " << free_values);
    CHECK(testing::chunk_modes(s)[4] == 1);
    CHECK(testing::zero_symbol_chunks(s) == (free_values == 2 ? 1u : 0u));
    if (free_values == 2 && testing::zero_symbol_chunks(s) == 1) {
      const auto h = format::read_chunk_header(s.data() + format::directory_entry(s.data(), 0));
      CHECK(h.table[1] == 77);
      CHECK(h.table[2] == 200);
      CHECK(format::load_le<std::uint32_t>(h.table + 3) == 80);
    }
    std::vector<T> back(x.size());
    REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
    REQUIRE(back == x);
  }

  // with a zero mask too (mode 14): zero rows left out, scattered zeros in the other rows
  auto rows = testing::make_row_sparse<E>(2048, 128, 0.7, 1e-3, 63);
  std::mt19937_64 rng(64);
  for (auto& x : rows)
    if (x != 0 && rng() % 4 == 0) x = rng() % 2 ? neg0 : T(0);
  const auto s = host::compress<C>(rows.data(), rows.size());
  const auto modes = testing::chunk_modes(s);
  CHECK(modes[6] == format::chunk_count(rows.size(), format::default_chunk_elems));
  CHECK(testing::zero_symbol_chunks(s) == modes[6]);
  std::vector<T> back(rows.size());
  REQUIRE(host::decompress(s.data(), s.size(), back.data(), back.size() * sizeof(T)) == status::success);
  REQUIRE(back == rows);
  // and every chunk size, odd lengths included
  for (std::uint32_t chunk : {256u, 1024u, 65536u})
    for (std::uint64_t n : {1ull, 33ull, 255ull, 1000ull, 70001ull}) {
      INFO("chunk " << chunk << " n " << n);
      host::compress_options o;
      o.chunk_elems = chunk;
      round_trip<C>(rows.data(), n, o);
      const auto e = testing::make_element_sparse<E>(n, 0.6, 0.5, 1e-3, n);
      round_trip<C>(e.data(), n, o);
    }
}

TEMPLATE_LIST_TEST_CASE("version 1 streams stay readable, and carry no zero masks", "[host][roundtrip][zero]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  // a stream that needs nothing of version 2 is written as version 1: dense data with a 3-bit policy
  constexpr bool rans = codebook::is_entropy_v<typename TestType::codebook_type>;
  const auto d = testing::make_tensor<E>(70000, 0.02, testing::distribution::gaussian, 31);
  const auto policy = testing::policy_for<TestType>(d.data(), d.size());
  auto v1 = host::compress<TestType>(d.data(), d.size(), {}, policy);
  CHECK(format::load_le<std::uint16_t>(v1.data() + 4) == (rans ? 2 : 1));
  std::vector<T> back(d.size());
  if constexpr (rans) {
    // version 1 had no entropy policy (header byte 7 is 1..3) and no rANS chunks
    testing::set_version(v1, 1);
    CHECK(host::decompress(v1.data(), v1.size(), back.data(), back.size() * sizeof(T)) == status::corrupt);
    return;
  }
  REQUIRE(host::decompress(v1.data(), v1.size(), back.data(), back.size() * sizeof(T)) == status::success);
  CHECK(back == d);
  // the same bytes with the version field saying 2 are a valid version 2 stream
  testing::set_version(v1, 2);
  REQUIRE(host::decompress(v1.data(), v1.size(), back.data(), back.size() * sizeof(T)) == status::success);
  CHECK(back == d);
  // a zero_* chunk in a version 1 stream is corrupt
  const auto sparse = testing::make_row_sparse<E>(600, 128, 0.9, 1e-3, 37);
  auto bad = host::compress<TestType>(sparse.data(), sparse.size(), {}, policy);
  REQUIRE(testing::chunk_modes(bad)[2] + testing::chunk_modes(bad)[3] > 0);
  CHECK(format::load_le<std::uint16_t>(bad.data() + 4) == 2);
  testing::set_version(bad, 1);
  back.resize(sparse.size());
  CHECK(host::decompress(bad.data(), bad.size(), back.data(), back.size() * sizeof(T)) == status::corrupt);
}

TEMPLATE_LIST_TEST_CASE("sizes around chunk boundaries and unaligned buffers", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  const std::uint32_t chunk = 1024;
  host::compress_options opt;
  opt.chunk_elems = chunk;
  const auto v = testing::make_tensor<E>(5 * chunk + 77, 0.02, testing::distribution::gaussian, 5);
  for (std::uint64_t n : {0ull, 1ull, 2ull, 31ull, 32ull, 33ull, chunk - 1ull, 1ull * chunk, chunk + 1ull,
                          5ull * chunk + 77}) {
    INFO("n = " << n);
    round_trip<TestType>(v.data(), n, opt);
  }
  // input and output at every misalignment
  std::vector<std::uint8_t> raw(v.size() * sizeof(T) + 8);
  for (std::size_t shift = 1; shift < sizeof(T) + 2; ++shift) {
    std::memcpy(raw.data() + shift, v.data(), v.size() * sizeof(T));
    INFO("shift " << shift);
    round_trip<TestType>(raw.data() + shift, v.size(), opt, shift);
  }
  // a large tensor with the default chunk size
  const auto big = testing::make_tensor<E>(3 * 65536 + 1000, 3.0, testing::distribution::laplace, 9);
  round_trip<TestType>(big.data(), big.size());
}

TEMPLATE_LIST_TEST_CASE("incompressible data stays within max_compressed_size", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  for (std::uint64_t n : {1ull, 100ull, 65536ull, 100000ull}) {
    const auto v = testing::random_bits<E>(n, n);
    const std::uint64_t bytes = round_trip<TestType>(v.data(), v.size());
    CHECK(bytes <= host::max_compressed_size<TestType>(n));
  }
}

TEMPLATE_LIST_TEST_CASE("threads and checksums give identical, valid streams", "[host][roundtrip]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  auto v = testing::make_tensor<E>(10 * 4096 + 5, 0.5, testing::distribution::gaussian, 77);
  if (GENERATE(false, true))  // zero groups: masked chunks, and all-zero chunks at the end
    for (std::uint64_t i = 0; i < v.size(); ++i)
      if ((i / 64) % 3 == 1 || i >= 8 * 4096) v[i] = 0;
  const auto policy = testing::policy_for<TestType>(v.data(), v.size());
  for (bool checksum : {false, true}) {
    std::vector<std::vector<std::uint8_t>> streams;
    for (unsigned threads : {1u, 2u, 3u, 16u}) {
      host::compress_options opt;
      opt.chunk_elems = 4096;
      opt.checksum = checksum;
      opt.threads = threads;
      streams.push_back(host::compress<TestType>(v.data(), v.size(), opt, policy));
      host::decompress_options dopt;
      dopt.threads = threads;
      const auto back = host::decompress(streams.back().data(), streams.back().size(), dopt);
      REQUIRE(std::memcmp(back.data(), v.data(), back.size()) == 0);
    }
    for (const auto& s : streams) CHECK(s == streams.front());
    host::stream_info info;
    REQUIRE(host::read_header(streams.front().data(), streams.front().size(), &info) == status::success);
    CHECK(info.checksum == checksum);
  }
}

TEMPLATE_LIST_TEST_CASE("bad arguments give clear errors", "[host][errors]", testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  const auto v = testing::make_tensor<E>(5000, 1.0);
  const auto policy = testing::policy_for<TestType>(v.data(), v.size());
  std::vector<std::uint8_t> out(host::max_compressed_size<TestType>(v.size()));
  std::uint64_t bytes = 0;
  CHECK(host::compress<TestType>(nullptr, 10, out.data(), out.size(), &bytes, {}, policy) == status::invalid_argument);
  CHECK(host::compress<TestType>(v.data(), 10, nullptr, out.size(), &bytes, {}, policy) == status::invalid_argument);
  CHECK(host::compress<TestType>(v.data(), 10, out.data(), out.size(), nullptr, {}, policy) == status::invalid_argument);
  host::compress_options bad;
  bad.chunk_elems = 1000;
  CHECK(host::compress<TestType>(v.data(), v.size(), out.data(), out.size(), &bytes, bad, policy) ==
        status::invalid_argument);
  CHECK(host::compress<TestType>(v.data(), v.size(), out.data(), 40, &bytes, {}, policy) == status::buffer_too_small);
  CHECK(host::compress<TestType>(v.data(), v.size(), out.data(), 200, &bytes, {}, policy) == status::buffer_too_small);

  REQUIRE(host::compress<TestType>(v.data(), v.size(), out.data(), out.size(), &bytes, {}, policy) == status::success);
  std::vector<T> back(v.size());
  CHECK(host::decompress(out.data(), bytes, back.data(), back.size() * sizeof(T) - 1) == status::buffer_too_small);
  CHECK(host::decompress(out.data(), bytes, nullptr, back.size() * sizeof(T)) == status::invalid_argument);
  CHECK(host::decompress(nullptr, bytes, back.data(), back.size() * sizeof(T)) == status::invalid_argument);
  if constexpr (std::is_same_v<E, fp32>)
    CHECK(host::decompress_as<bf16>(out.data(), bytes, back.data(), back.size() * sizeof(T)) == status::type_mismatch);
  else
    CHECK(host::decompress_as<fp32>(out.data(), bytes, back.data(), back.size() * sizeof(T)) == status::type_mismatch);
  CHECK(host::decompress_as<E>(out.data(), bytes, back.data(), back.size() * sizeof(T)) == status::success);
  CHECK_THROWS_AS(host::decompress(out.data(), bytes - 1), zipccl::error);
  if constexpr (std::is_same_v<typename TestType::codebook_type, codebook::fixed>) {
    codebook::table dup{};
    CHECK(host::compress<TestType>(v.data(), v.size(), out.data(), out.size(), &bytes, {}, codebook::fixed(dup)) ==
          status::invalid_argument);
  }
}

TEST_CASE("Gaussian ratios meet the format's design figures", "[host][ratio]") {
  const auto b = testing::make_tensor<bf16>(1 << 20, 1.0);
  const auto h = host::compress<codec<bf16, codebook::histogram>>(b.data(), b.size());
  const auto a = host::compress<codec<bf16, codebook::analytic_gaussian>>(b.data(), b.size());
  CHECK(2.0 * b.size() / h.size() >= 1.42);
  CHECK(2.0 * b.size() / a.size() >= 1.41);
  const auto f16 = testing::make_tensor<fp16>(1 << 20, 1.0);
  CHECK(2.0 * f16.size() / host::compress<codec<fp16, codebook::histogram>>(f16.data(), f16.size()).size() >= 1.12);
  const auto f32 = testing::make_tensor<fp32>(1 << 20, 1.0);
  CHECK(4.0 * f32.size() / host::compress<codec<fp32, codebook::histogram>>(f32.data(), f32.size()).size() >= 1.17);
}
