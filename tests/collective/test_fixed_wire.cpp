// The fixed-size wire of the device collectives (collective/detail/fixed_wire.hpp): a segment's
// size follows from its count and the spill budget alone; it decodes bit for bit; a segment that
// does not fit says so on both ends (wire_overflow), never a wrong value; a damaged or mismatched
// segment is an error; and the budget costs at most 1.5% of the variable-size wire's ratio on
// Gaussian bf16 (default budget) and on ../shared/data (the budget spill_permille_for gives, for
// the 3-bit policies and for codebook::entropy, whose spill holds its rANS bodies).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/collective/detail/fixed_wire.hpp>
#include <zipccl/collective/spill_budget.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;
using collective::detail::fixed_wire;
using collective::detail::wire;

TEST_CASE("the fixed-size wire's sizes follow from the count and budget alone", "[collective][fixed_wire][host]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using F = fixed_wire<C>;
  CHECK(F::spill_bytes(0, 40) == 0);
  CHECK(F::spill_bytes(1, 40) == 16);       // ceil(0.04) = 1, rounded up to 16
  CHECK(F::spill_bytes(1000, 40) == 48);    // 40 -> 48
  CHECK(F::spill_bytes(262144, 40) == 10496);  // ceil(10485.76) = 10486 -> 10496
  CHECK(F::spill_bytes(1000, 0) == 0);
  // exact far past any message: m = 10^15 + 1 elements at 4000 per mille is 4 * 10^15 + 4 bytes,
  // rounded up to 16 (hand computed; no intermediate product wraps)
  CHECK(F::spill_bytes(1000000000000001ull, 4000) == 4000000000000016ull);
  CHECK(F::spill_bytes(1000000000000001ull, 1) == 1000000000016ull);  // ceil(10^12 + 0.001), to 16
  CHECK(F::segment_bytes(8192, 8192, 40) == 16 + wire<C>::fixed_bytes(8192, 8192) + F::spill_bytes(8192, 40));
  CHECK(F::segment_bytes(0, 8192, 40) == 16);
  // the tag: type in the top byte, the overflow bit, the index
  CHECK(F::tag(5, false) == ((std::uint64_t{1} << 56) | 5));
  CHECK(F::tag(5, true) == ((std::uint64_t{1} << 56) | (std::uint64_t{1} << 48) | 5));
}

