// Host executor on untrusted input: truncation, random corruption, forged hashes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/stream_tools.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

namespace {

constexpr std::uint64_t rans_bitmap() { return codec_detail::rans::bitmap_bytes; }

// A stream with coded and stored chunks and a short tail chunk; with `sparse`, chunks 0 and 1 have
// zero groups (zero_coded and zero_stored) and the tail chunk is all zero (a mask, no body).
// The sample streams' chunk size: rANS needs larger chunks to pay for its table and states.
template <class Codec>
constexpr std::uint32_t sample_chunk = codebook::is_entropy_v<typename Codec::codebook_type> ? 2048 : 512;

// The mode a coded chunk of Codec takes, with or without a zero mask.
template <class Codec>
constexpr format::chunk_mode coded_mode(bool masked) {
  if constexpr (codebook::is_entropy_v<typename Codec::codebook_type>)
    return masked ? format::chunk_mode::zero_rans : format::chunk_mode::rans;
  else
    return masked ? format::chunk_mode::zero_coded : format::chunk_mode::coded;
}

template <class Codec>
std::vector<std::uint8_t> sample_stream(bool checksum, std::vector<typename Codec::bits_type>* data = nullptr,
                                        bool sparse = false) {
  using E = typename Codec::element_type;
  constexpr std::uint64_t chunk = sample_chunk<Codec>;
  auto v = testing::make_tensor<E>(3 * chunk + 100, 0.1, testing::distribution::gaussian, 3);
  const auto noise = testing::random_bits<E>(chunk, 4);
  std::copy(noise.begin(), noise.end(), v.begin() + chunk);  // chunk 1 is stored
  if (sparse) {
    for (std::uint64_t g : {std::uint64_t{1}, std::uint64_t{3}, chunk / 64 + 2, chunk / 64 + 7})
      std::fill(v.begin() + 64 * g, v.begin() + 64 * (g + 1), typename Codec::bits_type(0));
    std::fill(v.begin() + 3 * chunk, v.end(), typename Codec::bits_type(0));
    // chunk 2: every eleventh element +0.0 or -0.0 (rANS: zero symbols; the 3-bit code escapes
    // them, within fp16's escape budget)
    for (std::uint64_t i = 2 * chunk; i < 3 * chunk; i += 11)
      v[i] = (i / 11) % 2 ? typename Codec::bits_type(0) : codec_detail::rans::split<E>::negative_zero;
  }
  host::compress_options opt;
  opt.chunk_elems = chunk;
  opt.checksum = checksum;
  auto s = host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), 512));
  if (data) *data = v;
  return s;
}

template <class Codec>
status decode(const std::vector<std::uint8_t>& s, std::size_t len, std::vector<std::uint8_t>& out) {
  // a canary past the output catches any write beyond the caller's buffer
  const std::size_t capacity = out.size() - 64;
  std::fill(out.begin(), out.end(), 0xA5);
  const status st = host::decompress(s.data(), len, out.data(), capacity);
  for (std::size_t i = capacity; i < out.size(); ++i) REQUIRE(out[i] == 0xA5);
  return st;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every truncation of a valid stream is an error", "[host][corruption]",
                        testing::host_codecs) {
  for (bool sparse : {false, true})
  for (bool checksum : {false, true}) {
    const auto s = sample_stream<TestType>(checksum, nullptr, sparse);
    std::vector<std::uint8_t> out(4 * sample_chunk<TestType> * 4 + 64);
    for (std::size_t len = 0; len < s.size(); ++len) {
      INFO("length " << len << " of " << s.size());
      REQUIRE(decode<TestType>(s, len, out) != status::success);
    }
    REQUIRE(decode<TestType>(s, s.size(), out) == status::success);
  }
}

TEMPLATE_LIST_TEST_CASE("random corruptions: an error, or a well-formed result from payload bytes",
                        "[host][corruption]", testing::host_codecs) {
  using E = typename TestType::element_type;
  std::vector<typename TestType::bits_type> data;
  for (bool sparse : {false, true})
  for (bool checksum : {false, true}) {
    const auto s = sample_stream<TestType>(checksum, &data, sparse);
    const auto modes = testing::chunk_modes(s);
    // coded: chunks 0 and 2, and the 100-element tail where coding pays for so few elements (not
    // for fp16's 3-bit code nor for rANS, whose table and states outweigh it); sparse: chunk 0 with
    // its zero mask, chunk 2 without
    REQUIRE(modes[static_cast<unsigned>(coded_mode<TestType>(false))] >= (sparse ? 1u : 2u));
    if (sparse) REQUIRE(modes[static_cast<unsigned>(coded_mode<TestType>(true))] == 1u);
    if (sparse) REQUIRE(modes[2] == 2);  // chunk 1 (noise with zero groups) and the all-zero tail
    const auto payload = testing::payload_map<E>(s);
    std::vector<std::uint8_t> out(data.size() * sizeof(data[0]) + 64);
    std::mt19937_64 rng(checksum ? 11 : 12);
    int errors = 0, wrong = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      auto bad = s;
      const int hits = 1 + static_cast<int>(rng() % 3);
      bool all_payload = true;
      for (int k = 0; k < hits; ++k) {
        const std::size_t pos = rng() % bad.size();
        const auto flip = static_cast<std::uint8_t>(1 + rng() % 255);
        bad[pos] ^= flip;
        all_payload = all_payload && payload[pos];
      }
      const status st = decode<TestType>(bad, bad.size(), out);
      if (st != status::success) {
        ++errors;
        continue;
      }
      ++wrong;
      INFO("trial " << trial << " checksum " << checksum);
      // success on corrupted input is allowed only without checksums, only from payload bytes
      REQUIRE_FALSE(checksum);
      REQUIRE(all_payload);
    }
    CHECK(errors + wrong == 3000);
    if (checksum) CHECK(wrong == 0);
  }
}

