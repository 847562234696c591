// The host fast paths (built here with -march=native) against the scalar reference: the same
// bytes out of the encoder, the same values out of the decoder, the same errors on bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <cstring>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

namespace {
#if ZIPCCL_HAS_AVX2
// The vector kernels themselves, whichever the dispatcher picks on this CPU (with AVX-512 it takes
// the AVX-512 ones for rANS and for dense 3-bit chunks): the AVX2 ones always, and the AVX-512
// rANS kernels where they are built (so test_host_simd_avx512 and its emulated twin run them by
// name). A chunk's encoder, and its decoder as host::detail::decode_chunk runs it: the reference's
// checks, then the vector body decoder.
template <class Rans>
struct vector_path {
  template <class E, class Policy>
  static std::uint64_t encode(const Policy& policy, const std::uint8_t* in, std::uint64_t m, bool checksum,
                              bool zero_masks, std::uint8_t* out) {
    const codec_detail::body_shape shape = codec_detail::plan_body<E>(in, m, zero_masks, out);
    if constexpr (codebook::is_entropy_v<Policy>) return Rans::template encode<E>(in, m, checksum, out, shape);
    else return host::detail::avx2::encode_chunk<E>(policy, in, m, checksum, out, shape);
  }
  template <class E>
  static status decode(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, bool checksum, std::uint8_t* out) {
    if (span < format::chunk_header_bytes || chunk[0] == 0u || chunk[0] == 2u)
      return codec_detail::decode_chunk<E>(chunk, span, m, checksum, out);
    format::chunk_header h;
    codec_detail::body_shape body;
    const status st = codec_detail::check_chunk<E>(chunk, span, m, checksum, &h, &body);
    if (st != status::success) return st;
    if (format::mode_is_rans(h.mode)) return Rans::template decode<E>(chunk, m, h, body, out);
    return host::detail::avx2::decode_coded_body<E>(chunk, m, h, body, out);
  }
};
#define ZIPCCL_TEST_RANS_KERNELS(ns)                                                                              \
  struct ns##_rans {                                                                                             \
    template <class E>                                                                                           \
    static std::uint64_t encode(const std::uint8_t* in, std::uint64_t m, bool checksum, std::uint8_t* out,       \
                                const codec_detail::body_shape& shape) {                                         \
      return host::detail::ns::rans_simd::encode_rans_chunk<E>(in, m, checksum, out, shape);                     \
    }                                                                                                            \
    template <class E>                                                                                           \
    static status decode(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,              \
                         const codec_detail::body_shape& body, std::uint8_t* out) {                              \
      return host::detail::ns::rans_simd::decode_rans_body<E>(chunk, m, h, body, out);                           \
    }                                                                                                            \
  };
ZIPCCL_TEST_RANS_KERNELS(avx2)
#if ZIPCCL_HAS_AVX512
ZIPCCL_TEST_RANS_KERNELS(avx512)
using vector_paths = std::tuple<vector_path<avx2_rans>, vector_path<avx512_rans>>;
#else
using vector_paths = std::tuple<vector_path<avx2_rans>>;
#endif
#undef ZIPCCL_TEST_RANS_KERNELS
#else
using vector_paths = std::tuple<>;
#endif

// Calls f(path) for each vector path above (none where AVX2 is not built).
template <class F>
void for_each_vector_path(F&& f) {
  std::apply([&](auto... path) { (f(path), ...); }, vector_paths{});
}

// A valid dense rANS chunk (a short last group included) to decode beside the chunks under test
// in host::detail::decode_chunk_pair, with and without a check value.
template <class E>
struct pair_partner {
  using Codec = codec<E, codebook::entropy>;
  std::uint64_t m = 2048 + 40, span = 0;
  std::vector<typename Codec::bits_type> values = testing::make_tensor<E>(m, 0.02, testing::distribution::gaussian, 404);
  std::vector<std::uint8_t> chunk = std::vector<std::uint8_t>(Codec::layout::stored_bytes(m));
  explicit pair_partner(bool checksum) {
    const auto* in = reinterpret_cast<const std::uint8_t*>(values.data());
    span = host::detail::encode_chunk<E>(testing::policy_for<Codec>(values.data(), m), in, m, checksum, true, chunk.data());
  }
  static const pair_partner& get(bool checksum) {
    static const pair_partner with(true), without(false);
    const pair_partner& p = checksum ? with : without;
    REQUIRE(format::read_chunk_header(p.chunk.data()).mode == format::chunk_mode::rans);
    return p;
  }
};

// The pair decoder's half of compare_decoders, for every chunk (dense rANS pairs take the pair
// loop, anything else decode_chunk): `chunk` beside pair_partner's, first or second in
// host::detail::decode_chunk_pair (by turns), gets the reference's status s2 and values y, and the partner its
// own values.
template <class E>
void compare_pair_decoder(const std::vector<std::uint8_t>& chunk, std::uint64_t span, std::uint64_t m, bool checksum,
                          status s2, const std::vector<std::uint8_t>& y) {
  using L = format::chunk_layout<E>;
  std::vector<std::uint8_t> x(m * L::elem_size + 8);
  const pair_partner<E>& q = pair_partner<E>::get(checksum);
  // (to keep the time down, the chunk goes first and second in turn, call after call, and the
  // pair loop's own check below runs on every other call)
  static unsigned calls = 0;
  const unsigned call = calls++;
  const int side = static_cast<int>(call % 2);
  // chunks of other modes go to decode_chunk, compared above: one call in eight checks that
  const bool rans_chunk = span >= format::chunk_header_bytes && chunk[0] < 16u &&
                          format::mode_is_rans(static_cast<format::chunk_mode>(chunk[0]));
  if (!rans_chunk && call % 8 >= 2) return;
#if ZIPCCL_HAS_AVX2
  // the pair loop itself, where the chunk is a dense rANS chunk that passes check_chunk: true
  // exactly when the chunk decodes (so a valid pair never falls back to one by one), with the
  // reference's values
  format::chunk_header hs[2];
  codec_detail::body_shape bs[2];
  if (side == 1 && span >= format::chunk_header_bytes &&
      (chunk[0] == static_cast<std::uint8_t>(format::chunk_mode::rans) ||
       chunk[0] == static_cast<std::uint8_t>(format::chunk_mode::zero_rans)) &&
      codec_detail::check_chunk<E>(chunk.data(), span, m, checksum, &hs[0], &bs[0]) == status::success) {
    REQUIRE(codec_detail::check_chunk<E>(q.chunk.data(), q.span, q.m, checksum, &hs[1], &bs[1]) == status::success);
    const std::uint8_t* pc[2] = {chunk.data(), q.chunk.data()};
    const std::uint64_t pm[2] = {m, q.m};
    std::vector<std::uint8_t> px(q.m * L::elem_size);
    std::uint8_t* po[2] = {x.data(), px.data()};
    REQUIRE(host::detail::rans_vector::decode_rans_pair<E>(pc, pm, hs, bs, po) == (s2 == status::success));
    if (s2 == status::success) {
      REQUIRE(std::memcmp(x.data(), y.data(), m * L::elem_size) == 0);
      REQUIRE(std::memcmp(px.data(), q.values.data(), q.m * L::elem_size) == 0);
    }
  }
#endif
  std::vector<std::uint8_t> qx(q.m * L::elem_size);
  {
    INFO("decoded as chunk " << side << " of a pair");
    const std::uint8_t* chunks[2];
    std::uint64_t spans[2], ms[2];
    std::uint8_t* outs[2];
    chunks[side] = chunk.data(), spans[side] = span, ms[side] = m, outs[side] = x.data();
    chunks[1 - side] = q.chunk.data(), spans[1 - side] = q.span, ms[1 - side] = q.m, outs[1 - side] = qx.data();
    status st[2] = {status::unsupported_mode, status::unsupported_mode};  // (neither is ever a result here)
    const format::chunk_seal seals[2] = {checksum, checksum};
    host::detail::decode_chunk_pair<E>(chunks, spans, ms, seals, outs, st);
    REQUIRE(st[side] == s2);
    if (s2 == status::success) REQUIRE(std::memcmp(x.data(), y.data(), m * L::elem_size) == 0);
    REQUIRE(st[1 - side] == status::success);
    REQUIRE(std::memcmp(qx.data(), q.values.data(), q.m * L::elem_size) == 0);
  }
}

// Decodes `chunk` with the dispatched path, each vector path and, beside a valid dense rANS chunk,
// host::detail::decode_chunk_pair (compare_pair_decoder); all must return the reference's status
// and, on success, its values.
template <class E>
void compare_decoders(const std::vector<std::uint8_t>& chunk, std::uint64_t span, std::uint64_t m, bool checksum) {
  using L = format::chunk_layout<E>;
  std::vector<std::uint8_t> x(m * L::elem_size + 8), y(m * L::elem_size + 8);
  const status s2 = codec_detail::decode_chunk<E>(chunk.data(), span, m, checksum, y.data());
  const status s1 = host::detail::decode_chunk<E>(chunk.data(), span, m, checksum, x.data());
  REQUIRE(s1 == s2);
  if (s1 == status::success) REQUIRE(std::memcmp(x.data(), y.data(), m * L::elem_size) == 0);
  for_each_vector_path([&](auto path) {
    const status s3 = decltype(path)::template decode<E>(chunk.data(), span, m, checksum, x.data());
    REQUIRE(s3 == s2);
    if (s3 == status::success) REQUIRE(std::memcmp(x.data(), y.data(), m * L::elem_size) == 0);
  });
  compare_pair_decoder<E>(chunk, span, m, checksum, s2, y);
}

// Chunks with a zero count moved (compare_paths) that pass the header's rules and so reach the body
// decoders: the test case checks that some do.
std::uint64_t moved_zero_counts_decoded = 0;

template <class Codec>
void compare_paths(const std::vector<typename Codec::bits_type>& v, bool checksum, bool zero_masks = true) {
  using E = typename Codec::element_type;
  using L = typename Codec::layout;
  const auto policy = testing::policy_for<Codec>(v.data(), v.size());
  const auto* in = reinterpret_cast<const std::uint8_t*>(v.data());
  const std::uint64_t m = v.size();
  std::vector<std::uint8_t> fast(L::stored_bytes(m)), ref(L::stored_bytes(m));
  const std::uint64_t a = host::detail::encode_chunk<E>(policy, in, m, checksum, zero_masks, fast.data());
  const std::uint64_t b = codec_detail::code_chunk<E>(policy, in, m, checksum, zero_masks, ref.data());
  REQUIRE(a == b);
  REQUIRE(std::memcmp(fast.data(), ref.data(), a) == 0);
  for_each_vector_path([&](auto path) {
    std::vector<std::uint8_t> v2(L::stored_bytes(m));
    const std::uint64_t c = decltype(path)::template encode<E>(policy, in, m, checksum, zero_masks, v2.data());
    REQUIRE(c == b);
    REQUIRE(std::memcmp(v2.data(), ref.data(), c) == 0);
  });
  std::vector<std::uint8_t> x(m * L::elem_size + 8), y(m * L::elem_size + 8);
  REQUIRE(host::detail::decode_chunk<E>(fast.data(), a, m, checksum, x.data()) == status::success);
  REQUIRE(codec_detail::decode_chunk<E>(ref.data(), b, m, checksum, y.data()) == status::success);
  REQUIRE(std::memcmp(x.data(), in, m * L::elem_size) == 0);
  compare_decoders<E>(fast, a, m, checksum);
  // a rANS chunk whose stream is a few words short or long, in the same span, with its check value
  // repaired: the stream runs out, or words are left over, near the vector decoder's 32-word
  // threshold; both paths agree
  if (a >= format::chunk_header_bytes && format::mode_is_rans(format::read_chunk_header(fast.data()).mode)) {
    const format::chunk_header h = format::read_chunk_header(fast.data());
    const bool masked = format::mode_has_zero_mask(h.mode);
    const std::uint64_t base = format::body_offset(m, masked), nsym = h.table[0] + 1u;
    // the chunk with header g in place of its own, its check value repaired
    const auto with_header = [&](const format::chunk_header& g) {
      auto bad = fast;
      format::write_chunk_header(bad.data(), g);
      format::store_chunk_check(bad.data(), format::chunk_check(bad.data(), a, checksum,
                                                                codec_detail::rans::layout<E>::words_offset(base, nsym)));
      return bad;
    };
    for (int delta : {-33, -32, -31, -3, -2, -1, 1, 2, 3}) {
      if (static_cast<std::int64_t>(h.escapes) + delta < 0) continue;
      format::chunk_header g = h;
      g.escapes = static_cast<std::uint32_t>(static_cast<std::int64_t>(h.escapes) + delta);
      INFO("escapes " << h.escapes << " + " << delta);
      compare_decoders<E>(with_header(g), a, m, checksum);
    }
    // with zero symbols: a zero count a few off, alone (the rest section moves by up to the
    // padding) or with the word count moved by as many bytes (the span still fits), so that the
    // rests run out, or are left over, near the vector decoder's 32-rest threshold (the header's
    // rules turn some of these away first); both paths agree
    if (format::mode_has_zero_symbols(h.mode)) {
      constexpr int rest_bytes = 1 + static_cast<int>(codec_detail::rans::split<E>::word_bytes);
      const codec_detail::rans::zero_symbols z = codec_detail::rans::header_zero_symbols(h.table, true);
      for (int delta : {-64, -34, -33, -32, -31, -30, -3, -2, -1, 1, 2, 3, 30, 31, 32, 33, 34, 64})
        for (bool words_too : {false, true}) {
          const std::int64_t zeros = static_cast<std::int64_t>(z.count) + delta;
          const std::int64_t n_words = static_cast<std::int64_t>(h.escapes) + (words_too ? delta * rest_bytes / 2 : 0);
          if (zeros < 0 || n_words < 0 || (words_too && (delta * rest_bytes) % 2 != 0)) continue;
          format::chunk_header g = h;
          codec_detail::rans::zero_symbols y = z;
          y.count = static_cast<std::uint64_t>(zeros);
          codec_detail::rans::store_header_zero_symbols(y, g.table);
          g.escapes = static_cast<std::uint32_t>(n_words);
          const auto bad = with_header(g);
          INFO("zeros " << z.count << " + " << delta << (words_too ? ", words moved too" : ""));
          format::chunk_header moved;
          codec_detail::body_shape body;
          if (codec_detail::check_chunk<E>(bad.data(), a, m, checksum, &moved, &body) == status::success)
            ++moved_zero_counts_decoded;
          compare_decoders<E>(bad, a, m, checksum);
        }
    }
  }
  // corrupt single bytes: both paths agree on the status, and on the values where it succeeds
  std::mt19937_64 rng(m);
  for (int k = 0; k < (testing::sanitized ? 25 : 200); ++k) {
    auto bad = fast;
    bad[rng() % a] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    compare_decoders<E>(bad, a, m, checksum);
  }
}
}  // namespace

