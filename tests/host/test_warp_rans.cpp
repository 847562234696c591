// The device's rANS decoder by warps (cuda/detail/warp_rans.cuh, which cuda::decompress runs with
// tuning<..., RansWarps > 0>) on a warp of 32 host threads (support/warp_emulation.hpp), so that
// it is checked on every machine, GPU or not: it decodes every rANS chunk of the host's streams to
// the host's values (dense, zero masks, zero symbols, the edge chunks of rans_edge_chunks), gives
// the host's verdict on damaged chunks that pass the chunk checks (the only ones it is handed),
// and its warp's table check (warp_table_ok, also block_decode's) gives rans::table_ok's verdict.
// The kernel around it (chunk assignment, the skip rule, statuses) is the GPU tests' to check.
#include "../support/warp_emulation.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
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
// that an element it never writes shows.
template <class E>
bool warp_decode(const std::uint8_t* chunk, std::uint64_t m, std::vector<std::uint8_t>& out) {
  out.assign(m * sizeof(typename E::bits_type), 0xEE);
  typename cuda::detail::warp_rans<E>::storage shared;  // the warp's shared memory
  bool ok[32];
  we::run_warp([&](unsigned l) { ok[l] = cuda::detail::warp_rans<E>::decode(shared, chunk, m, out.data()); });
  for (unsigned l = 1; l < 32; ++l) REQUIRE(ok[l] == ok[0]);
  return ok[0];
}

struct tally {
  std::uint64_t rans = 0, failed = 0, partial = 0;  // partial: chunks whose last group is short
};

// Every rANS chunk of stream s that passes the host's chunk checks: the warp's verdict and values
// against the host's decode_chunk.
template <class E>
tally compare_stream(const std::vector<std::uint8_t>& s) {
  tally t;
  format::stream_header h;
  REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
  const bool checksum = (h.flags & format::flag_checksum) != 0;
  for (std::uint64_t c = 0; c < h.chunks; ++c) {
    const std::uint64_t off = format::directory_entry(s.data(), c), end = format::chunk_end(s.data(), h, c);
    if (off >= end || end > s.size()) continue;
    const std::uint64_t m = format::chunk_elements(h.count, h.chunk_elems, c);
    const std::uint8_t* chunk = s.data() + off;
    format::chunk_header ch;
    codec_detail::body_shape body;
    if (codec_detail::check_chunk<E>(chunk, end - off, m, checksum, &ch, &body) != status::success) continue;
    if (!format::mode_is_rans(ch.mode)) continue;
    std::vector<std::uint8_t> want(m * sizeof(typename E::bits_type) + 8), got;
    const status host = codec_detail::decode_chunk<E>(chunk, end - off, m, checksum, want.data());
    INFO("chunk " << c << " mode " << unsigned(s[off]) << " host " << to_string(host));
    const bool ok = warp_decode<E>(chunk, m, got);
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