// host::decompress takes chunks two at a time (dense rANS pairs in one loop of groups on
// AVX-512): on a stream of dense rANS chunks with one or two chunks hit (a body byte flipped, or
// a mode byte the stream's version does not allow), at any threads, its status is that of the
// first bad chunk as the reference decodes them one by one, and a stream whose hits all decode
// gives the reference's values.
TEMPLATE_TEST_CASE("decompress reports the first bad chunk, chunks decoded in pairs", "[host][corruption]", bf16, fp16,
                   fp32) {
  using E = TestType;
  using Codec = codec<E, codebook::entropy>;
  using L = format::chunk_layout<E>;
  constexpr std::uint32_t chunk = 2048;
  constexpr unsigned chunks = 7;  // six full chunks and a tail of 100 elements
  const auto v = testing::make_tensor<E>((chunks - 1) * chunk + 100, 0.05, testing::distribution::gaussian, 21);
  for (bool checksum : {false, true}) {
    host::compress_options opt;
    opt.chunk_elems = chunk;
    opt.checksum = checksum;
    const auto s = host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), v.size()));
    format::stream_header h;
    REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
    REQUIRE(h.chunks == chunks);
    for (unsigned c = 0; c + 1 < chunks; ++c)
      REQUIRE(s[format::directory_entry(s.data(), c)] == static_cast<std::uint8_t>(format::chunk_mode::rans));
    // the reference, chunk by chunk in order: the first bad chunk's status, or the values
    const auto reference = [&](const std::vector<std::uint8_t>& b, std::vector<std::uint8_t>* values) {
      values->assign(v.size() * L::elem_size, 0);
      for (unsigned c = 0; c < chunks; ++c) {
        const std::uint64_t off = format::directory_entry(b.data(), c), end = format::chunk_end(b.data(), h, c);
        const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
        const status st = !format::chunk_mode_allowed(h, b[off])
                              ? status::corrupt
                              : codec_detail::decode_chunk<E>(b.data() + off, end - off, m, format::reader_seal(h, c),
                                                              values->data() + std::uint64_t{c} * chunk * L::elem_size);
        if (st != status::success) return st;
      }
      return status::success;
    };
    std::mt19937_64 rng(checksum ? 31 : 32);
    std::vector<std::uint8_t> want, got(v.size() * L::elem_size);
    int failures = 0, first_of_pair = 0;
    for (int trial = 0; trial < 240; ++trial) {
      auto bad = s;
      const unsigned hits = 1 + static_cast<unsigned>(rng() % 2);
      unsigned first = chunks;
      for (unsigned k = 0; k < hits; ++k) {
        const unsigned c = static_cast<unsigned>(rng() % chunks);
        first = std::min(first, c);
        const std::uint64_t off = format::directory_entry(bad.data(), c), end = format::chunk_end(bad.data(), h, c);
        if (rng() % 4 == 0) {
          bad[off] = 9;  // a mode no version allows
        } else {
          const std::uint64_t at = off + format::chunk_header_bytes + rng() % (end - off - format::chunk_header_bytes);
          bad[at] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        }
      }
      const status expect = reference(bad, &want);
      failures += expect != status::success;
      first_of_pair += expect != status::success && first % 2 == 0 && first + 1 < chunks;
      for (unsigned threads : {1u, 2u, 3u}) {
        INFO("trial " << trial << " checksum " << checksum << " threads " << threads << " first hit chunk " << first);
        host::decompress_options dopt;
        dopt.threads = threads;
        std::fill(got.begin(), got.end(), std::uint8_t{0xA5});
        REQUIRE(host::decompress(bad.data(), bad.size(), got.data(), got.size(), nullptr, dopt) == expect);
        if (expect == status::success) REQUIRE(got == want);
      }
    }
    INFO("checksum " << checksum);
    CHECK(failures > (checksum ? 200 : 50));  // (without check values a flipped rest byte decodes)
    CHECK(first_of_pair > 50);  // the first bad chunk is often the first of a pair (threads 1)
  }
}

