// Seeded mutation of checksum streams and wire segments: bit flips, truncations, header fields
// with the header hash recomputed, chunks swapped or taken from another stream (the directory
// laid out again and the header hash recomputed where their sizes differ), chunks of a segment
// swapped or moved between segments. With the checksum, none of them may decode to values other
// than the ones written: every mutated input is an error or decodes to the original, bit for bit.
// (Under the sanitize preset this also checks that no mutation reads or writes out of bounds.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/collective/detail/fixed_wire.hpp>
#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/stream_tools.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

namespace {

template <class Codec>
constexpr std::uint64_t chunk_of = codebook::is_entropy_v<typename Codec::codebook_type> ? 2048 : 512;

// The data sets: paired chunks (coded and stored pairs of equal sizes), the same with zero groups
// and zeros, and the rANS edge cases (one symbol, zero symbols, zero_stored, stored, zero_rans,
// frequencies 4095 and 1, a masked tail), so that every chunk mode occurs.
template <class Codec>
std::vector<typename Codec::bits_type> data_set(int which, std::uint64_t seed) {
  using E = typename Codec::element_type;
  if (which < 2) return testing::paired_chunks<E>(chunk_of<Codec>, which == 1, seed);
  return testing::rans_edge_chunks<E>(chunk_of<Codec>, seed);
}

template <class Codec>
std::vector<std::uint8_t> compress(const std::vector<typename Codec::bits_type>& v) {
  host::compress_options opt;
  opt.chunk_elems = static_cast<std::uint32_t>(chunk_of<Codec>);
  opt.checksum = true;
  return host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), v.size()));
}

// The chunks of a valid stream, each as its bytes.
std::vector<std::vector<std::uint8_t>> chunks_of(const std::vector<std::uint8_t>& s) {
  format::stream_header h;
  REQUIRE(format::read_header(s.data(), s.size(), &h) == status::success);
  std::vector<std::vector<std::uint8_t>> r;
  for (std::uint64_t c = 0; c < h.chunks; ++c)
    r.emplace_back(s.begin() + format::directory_entry(s.data(), c), s.begin() + format::chunk_end(s.data(), h, c));
  return r;
}

// A stream with the header of `s` (its total size and header hash recomputed, its digest kept)
// around the given chunks, as a forger who lays out the directory again would write it.
std::vector<std::uint8_t> relayout(const std::vector<std::uint8_t>& s, const std::vector<std::vector<std::uint8_t>>& cs) {
  const std::uint64_t data = format::data_offset(cs.size());
  std::vector<std::uint8_t> r(data, 0);
  std::memcpy(r.data(), s.data(), format::header_bytes);
  for (std::uint64_t c = 0; c < cs.size(); ++c) {
    format::store_le<std::uint64_t>(r.data() + format::header_bytes + 8 * c, r.size());
    const std::size_t at = r.size();
    r.resize(at + cs[c].size());
    if (!cs[c].empty()) std::memcpy(r.data() + at, cs[c].data(), cs[c].size());
  }
  format::store_le<std::uint64_t>(r.data() + 24, r.size());
  format::store_le<std::uint64_t>(r.data() + 40, format::header_hash(r.data(), cs.size()));
  return r;
}

// What the mutations of one stream came to.
struct outcome {
  int errors = 0, originals = 0;
};