// tests/CMakeLists.txt runs host_codecs' entries 3, 7 and 11 of this case (the slowest) as ctest
// entries of their own, by these names ("... - testing::host_codecs - 3"), labelled entropy bf16,
// fp16 and fp32
static_assert(std::is_same_v<std::tuple_element_t<3, testing::host_codecs>, codec<bf16, codebook::entropy>> &&
                  std::is_same_v<std::tuple_element_t<7, testing::host_codecs>, codec<fp16, codebook::entropy>> &&
                  std::is_same_v<std::tuple_element_t<11, testing::host_codecs>, codec<fp32, codebook::entropy>>,
              "host_codecs changed: update ZIPCCL_SIMD_TEST_PARTS in tests/CMakeLists.txt");
TEMPLATE_LIST_TEST_CASE("fast host path emits the reference bytes", "[host][simd]", testing::host_codecs) {
  using E = typename TestType::element_type;
  INFO("AVX-512 path compiled in: " << ZIPCCL_HAS_AVX512);
  moved_zero_counts_decoded = 0;
  const std::uint64_t sizes[] = {1, 31, 32, 64, 65, 255, 1000, 4096, 65536};
  for (std::size_t at = 0; at < std::size(sizes); ++at)
    for (bool checksum : {false, true}) {
      const std::uint64_t m = sizes[at];
      if (testing::sanitized && checksum != (at % 2 == 0)) continue;  // (one setting per size, alternating)
      INFO("m = " << m << " checksum " << checksum);
      compare_paths<TestType>(testing::make_tensor<E>(m, 0.03, testing::distribution::student_t, m), checksum);
      compare_paths<TestType>(testing::make_tensor<E>(m, 1e-6, testing::distribution::laplace, m + 1), checksum);
      compare_paths<TestType>(testing::random_bits<E>(m, m + 2), checksum);
      // zero groups: every other row of 128 elements (and the tail) all zero, with and without masks
      auto sparse = testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, m + 3);
      for (std::uint64_t i = 0; i < m; ++i)
        if ((i / 128) % 2 == 1 || i + 40 >= m) sparse[i] = 0;
      compare_paths<TestType>(sparse, checksum, true);
      compare_paths<TestType>(sparse, checksum, false);
      // zero rows only (a short last group that is not in a zero group), and a few infinities and
      // NaNs among ordinary values (exponent fields the analytic mean leaves out)
      auto rows = testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, m + 4);
      for (std::uint64_t i = 0; i < m; ++i)
        if ((i / 128) % 2 == 1) rows[i] = 0;
      compare_paths<TestType>(rows, checksum, true);
      // scattered +0.0 and -0.0 (rANS: zero symbols from 32 zeros in a body on)
      compare_paths<TestType>(testing::make_element_sparse<E>(m, 0.5, 0.5, 0.03, m + 6), checksum);
      compare_paths<TestType>(testing::make_element_sparse<E>(m, 0.97, 0.3, 0.03, m + 7), checksum);
      using bits = typename TestType::bits_type;
      // and with subnormals of both signs among them: other elements with the zeros' own symbol
      // (bf16 and fp32: exponent 0), which the AVX2 zeros encoder may then not look up as zeros
      auto sub = testing::make_element_sparse<E>(m, 0.5, 0.5, 0.03, m + 8);
      for (std::uint64_t i = 0; i < m; i += 41)
        sub[i] = static_cast<bits>((i % 2 ? bits(bits{1} << (E::total_bits - 1)) : bits{0}) | (1u + i % 5));
      compare_paths<TestType>(sub, checksum);
      auto odd = testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, m + 5);
      for (std::uint64_t i = 0; i < m; i += 97)
        odd[i] = static_cast<bits>((E::exponent_mask << E::mantissa_bits) | (i % 3 == 0 ? 1u : 0u) | (i % 2 ? 0u : (1u << (E::total_bits - 1))));
      compare_paths<TestType>(odd, checksum);
      // one value (rANS: a single symbol of frequency 4096, never renormalising), and that value
      // with one element of another exponent (frequency 1)
      std::vector<typename TestType::bits_type> flat(m, testing::one_value<E>());
      compare_paths<TestType>(flat, checksum);
      flat[m / 2] = testing::rare_value<E>();
      compare_paths<TestType>(flat, checksum);
    }
  // the rANS encoders' register lookups cover a window of 32 symbols (AVX2) or 64 (AVX-512):
  // symbols on its two edges, and single elements just outside it on either side (those registers
  // take the gathers)
  for (unsigned width : {32u, 64u}) {
    using bits = typename TestType::bits_type;
    constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 8;
    std::mt19937_64 rng(91 + width);
    std::vector<bits> edges(65536);
    for (auto& x : edges)
      x = static_cast<bits>(((100u + static_cast<unsigned>(rng() % width)) << shift) | (rng() & ((1u << shift) - 1u)));
    for (bool checksum : {false, true}) {
      INFO("window " << width << " checksum " << checksum);
      compare_paths<TestType>(edges, checksum);
      auto out = edges;
      out[777] = static_cast<bits>((100u + width) << shift);
      out[40000] = static_cast<bits>(99u << shift);
      compare_paths<TestType>(out, checksum);
    }
  }
  {
    using bits = typename TestType::bits_type;
    constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 8;
    constexpr bits sign = static_cast<bits>(bits{1} << (E::total_bits - 1));
    std::mt19937_64 rng(313);
    // fp16's AVX-512 sign window (behind its window of magnitude << 1 | sign, which 64 magnitudes
    // overflow) is one of 64 magnitudes with a table per sign: both signs on its two edges, and
    // single elements of either sign just outside it; then chunks that the window of magnitude and
    // sign holds (so the held-window kernels code them): 16 magnitudes of both signs (32 values,
    // the narrow window) and 17 to 32 (the wide one), with no +-0, which would give zero symbols
    if constexpr (std::is_same_v<E, fp16>) {
      for (unsigned span : {1u, 8u, 16u, 17u, 25u, 32u}) {
        INFO("held window, " << span << " magnitudes of both signs");
        std::vector<bits> held(65536 + 77);
        for (auto& x : held)
          x = static_cast<bits>(((40u + static_cast<unsigned>(rng() % span)) << shift) | (1u + rng() % 255u) |
                                (rng() % 2 ? sign : 0u));
        compare_paths<TestType>(held, false);
        compare_paths<TestType>(held, true);
      }
      std::vector<bits> mags(65536);
      for (auto& x : mags)
        x = static_cast<bits>(((30u + static_cast<unsigned>(rng() % 64)) << shift) | (rng() & 0xFFu) | (rng() % 2 ? sign : 0u));
      compare_paths<TestType>(mags, false);
      auto out = mags;
      out[1000] = static_cast<bits>(29u << shift);
      out[2000] = static_cast<bits>((94u << shift) | sign);
      compare_paths<TestType>(out, false);
    }
    // zero symbols inside the encoders' window: the values' symbols start at 2, so zp and zn (the
    // smallest free values, 0 and 1) fall in it, with +0.0 and -0.0 among values of both signs
    std::vector<bits> low(65536);
    for (auto& x : low) {
      const unsigned r = static_cast<unsigned>(rng() % 10);
      x = r == 0 ? bits{0} : r == 1 ? sign
                           : static_cast<bits>(((2u + static_cast<unsigned>(rng() % 30)) << shift) | (rng() & ((1u << shift) - 1u)) |
                                               (rng() % 2 ? sign : 0u));
    }
    for (bool checksum : {false, true}) compare_paths<TestType>(low, checksum);
  }
  // every bit pattern, in one chunk
  if constexpr (sizeof(typename TestType::bits_type) == 2) {
    std::vector<typename TestType::bits_type> all(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<typename TestType::bits_type>(i * 40503u);
    compare_paths<TestType>(all, false);
  }
  // fp16's sampled counts (rans::counts_from_sample): symbols 1..25 that only groups outside the
  // sample have (one element each, symbol 25 the chunk's last element: in a full group, and in a
  // short one of 7 elements), among +0.0 and -0.0 there too, so that the zero symbols' free values
  // (the smallest unused) depend on every one of them counting
  if constexpr (std::is_same_v<E, fp16>) {
    using bits = typename TestType::bits_type;
    std::mt19937_64 rng(4242);
    for (std::uint64_t m : {65536ull, 40039ull}) {
      std::vector<bits> v(m);
      unsigned next = 1;
      for (std::uint64_t i = 0; i < m; ++i) {
        const std::uint64_t g = i / format::group_elems;
        const bool outside = !codec_detail::rans::sampled_group(g);
        if (outside && i % 8 == 3) v[i] = rng() % 2 ? bits{0} : bits{0x8000};
        else if (outside && i % 97 == 5 && next <= 24) v[i] = static_cast<bits>((next++ << 8) | 0x11u);
        else v[i] = static_cast<bits>(((50u + static_cast<unsigned>(rng() % 8)) << 8) | (rng() & 0xFFu) | (rng() % 2 ? 0x8000u : 0u));
      }
      REQUIRE(!codec_detail::rans::sampled_group((m - 1) / format::group_elems));
      v[m - 1] = static_cast<bits>((25u << 8) | 0x22u);
      for (bool checksum : {false, true}) compare_paths<TestType>(v, checksum);
    }
  }
  // the element-sparse inputs above give rANS chunks with zero symbols, some of whose moved zero
  // counts pass the header's rules and are decoded (reference and vector paths)
  if constexpr (codebook::is_entropy_v<typename TestType::codebook_type>) CHECK(moved_zero_counts_decoded > 0);
}

