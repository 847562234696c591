// The collectives' schedules (collective/schedule.hpp), which the host and the device executors
// share: simulated over every rank at once, each item pairs a send with the matching receive,
// nothing is sent before it is there, and the collective ends with the right data everywhere.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <zipccl/collective/schedule.hpp>

using namespace zipccl::collective;

namespace {
// Every rank's schedule; checks that item i of rank r and item i of its dst are the two ends of
// one transfer (same block, segment and elements), for every i.
std::vector<schedule> all_ranks(int n, schedule (*make)(int, int, const segmentation&), const segmentation& seg) {
  std::vector<schedule> v;
  for (int r = 0; r < n; ++r) v.push_back(make(r, n, seg));
  for (int r = 0; r < n; ++r) {
    REQUIRE(v[r].items() == v[0].items());
    for (std::uint64_t i = 0; i < v[r].items(); ++i) {
      const step a = v[r].at(i);
      REQUIRE(a.dst >= 0);
      REQUIRE(a.dst != r);
      const step b = v[a.dst].at(i);
      CHECK(b.src == r);
      CHECK(b.recv_block == a.send_block);
      CHECK(b.segment == a.segment);
      CHECK(b.first == a.first);
      CHECK(b.elems == a.elems);
    }
  }
  return v;
}
}  // namespace

TEST_CASE("segmentation cuts a block into whole chunks", "[collective][schedule][host]") {
  const segmentation s(5000, 1024, 2048);
  CHECK(s.seg == 2048);
  CHECK(s.segments == 3);
  CHECK(s.elems(2) == 5000 - 4096);
  CHECK(segmentation(5000, 1024, 1500).seg == 2048);  // rounded up to whole chunks
  CHECK(segmentation(5000, 1024, 0).segments == 1);   // 0: one segment
  CHECK(segmentation(100, 1024, 2048).seg == 100);    // at most the count
  CHECK(segmentation(0, 1024, 2048).segments == 0);
}

TEST_CASE("ring all_gather: every rank ends with every segment of every block, once", "[collective][schedule][host]") {
  for (int n = 1; n <= 9; ++n) {
    for (std::uint64_t count : {1ull, 3000ull, 8192ull}) {
      INFO("ranks " << n << ", count " << count);
      const segmentation seg(count, 1024, 2048);
      const auto v = all_ranks(n, &schedule::ring_all_gather, seg);
      CHECK(v[0].items() == static_cast<std::uint64_t>(n - 1) * seg.segments);
      // have[r] = the (block, segment) pairs rank r holds, and in which item each arrived
      std::vector<std::map<std::pair<int, std::uint64_t>, std::uint64_t>> have(n);
      for (int r = 0; r < n; ++r)
        for (std::uint64_t s = 0; s < seg.segments; ++s) have[r][{r, s}] = no_item;
      for (std::uint64_t i = 0; i < v[0].items(); ++i) {
        for (int r = 0; r < n; ++r) {  // sends first: all of them read what arrived in earlier items
          const step a = v[r].at(i);
          const auto it = have[r].find({a.send_block, a.segment});
          REQUIRE(it != have[r].end());
          CHECK(a.from_input == (a.send_block == r));
          CHECK(it->second == a.forwards);  // forwards exactly the item that brought it
          if (!a.from_input) CHECK(a.forwards < i);
        }
        for (int r = 0; r < n; ++r) {
          const step b = v[r].at(i);
          CHECK(have[r].count({b.recv_block, b.segment}) == 0);  // never twice
          have[r][{b.recv_block, b.segment}] = i;
        }
      }
      for (int r = 0; r < n; ++r) CHECK(have[r].size() == static_cast<std::size_t>(n) * seg.segments);
    }
  }
}