TEMPLATE_TEST_CASE("zero-symbol header rules, checked on the header alone", "[host][corruption][zero]", bf16, fp16,
                   fp32) {
  using E = TestType;
  // a header whose span is computed from its own fields (chunk_span_of): only the rules can reject it
  auto header = [](std::uint32_t count, std::uint8_t zp, std::uint8_t zn) {
    format::chunk_header h;
    h.mode = format::chunk_mode::rans_zeros;
    h.table[0] = 0;  // one symbol
    h.table[1] = zp;
    h.table[2] = zn;
    for (unsigned i = 0; i < 4; ++i) h.table[3 + i] = static_cast<std::uint8_t>(count >> (8 * i));
    return h;
  };
  const std::uint64_t m = 4096;
  CHECK(codec_detail::chunk_span_of<E>(header(m, 0, 1), m) != 0);  // all zeros: 192 bytes
  CHECK(codec_detail::chunk_span_of<E>(header(m, 0, 1), m) == 192);
  CHECK(codec_detail::chunk_span_of<E>(header(m - 5, 0, 1), m) != 0);
  for (std::uint32_t d = 1; d < 80; ++d) {
    INFO("count m + " << d);
    CHECK(codec_detail::chunk_span_of<E>(header(static_cast<std::uint32_t>(m) + d, 0, 1), m) == 0);
  }
  CHECK(codec_detail::chunk_span_of<E>(header(0, 0, 1), m) == 0);
  CHECK(codec_detail::chunk_span_of<E>(header(100, 3, 3), m) == 0);
  CHECK(codec_detail::chunk_span_of<E>(header(100, 1, 0), m) == 0);  // zp above zn: never chosen so
  // the encoders' rule (rans::zeros_pay): at least 64 zeros, and at least 1/64 of the body
  CHECK(codec_detail::chunk_span_of<E>(header(63, 0, 1), m) == 0);
  CHECK(codec_detail::chunk_span_of<E>(header(64, 0, 1), m) != 0);
  CHECK(codec_detail::chunk_span_of<E>(header(1, 0, 1), m) == 0);
  const std::uint64_t wide = 65536;
  CHECK(codec_detail::chunk_span_of<E>(header(1023, 0, 1), wide) == 0);
  CHECK(codec_detail::chunk_span_of<E>(header(1024, 0, 1), wide) != 0);
  // mode 4 with any zero-symbol byte set
  auto plain = header(0, 0, 0);
  plain.mode = format::chunk_mode::rans;
  CHECK(codec_detail::chunk_span_of<E>(plain, m) != 0);
  for (unsigned i = 1; i < format::table_size; ++i) {
    auto b = plain;
    b.table[i] = 1;
    CHECK(codec_detail::chunk_span_of<E>(b, m) == 0);
  }
  // in a chunk of 2^17 elements a chunk with zero symbols must keep min_zero_rests rests, so that
  // it is never smaller than its header and a mask's room
  const std::uint64_t big = 1u << 17;
  const std::uint64_t keep = codec_detail::rans::min_zero_rests<E>(big, format::chunk_header_bytes);
  REQUIRE(keep > 0);
  CHECK(codec_detail::chunk_span_of<E>(header(static_cast<std::uint32_t>(big), 0, 1), big) == 0);
  CHECK(codec_detail::chunk_span_of<E>(header(static_cast<std::uint32_t>(big - keep + 1), 0, 1), big) == 0);
  const std::uint64_t span = codec_detail::chunk_span_of<E>(header(static_cast<std::uint32_t>(big - keep), 0, 1), big);
  CHECK(span >= format::body_offset(big, true));
}

// The table's rule for zero symbols: they are the two smallest values the other elements leave
// free (rans::choose_zero_symbols), so every value below zn but zp is a symbol of the table.
TEST_CASE("zero symbols are the two smallest free values", "[host][corruption][zero]") {
  namespace rans = codec_detail::rans;
  // a table of the symbols in `present`, frequencies summing to 4096, states at 2^16
  auto table = [](std::initializer_list<unsigned> present) {
    std::vector<std::uint8_t> t(rans::table_bytes(present.size()) + 4 * rans::lanes, 0);
    std::uint32_t left = rans::prob_total;
    std::size_t k = 0;
    for (unsigned s : present) {
      t[s / 8] = static_cast<std::uint8_t>(t[s / 8] | (1u << (s % 8)));
      const std::uint32_t f = ++k == present.size() ? left : 16u;
      format::store_le<std::uint16_t>(t.data() + rans::bitmap_bytes + 2 * (k - 1), static_cast<std::uint16_t>(f));
      left -= f;
    }
    for (unsigned l = 0; l < rans::lanes; ++l)
      format::store_le<std::uint32_t>(t.data() + rans::table_bytes(present.size()) + 4 * l, rans::state_low);
    return t;
  };
  auto zeros = [](unsigned pos, unsigned neg) {
    rans::zero_symbols z;
    z.on = true;
    z.pos = pos;
    z.neg = neg;
    z.count = 100;
    return z;
  };
  const auto a = table({0, 1, 2, 120, 121});  // +0.0, -0.0 on 0 and 1: 2 and up used by the others
  CHECK(rans::table_ok(a.data(), 5, zeros(0, 1)));
  CHECK(rans::table_ok(a.data(), 5, rans::zero_symbols{}));
  const auto b = table({0, 3, 120, 121});  // only +0.0 (no -0.0 in the body): zn = 1 has no entry
  CHECK(rans::table_ok(b.data(), 4, zeros(0, 1)));
  CHECK(rans::table_ok(b.data(), 4, zeros(0, 2)) == false);  // 1 is free and below zn
  CHECK(rans::table_ok(b.data(), 4, zeros(1, 2)));  // 0 used by another element: 1 and 2 are the free ones
  const auto c = table({0, 1, 5, 120});
  CHECK(rans::table_ok(c.data(), 4, zeros(0, 1)));
  CHECK(rans::table_ok(c.data(), 4, zeros(0, 5)) == false);  // 2, 3, 4 are free and below zn
  CHECK(rans::table_ok(c.data(), 4, zeros(1, 120)) == false);
}