// The 3-bit encoders at the escape budget: exactly as many escapes as a coded body may hold, and
// one more (the chunk is stored), with the crossing in a full group or in the short last group; and
// tables that compress() refuses (repeated entries, entries past fp16's 32 fields), which the
// chunk encoders still take alike.
TEMPLATE_TEST_CASE("fast 3-bit encoders agree at the escape budget and on odd tables", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using L = format::chunk_layout<E>;
  using bits = typename E::bits_type;
  const auto value = [](std::uint32_t exponent, std::uint32_t i) {
    return static_cast<bits>((exponent << E::mantissa_bits) | (i & E::mantissa_mask) | ((i & 8u) ? (1u << (E::total_bits - 1)) : 0u));
  };
  codebook::table t;
  for (unsigned k = 0; k < format::table_size; ++k) t.exponent[k] = static_cast<std::uint8_t>(1 + k);
  const std::uint32_t escaped = std::is_same_v<E, fp16> ? 20u : 100u;
  const auto check = [&](const std::vector<bits>& v, const codebook::fixed& policy, bool zero_masks) {
    const auto* in = reinterpret_cast<const std::uint8_t*>(v.data());
    const std::uint64_t m = v.size();
    std::vector<std::uint8_t> fast(L::stored_bytes(m)), ref(L::stored_bytes(m));
    const std::uint64_t b = codec_detail::code_chunk<E>(policy, in, m, false, zero_masks, ref.data());
    const std::uint64_t a = host::detail::encode_chunk<E>(policy, in, m, false, zero_masks, fast.data());
    REQUIRE(a == b);
    REQUIRE(std::memcmp(fast.data(), ref.data(), a) == 0);
    for_each_vector_path([&](auto path) {
      std::vector<std::uint8_t> v2(L::stored_bytes(m));
      const std::uint64_t c = decltype(path)::template encode<E>(policy, in, m, false, zero_masks, v2.data());
      REQUIRE(c == b);
      REQUIRE(std::memcmp(v2.data(), ref.data(), c) == 0);
    });
    return format::read_chunk_header(ref.data()).mode;
  };
  for (std::uint64_t m : {1000ull, 4096ull, 65536ull + 17}) {
    const std::int64_t budget = L::escape_budget(m);
    REQUIRE(budget > 0);
    for (std::int64_t extra : {0, 1})
      for (bool at_end : {true, false}) {
        INFO("m = " << m << " escapes = budget + " << extra << (at_end ? " (last elements)" : " (first elements)"));
        std::vector<bits> v(m);
        const std::uint64_t k = static_cast<std::uint64_t>(budget + extra);
        for (std::uint64_t i = 0; i < m; ++i) {
          const bool esc = at_end ? i >= m - k : i < k;
          v[i] = value(esc ? escaped : 1u + static_cast<std::uint32_t>(i % 7), static_cast<std::uint32_t>(i));
        }
        const auto mode = check(v, codebook::fixed(t), false);
        REQUIRE(mode == (extra == 0 ? format::chunk_mode::coded : format::chunk_mode::stored));
      }
  }
  // repeated and out-of-range entries: the first code of an exponent wins, as in make_code_lut
  codebook::table odd;
  const std::uint8_t entries[format::table_size] = {3, 3, 5, 40, 3, 250, 5};
  for (unsigned k = 0; k < format::table_size; ++k) odd.exponent[k] = entries[k];
  std::mt19937_64 rng(5);
  std::vector<bits> v(5000);
  for (std::uint32_t i = 0; i < v.size(); ++i)
    v[i] = value(static_cast<std::uint32_t>(rng() % 8 == 0 ? rng() % E::exponent_count : (rng() % 2 ? 3 : 5)), i);
  for (bool zero_masks : {false, true}) check(v, codebook::fixed(odd), zero_masks);
}

#if ZIPCCL_HAS_AVX2
// The rANS encoders' symbol counts (the kernels' count, which plan_chunk takes) against a count of
// the body's elements one by one (for an fp16 body of 32768 elements or more, the rule of
// rans::counts_from_sample applied to the sampled groups' and the body's counts one by one):
// exact on every input, whether the symbols fall inside the counters' windows (AVX-512: sixteen;
// AVX2: fourteen, counted in batches of 255 groups), outside them, below 16 or near 255, move in
// the chunk's middle, spread too wide for any window (the AVX2
// counter then hands the rest of the chunk to its tables), or repeat more often than a byte
// counter holds (symbol 0's counter too); with zero groups (among them the first groups, which the
// AVX2 counter counts one by one), an odd number of full groups (a half register, after the
// window has moved too) and a short last one; and the kernels' counts of +0.0 and -0.0 on the
// same chunks and on chunks full of both. (A count off by one can leave the normalised table, and
// so the bytes, unchanged: the byte comparisons above do not see it.)
TEMPLATE_TEST_CASE("rANS symbol counts are the reference's", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using L = format::chunk_layout<E>;
  using S = codec_detail::rans::split<E>;
  using bits = typename E::bits_type;
  constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 8;
  const auto check = [&](const std::vector<bits>& v) {
    const auto* in = reinterpret_cast<const std::uint8_t*>(v.data());
    const std::uint64_t m = v.size();
    std::vector<std::uint8_t> scratch(L::stored_bytes(m));
    const codec_detail::body_shape shape = codec_detail::plan_body<E>(in, m, true, scratch.data());
    std::uint32_t want[codec_detail::rans::symbols] = {}, sampled[codec_detail::rans::symbols] = {};
    for (std::uint64_t i = 0; i < m; ++i) {
      if (codec_detail::in_zero_group(shape, i / format::group_elems)) continue;
      ++want[S::symbol(v[i])];
      if (codec_detail::rans::sampled_group(i / format::group_elems)) ++sampled[S::symbol(v[i])];
    }
    if (codec_detail::rans::samples_counts<E>(shape.elems)) {
      CHECK(std::is_same_v<E, fp16>);
      codec_detail::rans::counts_from_sample(sampled, want, shape.elems);
    }
    const auto compare = [&](auto count) {
      std::uint32_t got[codec_detail::rans::symbols];
      for (auto& c : got) c = 0xDEADu;  // (every entry must be written)
      count(in, m, shape, got);
      for (unsigned s = 0; s < codec_detail::rans::symbols; ++s) {
        INFO("symbol " << s);
        REQUIRE(got[s] == want[s]);
      }
    };
    compare(host::detail::avx2::rans_simd::encode_kernel<E>::count);
#if ZIPCCL_HAS_AVX512
    compare(host::detail::avx512::rans_simd::encode_kernel<E>::count);
#endif
    // and the numbers of +0.0 and -0.0 (the kernels' zeros)
    std::uint64_t want_pos = 0, want_neg = 0;
    for (std::uint64_t i = 0; i < m; ++i)
      if (!codec_detail::in_zero_group(shape, i / format::group_elems)) want_pos += v[i] == 0, want_neg += v[i] == S::negative_zero;
    const auto compare_zeros = [&](auto zeros) {
      std::uint64_t pos = 7, neg = 7;
      zeros(in, m, shape, &pos, &neg);
      REQUIRE(pos == want_pos);
      REQUIRE(neg == want_neg);
    };
    compare_zeros(host::detail::avx2::rans_simd::encode_kernel<E>::zeros);
#if ZIPCCL_HAS_AVX512
    compare_zeros(host::detail::avx512::rans_simd::encode_kernel<E>::zeros);
#endif
  };
  std::mt19937_64 rng(2024);
  const auto with_symbol = [&](unsigned s) { return static_cast<bits>((bits(s) << shift) | (rng() & ((1u << shift) - 1u))); };
  for (std::uint64_t m : {65536ull, 65536ull - 32 * 3 - 5, 32ull * 2045 + 7, 32ull * 7, 100ull}) {
    INFO("m = " << m);
    check(testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, m));
    check(testing::random_bits<E>(m, m + 1));
    // one symbol everywhere (1024 per byte lane of the counters in a full chunk), at either end
    for (unsigned s : {0u, 1u, 120u, 255u}) check(std::vector<bits>(m, with_symbol(s)));
    // low symbols (the AVX-512 window's start held at 1), symbols near 255, and zeros among them
    // (twenty symbols: the AVX2 counter, fourteen wide, hands these to its tables)
    for (unsigned base : {0u, 3u, 236u}) {
      std::vector<bits> v(m);
      for (auto& x : v) x = with_symbol(rng() % 8 == 0 ? 0u : base + static_cast<unsigned>(rng() % 20));
      check(v);
    }
    // the same within fourteen symbols, which the AVX2 window holds at either end (1 and 242:
    // symbol 0 one past its last counter there, symbol 241 a byte of 255 below it)
    for (unsigned base : {1u, 242u}) {
      std::vector<bits> v(m);
      for (auto& x : v) {
        const auto r = rng() % 64;
        x = with_symbol(r < 8 ? 0u : r == 8 && base > 1 ? base - 1 : base + static_cast<unsigned>(rng() % 14));
      }
      check(v);
    }
    // the first quarter's symbols around 60 (the window set from the first group), the rest
    // around 200 (the AVX-512 window moves there; the AVX2 count, whose best window misses a
    // quarter of what it has counted after its third batch, hands the rest to its tables), a few
    // far out; and with every other row of 128 elements zero
    std::vector<bits> v(m);
    for (std::uint64_t i = 0; i < m; ++i)
      v[i] = with_symbol(rng() % 50 == 0 ? static_cast<unsigned>(rng() % 256)
                                         : (i < m / 4 ? 60u : 200u) + static_cast<unsigned>(rng() % 12));
    check(v);
    for (std::uint64_t i = 0; i < m; ++i)
      if ((i / 128) % 2 == 1) v[i] = 0;
    check(v);
    // zero groups first, where the AVX2 counter counts groups one by one to place its window
    for (std::uint64_t i = 0; i < m / 4; ++i) v[i] = 0;
    check(v);
    // the body's first four groups around 60 and the rest around 200: the AVX2 window moves after
    // its first batch, whose symbols miss it all, and keeps its counters; with a zero group among
    // the first four groups too (the first 64 elements, and every other row of 128 after them)
    for (std::uint64_t i = 0; i < m; ++i)
      v[i] = with_symbol((i < 128 ? 60u : 200u) + static_cast<unsigned>(rng() % (i < 128 ? 4 : 12)));
    check(v);
    for (std::uint64_t i = 0; i < m; ++i)
      if (i < 64 || (i >= 256 && (i / 128) % 2 == 1)) v[i] = 0;
    check(v);
    // one symbol outside the window in each group, at lane g % 32 (the AVX2 count finds its
    // element by the lane behind each byte of its packed register)
    for (std::uint64_t i = 0; i < m; ++i)
      v[i] = with_symbol(i % 32 == (i / 32) % 32 ? 30u + static_cast<unsigned>((i / 32) % 50)
                                                 : 120u + static_cast<unsigned>(rng() % 10));
    check(v);
    // a window's symbols in the first half, random bits after (the AVX2 counter hands over to its
    // tables in the middle)
    for (std::uint64_t i = 0; i < m; ++i)
      v[i] = i < m / 2 ? with_symbol(90u + static_cast<unsigned>(rng() % 10)) : static_cast<bits>(rng());
    check(v);
    // +0.0 and -0.0 scattered among values, a few whole groups of them, the last lanes too
    for (std::uint64_t i = 0; i < m; ++i)
      v[i] = rng() % 3 == 0 ? (rng() % 2 ? S::negative_zero : bits(0)) : with_symbol(100u + static_cast<unsigned>(rng() % 9));
    for (std::uint64_t i = m / 2; i < m / 2 + 64 && i < m; ++i) v[i] = (i % 2) ? S::negative_zero : bits(0);
    v[m - 1] = S::negative_zero;
    check(v);
    // fp16's sampled counts: symbols that only the groups outside the sample have (a new one every
    // 37 groups, at lane g % 32, the fast count's bitmap taking each the first time), 0x00 and
    // 0x80 (zeros and subnormals) only there too, and a last group that is short
    if constexpr (std::is_same_v<E, fp16>) {
      for (std::uint64_t i = 0; i < m; ++i) {
        const std::uint64_t g = i / format::group_elems;
        const bool sampled_group = codec_detail::rans::sampled_group(g);
        if (!sampled_group && i % 32 == g % 32 && g % 37 == 1) v[i] = with_symbol(static_cast<unsigned>((g / 37 * 7) % 256));
        else if (!sampled_group && i % 11 == 3) v[i] = static_cast<bits>(rng() % 4 == 0 ? 0x8000u | (rng() % 0x300) : rng() % 0x300);
        else v[i] = with_symbol(60u + static_cast<unsigned>(rng() % 8));
      }
      check(v);
    }
  }
  // a body past 8192 groups, where the AVX2 zero count sums its 16-bit lane counters: all -0.0
  // (each lane's counter at its most, 16384, at the sum); all +0.0 but one element a group (no
  // zero groups; every lane of +0.0's counters but one at 16384); +0.0 and -0.0 scattered
  const std::uint64_t big = 32ull * 8192 * 2 + 77;
  check(std::vector<bits>(big, S::negative_zero));
  std::vector<bits> v(big, bits(0));
  for (std::uint64_t i = 0; i < big; i += format::group_elems) v[i] = with_symbol(100u);
  check(v);
  for (auto& x : v) x = rng() % 3 == 0 ? (rng() % 2 ? S::negative_zero : bits(0)) : with_symbol(100u + static_cast<unsigned>(rng() % 9));
  check(v);
}
#endif