// Decodes a mutated stream: an error, or exactly the original values (counted in *o).
template <class T>
void judge(const std::vector<std::uint8_t>& bad, const std::vector<T>& v, outcome* o) {
  std::vector<T> out(v.size() + 8, T(0x5A5A));
  const status s = host::decompress(bad.data(), bad.size(), out.data(), v.size() * sizeof(T));
  for (std::size_t i = v.size(); i < out.size(); ++i) REQUIRE(out[i] == T(0x5A5A));  // nothing past the output
  if (s != status::success) {
    ++o->errors;
    return;
  }
  out.resize(v.size());
  REQUIRE(out == v);
  ++o->originals;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("mutated checksum streams never decode to other values", "[host][mutation]",
                        testing::host_codecs) {
  using T = typename TestType::bits_type;
  const int which = GENERATE(0, 1, 2);
  INFO("data set " << which);
  const auto v = data_set<TestType>(which, 50 + static_cast<std::uint64_t>(which));
  const auto s = compress<TestType>(v);
  // a donor of the same shape: the same data with each pair's chunks exchanged (chunks of the
  // same place and size), or other data (other sizes)
  auto w = v;
  const std::uint64_t chunk = chunk_of<TestType>;
  std::swap_ranges(w.begin(), w.begin() + chunk, w.begin() + chunk);
  std::swap_ranges(w.begin() + 2 * chunk, w.begin() + 3 * chunk, w.begin() + 3 * chunk);
  const auto donor = compress<TestType>(w);
  const auto other = compress<TestType>(data_set<TestType>(which, 90 + static_cast<std::uint64_t>(which)));
  const auto cs = chunks_of(s), ds = chunks_of(donor), os = chunks_of(other);
  REQUIRE(ds.size() == cs.size());
  REQUIRE(os.size() == cs.size());
  std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(which));
  outcome o;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<std::uint8_t> bad;
    const int kind = trial % 6;
    INFO("trial " << trial << " kind " << kind);
    if (kind == 0) {  // one to three bit flips anywhere
      bad = s;
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) bad[rng() % bad.size()] ^= std::uint8_t(1u << (rng() % 8));
    } else if (kind == 1) {  // a truncation
      bad = s;
      bad.resize(rng() % s.size());
    } else if (kind == 2) {  // a header field changed, the header hash recomputed
      bad = s;
      static constexpr unsigned field_at[] = {4, 6, 7, 8, 12, 16, 24, 32, 36};
      static constexpr unsigned field_size[] = {2, 1, 1, 4, 4, 8, 8, 4, 4};
      const unsigned f = static_cast<unsigned>(rng() % 9);
      const unsigned byte = field_at[f] + static_cast<unsigned>(rng() % field_size[f]);
      bad[byte] = rng() % 2 ? static_cast<std::uint8_t>(bad[byte] + 1 + rng() % 3) : static_cast<std::uint8_t>(rng());
      // the header hash again, where the chunk count leaves the directory inside the stream
      const std::uint32_t chunks = format::load_le<std::uint32_t>(bad.data() + 32);
      if (format::data_offset(chunks) <= bad.size())
        format::store_le<std::uint64_t>(bad.data() + 40, format::header_hash(bad.data(), chunks));
    } else if (kind == 3) {  // two chunks swapped
      auto x = cs;
      const std::size_t a = rng() % x.size(), b = (a + 1 + rng() % (x.size() - 1)) % x.size();
      std::swap(x[a], x[b]);
      bad = relayout(s, x);
    } else if (kind == 4) {  // a chunk of the donor (the same place; the same size in pairs)
      auto x = cs;
      const std::size_t c = rng() % x.size();
      x[c] = ds[c];
      bad = relayout(s, x);
    } else {  // a chunk of other data, in its place or another
      auto x = cs;
      x[rng() % x.size()] = os[rng() % os.size()];
      bad = relayout(s, x);
    }
    judge<T>(bad, v, &o);
  }
  INFO("errors " << o.errors << ", decoded to the original " << o.originals);
  CHECK(o.errors > 500);
}

