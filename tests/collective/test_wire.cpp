// The collectives' wire framing (collective/detail/wire.hpp and the segment plan of
// detail/pipeline.hpp): the fixed section's size depends on the count alone, the tail's size is
// read back from the fixed section, the two sections decode to the input bit for bit, and a
// damaged or mismatched segment is an error.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include <zipccl/collective.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;
using collective::detail::segment_plan;
using collective::detail::wire;
using collective::detail::wire_place;

TEMPLATE_LIST_TEST_CASE("wire sections round-trip and announce their own tail", "[collective][wire][host]",
                        testing::host_codecs) {
  using T = typename TestType::bits_type;
  using W = wire<TestType>;
  std::mt19937_64 rng(42);
  for (std::uint64_t chunk : {256u, 1024u}) {
    for (std::uint64_t count : {0ull, 1ull, 31ull, 255ull, 256ull, 257ull, 1023ull, 4097ull, 20000ull}) {
      INFO("chunk " << chunk << ", count " << count);
      for (bool noise : {false, true}) {  // near-Gaussian data, or random bits (stored chunks)
        auto in = testing::make_tensor<typename TestType::element_type>(count, 0.02, testing::distribution::gaussian, rng());
        if (noise)
          for (auto& v : in) v = static_cast<T>(rng());
        const auto policy = testing::policy_for<TestType>(in.data(), in.size());
        std::vector<std::uint8_t> fixed(W::fixed_bytes(count, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(count, chunk) + 1);
        std::vector<std::uint8_t> scratch(W::scratch_bytes(chunk));
        const std::uint64_t tb = W::encode(policy, in.data(), count, chunk, true, wire_place{}, fixed.data(), tail.data());
        REQUIRE(W::fixed_bytes(count, chunk) + tb <= W::max_bytes(count, chunk));
        std::uint64_t announced = ~0ull;
        REQUIRE(W::tail_bytes(fixed.data(), count, chunk, &announced) == status::success);
        REQUIRE(announced == tb);
        std::vector<T> out(count, T(0));
        REQUIRE(W::decode_into(fixed.data(), tail.data(), tb, count, chunk, true, wire_place{}, out.data(), scratch.data()) ==
                status::success);
        REQUIRE(out == in);
        if (count >= 256 && !noise) {
          // a damaged chunk header in the fixed section: caught before any tail is read
          auto bad = fixed;
          bad[0] = 0x7E;
          CHECK(W::tail_bytes(bad.data(), count, chunk, &announced) == status::corrupt);
          // a damaged body, with checksums on: caught by decode
          bad = fixed;
          bad[W::fixed_bytes(count, chunk) / 2] ^= 0x01;
          const status s = W::decode_into(bad.data(), tail.data(), tb, count, chunk, true, wire_place{}, out.data(), scratch.data());
          CHECK(s != status::success);
          // a tail of the wrong length
          if (tb)
            CHECK(W::decode_into(fixed.data(), tail.data(), tb - 1, count, chunk, true, wire_place{}, out.data(), scratch.data()) ==
                  status::corrupt);
        }
      }
    }
  }
}

TEST_CASE("the entropy wire: zero masks travel in the fixed section, a damaged mask is caught there",
          "[collective][wire][host]") {
  using C = codec<fp32, codebook::entropy>;
  using W = wire<C>;
  const std::uint64_t chunk = 4096, count = 3 * chunk + 700;
  // every other row of 256 elements all zero: every chunk takes a mask
  auto in = testing::make_tensor<fp32>(count, 0.02, testing::distribution::gaussian, 77);
  for (std::uint64_t i = 0; i < count; ++i)
    if ((i / 256) % 2 == 1) in[i] = 0;
  CHECK(W::chunk_fixed(chunk) == format::body_offset(chunk, true));
  CHECK(W::fixed_bytes(count, chunk) == 3 * W::chunk_fixed(chunk) + W::chunk_fixed(700));
  for (bool checksum : {false, true}) {
    std::vector<std::uint8_t> fixed(W::fixed_bytes(count, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(count, chunk));
    std::vector<std::uint8_t> scratch(W::scratch_bytes(chunk));
    const std::uint64_t tb = W::encode({}, in.data(), count, chunk, checksum, wire_place{}, fixed.data(), tail.data());
    CHECK(fixed[0] == static_cast<std::uint8_t>(format::chunk_mode::zero_rans));
    // about half the raw size: the zero rows cost their mask bits only
    CHECK(W::fixed_bytes(count, chunk) + tb < count * 4 * 6 / 10);
    std::uint64_t announced = 0;
    REQUIRE(W::tail_bytes(fixed.data(), count, chunk, &announced) == status::success);
    REQUIRE(announced == tb);
    std::vector<float> out(count, -1.0f);
    REQUIRE(W::decode_into(fixed.data(), tail.data(), tb, count, chunk, checksum, wire_place{}, out.data(), scratch.data()) ==
            status::success);
    REQUIRE(std::memcmp(out.data(), in.data(), count * 4) == 0);
    // a mask bit flipped: the chunk's span no longer matches (or its mask breaks the rules)
    auto bad = fixed;
    bad[format::chunk_header_bytes] ^= 0x01;
    std::uint64_t t2 = 0;
    const status s1 = W::tail_bytes(bad.data(), count, chunk, &t2);
    const status s2 = s1 == status::success
                          ? W::decode_into(bad.data(), tail.data(), tb, count, chunk, checksum, wire_place{}, out.data(), scratch.data())
                          : s1;
    CHECK(s2 != status::success);
  }
}

TEST_CASE("the entropy wire: chunks with zero symbols, and large chunks of zeros of either sign",
          "[collective][wire][host][zero]") {
  using C = codec<bf16, codebook::entropy>;
  using W = wire<C>;
  const std::uint16_t neg0 = codec_detail::rans::split<bf16>::negative_zero;
  // element-sparse data (zero symbols) at the default chunk size, and 2^17-element chunks of
  // -0.0 (no mask) and of -0.0 with a few values: no chunk may be smaller than its fixed part
  for (std::uint64_t chunk : {std::uint64_t{65536}, std::uint64_t{1} << 17})
    for (int variant = 0; variant < 3; ++variant) {
      const std::uint64_t count = 2 * chunk + 300;
      std::vector<std::uint16_t> in = testing::make_element_sparse<bf16>(count, 0.6, 0.5, 1e-3, 78);
      if (variant > 0) std::fill(in.begin(), in.end(), neg0);
      if (variant == 2)
        for (std::uint64_t i = 0; i < count; i += 997) in[i] = 0x3F80;
      INFO("chunk " << chunk << " variant " << variant);
      std::vector<std::uint8_t> fixed(W::fixed_bytes(count, chunk) + W::spill_bytes(chunk));
      std::vector<std::uint8_t> tail(W::max_bytes(count, chunk)), scratch(W::scratch_bytes(chunk));
      const std::uint64_t tb = W::encode({}, in.data(), count, chunk, true, wire_place{}, fixed.data(), tail.data());
      REQUIRE(tb <= W::max_bytes(count, chunk) - W::fixed_bytes(count, chunk));
      if (variant == 0) CHECK((fixed[0] & 8u) != 0);  // zero symbols
      std::uint64_t announced = 0;
      REQUIRE(W::tail_bytes(fixed.data(), count, chunk, &announced) == status::success);
      REQUIRE(announced == tb);
      std::vector<std::uint16_t> out(count, 1);
      REQUIRE(W::decode_into(fixed.data(), tail.data(), tb, count, chunk, true, wire_place{}, out.data(), scratch.data()) ==
              status::success);
      REQUIRE(out == in);
    }
}

TEST_CASE("the fixed section's size depends on the count only", "[collective][wire][host]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using W = wire<C>;
  // 3-bit codes and a raw byte per element: 11/16 of the raw size plus the chunk headers
  CHECK(W::fixed_bytes(8192, 8192) == 16 + 256 * 12 + 8192);
  CHECK(W::fixed_bytes(8193, 8192) == W::fixed_bytes(8192, 8192) + W::chunk_fixed(1));
  // a chunk too small to code: the fixed part is the whole stored chunk
  using H = wire<codec<fp16, codebook::histogram>>;
  CHECK(H::chunk_fixed(1) == 32);
}

TEST_CASE("a segment's preamble names the count and element type", "[collective][wire][host]") {
  using C = codec<bf16, codebook::histogram>;
  const auto in = testing::make_tensor<bf16>(5000, 0.01, testing::distribution::gaussian, 3);
  const segment_plan<C> plan(5000, 1024, 2048);
  REQUIRE(plan.segments == 3);
  CHECK(plan.elems(2) == 5000 - 4096);
  std::vector<std::uint8_t> slot(plan.slot);
  const auto sec = plan.encode({}, in.data(), 1, false, slot.data());
  std::uint64_t tb = 0;
  std::uint8_t* tail = nullptr;
  CHECK(plan.arrived(slot.data(), 1, &tb, &tail) == status::success);
  CHECK(tb == sec.tail_bytes);
  CHECK(plan.arrived(slot.data(), 2, &tb, &tail) == status::size_mismatch);  // another segment's index
  const segment_plan<C> other(5001, 1024, 2048);
  CHECK(other.arrived(slot.data(), 1, &tb, &tail) == status::size_mismatch);  // another count
  const segment_plan<codec<fp16, codebook::histogram>> fp16_plan(5000, 1024, 2048);
  CHECK(fp16_plan.arrived(slot.data(), 1, &tb, &tail) == status::size_mismatch);  // another type
}

namespace {

// Where chunk j of a segment lies on the wire: its fixed part, and its tail inside the tail
// section (or the fixed wire's spill area).
struct wire_chunk {
  std::uint64_t fixed, tail, tail_bytes;
};
template <class Codec>
std::vector<wire_chunk> wire_chunks(const std::uint8_t* fixed, std::uint64_t count, std::uint64_t chunk) {
  using W = wire<Codec>;
  std::vector<wire_chunk> r;
  std::uint64_t at = 0, tail = 0;
  for (std::uint64_t first = 0; first < count; first += chunk) {
    const std::uint64_t m = count - first < chunk ? count - first : chunk, f = W::chunk_fixed(m);
    const std::uint64_t span = codec_detail::chunk_span_from_head<typename Codec::element_type>(fixed + at, f, m);
    REQUIRE(span >= f);
    r.push_back({at, tail, span - f});
    at += f;
    tail += span - f;
  }
  return r;
}

// Chunks a and b (of one size) of a segment swapped: fixed parts and tails.
template <class Codec>
void swap_wire_chunks(std::uint8_t* fixed, std::uint8_t* tail, std::uint64_t count, std::uint64_t chunk,
                      std::uint64_t a, std::uint64_t b) {
  const auto w = wire_chunks<Codec>(fixed, count, chunk);
  REQUIRE(w[a].tail_bytes == w[b].tail_bytes);
  const std::uint64_t f = wire<Codec>::chunk_fixed(chunk);
  std::swap_ranges(fixed + w[a].fixed, fixed + w[a].fixed + f, fixed + w[b].fixed);
  std::swap_ranges(tail + w[a].tail, tail + w[a].tail + w[a].tail_bytes, tail + w[b].tail);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("wire chunks swapped or taken from another segment are reported",
                        "[collective][wire][host][binding]", testing::host_codecs) {
  using E = typename TestType::element_type;
  using W = wire<TestType>;
  const std::uint64_t chunk = codebook::is_entropy_v<typename TestType::codebook_type> ? 2048 : 512;
  const bool sparse = GENERATE(false, true), checksum = GENERATE(false, true);
  INFO("sparse " << sparse << " checksum " << checksum);
  const auto v = testing::paired_chunks<E>(chunk, sparse, 31);
  const std::uint64_t count = v.size(), message = 5 * count;
  const auto policy = testing::policy_for<TestType>(v.data(), count);
  const std::uint64_t tag = std::uint64_t(TestType::type) << 56;
  const wire_place here{message, tag | 2}, there{message, tag | 3};
  const auto encode = [&](const std::vector<typename TestType::bits_type>& in, const wire_place& p,
                          std::vector<std::uint8_t>* fixed, std::vector<std::uint8_t>* tail) {
    fixed->assign(W::fixed_bytes(count, chunk) + W::spill_bytes(chunk), 0);
    tail->assign(W::max_bytes(count, chunk), 0);
    return W::encode(policy, in.data(), count, chunk, checksum, p, fixed->data(), tail->data());
  };
  std::vector<std::uint8_t> fixed, tail, scratch(W::scratch_bytes(chunk));
  const std::uint64_t tb = encode(v, here, &fixed, &tail);
  std::vector<typename TestType::bits_type> out(count);
  const auto decode = [&](const std::vector<std::uint8_t>& f, const std::vector<std::uint8_t>& t, const wire_place& p) {
    return W::decode_into(f.data(), t.data(), tb, count, chunk, checksum, p, out.data(), scratch.data());
  };
  REQUIRE(decode(fixed, tail, here) == status::success);
  REQUIRE(out == v);
  // decoded as another segment's, or as a message of another count: every check names its place
  CHECK(decode(fixed, tail, there) == status::checksum_mismatch);
  CHECK(decode(fixed, tail, wire_place{message + 1, tag | 2}) == status::checksum_mismatch);
  // two chunks of one size swapped: coded ones (3-bit or rANS) and stored ones
  const auto w = wire_chunks<TestType>(fixed.data(), count, chunk);
  REQUIRE(w.size() == 5);
  for (std::uint64_t pair : {0u, 2u}) {
    INFO("chunks " << pair << " and " << pair + 1);
    REQUIRE(fixed[w[pair].fixed] == fixed[w[pair + 1].fixed]);  // one mode
    auto f2 = fixed, t2 = tail;
    swap_wire_chunks<TestType>(f2.data(), t2.data(), count, chunk, pair, pair + 1);
    CHECK(decode(f2, t2, here) == status::checksum_mismatch);
  }
  CHECK(format::mode_is_stored(format::chunk_mode(fixed[w[2].fixed])));
  // (the 3-bit policies' wire takes no zero mask, so the sparse chunk 0 may fall back to stored)
  if (!sparse || W::rans) CHECK(!format::mode_is_stored(format::chunk_mode(fixed[w[0].fixed])));
  // chunk 0 of the same data sent as segment 3, moved into segment 2
  std::vector<std::uint8_t> f3, t3;
  REQUIRE(encode(v, there, &f3, &t3) == tb);
  auto f2 = fixed, t2 = tail;
  std::copy(f3.begin(), f3.begin() + W::chunk_fixed(chunk), f2.begin());
  std::copy(t3.begin(), t3.begin() + w[0].tail_bytes, t2.begin());
  CHECK(decode(f2, t2, here) == status::checksum_mismatch);
}