#if ZIPCCL_HAS_AVX2
// The histogram policy's exponent counts on their own: the AVX2 full histogram
// (avx2::byte_histogram, which counts fp16's high bytes and sums them by exponent) and the AVX-512
// bins (avx512::count_bins: byte counters for fp16's 31 values, popcounts for up to sixteen)
// against a plain count, on chunks whose every element has one exponent (1024 a byte counter in a
// full chunk, more than it holds between two flushes), Gaussian values and random bits, with
// short last registers and groups. (As with the symbol counts, a count that is off can leave the
// chosen table, and so the bytes, unchanged.)
TEMPLATE_TEST_CASE("exponent counts are exact", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using bits = typename E::bits_type;
  constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 10;
  const auto check = [&](const std::vector<bits>& v) {
    const auto* in = reinterpret_cast<const std::uint8_t*>(v.data());
    const std::uint64_t m = v.size();
    std::vector<std::uint64_t> want(E::exponent_count, 0);
    for (bits x : v) ++want[E::exponent(x)];
    std::uint32_t got[E::exponent_count];
    for (auto& c : got) c = 0xDEADu;
    host::detail::avx2::byte_histogram<E, true>(in, m, codec_detail::dense_body(m), got, E::exponent_count);
    for (unsigned e = 0; e < E::exponent_count; ++e) {
      INFO("AVX2 histogram, exponent " << e);
      REQUIRE(got[e] == want[e]);
    }
#if ZIPCCL_HAS_AVX512
    constexpr int bins = E::exponent_count <= 32 ? E::exponent_count - 1 : 11;
    for (int base : {1, static_cast<int>(E::exponent_count) - bins - 1, static_cast<int>(E::exponent_count / 2) - 5}) {
      if (base < 1) continue;
      std::uint64_t near[bins] = {}, zero = 0;
      host::detail::avx512::count_bins<E, bins>(in, m, base, near, &zero);
      INFO("AVX-512 bins from " << base);
      REQUIRE(zero == want[0]);
      for (int j = 0; j < bins; ++j) {
        INFO("exponent " << base + j);
        REQUIRE(near[j] == (base + j < static_cast<int>(E::exponent_count) ? want[base + j] : 0u));
      }
    }
#endif
  };
  std::mt19937_64 rng(2025);
  const auto with_exponent = [&](unsigned e) {
    return static_cast<bits>((bits(e) << shift) | (rng() & ((bits(1) << shift) - 1u)) |
                             (rng() % 2 ? bits(bits(1) << (E::total_bits - 1)) : bits(0)));
  };
  for (std::uint64_t m : {65536ull, 65536ull - 37, 64ull * 255 + 1, 100ull}) {
    INFO("m = " << m);
    check(testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, m));
    check(testing::random_bits<E>(m, m + 1));
    for (unsigned e : {0u, 1u, E::exponent_count / 2, E::exponent_count - 2, E::exponent_count - 1})
      check(std::vector<bits>(m, with_exponent(e)));
  }
}
#endif

#if ZIPCCL_HAS_AVX2
// The host's zero-group test (avx2::zero_group_test, which the dispatcher's plan_body takes)
// against the reference's in format::make_zero_mask: the same bytes, padding included, and the same count, on chunks
// with random zero groups, one nonzero byte at every offset of a group (its last byte is what a
// short OR of the group's loads would miss), -0.0 and a short last group.
TEMPLATE_TEST_CASE("the host zero-group mask is the reference's", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using L = format::chunk_layout<E>;
  std::mt19937_64 rng(77);
  const auto check = [&](const std::vector<std::uint8_t>& bytes, std::uint64_t m) {
    const std::uint64_t n = format::zero_mask_bytes(m);
    std::vector<std::uint8_t> want(n, 0xA5), got(n, 0x5A);
    const std::uint64_t a = format::make_zero_mask(bytes.data(), m, L::elem_size, want.data());
    const std::uint64_t b = format::make_zero_mask(bytes.data(), m, L::elem_size, got.data(),
                                                   host::detail::avx2::zero_group_test{L::elem_size});
    REQUIRE(a == b);
    REQUIRE(want == got);
  };
  for (std::uint64_t m : {65536ull, 64ull * 37, 64ull * 37 + 1, 64ull * 37 + 63, 63ull, 1ull}) {
    INFO("m = " << m);
    const std::uint64_t groups = format::zero_groups(m);
    std::vector<std::uint8_t> bytes(m * L::elem_size, 0);
    check(bytes, m);  // all zero
    for (auto& x : bytes) x = static_cast<std::uint8_t>(rng());
    check(bytes, m);  // (nearly surely) none
    // every other group zero, a third of them with one nonzero byte somewhere
    for (std::uint64_t g = 0; g < groups; ++g) {
      const std::uint64_t first = g * format::zero_group_elems * L::elem_size;
      const std::uint64_t size = format::zero_group_size(m, g) * L::elem_size;
      if (rng() % 2 == 0) continue;
      std::memset(bytes.data() + first, 0, size);
      if (rng() % 3 == 0) bytes[first + rng() % size] = static_cast<std::uint8_t>(1 + rng() % 255);
    }
    check(bytes, m);
    // one nonzero byte (the sign bit of a -0.0 where it is an element's top byte) at each offset of
    // group 0, and of the last group
    for (std::uint64_t g : {std::uint64_t{0}, groups - 1}) {
      const std::uint64_t first = g * format::zero_group_elems * L::elem_size;
      const std::uint64_t size = format::zero_group_size(m, g) * L::elem_size;
      for (std::uint64_t i = 0; i < size; ++i) {
        std::vector<std::uint8_t> z(m * L::elem_size, 0);
        z[first + i] = (i + 1) % L::elem_size == 0 ? 0x80 : 0x01;
        INFO("group " << g << ", byte " << i);
        check(z, m);
      }
    }
  }
}
#endif

#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
namespace {
// Looks the sixteen symbols at sym up in an encoder window table: by its checked lookup or (held)
// by the held mode the table allows (narrow or wide), through the window indices as the dense
// kernels' split_indices leaves them (the distance from the window's start modulo 256 in each
// lane's low byte, other bits above it) and, unheld, through the symbols too (the zeros kernel's
// lookup), which must agree. Where the lookup reports them found, every lane must have the encode
// table's entries; returns whether it did.
template <class Table>
bool window_finds(const Table& wt, const host::detail::rans_loops::encode_table& et, const std::uint32_t* sym,
                  bool held = false) {
  namespace simd = host::detail::avx512::rans_simd;
  static std::mt19937 noise(31);
  const std::uint32_t lo = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(wt.lo)));
  alignas(64) std::uint32_t idx[16];
  for (unsigned k = 0; k < 16; ++k) {
    std::uint32_t value = sym[k];
    if constexpr (std::is_same_v<Table, simd::fp16_window_table>) value = Table::rotated(sym[k]);
    idx[k] = ((value - lo) & 0xFFu) | (static_cast<std::uint32_t>(noise()) << 8);
  }
  __m512i f = _mm512_setzero_si512(), r = f;
  const __m512i s = _mm512_loadu_si512(sym), i = _mm512_load_si512(idx);
  const auto symbols = [&] { return s; };
  bool found;
  if (!held) {
    found = wt.template lookup_at<simd::lookup_mode::checked>(i, symbols, &f, &r);
    __m512i f2 = _mm512_setzero_si512(), r2 = f2;
    REQUIRE(wt.lookup(s, &f2, &r2) == found);
    if (found) {
      alignas(64) std::uint32_t a[2][16], b[2][16];
      _mm512_storeu_si512(a[0], f);
      _mm512_storeu_si512(a[1], r);
      _mm512_storeu_si512(b[0], f2);
      _mm512_storeu_si512(b[1], r2);
      REQUIRE(std::memcmp(a, b, sizeof a) == 0);
    }
  } else {
    found = wt.narrow ? wt.template lookup_at<simd::lookup_mode::held_narrow>(i, symbols, &f, &r)
                      : wt.template lookup_at<simd::lookup_mode::held_wide>(i, symbols, &f, &r);
  }
  if (!found) return false;
  alignas(64) std::uint32_t fc[16], rcp[16];
  _mm512_storeu_si512(fc, f);
  _mm512_storeu_si512(rcp, r);
  for (unsigned k = 0; k < 16; ++k) {
    INFO("lane " << k << ", symbol " << sym[k]);
    REQUIRE(fc[k] == et.freq_cum[sym[k]]);
    REQUIRE(rcp[k] == et.rcp[sym[k]]);
  }
  return true;
}
}  // namespace

// The AVX-512 encoder's window lookups (window_table) on their own: for plans whose symbols span
// 32 values or fewer (the narrow window, four registers), up to 64 (the wide one), more (a window
// that does not hold them all), or 32 values plus zero symbols outside them (which the window
// leaves out), every symbol 0..255 is found with the table's entries exactly when it lies in the
// window, and is reported missing otherwise; where the window holds every symbol, the held
// lookup (which skips the test) gives the same entries. The encoders never ask for a symbol
// outside a narrow window, so only this test sees that answer.
TEST_CASE("the AVX-512 encoder's window lookups", "[host][simd]") {
  namespace simd = host::detail::avx512::rans_simd;
  namespace rans = codec_detail::rans;
  using host::detail::rans_loops::encode_table;
  std::mt19937 rng(5);
  struct shape {
    unsigned first, span;
    bool zeros, narrow, held;
  };
  for (const shape s : {shape{0, 1, false, true, true}, shape{100, 32, false, true, true}, shape{224, 32, false, true, true},
                        shape{90, 33, false, false, true}, shape{10, 64, false, false, true}, shape{120, 20, true, true, true},
                        shape{30, 65, false, false, false}, shape{0, 256, false, false, false}}) {
    INFO("symbols " << s.first << ".." << s.first + s.span - 1 << (s.zeros ? " and zero symbols 1, 2" : ""));
    codec_detail::rans_plan plan{};
    rans::zero_symbols skip;
    for (unsigned v = s.first; v < s.first + s.span; ++v) plan.freq[v] = 1 + rng() % 200;
    plan.freq[s.first] = plan.freq[s.first + s.span - 1] = 7;  // both ends present
    if (s.zeros) {
      skip.on = true, skip.pos = 1, skip.neg = 2;
      plan.freq[1] = 9000, plan.freq[2] = 3000;  // heavier than the window: they must not place it
    }
    for (unsigned v = 0, c = 0; v < rans::symbols; c += plan.freq[v], ++v) plan.cum[v] = c;
    const encode_table et(plan);
    const simd::window_table wt(plan, et, s.zeros ? &skip : nullptr);
    REQUIRE(wt.narrow == s.narrow);
    REQUIRE(wt.held == s.held);
    alignas(64) std::uint32_t lo[16];
    _mm512_storeu_si512(lo, wt.lo);
    const unsigned width = s.narrow ? 32 : 64;
    if (s.held) {
      REQUIRE(lo[0] <= s.first);
      REQUIRE(lo[0] + width >= s.first + s.span);
    }
    // every symbol of the window, sixteen at a time and out of order
    for (unsigned round = 0; round < 2 * width / 16; ++round) {
      alignas(64) std::uint32_t sym[16];
      for (unsigned k = 0; k < 16; ++k) sym[k] = std::min(lo[0] + (16 * round + 7 * k) % width, rans::symbols - 1);
      INFO("round " << round);
      REQUIRE(window_finds(wt, et, sym));
      // the held mode the window allows (the kernel's for such a chunk): the same entries
      if (wt.held) REQUIRE(window_finds(wt, et, sym, true));
    }
    // every symbol outside the window, in one lane among symbols of the window
    for (unsigned v = 0; v < rans::symbols; ++v) {
      if (v >= lo[0] && v < lo[0] + width) continue;
      alignas(64) std::uint32_t sym[16];
      for (unsigned k = 0; k < 16; ++k) sym[k] = k == v % 16 ? v : lo[0];
      INFO("symbol " << v);
      REQUIRE_FALSE(window_finds(wt, et, sym));
    }
  }
}
#endif

