// The device's rANS decoder by warps (cuda/detail/warp_rans.cuh, which cuda::decompress runs with
// tuning<..., RansWarps > 0>) on a warp of 32 host threads (support/warp_emulation.hpp), so that
// it is checked on every machine, GPU or not: it decodes every rANS chunk of the host's streams to
// the host's values (dense, zero masks, zero symbols, the edge chunks of rans_edge_chunks), gives
// the host's verdict on damaged chunks that pass the chunk checks (the only ones it is handed),
// and its warp's table check (warp_table_ok, also block_decode's) gives rans::table_ok's verdict;
// and the device encoder's warp walk (rans_encode_groups) writes the host's bytes. The kernels
// around them (chunk assignment, the skip rule, statuses, the block's staging) are the GPU tests'.
#include "../support/warp_emulation.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <zipccl/zipccl.hpp>
#include <zipccl/cuda/detail/warp_rans.cuh>

#include "../support/stream_tools.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;
namespace we = zipccl::testing::warp_emulation;

namespace {

constexpr std::uint32_t chunk_elems = 2048;

// The warp decoder on one chunk (every lane must give the same answer); out is filled first, so
// that an element it never writes shows. With odd, the chunk is read from and the values written
// to odd addresses (the decoder's byte-wise loads and stores, which a device test never takes).
template <class E>
bool warp_decode(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, std::vector<std::uint8_t>& out,
                 bool odd = false) {
  const std::size_t bytes = m * sizeof(typename E::bits_type), at = odd ? 1 : 8;  // (8: aligned for every type)
  std::vector<std::uint8_t> in, dst(bytes + 16, 0xEE);
  if (odd) {
    in.assign(span + 1, 0);
    std::memcpy(in.data() + 1, chunk, span);
    chunk = in.data() + 1;
  }
  std::uint8_t* o = dst.data() + at;
  typename cuda::detail::warp_rans<E>::storage shared;  // the warp's shared memory
  bool ok[32];
  we::run_warp([&](unsigned l) { ok[l] = cuda::detail::warp_rans<E>::decode(shared, chunk, m, o); });
  for (unsigned l = 1; l < 32; ++l) REQUIRE(ok[l] == ok[0]);
  // nothing written outside the output, on either side
  const auto fill = [](std::uint8_t x) { return x == 0xEE; };
  REQUIRE(std::all_of(dst.begin(), dst.begin() + at, fill));
  REQUIRE(std::all_of(dst.begin() + at + bytes, dst.end(), fill));
  out.assign(o, o + bytes);
  return ok[0];
}

struct tally {
  std::uint64_t rans = 0, failed = 0, partial = 0;  // partial: chunks whose last group is short
};

// Every rANS chunk of stream s that passes the host's chunk checks: the warp's verdict and values
// against the host's decode_chunk (with odd, each chunk and its output at odd addresses).
template <class E>
tally compare_stream(const std::vector<std::uint8_t>& s, bool odd = false) {
  INFO("chunks and output at odd addresses: " << odd);
  tally t;
  format::stream_header h;
  REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
  for (std::uint64_t c = 0; c < h.chunks; ++c) {
    const std::uint64_t off = format::directory_entry(s.data(), c), end = format::chunk_end(s.data(), h, c);
    if (off >= end || end > s.size()) continue;
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    const std::uint8_t* chunk = s.data() + off;
    format::chunk_header ch;
    codec_detail::body_shape body;
    if (codec_detail::check_chunk<E>(chunk, end - off, m, format::reader_seal(h, c), &ch, &body) != status::success)
      continue;
    if (!format::mode_is_rans(ch.mode)) continue;
    std::vector<std::uint8_t> want(m * sizeof(typename E::bits_type) + 8), got;
    const status host = codec_detail::decode_chunk<E>(chunk, end - off, m, format::reader_seal(h, c), want.data());
    INFO("chunk " << c << " mode " << unsigned(s[off]) << " host " << to_string(host));
    const bool ok = warp_decode<E>(chunk, end - off, m, got, odd);
    ++t.rans;
    t.failed += host != status::success;
    t.partial += m % format::group_elems != 0;
    CHECK(ok == (host == status::success));
    if (ok && host == status::success) CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
  }
  return t;
}

template <class E>
std::vector<std::vector<typename E::bits_type>> inputs() {
  using T = typename E::bits_type;
  std::vector<std::vector<T>> v;
  v.push_back(testing::make_tensor<E>(5 * chunk_elems + 1501, 0.02, testing::distribution::gaussian, 11));
  v.push_back(testing::make_tensor<E>(3 * chunk_elems, 1e-4, testing::distribution::student_t, 12));
  v.push_back(testing::rans_edge_chunks<E>(chunk_elems, 13));
  v.push_back(testing::make_element_sparse<E>(2 * chunk_elems + 1005, 0.5, 0.5, 1e-3, 14));  // zero symbols
  auto rows = testing::make_row_sparse<E>(2 * chunk_elems / 128, 128, 0.6, 1e-3, 15);     // zero masks
  for (std::uint64_t i = 0; i < rows.size(); i += 5) rows[i] = 0;                            // and zero symbols
  v.push_back(rows);
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("rANS by warps, on an emulated warp: the host's values for every rANS chunk", "[host][rans-warps]",
                   bf16, fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  tally all;
  std::uint64_t zero_symbols = 0, masked = 0;
  const auto in = inputs<E>();
  for (std::size_t k = 0; k < in.size(); ++k)
    for (bool checksum : {false, true}) {
      INFO("input " << k << " checksum " << checksum);
      host::compress_options opt;
      opt.chunk_elems = chunk_elems;
      opt.checksum = checksum;
      const auto s = host::compress<C>(in[k].data(), in[k].size(), opt);
      const tally t = compare_stream<E>(s);
      const tally u = compare_stream<E>(s, true);
      CHECK(u.rans == t.rans);
      all.rans += t.rans;
      all.failed += t.failed;
      all.partial += t.partial;
      zero_symbols += testing::zero_symbol_chunks(s);
      masked += testing::chunk_modes(s)[6];
    }
  // what the inputs were made to reach (none of it fails: these are whole streams)
  CHECK(all.rans >= 30);
  CHECK(all.partial >= 4);  // (a short last group: its lanes past m neither step nor store)
  CHECK(all.failed == 0);
  CHECK(zero_symbols >= 6);
  CHECK(masked >= 2);
}

TEMPLATE_TEST_CASE("rANS by warps, on an emulated warp: the host's verdict on damaged chunks that pass the checks",
                   "[host][rans-warps]", bf16, fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  host::compress_options opt;
  opt.chunk_elems = chunk_elems;
  const auto v = testing::make_element_sparse<E>(3 * chunk_elems, 0.3, 0.5, 1e-3, 21);  // zero symbols too
  const auto dense = testing::make_tensor<E>(3 * chunk_elems, 0.02, testing::distribution::gaussian, 22);
  std::mt19937_64 rng(23);
  tally all;
  for (const auto* x : {&v, &dense}) {
    const auto s = host::compress<C>(x->data(), x->size(), opt);
    format::stream_header h;
    REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
    for (int trial = 0; trial < 40; ++trial) {
      auto bad = s;
      const std::uint64_t c = rng() % h.chunks;
      const std::uint64_t off = format::directory_entry(bad.data(), c), end = format::chunk_end(bad.data(), h, c);
      // a byte of the table, the states, the rests or the stream (past the 16-byte header), or
      // two, hashes repaired so that the chunk checks pass where the damage is not structural
      const int flips = 1 + trial % 2;
      for (int f = 0; f < flips; ++f) bad[off + 16 + rng() % (end - off - 16)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      testing::repair_hashes(bad);
      INFO("trial " << trial);
      const tally t = compare_stream<E>(bad);
      all.rans += t.rans;
      all.failed += t.failed;
    }
  }
  // the damage reached the decoder, and the decoder found some of it (a state that does not end at
  // 2^16, a stream or rests that run out or are left over)
  CHECK(all.rans >= 200);
  CHECK(all.failed >= 5);
}

namespace {

// A chunk's table as the device encoder holds it (frequencies, first slots, the divisors'
// reciprocals), read back from the table the host wrote.
struct encoder_table {
  std::uint32_t freq[codec_detail::rans::symbols] = {}, cum[codec_detail::rans::symbols] = {};
  std::uint64_t inv[codec_detail::rans::symbols] = {};
  explicit encoder_table(const std::uint8_t* t) {
    namespace rans = codec_detail::rans;
    std::uint64_t k = 0;
    for (unsigned v = 0; v < rans::symbols; ++v)
      if ((t[v / 8] >> (v % 8)) & 1u) freq[v] = format::load_le<std::uint16_t>(t + rans::bitmap_bytes + 2 * k++);
    for (unsigned v = 0, c = 0; v < rans::symbols; c += freq[v], ++v) cum[v] = c;
    for (unsigned v = 0; v < rans::symbols; ++v) inv[v] = rans::divisor::of(freq[v]).inv;
  }
};

}  // namespace

// block_encode's walk (detail::rans_encode_groups, the device encoder's only warp-level step) on an
// emulated warp, with each rANS chunk's table as the host chose it: the rest sections, the stream
// words and the final states, byte for byte the host's; the words it counts without writing; and
// the fallback where the stream would not fit.
TEMPLATE_TEST_CASE("the device encoder's warp walk, on an emulated warp: the host's bytes for every rANS chunk",
                   "[host][rans-warps]", bf16, fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  using bits = typename E::bits_type;
  namespace rans = codec_detail::rans;
  using RL = rans::layout<E>;
  std::uint64_t coded = 0, partial = 0, with_zeros = 0, with_mask = 0, refused = 0;
  for (const auto& v : inputs<E>()) {
    host::compress_options opt;
    opt.chunk_elems = chunk_elems;
    const auto s = host::compress<C>(v.data(), v.size(), opt);
    format::stream_header h;
    REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
    for (std::uint64_t c = 0; c < h.chunks; ++c) {
      const std::uint64_t off = format::directory_entry(s.data(), c), end = format::chunk_end(s.data(), h, c);
      const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
      format::chunk_header ch;
      codec_detail::body_shape body;
      REQUIRE(codec_detail::check_chunk<E>(s.data() + off, end - off, m, false, &ch, &body) == status::success);
      if (!format::mode_is_rans(ch.mode)) continue;
      INFO("chunk " << c << " mode " << unsigned(s[off]));
      const std::vector<std::uint8_t> want(s.begin() + static_cast<std::ptrdiff_t>(off), s.begin() + static_cast<std::ptrdiff_t>(end));
      const rans::zero_symbols zero = codec_detail::header_zero_symbols(ch);
      const std::uint64_t nsym = ch.table[0] + 1u, rests = rans::rests_of(body.elems, zero), escapes = ch.escapes;
      const encoder_table t(want.data() + RL::table_offset(body.base));
      const bits* in = v.data() + c * chunk_elems;
      const std::uint8_t* mask = body.zero_mask != nullptr ? want.data() + format::chunk_header_bytes : nullptr;
      const std::uint64_t groups = (m + format::group_elems - 1) / format::group_elems;
      // writing: the states, rests and stream cleared, then written by the walk
      std::vector<std::uint8_t> got = want;
      std::fill(got.begin() + static_cast<std::ptrdiff_t>(RL::states_offset(body.base, nsym)),
                got.begin() + static_cast<std::ptrdiff_t>(RL::content_end(rests, body.base, nsym, escapes)), 0);
      bool fits[32];
      std::uint64_t left[32], at_end[32];
      we::run_warp([&](unsigned l) {
        std::uint32_t x = rans::state_low;
        std::uint64_t at = rests, top = 2 * escapes;
        fits[l] = cuda::detail::rans_encode_groups<E>(
            [&](std::uint64_t i) { return in[i]; }, 0, groups, m, mask, zero, t.freq, t.cum, t.inv, x, at, top,
            got.data() + RL::bytes_offset(rests, body.base, nsym), got.data() + RL::words_offset(body.base, nsym),
            got.data() + RL::stream_offset(rests, body.base, nsym));
        format::store_le<std::uint32_t>(got.data() + RL::states_offset(body.base, nsym) + 4 * l, x);
        left[l] = top;
        at_end[l] = at;
      });
      for (unsigned l = 0; l < 32; ++l) {
        REQUIRE(fits[l]);
        REQUIRE(left[l] == 0);
        REQUIRE(at_end[l] == 0);
      }
      CHECK(got == want);
      // counting: the same number of words; and one word too little room is refused
      for (std::uint64_t room : {2 * escapes + 64, 2 * escapes - (escapes ? 2 : 0)}) {
        const bool enough = room >= 2 * escapes;
        if (!enough && escapes == 0) continue;
        we::run_warp([&](unsigned l) {
          std::uint32_t x = rans::state_low;
          std::uint64_t at = rests, top = room;
          fits[l] = cuda::detail::rans_encode_groups<E>([&](std::uint64_t i) { return in[i]; }, 0, groups, m, mask, zero,
                                                        t.freq, t.cum, t.inv, x, at, top, nullptr, nullptr, nullptr);
          left[l] = top;
        });
        for (unsigned l = 0; l < 32; ++l) {
          REQUIRE(fits[l] == enough);
          if (enough) REQUIRE(room - left[l] == 2 * escapes);
        }
        refused += !enough;
      }
      ++coded;
      partial += m % format::group_elems != 0;
      with_zeros += zero.on;
      with_mask += mask != nullptr;
    }
  }
  CHECK(coded >= 15);
  CHECK(partial >= 2);
  CHECK(with_zeros >= 3);
  CHECK(with_mask >= 1);
  CHECK(refused >= 10);
}

TEMPLATE_TEST_CASE("warp_table_ok on an emulated warp gives rans::table_ok's verdict", "[host][rans-warps]", bf16,
                   fp16, fp32) {
  using E = TestType;
  using C = codec<E, codebook::entropy>;
  namespace rans = codec_detail::rans;
  host::compress_options opt;
  opt.chunk_elems = chunk_elems;
  const auto v = testing::make_element_sparse<E>(4 * chunk_elems, 0.3, 0.5, 1e-3, 31);
  const auto s = host::compress<C>(v.data(), v.size(), opt);
  format::stream_header h;
  REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
  std::mt19937_64 rng(32);
  std::uint64_t good = 0, bad = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const std::uint64_t c = rng() % h.chunks, off = format::directory_entry(s.data(), c);
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    format::chunk_header ch = format::read_chunk_header(s.data() + off);
    if (!format::mode_is_rans(ch.mode)) continue;
    const codec_detail::body_shape body = codec_detail::chunk_body<E>(ch, m, {}, s.data() + off);
    const rans::zero_symbols zero = codec_detail::header_zero_symbols(ch);
    const std::uint64_t nsym = ch.table[0] + 1u;
    // the table and the states after it (which table_ok checks too)
    const std::uint64_t at = off + rans::layout<E>::table_offset(body.base);
    std::vector<std::uint8_t> table(s.begin() + static_cast<std::ptrdiff_t>(at),
                                    s.begin() + static_cast<std::ptrdiff_t>(at + rans::table_bytes(nsym) + rans::states_bytes));
    if (trial % 3 != 0) table[rng() % table.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    const bool want = rans::table_ok(table.data(), nsym, zero);
    bool got[32];
    we::run_warp([&](unsigned l) { got[l] = cuda::detail::warp_table_ok(table.data(), nsym, zero); });
    for (unsigned l = 0; l < 32; ++l) REQUIRE(got[l] == want);
    (want ? good : bad) += 1;
  }
  CHECK(good >= 20);
  CHECK(bad >= 20);
}