// The device decoders check a rANS table with one warp, each lane its share
// (rans::table_lane_share): the 32 shares combined must give table_ok's verdict on every table,
// valid or damaged (frequencies, bitmap bits, padding, states, zero symbols, a wrong nsym).
TEST_CASE("a rANS table checked by 32 lanes gives table_ok's verdict", "[host][corruption][rans]") {
  namespace rans = codec_detail::rans;
  std::mt19937_64 rng(2026);
  int passed = 0, failed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // nsym distinct symbols, frequencies of at least 1 summing to 4096, states from 2^16 up
    unsigned nsym = 1 + static_cast<unsigned>(rng() % (trial % 3 == 0 ? 256 : 40));
    std::vector<unsigned> values(rans::symbols);
    for (unsigned v = 0; v < rans::symbols; ++v) values[v] = v;
    std::shuffle(values.begin(), values.end(), rng);
    values.resize(nsym);
    // every fourth table with zero symbols zp < zn: every value below zn but zp present, but for
    // none, the value zn - 1, or another one
    const unsigned zn = 2 + static_cast<unsigned>(rng() % 60), zp = static_cast<unsigned>(rng() % (zn - 1));
    if (trial % 4 == 3) {
      const unsigned kind = static_cast<unsigned>(rng() % 3);
      const unsigned gap = kind == 0 ? rans::symbols : kind == 1 ? zn - 1 : static_cast<unsigned>(rng() % zn);
      values.clear();
      for (unsigned v = 0; v < zn; ++v)
        if (v != zp && v != gap) values.push_back(v);
      for (unsigned v = zn + 1 + static_cast<unsigned>(rng() % 8); v < rans::symbols; v += 1 + static_cast<unsigned>(rng() % 40))
        values.push_back(v);
      nsym = static_cast<unsigned>(values.size());
    }
    std::sort(values.begin(), values.end());
    std::vector<std::uint8_t> t(rans::table_bytes(nsym) + rans::states_bytes, 0);
    std::uint32_t left = rans::prob_total - nsym;
    for (unsigned k = 0; k < nsym; ++k) {
      t[values[k] / 8] = static_cast<std::uint8_t>(t[values[k] / 8] | (1u << (values[k] % 8)));
      const std::uint32_t extra = k + 1 == nsym ? left : static_cast<std::uint32_t>(rng() % (left + 1));
      left -= extra;
      format::store_le<std::uint16_t>(t.data() + rans::bitmap_bytes + 2 * k, static_cast<std::uint16_t>(1 + extra));
    }
    for (unsigned l = 0; l < rans::lanes; ++l)
      format::store_le<std::uint32_t>(t.data() + rans::table_bytes(nsym) + 4 * l,
                                      rans::state_low + static_cast<std::uint32_t>(rng() % 100000));
    // zero symbols: none, the two smallest unused values, or any two
    rans::zero_symbols z;
    if (trial % 4 != 0) {
      z.on = true;
      z.count = 100;
      if (trial % 4 == 1) {
        unsigned found = 0;
        for (unsigned v = 0; v < rans::symbols && found < 2; ++v)
          if (!std::binary_search(values.begin(), values.end(), v)) (found++ == 0 ? z.pos : z.neg) = v;
        z.on = found == 2;
      } else if (trial % 4 == 2) {
        z.pos = static_cast<std::uint32_t>(rng() % 255);
        z.neg = z.pos + 1 + static_cast<std::uint32_t>(rng() % (255 - z.pos));
      } else {
        z.pos = zp;
        z.neg = zn;
      }
    }
    // damage: up to three bytes anywhere in the table and states, or a wrong symbol count
    const unsigned damage = static_cast<unsigned>(rng() % 4) * (trial % 4 == 3 ? (trial / 4) % 2 : 1);  // (half of the zero-rule tables undamaged)
    for (unsigned d = 0; d < damage; ++d) t[rng() % t.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    std::uint64_t claimed = nsym;
    if (trial % 17 == 0 && nsym > 1) claimed = nsym - 1;  // (nsym + 1 would read past the table)
    const bool want = rans::table_ok(t.data(), claimed, z);
    rans::table_share all;
    for (unsigned l = 0; l < rans::lanes; ++l) {
      const rans::table_share r = rans::table_lane_share(t.data(), claimed, z, l);
      all.ok = all.ok && r.ok;
      all.bits += r.bits;
      all.sum += r.sum;
    }
    const bool got = all.ok && all.bits == claimed && all.sum == rans::prob_total;
    INFO("trial " << trial << " nsym " << nsym << " claimed " << claimed << " damage " << damage);
    REQUIRE(got == want);
    (want ? passed : failed) += 1;
  }
  CHECK(passed > 2000);
  CHECK(failed > 2000);
}