#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
// fp16's window lookups (fp16_window_table) on their own: the window over magnitude << 1 | sign
// holds 32 or 64 such values; a register with a symbol outside it takes the sign window's lookup
// where the chunk has symbols outside it, else is reported missing. For plans of a few magnitudes
// (narrow), more (wide), more than 32 (the sign window behind), with and without zero symbols
// (0x00 and 0x80, left out of the window), every symbol 0..255 is found with the table's entries
// exactly when one of the windows used holds it.
TEST_CASE("the AVX-512 encoder's fp16 window lookups", "[host][simd]") {
  namespace simd = host::detail::avx512::rans_simd;
  namespace rans = codec_detail::rans;
  using host::detail::rans_loops::encode_table;
  using T = simd::fp16_window_table;
  std::mt19937 rng(9);
  struct shape {
    unsigned first, span;  // magnitudes first .. first + span - 1, both signs
    bool zeros, narrow, all;  // all: the window holds every symbol (held)
  };
  for (const shape s : {shape{40, 1, false, true, true}, shape{40, 16, false, true, true}, shape{100, 16, false, true, true},
                        shape{30, 17, false, false, true}, shape{96, 32, false, false, true}, shape{20, 33, false, false, false},
                        shape{0, 128, false, false, false}, shape{50, 12, true, true, true}, shape{50, 40, true, false, false}}) {
    INFO("magnitudes " << s.first << ".." << s.first + s.span - 1 << (s.zeros ? " and zero symbols 0x00, 0x80" : ""));
    codec_detail::rans_plan plan{};
    rans::zero_symbols skip;
    for (unsigned v = s.first; v < s.first + s.span; ++v) plan.freq[v] = plan.freq[v | 0x80u] = 1 + rng() % 200;
    plan.freq[s.first | 0x80u] = plan.freq[s.first + s.span - 1] = 7;  // both ends present
    if (s.zeros) {
      skip.on = true, skip.pos = 0x00, skip.neg = 0x80;
      plan.freq[0x00] = 9000, plan.freq[0x80] = 3000;  // heavier than the window: they must not place it
    }
    for (unsigned v = 0, c = 0; v < rans::symbols; c += plan.freq[v], ++v) plan.cum[v] = c;
    const encode_table et(plan);
    const T wt(plan, et, s.zeros ? &skip : nullptr);
    REQUIRE(wt.narrow == s.narrow);
    REQUIRE(wt.held == s.all);
    alignas(64) std::uint32_t lo[16], mag_lo[16], inside[16];
    _mm512_storeu_si512(lo, wt.lo);
    _mm512_storeu_si512(mag_lo, wt.signs.lo);
    _mm512_storeu_si512(inside, wt.inside());
    const unsigned width = s.narrow ? 32 : 64;
    REQUIRE(T::symbol(T::rotated(inside[0])) == inside[0]);
    REQUIRE(T::rotated(inside[0]) == lo[0]);
    const auto in_window = [&](unsigned v) { return T::rotated(v) >= lo[0] && T::rotated(v) < lo[0] + width; };
    const auto in_signs = [&](unsigned v) { return (v & 0x7Fu) >= mag_lo[0] && (v & 0x7Fu) < mag_lo[0] + 64; };
    for (unsigned v = 0; v < rans::symbols; ++v)
      if (plan.freq[v] != 0 && !(s.zeros && (v == 0x00 || v == 0x80))) REQUIRE((in_window(v) || !s.all));
    // every symbol, in one lane among the window's first, and sixteen at a time in order
    for (unsigned v = 0; v < rans::symbols; ++v) {
      const bool found = in_window(v) || (!wt.held && in_signs(v));
      alignas(64) std::uint32_t sym[16];
      for (unsigned k = 0; k < 16; ++k) sym[k] = k == v % 16 ? v : inside[0];
      INFO("symbol " << v);
      REQUIRE(window_finds(wt, et, sym) == found);
    }
    for (unsigned first = 0; first < rans::symbols; first += 16) {
      alignas(64) std::uint32_t sym[16];
      bool found = true;
      for (unsigned k = 0; k < 16; ++k) {
        sym[k] = T::symbol(first + k);  // sixteen neighbours of the window's order
        found = found && in_window(sym[k]);
      }
      bool signs_found = true;
      for (unsigned k = 0; k < 16; ++k) signs_found = signs_found && in_signs(sym[k]);
      const bool in_rotated = found;
      found = found || (!wt.held && signs_found);
      INFO("window values " << first << ".." << first + 15);
      REQUIRE(window_finds(wt, et, sym) == found);
      // the held mode the window allows: the same entries for the window's values
      if (wt.held && in_rotated) REQUIRE(window_finds(wt, et, sym, true));
    }
  }
}
#endif

#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
// The decoder's two ways to gather sixteen slot words (one is built per target: gather16) give
// the same words, lane for lane, as plain loads.
TEST_CASE("the AVX-512 decoder's gathers agree", "[host][simd]") {
  namespace simd = host::detail::avx512::rans_simd;
  std::mt19937 rng(8);
  alignas(64) std::uint32_t table[4096];
  for (auto& w : table) w = static_cast<std::uint32_t>(rng());
  for (int trial = 0; trial < 2000; ++trial) {
    alignas(64) std::uint32_t idx[16], wide[16], halves[16];
    for (auto& i : idx) i = trial < 16 ? (trial * 256 + 255 * (&i - idx)) % 4096 : rng() % 4096;
    const __m512i iv = _mm512_loadu_si512(idx);
    _mm512_storeu_si512(wide, simd::gather16_wide(table, iv));
    _mm512_storeu_si512(halves, simd::gather16_halves(table, iv));
    for (unsigned k = 0; k < 16; ++k) {
      INFO("trial " << trial << " lane " << k);
      REQUIRE(wide[k] == table[idx[k]]);
      REQUIRE(halves[k] == table[idx[k]]);
    }
  }
}
#endif

#if ZIPCCL_HAS_AVX2
namespace {

// A random rANS table of n symbols (distinct values, ascending) in decoder form: `rare` symbols of
// frequency 1..3 at the low end and as many at the high end (fine buckets), the others sharing the
// rest; with `edges`, the shared frequencies multiples of 32 where they can be (boundaries on the
// buckets' edges, and beside them where a rare one follows).
void random_table(std::mt19937& rng, unsigned n, unsigned rare, bool edges, codec_detail::rans::decode_table* t,
                  std::vector<std::uint32_t>* cum) {
  namespace rans = codec_detail::rans;
  std::vector<std::uint32_t> f(n, 0);
  std::uint32_t left = rans::prob_total;
  const unsigned lo = std::min(rare, n - 1), hi = std::min(rare, n - 1 - lo);
  for (unsigned i = 0; i < lo; ++i) left -= (f[i] = 1 + rng() % 3);
  for (unsigned i = 0; i < hi; ++i) left -= (f[n - 1 - i] = 1 + rng() % 3);
  const unsigned mid = n - lo - hi;
  for (unsigned i = 0; i < mid; ++i) {
    const std::uint32_t rest = left - (mid - 1 - i);  // (each later one keeps at least 1)
    std::uint32_t v = i + 1 == mid ? rest : 1 + rng() % std::max<std::uint32_t>(1, 2 * left / (mid - i));
    if (edges && i + 1 < mid && v > 32) v -= v % 32;
    v = std::min(v, rest);
    f[lo + i] = v;
    left -= v;
  }
  std::vector<unsigned> values(256);
  for (unsigned v = 0; v < 256; ++v) values[v] = v;
  std::shuffle(values.begin(), values.end(), rng);
  values.resize(n);
  std::sort(values.begin(), values.end());
  std::uint32_t freq[256] = {};
  cum->assign(n + 1, 0);
  for (unsigned i = 0; i < n; ++i) freq[values[i]] = f[i], (*cum)[i + 1] = (*cum)[i] + f[i];
  std::vector<std::uint8_t> bytes(rans::table_bytes(n));
  rans::write_table(freq, n, bytes.data());
  rans::read_table(bytes.data(), t);
}

// The crowded buckets of a table of n symbols starting at cum[0..n-1]: buckets of 32 slots with
// two or more symbol starts strictly inside.
unsigned crowded_buckets(const std::vector<std::uint32_t>& cum, unsigned n) {
  unsigned crowded = 0;
  for (unsigned b = 0; b < 128; ++b) {
    unsigned inside = 0;
    for (unsigned i = 1; i < n; ++i) inside += cum[i] > 32 * b && cum[i] < 32 * b + 32;
    crowded += inside >= 2;
  }
  return crowded;
}

// Zero symbols for a body of table rt (n symbols), as the rank tests pick them by trial: two of
// the table's symbols, or one of them and a value it lacks (a body without zeros of one sign:
// -0.0's past every symbol, 256, or +0.0's below a symbol), z.pos < z.neg as the header requires
// (+0.0 at 0 and -0.0 at 256 where rt does not hold the table).
codec_detail::rans::zero_symbols random_zero_symbols(std::mt19937& rng, const host::detail::rank_table& rt, unsigned n,
                                                      int trial) {
  codec_detail::rans::zero_symbols z;
  z.on = true;
  z.pos = rt.held ? rt.sym[rng() % n] : 0;
  z.neg = trial % 2 && n > 1 && rt.held ? rt.sym[rng() % n] : 256;
  if (z.neg == z.pos) z.neg = 256;
  if (z.neg < z.pos) std::swap(z.pos, z.neg);
  if (rt.held && trial % 5 == 4 && rt.sym[n - 1] > n - 1) {  // (the first value that is no symbol)
    unsigned v = 0;
    for (unsigned r = 0; r < n && rt.sym[r] == v; ++r) ++v;
    z.pos = v;
    z.neg = rt.sym[n - 1];
  }
  return z;
}

// 32 decoder states at random, 2^16 and 2^32 - 1 among them.
void random_states(std::mt19937& rng, std::uint32_t (&x)[32]) {
  namespace rans = codec_detail::rans;
  for (auto& v : x) {
    const unsigned k = static_cast<unsigned>(rng() % 8);
    v = k == 0 ? rans::state_low
        : k == 1 ? 0xFFFFFFFFu
                 : rans::state_low + static_cast<std::uint32_t>(rng() % (0xFFFFFFFFu - rans::state_low));
  }
}

// One full group decoded by kernel K (a rank kernel: AVX2's or AVX-512's) and by the reference's
// steps from the same 32 states (at random, with 2^16 and 2^32 - 1 among them; with all_low, every
// state 2^16, so that every lane below a frequency of 4096 takes a word), rests and stream words:
// the same values, states and words taken. The rests and the 32 stream words are heap blocks of
// exactly their size, so that a sanitizer build sees a read past them.
template <class E, class K>
void compare_rank_group(std::mt19937& rng, const codec_detail::rans::decode_table& t, const K& kernel,
                        bool all_low = false) {
  namespace rans = codec_detail::rans;
  using S = rans::split<E>;
  using bits = typename E::bits_type;
  alignas(64) std::uint32_t x[32], y[32];
  random_states(rng, x);
  if (all_low)
    for (auto& v : x) v = rans::state_low;
  std::vector<std::uint8_t> bytes(32), words(64), stream(64);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (auto& b : words) b = static_cast<std::uint8_t>(rng());
  for (auto& b : stream) b = static_cast<std::uint8_t>(rng());
  bits want[32], got[32];
  std::uint64_t n = 0;
  std::memcpy(y, x, sizeof x);
  for (unsigned l = 0; l < 32; ++l) {
    const std::uint32_t sym = rans::decode_step(t, &y[l]);
    if (y[l] < rans::state_low) y[l] = y[l] << 16 | (stream[2 * n] | std::uint32_t(stream[2 * n + 1]) << 8), ++n;
    want[l] = S::join(sym, bytes[l], words[2 * l] | std::uint32_t(words[2 * l + 1]) << 8);
  }
  K k = kernel;
  k.load(x);
  std::uint64_t next = 0;
  k.group(bytes.data(), words.data(), stream.data(), &next, reinterpret_cast<std::uint8_t*>(got));
  k.store(x);
  REQUIRE(next == n);
  for (unsigned l = 0; l < 32; ++l) {
    INFO("lane " << l);
    REQUIRE(got[l] == want[l]);
    REQUIRE(x[l] == y[l]);
  }
}

// The AVX2 rank kernel K's ranks of every slot of table t (the 4096 slots in a random order, 32 at
// a time, so that a register's lanes fall in different buckets; the states' bits above the slot
// at random) against the slot table: each rank's symbol, frequency and start.
template <class K>
void compare_avx2_ranks(std::mt19937& rng, const codec_detail::rans::decode_table& t, const host::detail::rank_table& rt,
                        K k) {
  namespace rans = codec_detail::rans;
  std::vector<std::uint32_t> order(rans::prob_total);
  for (std::uint32_t i = 0; i < rans::prob_total; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (std::uint32_t s0 = 0; s0 < rans::prob_total; s0 += 32) {
    alignas(32) std::uint16_t lo[32];
    alignas(32) std::uint8_t r[32];
    for (unsigned l = 0; l < 32; ++l) lo[l] = static_cast<std::uint16_t>(order[s0 + l] | (rng() % 16) << 12);
    k.XL[0] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
    k.XL[1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo + 16));
    _mm256_store_si256(reinterpret_cast<__m256i*>(r), k.rank());
    for (unsigned l = 0; l < 32; ++l) {
      // (the ranks in vpackuswb order: lanes 0..7, 16..23, 8..15, 24..31)
      const unsigned at = l % 8 + 8 * (l / 16 + 2 * ((l / 8) % 2));
      const std::uint32_t s = order[s0 + l], e = t.slot[s];
      INFO("slot " << s);
      REQUIRE(r[at] < rt.ranks);
      REQUIRE(rt.sym[r[at]] == rans::decode_table::symbol(e));
      REQUIRE(rt.freq[r[at]] == rans::decode_table::freq(e));
      REQUIRE(s - rt.cum[r[at]] == rans::decode_table::offset(e));
    }
  }
}

// The class of an AVX2 decoder kernel: a rank kernel's crowded buckets, 0 for the slot kernel.
template <class K>
struct avx2_rank_class : std::integral_constant<unsigned, 0> {};
template <class E, unsigned C>
struct avx2_rank_class<host::detail::avx2::rans_simd::decode_rank_kernel<E, C>> : std::integral_constant<unsigned, C> {};
template <class E, unsigned C>
struct avx2_rank_class<host::detail::avx2::rans_simd::decode_rank_zeros_kernel<E, C>> : std::integral_constant<unsigned, C> {};

// A full group of a body with zero symbols z by kernel K (a rank zeros kernel: AVX2's or
// AVX-512's), from random states, against the reference's steps: lanes that decode z.pos or z.neg
// are +0.0 or -0.0 and take no rest, the others take the next rests in lane order (from rest 3
// on); the same states, words and rests taken.
template <class E, class K>
void compare_zeros_group(std::mt19937& rng, const codec_detail::rans::decode_table& t, const codec_detail::rans::zero_symbols& z,
                         K k) {
  namespace rans = codec_detail::rans;
  using S = rans::split<E>;
  using bits = typename E::bits_type;
  alignas(64) std::uint32_t x[32], y[32];
  random_states(rng, x);
  std::uint8_t bytes[40], words[80], stream[64];
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (auto& b : words) b = static_cast<std::uint8_t>(rng());
  for (auto& b : stream) b = static_cast<std::uint8_t>(rng());
  bits want[32], got[32];
  std::uint64_t n = 0, j = 3;  // (the rests from index 3 on)
  std::memcpy(y, x, sizeof x);
  for (unsigned l = 0; l < 32; ++l) {
    const std::uint32_t sym = rans::decode_step(t, &y[l]);
    if (y[l] < rans::state_low) y[l] = y[l] << 16 | (stream[2 * n] | std::uint32_t(stream[2 * n + 1]) << 8), ++n;
    if (sym == z.pos || sym == z.neg) {
      want[l] = sym == z.pos ? bits{0} : S::negative_zero;
    } else {
      want[l] = S::join(sym, bytes[j], words[2 * j] | std::uint32_t(words[2 * j + 1]) << 8);
      ++j;
    }
  }
  k.load(x);
  std::uint64_t next = 0, rest = 3;
  k.group(bytes, words, &rest, stream, &next, reinterpret_cast<std::uint8_t*>(got));
  k.store(x);
  REQUIRE(next == n);
  REQUIRE(rest == j);
  for (unsigned l = 0; l < 32; ++l) {
    INFO("lane " << l);
    REQUIRE(got[l] == want[l]);
    REQUIRE(x[l] == y[l]);
  }
}

// Two full groups, one of each of two tables, through group_pair (the pair loop's interleaved
// step) and through each kernel's own group: the same values, states and words taken.
template <class E, class K>
void compare_rank_pair(std::mt19937& rng, const K& ka, const K& kb) {
  alignas(64) std::uint32_t x[2][32], y[2][32];
  std::uint8_t bytes[2][32], words[2][64], stream[2][64];
  for (int c = 0; c < 2; ++c) {
    random_states(rng, x[c]);
    for (auto& b : bytes[c]) b = static_cast<std::uint8_t>(rng());
    for (auto& b : words[c]) b = static_cast<std::uint8_t>(rng());
    for (auto& b : stream[c]) b = static_cast<std::uint8_t>(rng());
  }
  std::memcpy(y, x, sizeof x);
  std::uint8_t want[2][128], got[2][128];
  std::uint64_t n_want[2] = {0, 0}, n_got[2] = {0, 0};
  K one[2] = {ka, kb}, two[2] = {ka, kb};
  for (int c = 0; c < 2; ++c) {
    one[c].load(y[c]);
    one[c].group(bytes[c], words[c], stream[c], &n_want[c], want[c]);
    one[c].store(y[c]);
    two[c].load(x[c]);
  }
  K::group_pair(two[0], two[1], {bytes[0], bytes[1]}, {words[0], words[1]}, {stream[0], stream[1]}, {&n_got[0], &n_got[1]},
                {got[0], got[1]});
  constexpr std::size_t size = 32 * sizeof(typename E::bits_type);
  for (int c = 0; c < 2; ++c) {
    two[c].store(x[c]);
    INFO("chunk " << c);
    REQUIRE(n_got[c] == n_want[c]);
    REQUIRE(std::memcmp(got[c], want[c], size) == 0);
    REQUIRE(std::memcmp(x[c], y[c], sizeof x[c]) == 0);
  }
}

}  // namespace