TEMPLATE_LIST_TEST_CASE("mutated wire segments never decode to other values", "[host][mutation][wire]",
                        testing::host_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  using W = collective::detail::wire<TestType>;
  using F = collective::detail::fixed_wire<TestType>;
  const bool checksum = GENERATE(false, true), sparse = GENERATE(false, true);
  INFO("checksum " << checksum << " sparse " << sparse);
  const std::uint64_t chunk = chunk_of<TestType>;
  const auto v = testing::paired_chunks<E>(chunk, sparse, 60);
  const std::uint64_t n = v.size(), count = 3 * n;
  const auto policy = testing::policy_for<TestType>(v.data(), n);
  std::mt19937_64 rng(2000 + 2 * checksum + sparse);
  outcome o;
  // the variable-size wire: segment 1 of a message of `count` elements
  {
    const collective::detail::wire_place here = F::place(count, 1), there = F::place(count, 2);
    std::vector<std::uint8_t> fixed(W::fixed_bytes(n, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(n, chunk));
    std::vector<std::uint8_t> f2 = fixed, t2 = tail, scratch(W::scratch_bytes(chunk));
    const std::uint64_t tb = W::encode(policy, v.data(), n, chunk, checksum, here, fixed.data(), tail.data());
    REQUIRE(W::encode(policy, v.data(), n, chunk, checksum, there, f2.data(), t2.data()) == tb);
    const std::uint64_t fb = W::fixed_bytes(n, chunk), cf = W::chunk_fixed(chunk);
    for (int trial = 0; trial < 300; ++trial) {
      auto bf = fixed, bt = tail;
      std::uint64_t len = tb;
      const int kind = trial % 4;
      INFO("variable-size wire, trial " << trial << " kind " << kind);
      if (kind == 0) {  // a byte of the fixed or the tail section
        if (rng() % 2 || tb == 0) bf[rng() % fb] ^= std::uint8_t(1 + rng() % 255);
        else bt[rng() % tb] ^= std::uint8_t(1 + rng() % 255);
      } else if (kind == 1) {  // a shorter tail
        len = tb ? rng() % tb : 0;
      } else if (kind == 2) {  // the fixed parts of two full chunks swapped (their tails stay)
        const std::uint64_t a = rng() % 4, b = (a + 1 + rng() % 3) % 4;
        std::swap_ranges(bf.begin() + a * cf, bf.begin() + (a + 1) * cf, bf.begin() + b * cf);
      } else {  // the fixed part of a chunk of segment 2 in segment 1 (the tails as they are)
        const std::uint64_t a = rng() % 4;
        std::memcpy(bf.data() + a * cf, f2.data() + a * cf, cf);
      }
      std::vector<T> out(n + 8, T(0x5A5A));
      std::uint64_t announced = 0;
      status s = W::tail_bytes(bf.data(), n, chunk, &announced);
      if (s == status::success)
        s = W::decode_into(bf.data(), bt.data(), len, n, chunk, checksum, here, out.data(), scratch.data());
      for (std::size_t i = n; i < out.size(); ++i) REQUIRE(out[i] == T(0x5A5A));
      // without the checksum a payload byte may decode to another value; with it, never
      if (s == status::success && checksum) {
        out.resize(n);
        REQUIRE(out == v);
      }
      s == status::success ? ++o.originals : ++o.errors;
    }
  }
  // the fixed-size wire, with room for every tail
  {
    const std::uint32_t permille = 4000;
    std::vector<std::uint8_t> seg(F::segment_bytes(n, chunk, permille)), seg2(seg.size()), scratch(F::scratch_bytes(chunk));
    REQUIRE(F::encode(policy, v.data(), n, chunk, checksum, count, 1, permille, seg.data(), scratch.data()) ==
            status::success);
    REQUIRE(F::encode(policy, v.data(), n, chunk, checksum, count, 2, permille, seg2.data(), scratch.data()) ==
            status::success);
    const std::uint64_t cf = W::chunk_fixed(chunk);
    for (int trial = 0; trial < 300; ++trial) {
      auto bad = seg;
      const int kind = trial % 3;
      INFO("fixed-size wire, trial " << trial << " kind " << kind);
      if (kind == 0) {
        for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) bad[rng() % bad.size()] ^= std::uint8_t(1u << (rng() % 8));
      } else if (kind == 1) {  // two full chunks' fixed parts swapped
        const std::uint64_t a = rng() % 4, b = (a + 1 + rng() % 3) % 4;
        std::swap_ranges(bad.begin() + F::preamble + a * cf, bad.begin() + F::preamble + (a + 1) * cf,
                         bad.begin() + F::preamble + b * cf);
      } else {  // segment 2's body under segment 1's preamble, one chunk's fixed part or all
        const std::uint64_t a = rng() % 4;
        if (rng() % 2) std::memcpy(bad.data() + F::preamble, seg2.data() + F::preamble, seg2.size() - F::preamble);
        else std::memcpy(bad.data() + F::preamble + a * cf, seg2.data() + F::preamble + a * cf, cf);
      }
      std::vector<T> out(n + 8, T(0x5A5A));
      const status s = F::decode_into(bad.data(), n, chunk, checksum, count, 1, permille, out.data(), scratch.data());
      for (std::size_t i = n; i < out.size(); ++i) REQUIRE(out[i] == T(0x5A5A));
      if (s == status::success && checksum) {
        out.resize(n);
        REQUIRE(out == v);
      }
      s == status::success ? ++o.originals : ++o.errors;
    }
  }
  INFO("errors " << o.errors << ", decoded " << o.originals);
  CHECK(o.errors > (checksum ? 500 : 300));
}