// The table's rule on whole streams: a chunk whose zeros are all +0.0 has no -0.0 symbol in its
// table, so moving zn to another free value changes no decoded element; only the rule (every value
// below zn but zp in the table) turns it away. Every decoder path of this build.
TEMPLATE_TEST_CASE("a zero symbol moved to a larger free value is corrupt", "[host][corruption][zero]", bf16, fp16,
                   fp32) {
  using E = TestType;
  using Codec = codec<E, codebook::entropy>;
  const std::uint64_t n = 2 * 4096;
  const auto v = testing::make_element_sparse<E>(n, 0.5, 0.0, 0.03, 17);  // zeros: +0.0 only
  host::compress_options opt;
  opt.chunk_elems = 4096;
  for (bool checksum : {false, true}) {
    opt.checksum = checksum;
    const auto s = host::compress<Codec>(v.data(), v.size(), opt);
    std::vector<std::uint8_t> out(n * sizeof(typename E::bits_type) + 64);
    REQUIRE(decode<Codec>(s, s.size(), out) == status::success);
    const std::uint64_t off = format::directory_entry(s.data(), 0);
    REQUIRE(s[off] == static_cast<std::uint8_t>(format::chunk_mode::rans_zeros));
    const std::uint8_t* table = s.data() + off + codec_detail::rans::layout<E>::table_offset(format::chunk_header_bytes);
    const unsigned zn = s[off + 3];
    REQUIRE(((table[zn / 8] >> (zn % 8)) & 1u) == 0u);  // no -0.0 in the chunk
    REQUIRE(((table[255 / 8] >> 7) & 1u) == 0u);        // 255 is free too
    REQUIRE(zn < 255);
    auto bad = s;
    bad[off + 3] = 255;
    testing::repair_hashes(bad);
    INFO("checksum " << checksum);
    CHECK(decode<Codec>(bad, bad.size(), out) == status::corrupt);
  }
}