// The AVX2 rank decoder (avx2::rans_simd::decode_rank_kernel) against the slot table: on random
// tables of 1 to 40 symbols, with rare symbols at the ends (crowded buckets, which take the fine
// tables) and boundaries on bucket edges, decode_kernel::run picks the rank kernel for 2 crowded
// buckets, else for 4, exactly where the table has at most 32 symbols and that many crowded
// buckets (the slot kernel elsewhere; pair_pays where both tables of a pair take one class);
// each rank kernel that holds a table gives every slot its rank's symbol, frequency and start,
// decodes a full group as the reference's steps do, and two chunks' groups through group_pair as
// through their own kernels.
TEST_CASE("the AVX2 rank decoder finds every slot's symbol", "[host][simd]") {
  namespace simd = host::detail::avx2::rans_simd;
  namespace rans = codec_detail::rans;
  std::mt19937 rng(23);
  alignas(64) static rans::decode_table t, t_before;
  std::vector<std::uint32_t> cum;
  random_table(rng, 1, 0, false, &t_before, &cum);
  unsigned class_before = 2, fitted[2] = {}, refused = 0;
  // the class run hands its loop: a rank kernel's crowded buckets, 0 for the slot kernel
  const auto picked = [](auto k) { return avx2_rank_class<decltype(k)>::value; };
  for (int trial = 0; trial < 900; ++trial) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % 40);
    const unsigned rare = static_cast<unsigned>(rng() % (trial % 4 < 2 ? 6 : 14));
    random_table(rng, n, rare, trial % 3 == 0, &t, &cum);
    const unsigned crowded = crowded_buckets(cum, n);
    INFO("trial " << trial << ": " << n << " symbols, " << crowded << " crowded buckets");
    const unsigned want = n > 32 || crowded > 4 ? 0u : crowded <= 2 ? 2u : 4u;
    REQUIRE(simd::decode_kernel<bf16>::run(t, picked) == want);
    REQUIRE(simd::decode_kernel<fp32>::run(t, picked) == want);
    REQUIRE(simd::decode_kernel<fp16>::run(t, picked) == 0u);  // (a single fp16 body keeps the slot kernel)
    // bodies with zero symbols take the rank steps in the same classes (fp16: the slot kernel)
    const rans::zero_symbols z = random_zero_symbols(rng, host::detail::rank_table(t, 32), n, trial);
    REQUIRE(simd::decode_zeros_kernel<bf16>::run(t, z, picked) == want);
    REQUIRE(simd::decode_zeros_kernel<fp32>::run(t, z, picked) == want);
    REQUIRE(simd::decode_zeros_kernel<fp16>::run(t, z, picked) == 0u);
    REQUIRE(simd::decode_kernel<bf16>::pair_pays(t, t_before) == (want != 0 && class_before != 0));
    if (want != 0 && class_before != 0)
      REQUIRE(simd::decode_kernel<bf16>::run_pair(t, t_before, [&](auto a, auto b) {
                static_assert(std::is_same_v<decltype(a), decltype(b)>, "run_pair: one class for both");
                return picked(a);
              }) == std::max(want, class_before));
    const host::detail::rank_table rt(t, 32);
    REQUIRE(rt.held == (n <= 32));
    if (want == 0) {
      ++refused;
    } else {
      REQUIRE(rt.ranks == n);
      REQUIRE(rt.crowded == crowded);
      const host::detail::rank_table rb(t_before, 32);
      const auto check = [&](auto c) {
        constexpr unsigned C = decltype(c)::value;
        compare_avx2_ranks(rng, t, rt, simd::decode_rank_kernel<bf16, C>(rt));
        compare_rank_group<bf16>(rng, t, simd::decode_rank_kernel<bf16, C>(rt));
        compare_rank_group<fp16>(rng, t, simd::decode_rank_kernel<fp16, C>(rt));
        compare_rank_group<fp32>(rng, t, simd::decode_rank_kernel<fp32, C>(rt));
        compare_rank_group<bf16>(rng, t, simd::decode_rank_kernel<bf16, C>(rt), true);
        compare_zeros_group<bf16>(rng, t, z, simd::decode_rank_zeros_kernel<bf16, C>(rt, z));
        compare_zeros_group<fp32>(rng, t, z, simd::decode_rank_zeros_kernel<fp32, C>(rt, z));
        if (rb.holds(32, C)) {
          compare_rank_pair<bf16>(rng, simd::decode_rank_kernel<bf16, C>(rt), simd::decode_rank_kernel<bf16, C>(rb));
          compare_rank_pair<fp16>(rng, simd::decode_rank_kernel<fp16, C>(rt), simd::decode_rank_kernel<fp16, C>(rb));
          compare_rank_pair<fp32>(rng, simd::decode_rank_kernel<fp32, C>(rt), simd::decode_rank_kernel<fp32, C>(rb));
        }
      };
      if (want == 2) check(std::integral_constant<unsigned, 2>()), ++fitted[0];
      check(std::integral_constant<unsigned, 4>()), ++fitted[1];
    }
    t_before = t;
    class_before = want;
  }
  CHECK(fitted[0] > 200);
  CHECK(fitted[1] > fitted[0] + 50);
  CHECK(refused > 150);
}

// select_bytes (vpblendvb by inline assembly) against the intrinsic, on random bytes and masks.
TEST_CASE("select_bytes is vpblendvb", "[host][simd]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    alignas(32) std::uint8_t a[32], b[32], m[32], got[32], want[32];
    for (int i = 0; i < 32; ++i)
      a[i] = static_cast<std::uint8_t>(rng()), b[i] = static_cast<std::uint8_t>(rng()), m[i] = static_cast<std::uint8_t>(rng());
    const auto load = [](const std::uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); };
    _mm256_store_si256(reinterpret_cast<__m256i*>(got), host::detail::avx2::rans_simd::select_bytes(load(a), load(b), load(m)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(want), _mm256_blendv_epi8(load(a), load(b), load(m)));
    for (int i = 0; i < 32; ++i) {
      INFO("byte " << i);
      REQUIRE(got[i] == want[i]);
      REQUIRE(got[i] == (m[i] & 0x80u ? b[i] : a[i]));
    }
  }
}