TEST_CASE("ring reduce_scatter: every rank ends with the sum of its block over all ranks", "[collective][schedule][host]") {
  for (int n = 1; n <= 9; ++n) {
    for (std::uint64_t count : {1ull, 3000ull, 8192ull}) {
      INFO("ranks " << n << ", count " << count);
      const segmentation seg(count, 1024, 2048);
      const auto v = all_ranks(n, &schedule::ring_reduce_scatter, seg);
      // partial[r][(block, segment)] = the ranks whose inputs rank r's partial result holds
      std::vector<std::map<std::pair<int, std::uint64_t>, std::set<int>>> partial(n);
      std::vector<std::map<std::pair<int, std::uint64_t>, std::uint64_t>> made(n);  // item that made it
      for (std::uint64_t i = 0; i < v[0].items(); ++i) {
        std::vector<std::set<int>> sent(n);
        for (int r = 0; r < n; ++r) {
          const step a = v[r].at(i);
          if (a.from_input) {
            CHECK(a.hop == 0);
            CHECK(a.send_block == (r + n - 1) % n);
            sent[r] = {r};
          } else {
            const auto key = std::make_pair(a.send_block, a.segment);
            REQUIRE(partial[r].count(key) == 1);
            CHECK(made[r][key] == a.forwards);
            sent[r] = partial[r][key];
          }
        }
        for (int r = 0; r < n; ++r) {
          const step b = v[r].at(i);
          auto got = sent[b.src];
          CHECK(got.count(r) == 0);  // no input counted twice
          got.insert(r);             // the receiver adds its own input block
          partial[r][{b.recv_block, b.segment}] = got;
          made[r][{b.recv_block, b.segment}] = i;
        }
      }
      std::set<int> everyone;
      for (int q = 0; q < n; ++q) everyone.insert(q);
      for (int r = 0; r < n && n > 1; ++r)
        for (std::uint64_t s = 0; s < seg.segments; ++s) CHECK(partial[r][{r, s}] == everyone);
    }
  }
}

TEST_CASE("pairwise all_to_all: every ordered pair of ranks meets exactly once", "[collective][schedule][host]") {
  for (int n = 1; n <= 9; ++n) {
    INFO("ranks " << n);
    std::vector<schedule> v;
    for (int r = 0; r < n; ++r) v.push_back(schedule::pairwise_all_to_all(r, n));
    std::set<std::pair<int, int>> pairs;
    for (int r = 0; r < n; ++r) {
      REQUIRE(v[r].items() == static_cast<std::uint64_t>(n - 1));
      std::set<int> to, from;
      for (std::uint64_t i = 0; i < v[r].items(); ++i) {
        const step a = v[r].at(i);
        CHECK(a.send_block == a.dst);
        CHECK(a.recv_block == a.src);
        CHECK(a.forwards == no_item);
        CHECK(v[a.dst].at(i).src == r);
        to.insert(a.dst);
        from.insert(a.src);
        pairs.insert({r, a.dst});
      }
      CHECK(to.size() == static_cast<std::size_t>(n - 1));
      CHECK(from.size() == static_cast<std::size_t>(n - 1));
      CHECK(to.count(r) == 0);
    }
    CHECK(pairs.size() == static_cast<std::size_t>(n) * (n - 1));
  }
}

TEST_CASE("send and recv: the same segments, one side each", "[collective][schedule][host]") {
  const segmentation seg(10000, 1024, 4096);
  const schedule s = schedule::send(0, 2, 1, seg), r = schedule::recv(1, 2, 0, seg);
  REQUIRE(s.items() == 3);
  REQUIRE(r.items() == 3);
  for (std::uint64_t i = 0; i < 3; ++i) {
    CHECK(s.at(i).dst == 1);
    CHECK(s.at(i).src == no_peer);
    CHECK(r.at(i).src == 0);
    CHECK(r.at(i).dst == no_peer);
    CHECK(s.at(i).first == r.at(i).first);
    CHECK(s.at(i).elems == r.at(i).elems);
  }
  CHECK(s.at(2).elems == 10000 - 8192);
}