TEMPLATE_LIST_TEST_CASE("forged hashes still meet structural validation", "[host][corruption]",
                        testing::host_codecs) {
  const bool sparse = GENERATE(false, true);
  const auto s = sample_stream<TestType>(false, nullptr, sparse);
  std::vector<std::uint8_t> out(4 * sample_chunk<TestType> * 4 + 64);
  std::mt19937_64 rng(5);
  const std::size_t data = format::data_offset(format::load_le<std::uint32_t>(s.data() + 32));
  // corrupt structure only (header, directory, chunk headers), then repair every hash
  for (int trial = 0; trial < 3000; ++trial) {
    auto bad = s;
    std::size_t pos;
    if (trial % 2 == 0) {
      pos = rng() % data;
    } else {
      const std::uint64_t c = rng() % format::load_le<std::uint32_t>(s.data() + 32);
      pos = format::directory_entry(s.data(), c) + rng() % (sparse ? 32 : 12);  // header, and mask
    }
    bad[pos] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    testing::repair_hashes(bad);
    (void)decode<TestType>(bad, bad.size(), out);  // any status; the canary check is the test
  }
  // (each section's body is a lambda: an early return leaves the section, not the test case, so
  // that Catch still finds the sections after it)
  SECTION("an escape count that does not match the planes") [&] {
    if constexpr (codebook::is_entropy_v<typename TestType::codebook_type>) return;
    auto bad = s;
    const std::uint64_t off = format::directory_entry(bad.data(), 0);
    REQUIRE(bad[off] == static_cast<std::uint8_t>(coded_mode<TestType>(sparse)));
    // turn one escaped lane into a coded one: the planes then hold one escape fewer than the count
    using G = codec_detail::group_coder<typename TestType::element_type>;
    const std::uint64_t base = format::body_offset(512, sparse);
    for (std::uint64_t g = 0; g < 12; ++g) {
      const std::size_t planes = off + base + g * G::P * 4;
      const std::uint32_t em = G::escape_mask(bad.data() + planes, 32);
      if (em == 0) continue;
      unsigned lane = 0;
      while (((em >> lane) & 1u) == 0) ++lane;
      bad[planes + lane / 8] ^= static_cast<std::uint8_t>(1u << (lane % 8));
      break;
    }
    testing::repair_hashes(bad);
    CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
  }();
  SECTION("rANS tables, states and streams that break their rules") [&] {
    if constexpr (!codebook::is_entropy_v<typename TestType::codebook_type>) return;
    using E = typename TestType::element_type;
    using RL = codec_detail::rans::layout<E>;
    constexpr std::uint64_t chunk = sample_chunk<TestType>;
    const std::uint64_t off = format::directory_entry(s.data(), 0);
    REQUIRE(s[off] == static_cast<std::uint8_t>(coded_mode<TestType>(sparse)));
    const auto h = format::read_chunk_header(s.data() + off);
    const std::uint64_t b = sparse ? chunk - 128 : chunk, base = format::body_offset(chunk, sparse);
    const std::uint64_t nsym = h.table[0] + 1u, table = off + RL::table_offset(base);
    const std::uint64_t states = off + RL::states_offset(base, nsym), stream = off + RL::stream_offset(b, base, nsym);
    REQUIRE(h.escapes >= 2);
    auto expect = [&](std::vector<std::uint8_t> bad, const char* what) {
      testing::repair_hashes(bad);
      INFO(what);
      CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
    };
    auto bad = s;
    bad[off + 1] = static_cast<std::uint8_t>(nsym);  // one symbol more than the table holds
    expect(bad, "symbol count");
    bad = s;
    format::store_le<std::uint32_t>(bad.data() + off + 8, h.escapes - 1);  // one stream word fewer
    expect(bad, "word count");
    bad = s;
    format::store_le<std::uint16_t>(bad.data() + table + rans_bitmap(), 0);  // a zero frequency
    expect(bad, "zero frequency");
    bad = s;
    format::store_le<std::uint16_t>(bad.data() + table + rans_bitmap(),
                                    format::load_le<std::uint16_t>(bad.data() + table + rans_bitmap()) + 1);
    expect(bad, "frequencies that do not sum to 4096");
    bad = s;
    format::store_le<std::uint32_t>(bad.data() + states + 4 * 5, 0xFFFFu);  // a state below 2^16
    expect(bad, "state below the range");
    bad = s;
    bad[states + 4 * 7] ^= 1;  // a state that does not end at 2^16
    expect(bad, "state off by one");
    // a symbol relabelled in the bitmap (one present bit moved to an absent neighbour): the
    // frequencies read the same, so only the chunk check, which covers the table, can see it
    bad = s;
    for (unsigned sym = 0; sym + 1 < 256; ++sym) {
      const bool here = (bad[table + sym / 8] >> (sym % 8)) & 1u, next = (bad[table + (sym + 1) / 8] >> ((sym + 1) % 8)) & 1u;
      if (here && !next) {
        bad[table + sym / 8] ^= static_cast<std::uint8_t>(1u << (sym % 8));
        bad[table + (sym + 1) / 8] ^= static_cast<std::uint8_t>(1u << ((sym + 1) % 8));
        break;
      }
    }
    REQUIRE(bad != s);
    CHECK(decode<TestType>(bad, bad.size(), out) == status::checksum_mismatch);  // hashes not repaired
    bad = s;
    bad[table + rans_bitmap() + 2 * nsym] = 1;  // a padding byte after the frequencies, if there is one
    if ((rans_bitmap() + 2 * nsym) % 16 != 0) expect(bad, "table padding");
    bad = s;
    std::swap(bad[stream], bad[stream + 2]);
    std::swap(bad[stream + 1], bad[stream + 3]);
    if (bad != s) expect(bad, "two stream words swapped");
    CHECK(decode<TestType>(s, s.size(), out) == status::success);  // and the untouched stream decodes
  }();
  SECTION("zero symbols that break their rules") [&] {
    if constexpr (!codebook::is_entropy_v<typename TestType::codebook_type>) return;
    if (!sparse) return;
    constexpr std::uint64_t chunk = sample_chunk<TestType>;
    const std::uint64_t off = format::directory_entry(s.data(), 2);
    REQUIRE(s[off] == static_cast<std::uint8_t>(format::chunk_mode::rans_zeros));
    const auto h = format::read_chunk_header(s.data() + off);
    const auto zeros = static_cast<std::uint32_t>((chunk + 10) / 11);
    REQUIRE(format::load_le<std::uint32_t>(h.table + 3) == zeros);
    auto expect = [&](std::vector<std::uint8_t> bad, const char* what, status want = status::corrupt) {
      testing::repair_hashes(bad);
      INFO(what);
      CHECK(decode<TestType>(bad, bad.size(), out) == want);
    };
    auto bad = s;
    bad[off + 3] = bad[off + 2];  // the two zero symbols the same
    expect(bad, "zp == zn");
    for (std::uint32_t count : {0u, 1u, zeros - 1, zeros + 1, static_cast<std::uint32_t>(chunk),
                                static_cast<std::uint32_t>(chunk + 1), 0xFFFFFFFFu}) {
      bad = s;
      format::store_le<std::uint32_t>(bad.data() + off + 4, count);  // the span no longer matches
      expect(bad, "zero count");
    }
    bad = s;
    bad[off] = static_cast<std::uint8_t>(format::chunk_mode::rans);  // the zero bit cleared
    expect(bad, "mode 4 with zero symbols");
    for (std::uint8_t mode : {8, 9, 10, 11, 13, 15, 16, 28}) {
      bad = s;
      bad[off] = mode;
      expect(bad, "modes that do not exist");
    }
    // the zero symbols swapped: zp above zn, which no encoder writes
    bad = s;
    std::swap(bad[off + 2], bad[off + 3]);
    expect(bad, "zp and zn swapped");
    // zn moved to a value that is free but not the second smallest free one (the span is the same;
    // here the -0.0 elements then also mis-decode: the test case above isolates the table's rule)
    bad = s;
    REQUIRE(bad[off + 3] < 255);
    bad[off + 3] = 255;
    expect(bad, "zn not the second smallest free value");
    // a version 2 stream cannot hold mode 12
    bad = s;
    REQUIRE(format::load_le<std::uint16_t>(bad.data() + 4) == 3);
    testing::set_version(bad, 2);
    CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
    testing::set_version(bad, 3);
    CHECK(decode<TestType>(bad, bad.size(), out) == status::success);
  }();
  SECTION("zero masks that break their rules") [&] {
    if (!sparse) return;
    const std::uint64_t c0 = format::directory_entry(s.data(), 0);  // zero_coded, groups 1 and 3 zero
    const std::uint64_t tail = format::directory_entry(s.data(), 3);  // 100 elements, two groups, all zero
    auto check = [&](std::uint64_t at, std::uint8_t value) {
      auto bad = s;
      bad[at] = value;
      testing::repair_hashes(bad);
      INFO("byte " << at << " = " << int(value));
      CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
    };
    REQUIRE(s[c0 + 16] == 0x0A);
    check(c0 + 16, 0x0A | 0x01);  // one more zero group: the span no longer matches the body
    check(c0 + 16, 0x02);         // one fewer
    check(tail + 16, 0x07);       // a bit for a group past the chunk's end
    check(tail + 17, 0x00 + 1);   // a padding byte of the mask
    check(tail + 31, 0x80);
    // a mask that marks nothing does not pay: the chunk should not have been written with one
    auto none = s;
    none[tail + 16] = 0;
    testing::repair_hashes(none);
    CHECK(decode<TestType>(none, none.size(), out) == status::corrupt);
  }();
  SECTION("a directory entry past the end") {
    auto bad = s;
    format::store_le<std::uint64_t>(bad.data() + 48 + 8, bad.size() + 4096);
    testing::repair_hashes(bad);
    CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
  }
  SECTION("non-zero padding") {
    auto bad = s;
    bad[bad.size() - 1] ^= 1;  // the last chunk's padding or its last payload byte
    testing::repair_hashes(bad);
    const status st = decode<TestType>(bad, bad.size(), out);
    const auto payload = testing::payload_map<typename TestType::element_type>(s);
    if (!payload[s.size() - 1]) CHECK(st == status::corrupt);
  }
}