namespace {
// One chunk of m elements (zero-group masks on), coded by the entropy policy's fast path.
template <class E>
std::vector<std::uint8_t> entropy_chunk(const std::vector<typename E::bits_type>& v) {
  using Codec = codec<E, codebook::entropy>;
  std::vector<std::uint8_t> out(Codec::layout::stored_bytes(v.size()));
  const auto* in = reinterpret_cast<const std::uint8_t*>(v.data());
  out.resize(host::detail::encode_chunk<E>(testing::policy_for<Codec>(v.data(), v.size()), in, v.size(), false, true,
                                           out.data()));
  return out;
}

// The rank table of a coded dense rANS chunk's decoding table (limit 32).
template <class E>
host::detail::rank_table chunk_ranks(const std::vector<std::uint8_t>& chunk, std::uint64_t m) {
  format::chunk_header h;
  codec_detail::body_shape body;
  REQUIRE(codec_detail::check_chunk<E>(chunk.data(), chunk.size(), m, false, &h, &body) == status::success);
  REQUIRE(format::mode_is_rans(h.mode));
  REQUIRE_FALSE(format::mode_has_zero_symbols(h.mode));
  const codec_detail::rans_sections<E> sec(chunk.data(), h, body);
  alignas(64) static codec_detail::rans::decode_table t;
  std::uint32_t x[32];
  REQUIRE(sec.start(&t, x));
  return host::detail::rank_table(t, 32);
}

// Elements whose symbols (bf16: exponent; fp16: the high byte) are `symbols` in turn, each
// `count` times, the rest `big`, mantissas and signs at random (fp16: positive).
template <class E>
std::vector<typename E::bits_type> symbol_mix(std::mt19937& rng, std::uint64_t m, const std::vector<unsigned>& symbols,
                                              unsigned count, unsigned big) {
  std::vector<typename E::bits_type> v(m);
  for (std::uint64_t i = 0; i < m; ++i) {
    const unsigned s = i < symbols.size() * count ? symbols[i / count] : big;
    if constexpr (std::is_same_v<E, bf16>)
      v[i] = static_cast<std::uint16_t>((rng() & 0x8000u) | s << 7 | (rng() & 0x7Fu));
    else
      v[i] = static_cast<std::uint16_t>(s << 8 | (rng() & 0xFFu));
  }
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// The check value of chunk c (m elements, no whole-chunk check) recomputed over its header,
// table and states, as testing::repair_hashes does for a stream's chunks.
void reseal(std::vector<std::uint8_t>& c, std::uint64_t m) {
  std::uint64_t body = format::body_offset(m, format::mode_has_zero_mask(format::chunk_mode(c[0] & 3u)));
  if (format::mode_is_rans(format::chunk_mode(c[0] & 7u))) body = codec_detail::rans::prefix_end(body, c[1] + 1u);
  format::store_le<std::uint32_t>(c.data() + 12, format::chunk_check(c.data(), c.size(), false, body));
}

// decode_chunk_pair (and rans_vector::decode_rans_pair where both pass check_chunk) on chunks a
// and b: each chunk's reference status and values.
template <class E>
void compare_pair(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, std::uint64_t m) {
  using L = format::chunk_layout<E>;
  std::vector<std::uint8_t> want[2], got[2];
  status ref[2];
  const std::vector<std::uint8_t>* c[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    want[i].assign(m * L::elem_size, 0);
    got[i].assign(m * L::elem_size, 0xAB);
    ref[i] = codec_detail::decode_chunk<E>(c[i]->data(), c[i]->size(), m, false, want[i].data());
  }
  const std::uint8_t* chunks[2] = {a.data(), b.data()};
  const std::uint64_t spans[2] = {a.size(), b.size()}, ms[2] = {m, m};
  std::uint8_t* outs[2] = {got[0].data(), got[1].data()};
  status st[2] = {status::unsupported_mode, status::unsupported_mode};
  const format::chunk_seal seals[2] = {false, false};
  host::detail::decode_chunk_pair<E>(chunks, spans, ms, seals, outs, st);
  for (int i = 0; i < 2; ++i) {
    INFO("chunk " << i);
    REQUIRE(st[i] == ref[i]);
    if (ref[i] == status::success) REQUIRE(got[i] == want[i]);
  }
  format::chunk_header h[2];
  codec_detail::body_shape body[2];
  if (codec_detail::check_chunk<E>(a.data(), a.size(), m, false, &h[0], &body[0]) == status::success &&
      codec_detail::check_chunk<E>(b.data(), b.size(), m, false, &h[1], &body[1]) == status::success) {
    for (int i = 0; i < 2; ++i) got[i].assign(m * L::elem_size, 0xCD);
    const bool ok = host::detail::rans_vector::decode_rans_pair<E>(chunks, ms, h, body, outs);
    REQUIRE(ok == (ref[0] == status::success && ref[1] == status::success));
    if (ok) REQUIRE((got[0] == want[0] && got[1] == want[1]));
  }
}
}  // namespace

// The pair decoder of AVX2 builds (decode_pair_with with the AVX2 kernels), each way a pair goes:
// two bf16 tables of one rank class (one loop); a bf16 table of at most 32 symbols and more than 4
// crowded buckets beside one (one after the other, decided once the tables are read); fp16 chunks
// of at most 32 symbols (an fp16 rank pair); an fp16 chunk of many symbols beside one (decided from
// the headers); a table that breaks its rules beside a valid chunk, first and second. Each chunk
// gets the reference's status and values.
TEST_CASE("the AVX2 pair decoder takes every way a pair goes", "[host][simd]") {
  std::mt19937 rng(31);
  const std::uint64_t m = 8192 + 20;  // (a short last group too)
  const auto gauss = [&](std::uint64_t seed) {
    return entropy_chunk<bf16>(testing::make_tensor<bf16>(m, 0.02, testing::distribution::gaussian, seed));
  };
  const auto g1 = gauss(1), g2 = gauss(2);
  REQUIRE(chunk_ranks<bf16>(g1, m).holds(32, 4));
  REQUIRE(chunk_ranks<bf16>(g2, m).holds(32, 4));
  // thirty exponents about ten slots each around one that takes the rest: about ten crowded buckets
  std::vector<unsigned> few;
  for (unsigned e = 100; e < 131; ++e)
    if (e != 115) few.push_back(e);
  const auto crowded = entropy_chunk<bf16>(symbol_mix<bf16>(rng, m, few, 20, 115));
  const host::detail::rank_table rc = chunk_ranks<bf16>(crowded, m);
  REQUIRE(rc.held);
  REQUIRE(rc.ranks <= 32);
  REQUIRE(rc.crowded > 4);
  // fp16: 24 high bytes (exponents 10..15, positive), and Gaussian fp16 (far more)
  std::vector<unsigned> high;
  for (unsigned b = 10 << 2; b < 16 << 2; ++b) high.push_back(b);
  const auto h1 = entropy_chunk<fp16>(symbol_mix<fp16>(rng, m, high, 340, 14 << 2));
  const auto h2 = entropy_chunk<fp16>(symbol_mix<fp16>(rng, m, high, 300, 12 << 2));
  const auto many = entropy_chunk<fp16>(testing::make_tensor<fp16>(m, 0.02, testing::distribution::gaussian, 3));
  REQUIRE(chunk_ranks<fp16>(h1, m).holds(32, 4));
  REQUIRE(chunk_ranks<fp16>(h2, m).holds(32, 4));
  REQUIRE_FALSE(chunk_ranks<fp16>(many, m).held);
  {
    INFO("two bf16 rank tables");
    compare_pair<bf16>(g1, g2, m);
  }
  {
    INFO("a crowded bf16 table beside a rank one");
    compare_pair<bf16>(g1, crowded, m);
    compare_pair<bf16>(crowded, g2, m);
  }
  {
    INFO("two fp16 rank tables, and one of many symbols beside one");
    compare_pair<fp16>(h1, h2, m);
    compare_pair<fp16>(many, h1, m);
    compare_pair<fp16>(h2, many, m);
  }
  {
    INFO("a table whose frequencies do not sum to 4096, first and second");
    auto bad = g2;
    format::chunk_header h;
    codec_detail::body_shape body;
    REQUIRE(codec_detail::check_chunk<bf16>(bad.data(), bad.size(), m, false, &h, &body) == status::success);
    const codec_detail::rans_sections<bf16> sec(bad.data(), h, body);
    bad[static_cast<std::size_t>(sec.table - bad.data()) + codec_detail::rans::bitmap_bytes] ^= 1;
    reseal(bad, m);  // (so that check_chunk passes and the table's own rules fail)
    std::vector<std::uint8_t> ref(m * 2);
    REQUIRE(codec_detail::decode_chunk<bf16>(bad.data(), bad.size(), m, false, ref.data()) == status::corrupt);
    compare_pair<bf16>(g1, bad, m);
    compare_pair<bf16>(bad, g1, m);
    auto bad16 = h2;
    REQUIRE(codec_detail::check_chunk<fp16>(bad16.data(), bad16.size(), m, false, &h, &body) == status::success);
    const codec_detail::rans_sections<fp16> sec16(bad16.data(), h, body);
    bad16[static_cast<std::size_t>(sec16.table - bad16.data()) + codec_detail::rans::bitmap_bytes] ^= 1;
    reseal(bad16, m);
    REQUIRE(codec_detail::decode_chunk<fp16>(bad16.data(), bad16.size(), m, false, ref.data()) == status::corrupt);
    compare_pair<fp16>(many, bad16, m);
    compare_pair<fp16>(h1, bad16, m);
  }
}
#endif

#if ZIPCCL_HAS_AVX512 && ZIPCCL_HAS_AVX2
namespace {

// The kernel class that decode_kernel::run, run_pair and decode_zeros_kernel::run hand their loop:
// a rank kernel's symbols and pairs of fine tables, {0, 0} for the gather kernels.
template <class K>
struct kernel_class {
  static constexpr std::pair<unsigned, unsigned> value{0u, 0u};
};
template <class E, unsigned R, unsigned P>
struct kernel_class<host::detail::avx512::rans_simd::decode_rank_kernel<E, R, P>> {
  static constexpr std::pair<unsigned, unsigned> value{R, P};
};
template <class E, unsigned R, unsigned P>
struct kernel_class<host::detail::avx512::rans_simd::decode_rank_zeros_kernel<E, R, P>> {
  static constexpr std::pair<unsigned, unsigned> value{R, P};
};
// The smallest rank kernel class that holds a table, {0, 0} for none (the gather kernel's).
std::pair<unsigned, unsigned> expected_class(const host::detail::avx512::rans_simd::rank_table& rt) {
  for (const auto& c : {std::pair<unsigned, unsigned>{32, 1}, {64, 1}, {128, 3}})
    if (rt.fits(c.first, c.second)) return c;
  return {0u, 0u};
}

// The same for a body with zero symbols z (decode_rank_zeros_kernel): compare_zeros_group.
template <class E, unsigned Ranks, unsigned Pairs>
void compare_rank_zeros_group(std::mt19937& rng, const codec_detail::rans::decode_table& t,
                              const host::detail::avx512::rans_simd::rank_table& rt, const codec_detail::rans::zero_symbols& z) {
  compare_zeros_group<E>(rng, t, z, host::detail::avx512::rans_simd::decode_rank_zeros_kernel<E, Ranks, Pairs>(rt, z));
}

// Kernel K's ranks of every slot of table t (32 slots at a time, the states' bits above the slot
// at random) against the slot table: each rank's symbol, frequency and start.
template <class K>
void compare_ranks(std::mt19937& rng, const codec_detail::rans::decode_table& t,
                   const host::detail::avx512::rans_simd::rank_table& rt, K k) {
  namespace rans = codec_detail::rans;
  for (std::uint32_t s0 = 0; s0 < rans::prob_total; s0 += 32) {
    alignas(64) std::uint16_t lo[32], r[32];
    for (unsigned l = 0; l < 32; ++l) lo[l] = static_cast<std::uint16_t>((s0 + l) | (rng() % 16) << 12);
    k.XL = _mm512_loadu_si512(lo);
    _mm512_storeu_si512(r, k.rank());
    for (unsigned l = 0; l < 32; ++l) {
      const std::uint32_t s = s0 + l, e = t.slot[s];
      INFO("slot " << s);
      REQUIRE(r[l] < rt.ranks);
      REQUIRE(rt.sym[r[l]] == rans::decode_table::symbol(e));
      REQUIRE(rt.freq[r[l]] == rans::decode_table::freq(e));
      REQUIRE(s - rt.cum[r[l]] == rans::decode_table::offset(e));
    }
  }
}

}  // namespace

// The rank decoder (avx512::rans_simd::rank_table, decode_rank_kernel) against the slot table: on
// random tables of 1 to 140 symbols, with rare symbols at the ends (crowded buckets, with two or
// more symbol boundaries inside, which take the fine tables) and boundaries on bucket edges, a
// table is held exactly when it has at most 128 symbols and 16 crowded buckets; each kernel that
// fits it (32 symbols and 4 crowded buckets, 64 and 4, 128 and 12) gives every slot its rank's
// symbol, frequency and start, and decodes a full group as the reference's steps do, in a dense
// body and in one with zero symbols.
TEST_CASE("the AVX-512 rank decoder finds every slot's symbol", "[host][simd]") {
  namespace simd = host::detail::avx512::rans_simd;
  namespace rans = codec_detail::rans;
  std::mt19937 rng(21);
  alignas(64) static rans::decode_table t, t_before;  // (this trial's table and the one before)
  std::vector<std::uint32_t> cum;
  random_table(rng, 1, 0, false, &t_before, &cum);
  std::pair<unsigned, unsigned> class_before{32, 1};
  unsigned fitted[3] = {}, refused = 0;
  for (int trial = 0; trial < 1200; ++trial) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % (trial % 2 ? 34 : 140));
    const unsigned rare = static_cast<unsigned>(rng() % (trial % 4 < 2 ? 12 : 40));
    random_table(rng, n, rare, trial % 3 == 0, &t, &cum);
    const unsigned crowded = crowded_buckets(cum, n);
    const simd::rank_table rt(t);
    INFO("trial " << trial << ": " << n << " symbols, " << crowded << " crowded buckets");
    REQUIRE(rt.held == (n <= 128 && crowded <= 16));
    const rans::zero_symbols z = random_zero_symbols(rng, rt, n, trial);
    // the kernel class each run picks: the smallest that holds the table (for a pair, the
    // smallest that holds both; the gather kernel where either table is beyond them)
    const auto picked = [](auto k) { return kernel_class<decltype(k)>::value; };
    const std::pair<unsigned, unsigned> want = expected_class(rt), none{0u, 0u};
    REQUIRE(simd::decode_kernel<bf16>::run(t, picked) == want);
    REQUIRE(simd::decode_zeros_kernel<fp32>::run(t, z, picked) == want);
    REQUIRE(simd::decode_kernel<fp16>::run_pair(t, t_before, [](auto a, auto b) {
              static_assert(std::is_same_v<decltype(a), decltype(b)>, "run_pair: one class for both");
              return kernel_class<decltype(a)>::value;
            }) == (want == none || class_before == none ? none : std::max(want, class_before)));
    t_before = t;
    class_before = want;
    if (!rt.held) {
      ++refused;
      continue;
    }
    REQUIRE(rt.ranks == n);
    REQUIRE(rt.crowded == crowded);
    const auto check = [&](auto kernel) {
      compare_ranks(rng, t, rt, kernel);
      using K = decltype(kernel);
      compare_rank_group<bf16>(rng, t, simd::decode_rank_kernel<bf16, K::ranks, K::pairs>(rt));
      compare_rank_group<fp16>(rng, t, simd::decode_rank_kernel<fp16, K::ranks, K::pairs>(rt));
      compare_rank_group<fp32>(rng, t, simd::decode_rank_kernel<fp32, K::ranks, K::pairs>(rt));
      compare_rank_zeros_group<bf16, K::ranks, K::pairs>(rng, t, rt, z);
      compare_rank_zeros_group<fp16, K::ranks, K::pairs>(rng, t, rt, z);
      compare_rank_zeros_group<fp32, K::ranks, K::pairs>(rng, t, rt, z);
    };
    if (rt.fits(32, 1)) check(simd::decode_rank_kernel<bf16, 32, 1>(rt)), ++fitted[0];
    if (rt.fits(64, 1)) check(simd::decode_rank_kernel<bf16, 64, 1>(rt)), ++fitted[1];
    if (rt.fits(128, 3)) check(simd::decode_rank_kernel<bf16, 128, 3>(rt)), ++fitted[2];
  }
  CHECK(fitted[0] > 200);
  CHECK(fitted[1] > fitted[0] + 50);
  CHECK(fitted[2] > fitted[1] + 100);
  CHECK(refused > 50);
}
#endif