TEMPLATE_LIST_TEST_CASE("fixed-size segments round-trip bit for bit", "[collective][fixed_wire][host]",
                        testing::host_codecs) {
  using T = typename TestType::bits_type;
  using F = fixed_wire<TestType>;
  // codebook::entropy's spill holds its rANS bodies: a tight budget is a little over what they
  // need (fp16 in 1024-element chunks saves little after each chunk's table and states)
  constexpr bool rans = wire<TestType>::rans;
  constexpr bool rans16 = rans && std::is_same_v<typename TestType::element_type, fp16>;
  constexpr std::uint32_t tight = !rans ? 40u : rans16 ? 2030u : 950u * sizeof(T);
  std::mt19937_64 rng(7);
  for (std::uint64_t chunk : {256u, 1024u}) {
    for (std::uint64_t m : {0ull, 1ull, 31ull, 255ull, 256ull, 257ull, 1023ull, 4097ull, 20000ull}) {
      for (std::uint32_t permille : {tight, 4000u}) {
        INFO("chunk " << chunk << ", m " << m << ", permille " << permille);
        auto in = testing::make_tensor<typename TestType::element_type>(m, 0.02, testing::distribution::gaussian, rng());
        const auto policy = testing::policy_for<TestType>(in.data(), in.size());
        std::vector<std::uint8_t> seg(F::segment_bytes(m, chunk, permille), 0xAB), scratch(F::scratch_bytes(chunk));
        const status enc = F::encode(policy, in.data(), m, chunk, true, 3 * m + 1, 2, permille, seg.data(), scratch.data());
        if (permille == 4000) REQUIRE(enc == status::success);  // 4 bytes per element always fit
        if (enc == status::wire_overflow) {
          // only with tiny chunks or segments, where the chunks' padding to 16 bytes (up to 15
          // bytes per chunk: 5.9% of a 256-element chunk) exceeds a 4% budget, or where a rANS
          // chunk's table and states (about 150 bytes) outweigh what its stream saves
          CHECK((chunk == 256 || m < 1024));
          std::vector<T> out(m, T(0));
          CHECK(F::decode_into(seg.data(), m, chunk, true, 3 * m + 1, 2, permille, out.data(), scratch.data()) ==
                status::wire_overflow);
          continue;
        }
        REQUIRE(enc == status::success);
        std::vector<T> out(m, T(0));
        REQUIRE(F::decode_into(seg.data(), m, chunk, true, 3 * m + 1, 2, permille, out.data(), scratch.data()) ==
                status::success);
        REQUIRE(out == in);
        // the same bytes again: the encoding does not depend on what the buffer held
        std::vector<std::uint8_t> again(seg.size(), 0x00);
        REQUIRE(F::encode(policy, in.data(), m, chunk, true, 3 * m + 1, 2, permille, again.data(), scratch.data()) ==
                status::success);
        CHECK(again == seg);
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("a segment that exceeds its budget is an error on both ends", "[collective][fixed_wire][host]",
                        testing::host_codecs) {
  using F = fixed_wire<TestType>;
  using E = typename TestType::element_type;
  const std::uint64_t chunk = 1024, m = 8 * chunk;
  // random bits: every chunk falls back to stored, its rest far beyond a 4% budget
  const auto noise = testing::random_bits<E>(m, 11);
  const auto policy = testing::policy_for<TestType>(noise.data(), m);
  std::vector<std::uint8_t> seg(F::segment_bytes(m, chunk, 40)), scratch(F::scratch_bytes(chunk));
  REQUIRE(F::encode(policy, noise.data(), m, chunk, false, m, 0, 40, seg.data(), scratch.data()) ==
          status::wire_overflow);
  CHECK((format::load_le<std::uint64_t>(seg.data() + 8) & F::overflow_bit) != 0);
  std::vector<typename TestType::bits_type> out(m);
  CHECK(F::decode_into(seg.data(), m, chunk, false, m, 0, 40, out.data(), scratch.data()) == status::wire_overflow);
  // a mismatched segment is size_mismatch first, whatever its overflow bit says
  CHECK(F::decode_into(seg.data(), m, chunk, false, m, 1, 40, out.data(), scratch.data()) == status::size_mismatch);
  // the same data with room for it: one chunk stored whole in the spill area
  const std::uint64_t stored_rest = format::chunk_layout<E>::stored_bytes(chunk) - wire<TestType>::chunk_fixed(chunk);
  const std::uint32_t roomy = static_cast<std::uint32_t>((8 * stored_rest * 1000 + m - 1) / m);
  std::vector<std::uint8_t> big(F::segment_bytes(m, chunk, roomy));
  REQUIRE(F::encode(policy, noise.data(), m, chunk, false, m, 0, roomy, big.data(), scratch.data()) == status::success);
  REQUIRE(F::decode_into(big.data(), m, chunk, false, m, 0, roomy, out.data(), scratch.data()) == status::success);
  CHECK(out == noise);
}

TEST_CASE("a damaged or mismatched fixed-size segment is an error", "[collective][fixed_wire][host]") {
  using C = codec<bf16, codebook::histogram>;
  using F = fixed_wire<C>;
  const std::uint64_t chunk = 1024, m = 5000;
  const auto in = testing::make_tensor<bf16>(m, 0.01, testing::distribution::gaussian, 5);
  std::vector<std::uint8_t> seg(F::segment_bytes(m, chunk, 40)), scratch(F::scratch_bytes(chunk));
  REQUIRE(F::encode({}, in.data(), m, chunk, true, 9000, 1, 40, seg.data(), scratch.data()) == status::success);
  std::vector<std::uint16_t> out(m);
  std::uint64_t used = 0;
  REQUIRE(F::open(seg.data(), m, chunk, 9000, 1, 40, &used) == status::success);
  REQUIRE(used > 0);
  REQUIRE(used < F::spill_bytes(m, 40));
  CHECK(F::open(seg.data(), m, chunk, 9001, 1, 40, &used) == status::size_mismatch);  // another count
  CHECK(F::open(seg.data(), m, chunk, 9000, 2, 40, &used) == status::size_mismatch);  // another index
  CHECK(fixed_wire<codec<fp16, codebook::histogram>>::open(seg.data(), m, chunk, 9000, 1, 40, &used) ==
        status::size_mismatch);  // another element type
  auto bad = seg;
  bad[16] = 0x7E;  // the first chunk's mode
  CHECK(F::decode_into(bad.data(), m, chunk, true, 9000, 1, 40, out.data(), scratch.data()) == status::corrupt);
  bad = seg;
  bad.back() = 1;  // unused spill must be zero
  CHECK(F::decode_into(bad.data(), m, chunk, true, 9000, 1, 40, out.data(), scratch.data()) == status::corrupt);
  bad = seg;
  bad[16 + 16 + 5] ^= 0x10;  // a plane bit of the first chunk, with whole-chunk checks on
  CHECK(F::decode_into(bad.data(), m, chunk, true, 9000, 1, 40, out.data(), scratch.data()) != status::success);
  // escape counts each valid for its chunk, but together more tail than the spill area holds
  // (5000 elements at 40 per mille: 208 bytes; chunks of 1024 allow up to 624 escapes each)
  bad = seg;
  for (std::uint64_t j = 0; j < 4; ++j) {
    std::uint8_t* h = bad.data() + 16 + j * wire<C>::chunk_fixed(chunk);
    REQUIRE(format::read_chunk_header(h).mode == format::chunk_mode::coded);
    format::store_le<std::uint32_t>(h + format::chunk_escapes_field, 100);
  }
  CHECK(F::open(bad.data(), m, chunk, 9000, 1, 40, &used) == status::corrupt);
}

namespace {
// Raw bytes over wire bytes of `data` cut into segments: the variable-size wire (fixed section
// plus the escapes actually there) and the fixed-size one at `permille`; overflowed segments count.
template <class Codec>
struct wire_ratios {
  double variable = 0, fixed = 0;
  int overflows = 0;
};
template <class Codec>
wire_ratios<Codec> measure(const std::vector<typename Codec::bits_type>& data, std::uint32_t permille,
                           const collective_options& opt) {
  using W = wire<Codec>;
  using F = fixed_wire<Codec>;
  const std::uint64_t n = data.size(), chunk = opt.codec.chunk_elems, seg = opt.pipeline.segment_elems;
  std::vector<std::uint8_t> fixed(W::fixed_bytes(seg, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(seg, chunk)),
      whole(F::segment_bytes(seg, chunk, permille)), scratch(F::scratch_bytes(chunk));
  std::uint64_t var = 0, fix = 0;
  wire_ratios<Codec> r;
  for (std::uint64_t first = 0, s = 0; first < n; first += seg, ++s) {
    const std::uint64_t m = n - first < seg ? n - first : seg;
    const auto* p = data.data() + first;
    var += 16 + W::fixed_bytes(m, chunk) + W::encode({}, p, m, chunk, false, collective::detail::wire_place{}, fixed.data(), tail.data());
    fix += F::segment_bytes(m, chunk, permille);
    if (F::encode({}, p, m, chunk, false, n, s, permille, whole.data(), scratch.data()) != status::success) ++r.overflows;
  }
  r.variable = static_cast<double>(n * Codec::element_size) / static_cast<double>(var);
  r.fixed = static_cast<double>(n * Codec::element_size) / static_cast<double>(fix);
  return r;
}
}  // namespace

TEST_CASE("the default budget fits Gaussian bf16 at every scale within 1.5% of the ratio",
          "[collective][fixed_wire][host]") {
  collective_options opt;
  opt.codec.chunk_elems = 8192;  // the device codec's chunk
  for (double scale : {1e-6, 1e-4, 0.02, 1.0, 300.0}) {
    INFO("scale " << scale);
    const auto g = testing::make_tensor<bf16>(1u << 20, scale, testing::distribution::gaussian, 17);
    const auto a = measure<codec<bf16, codebook::analytic_gaussian>>(g, opt.device_wire.spill_permille, opt);
    const auto h = measure<codec<bf16, codebook::histogram>>(g, opt.device_wire.spill_permille, opt);
    CHECK(a.overflows == 0);
    CHECK(h.overflows == 0);
    CHECK(a.fixed >= 0.985 * a.variable);
    CHECK(h.fixed >= 0.985 * h.variable);
  }
}

TEMPLATE_TEST_CASE("the measured budget fits each kind of ../shared/data within 1.5% of the ratio",
                   "[collective][fixed_wire][host][data]", bf16, fp16, fp32) {
  using E = TestType;
  const std::string dt = std::is_same_v<E, bf16> ? "bf16" : std::is_same_v<E, fp16> ? "fp16" : "fp32";
  const auto rows = testing::shared_manifest(dt);
  if (rows.empty()) {
    WARN("../shared/data is not here (set ZIPCCL_DATA_DIR): nothing measured");
    return;
  }
  // one bucket per kind, as a training engine concatenates gradients (or weights) into a bucket
  std::map<std::string, std::vector<typename E::bits_type>> kinds;
  for (const auto& t : rows) {
    const auto v = testing::load_shared<E>(t);
    kinds[t.kind].insert(kinds[t.kind].end(), v.begin(), v.end());
  }
  collective_options opt;
  opt.codec.chunk_elems = 8192;
  for (const auto& [kind, data] : kinds) {
    INFO(dt << " " << kind);
    using A = codec<E, codebook::analytic_gaussian>;
    using H = codec<E, codebook::histogram>;
    const std::uint32_t pa = spill_permille_for<A>(data.data(), data.size(), opt);
    const std::uint32_t ph = spill_permille_for<H>(data.data(), data.size(), opt);
    const auto a = measure<A>(data, pa, opt);
    const auto h = measure<H>(data, ph, opt);
    CHECK(a.overflows == 0);
    CHECK(h.overflows == 0);
    CHECK(a.fixed >= 0.985 * a.variable);
    CHECK(h.fixed >= 0.985 * h.variable);
    // and one permille less than needed (no headroom) would overflow somewhere, or the budget is 0
    if (pa > 5) CHECK(measure<A>(data, pa - 6, opt).overflows > 0);
    // codebook::entropy: the spill holds the rANS bodies; the measured budget fits them as well
    using Y = codec<E, codebook::entropy>;
    const std::uint32_t py = spill_permille_for<Y>(data.data(), data.size(), opt);
    const auto y = measure<Y>(data, py, opt);
    CHECK(y.overflows == 0);
    CHECK(y.fixed >= 0.985 * y.variable);
    CHECK(y.variable > h.variable);  // and it is the smaller wire
    if (py > 5) CHECK(measure<Y>(data, py - 6, opt).overflows > 0);
  }
}

TEMPLATE_LIST_TEST_CASE("fixed-size segment chunks swapped or taken from another segment are reported",
                        "[collective][fixed_wire][host][binding]", testing::host_codecs) {
  using E = typename TestType::element_type;
  using F = fixed_wire<TestType>;
  using W = wire<TestType>;
  const std::uint64_t chunk = codebook::is_entropy_v<typename TestType::codebook_type> ? 2048 : 512;
  const bool sparse = GENERATE(false, true), checksum = GENERATE(false, true);
  INFO("sparse " << sparse << " checksum " << checksum);
  const auto v = testing::paired_chunks<E>(chunk, sparse, 41);
  const std::uint64_t m = v.size(), count = 4 * m;
  const std::uint32_t permille = 4000;  // room for any chunk's tail
  const auto policy = testing::policy_for<TestType>(v.data(), m);
  std::vector<std::uint8_t> seg(F::segment_bytes(m, chunk, permille)), other(seg.size());
  std::vector<std::uint8_t> scratch(F::scratch_bytes(chunk));
  REQUIRE(F::encode(policy, v.data(), m, chunk, checksum, count, 1, permille, seg.data(), scratch.data()) ==
          status::success);
  REQUIRE(F::encode(policy, v.data(), m, chunk, checksum, count, 2, permille, other.data(), scratch.data()) ==
          status::success);
  std::vector<typename TestType::bits_type> out(m);
  const auto decode = [&](const std::vector<std::uint8_t>& s) {
    return F::decode_into(s.data(), m, chunk, checksum, count, 1, permille, out.data(), scratch.data());
  };
  REQUIRE(decode(seg) == status::success);
  REQUIRE(out == v);
  // the chunks' fixed parts and their tails in the spill area
  const std::uint64_t f = W::chunk_fixed(chunk), spill = F::preamble + W::fixed_bytes(m, chunk);
  std::uint64_t tails[5] = {}, at = 0, start[5] = {};
  for (std::uint64_t j = 0; j < 5; ++j) {
    const std::uint64_t k = j < 4 ? chunk : 100;
    const std::uint64_t span = codec_detail::chunk_span_from_head<E>(seg.data() + F::preamble + j * f, W::chunk_fixed(k), k);
    REQUIRE(span >= W::chunk_fixed(k));
    start[j] = at;
    tails[j] = span - W::chunk_fixed(k);
    at += tails[j];
  }
  for (std::uint64_t pair : {0u, 2u}) {
    INFO("chunks " << pair << " and " << pair + 1);
    REQUIRE(tails[pair] == tails[pair + 1]);
    auto bad = seg;
    std::swap_ranges(bad.begin() + F::preamble + pair * f, bad.begin() + F::preamble + (pair + 1) * f,
                     bad.begin() + F::preamble + (pair + 1) * f);
    std::swap_ranges(bad.begin() + spill + start[pair], bad.begin() + spill + start[pair] + tails[pair],
                     bad.begin() + spill + start[pair + 1]);
    CHECK(decode(bad) == status::checksum_mismatch);
  }
  // chunk 0 of segment 2 (the same elements) in segment 1's place
  auto bad = seg;
  std::copy(other.begin() + F::preamble, other.begin() + F::preamble + f, bad.begin() + F::preamble);
  std::copy(other.begin() + spill, other.begin() + spill + tails[0], bad.begin() + spill);
  CHECK(decode(bad) == status::checksum_mismatch);
  // the whole body of segment 2 under segment 1's preamble
  bad = other;
  std::copy(seg.begin(), seg.begin() + F::preamble, bad.begin());
  CHECK(decode(bad) == status::checksum_mismatch);
}