namespace {

// The helpers of stream_tools.hpp, each result checked.
testing::chunk_place locate_chunk(const std::vector<std::uint8_t>& s, std::uint64_t c) {
  const testing::chunk_place p = testing::chunk_at(s, c);
  REQUIRE(p.span != 0);
  return p;
}
std::vector<std::uint8_t> swap_chunks(const std::vector<std::uint8_t>& s, std::uint64_t a, std::uint64_t b) {
  auto r = testing::swap_chunks(s, a, b);
  REQUIRE(!r.empty());
  return r;
}
std::vector<std::uint8_t> transplant(const std::vector<std::uint8_t>& s, const std::vector<std::uint8_t>& donor,
                                     std::uint64_t c) {
  auto r = testing::transplant(s, donor, c);
  REQUIRE(!r.empty());
  return r;
}

template <class Codec>
std::vector<std::uint8_t> paired_stream(const std::vector<typename Codec::bits_type>& v, bool checksum) {
  host::compress_options opt;
  opt.chunk_elems = sample_chunk<Codec>;
  opt.checksum = checksum;
  return host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), v.size()));
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("with the checksum, chunks swapped or taken from another stream are reported",
                        "[host][corruption][binding]", testing::host_codecs) {
  using E = typename TestType::element_type;
  constexpr std::uint64_t chunk = sample_chunk<TestType>;
  const bool sparse = GENERATE(false, true);
  INFO("sparse " << sparse);
  const auto v = testing::paired_chunks<E>(chunk, sparse, 21);
  const auto s = paired_stream<TestType>(v, true);
  format::stream_header h;
  REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
  REQUIRE(h.version == 4);
  // the pairs: chunks 0 and 1 coded (3-bit code or rANS, with a mask and rANS zero symbols when
  // sparse), chunks 2 and 3 stored (with a mask when sparse), each pair of one mode and size
  const auto mode = [&](std::uint64_t c) { return s[locate_chunk(s, c).off]; };
  REQUIRE(mode(0) == mode(1));
  REQUIRE(mode(2) == mode(3));
  CHECK(format::mode_is_stored(format::chunk_mode(mode(2))));
  CHECK(!format::mode_is_stored(format::chunk_mode(mode(0))));
  CHECK(format::mode_has_zero_mask(format::chunk_mode(mode(0))) == sparse);
  CHECK(format::mode_has_zero_mask(format::chunk_mode(mode(2))) == sparse);
  if (codebook::is_entropy_v<typename TestType::codebook_type>)
    CHECK(format::mode_has_zero_symbols(format::chunk_mode(mode(0))) == sparse);
  std::vector<std::uint8_t> out(v.size() * sizeof(v[0]) + 64);
  REQUIRE(decode<TestType>(s, s.size(), out) == status::success);
  REQUIRE(std::memcmp(out.data(), v.data(), v.size() * sizeof(v[0])) == 0);
  const unsigned threads = GENERATE(1u, 3u);
  INFO("threads " << threads);
  const auto verdict = [&](const std::vector<std::uint8_t>& bad) {
    host::decompress_options o;
    o.threads = threads;
    return host::decompress(bad.data(), bad.size(), out.data(), out.size() - 64, nullptr, o);
  };
  // a swap: each chunk's check binds it to its place (and the digest's terms are positional too)
  CHECK(verdict(swap_chunks(s, 0, 1)) == status::checksum_mismatch);
  CHECK(verdict(swap_chunks(s, 2, 3)) == status::checksum_mismatch);
  for (std::uint64_t c : {0u, 1u, 2u, 3u}) {
    const std::uint64_t twin = c ^ 1u;
    const auto at = locate_chunk(s, c);
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    std::vector<std::uint8_t> x(m * sizeof(v[0]));
    INFO("chunk " << c << " checked in its own place and in its twin's");
    CHECK(codec_detail::decode_chunk<E>(s.data() + at.off, at.span, m, format::reader_seal(h, c), x.data()) ==
          status::success);
    CHECK(codec_detail::decode_chunk<E>(s.data() + at.off, at.span, m, format::reader_seal(h, twin), x.data()) ==
          status::checksum_mismatch);
  }
  CHECK(verdict(transplant(s, s, 1)) == status::success);  // (the helper itself changes nothing)
  // a chunk in the place of its twin: 1 over 0 (chunk 1's check names place 1)
  auto twice = s;
  const auto c0 = locate_chunk(s, 0), c1 = locate_chunk(s, 1);
  std::copy(s.begin() + c1.off, s.begin() + c1.off + c1.span, twice.begin() + c0.off);
  CHECK(verdict(twice) == status::checksum_mismatch);
  // another stream of the same shape whose chunks 0 and 2 are the twins of this one's (same
  // places, same sizes, own valid checks): its chunks pass their own checks here, and the
  // header's digest of the chunks' checks catches them
  auto w = v;
  std::swap_ranges(w.begin(), w.begin() + chunk, w.begin() + chunk);
  std::swap_ranges(w.begin() + 2 * chunk, w.begin() + 3 * chunk, w.begin() + 3 * chunk);
  const auto donor = paired_stream<TestType>(w, true);
  REQUIRE(donor.size() == s.size());
  for (std::uint64_t c : {0u, 1u, 2u, 3u}) {
    INFO("chunk " << c << " from the other stream");
    const auto bad = transplant(s, donor, c);
    const auto at = locate_chunk(s, c);
    REQUIRE(format::load_le<std::uint32_t>(bad.data() + at.off + 12) != format::load_le<std::uint32_t>(s.data() + at.off + 12));
    CHECK(verdict(bad) == status::checksum_mismatch);
  }
  // the donor's whole chunk set under this stream's header: the same
  auto all = s;
  std::copy(donor.begin() + format::data_offset(h.chunks), donor.end(), all.begin() + format::data_offset(h.chunks));
  CHECK(verdict(all) == status::checksum_mismatch);
}