// The groups that decode a rANS body's last stream words (fewer than 32 left) take the vector
// kernels from a copy of those words (stream_tail), not from the chunk. A chunk that lacks its
// last k words (its word count cut by k, its span and buffer to match: the stream's padding after
// it, zeros, is all that follows it in the buffer, and for three of the cuts at most one byte;
// check value resealed) runs out there: every path says corrupt, as the reference does, and (in
// the sanitizer build) none reads past the buffer, not even in the groups after the one that ran
// out. Dense bodies, and bodies with zero symbols (every eleventh element zero).
TEMPLATE_TEST_CASE("a rANS stream that runs out in its last words", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using RL = codec_detail::rans::layout<E>;
  const std::uint64_t m = 8192;
  for (bool zeros : {false, true}) {
    auto v = testing::make_tensor<E>(m, 0.02, testing::distribution::gaussian, 9);
    if (zeros)
      for (std::uint64_t i = 0; i < m; i += 11) v[i] = 0;
    const auto chunk = entropy_chunk<E>(v);
    format::chunk_header h;
    codec_detail::body_shape body;
    REQUIRE(codec_detail::check_chunk<E>(chunk.data(), chunk.size(), m, false, &h, &body) == status::success);
    REQUIRE(format::mode_is_rans(h.mode));
    REQUIRE(format::mode_has_zero_symbols(h.mode) == zeros);
    REQUIRE(h.escapes > 40);
    compare_decoders<E>(chunk, chunk.size(), m, false);
    const codec_detail::rans_sections<E> sec(chunk.data(), h, body);
    const std::uint64_t stream = static_cast<std::uint64_t>(sec.stream - chunk.data());
    // (cuts after which at most one byte of padding follows the stream, so that a read of a word
    // past its end is a read past the buffer; the others leave up to 15 bytes of it)
    std::vector<std::uint32_t> cuts = {1u, 2u, 3u, 8u, 17u, 31u, 32u, 33u};
    for (std::uint32_t k = 1, close = 0; k < 40 && close < 3; ++k)
      if ((16 - (stream + 2 * (h.escapes - k)) % 16) % 16 <= 1) cuts.push_back(k), ++close;
    REQUIRE(cuts.size() == 11);
    for (std::uint32_t k : cuts) {
      INFO((zeros ? "zero symbols, " : "dense, ") << k << " words cut");
      format::chunk_header g = h;
      g.escapes -= k;
      std::vector<std::uint8_t> cut(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(RL::chunk_bytes(
                                                                      sec.rests, body.base, sec.nsym, g.escapes)));
      std::fill(cut.begin() + static_cast<std::ptrdiff_t>(stream + 2 * g.escapes), cut.end(), 0);
      format::write_chunk_header(cut.data(), g);
      reseal(cut, m);
      format::chunk_header checked;
      codec_detail::body_shape shape;
      REQUIRE(codec_detail::check_chunk<E>(cut.data(), cut.size(), m, false, &checked, &shape) == status::success);
      std::vector<std::uint8_t> back(m * format::chunk_layout<E>::elem_size);
      REQUIRE(codec_detail::decode_chunk<E>(cut.data(), cut.size(), m, false, back.data()) == status::corrupt);
      compare_decoders<E>(cut, cut.size(), m, false);
    }
  }
}

// The chunks of testing::rans_edge_chunks (one symbol, zero symbols of one sign, masked noise, a
// rare symbol), each through every host path, and as one stream in the modes they were made for
// (the device test compares its bytes with these: test_cuda_codec.cu). (Catch2 2.13 indents a
// failing test's name after its first ": " and throws std::out_of_range, hiding the failure,
// where that comes past the console's 80 columns: keep such names short before the colon.)
TEMPLATE_TEST_CASE("rANS edge chunks: every host path writes the reference's bytes", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using Codec = codec<E, codebook::entropy>;
  using bits = typename E::bits_type;
  const std::uint64_t chunk = 8192;
  const auto v = testing::rans_edge_chunks<E>(chunk);
  for (std::uint64_t first = 0; first < v.size(); first += chunk)
    for (bool checksum : {false, true}) {
      INFO("chunk " << first / chunk << " checksum " << checksum);
      compare_paths<Codec>(std::vector<bits>(v.begin() + static_cast<std::ptrdiff_t>(first),
                                             v.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(first + chunk, v.size()))),
                           checksum);
    }
  host::compress_options opt;
  opt.chunk_elems = chunk;
  const auto s = host::compress<Codec>(v.data(), v.size(), opt);
  std::vector<unsigned> modes;
  for (std::uint64_t c = 0; c < format::chunk_count(v.size(), chunk); ++c)
    modes.push_back(s[format::directory_entry(s.data(), c)]);
  CHECK(modes == std::vector<unsigned>{4, 12, 12, 2, 0, 6, 4, 2});
  std::vector<bits> back(v.size());
  REQUIRE(host::decompress_as<E>(s.data(), s.size(), back.data(), back.size() * sizeof(bits)) == status::success);
  CHECK(back == v);
}

// rANS chunks on the edge of being stored: a body whose elements are incompressible random bits
// where a uniform draw u_i < p and compressible values elsewhere, with p bisected until the
// reference's chunk turns from rANS to stored. The last rANS chunk's stream ends within a few
// bytes of its rest sections, so the vector encoders code its last groups by the reference's group
// step, and the first stored one runs out of room there; both must come out as the reference's
// bytes. Dense bodies in a full chunk, and bodies with zero symbols in a chunk of 4096 (64 zeros,
// the fewest that turn them on, whose savings do not pay for the zero-symbol table, so random
// bits still end up stored; no other element takes symbols 1 and 2, which become zp and zn).
TEMPLATE_TEST_CASE("rANS encoders agree where a chunk only just fits", "[host][simd]", bf16, fp16, fp32) {
  using E = TestType;
  using Codec = codec<E, codebook::entropy>;
  using L = format::chunk_layout<E>;
  using S = codec_detail::rans::split<E>;
  using bits = typename E::bits_type;
  constexpr unsigned shift = std::is_same_v<E, fp32> ? 23 : std::is_same_v<E, bf16> ? 7 : 8;
  for (bool zeros : {false, true}) {
    const std::uint64_t m = zeros ? 4096 : 65536;
    INFO("m = " << m << (zeros ? ", zero symbols" : ""));
    std::mt19937_64 rng(76);
    const auto smooth = testing::make_tensor<E>(m, 0.03, testing::distribution::gaussian, 5);
    std::vector<double> u(m);
    std::vector<bits> noise(m);
    for (std::uint64_t i = 0; i < m; ++i) {
      u[i] = std::uniform_real_distribution<double>(0, 1)(rng);
      noise[i] = static_cast<bits>(rng());
    }
    const auto make = [&](double p) {
      std::vector<bits> v(m);
      for (std::uint64_t i = 0; i < m; ++i) {
        v[i] = u[i] < p ? noise[i] : smooth[i];
        if (!zeros) continue;
        const unsigned sym = S::symbol(v[i]);
        if (sym == 1 || sym == 2) v[i] = static_cast<bits>((v[i] & ~(bits(0xFF) << shift)) | (bits(3) << shift));
        if (i % 64 == 0) v[i] = static_cast<bits>(i % 128 ? 0 : bits(1) << (E::total_bits - 1));  // +0.0, -0.0
      }
      return v;
    };
    std::vector<std::uint8_t> out(L::stored_bytes(m));
    std::uint64_t size = 0;
    const auto reference = [&](const std::vector<bits>& v) {
      size = codec_detail::code_chunk<E>(codebook::entropy{}, reinterpret_cast<const std::uint8_t*>(v.data()), m,
                                         false, true, out.data());
      return format::read_chunk_header(out.data()).mode;
    };
    REQUIRE(format::mode_is_rans(reference(make(0.0))));
    REQUIRE(!format::mode_is_rans(reference(make(1.0))));
    double lo = 0.0, hi = 1.0;  // rANS at lo, stored at hi
    for (int k = 0; k < 40; ++k) {
      const double mid = (lo + hi) / 2;
      (format::mode_is_rans(reference(make(mid))) ? lo : hi) = mid;
    }
    const auto last = make(lo), first = make(hi);
    const auto mode = reference(last);
    REQUIRE(format::mode_is_rans(mode));
    REQUIRE(format::mode_has_zero_symbols(mode) == zeros);
    INFO("last rANS chunk: " << size << " bytes against " << L::stored_bytes(m) << " stored");
    CHECK(size + 16 >= L::stored_bytes(m));  // (its stream came within the kernels' margin)
    for (bool checksum : {false, true}) {
      compare_paths<Codec>(last, checksum);
      compare_paths<Codec>(first, checksum);
    }
  }
}