TEMPLATE_LIST_TEST_CASE("streams without the checksum and checksum streams of versions 1 to 3 keep their meaning",
                        "[host][corruption][binding]", testing::host_codecs) {
  using E = typename TestType::element_type;
  const bool sparse = GENERATE(false, true);
  INFO("sparse " << sparse);
  const auto v = testing::paired_chunks<E>(sample_chunk<TestType>, sparse, 22);
  std::vector<std::uint8_t> out(v.size() * sizeof(v[0]) + 64);
  // without the flag: the version the modes need, no digest, checks of the prefix with no place
  const auto plain = paired_stream<TestType>(v, false);
  format::stream_header h;
  REQUIRE(format::read_header(plain.data(), plain.size(), &h) == status::success);
  CHECK(h.version <= 3);
  CHECK(h.digest == 0);
  for (std::uint64_t c = 0; c < h.chunks; ++c) {
    const auto at = locate_chunk(plain, c);
    const auto ch = format::read_chunk_header(plain.data() + at.off);
    const auto z = codec_detail::mask_summary_for(plain.data() + at.off, at.span, format::chunk_elements(h.count, h.chunk_elems, c));
    const auto body = codec_detail::chunk_body<E>(ch, format::chunk_elements(h.count, h.chunk_elems, c), z, plain.data() + at.off);
    CHECK(ch.check == format::chunk_check(plain.data() + at.off, at.span, false, codec_detail::check_prefix<E>(ch, body)));
  }
  // the checksum stream as a version 3 writer made it (checks of the whole chunk, no place, no
  // digest) decodes, with the old meaning
  auto old = paired_stream<TestType>(v, true);
  testing::set_version(old, 3);
  format::store_le<std::uint32_t>(old.data() + 36, 0u);
  testing::repair_hashes(old);
  REQUIRE(decode<TestType>(old, old.size(), out) == status::success);
  CHECK(std::memcmp(out.data(), v.data(), v.size() * sizeof(v[0])) == 0);
  // a version 3 header with a digest, or a version 4 one without the checksum flag, is corrupt
  auto bad = old;
  format::store_le<std::uint32_t>(bad.data() + 36, 1u);
  testing::repair_hashes(bad);
  CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
  bad = paired_stream<TestType>(v, true);
  format::store_le<std::uint32_t>(bad.data() + 8, 0u);
  testing::repair_hashes(bad);
  CHECK(decode<TestType>(bad, bad.size(), out) == status::corrupt);
  // a version 4 stream whose digest alone was changed, with the header hash recomputed
  bad = paired_stream<TestType>(v, true);
  bad[36] ^= 0x40;
  testing::set_version(bad, 4);  // (recomputes the header hash)
  CHECK(decode<TestType>(bad, bad.size(), out) == status::checksum_mismatch);
}

TEST_CASE("repairing the hashes of a stream with directory entries near 2^64 reads nothing outside it",
          "[corruption][binding]") {
  // (the sanitize preset's UBSan and ASan fail this case where the helper's bound check wraps)
  auto s = testing::wrapping_directory_stream();
  const auto before = s;
  testing::repair_hashes(s);
  CHECK(s.size() == before.size());
  // a chunk header outside the bytes: no digest can be computed, so bytes 36..39 stay as they were
  CHECK(std::equal(s.begin() + 36, s.begin() + 40, before.begin() + 36));
  std::vector<std::uint8_t> out(1 << 16);
  CHECK(host::decompress(s.data(), s.size(), out.data(), out.size()) != status::success);
}
