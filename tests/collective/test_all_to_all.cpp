// all_to_all with variable counts over transport::local: every rank gets exactly the blocks its
// peers sent, on the plain, compressed and adaptive paths, pipelined or in lock step; fewer bytes
// on the wire; mismatched counts and corrupt blocks become errors on every rank.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <vector>

#include <zipccl/collective.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"
#include "../support/transports.hpp"

using namespace zipccl;
using transport::local_transport;
using transport::local_world;

namespace {

constexpr auto test_timeout = std::chrono::seconds(20);

// The elements rank `from` sends to rank `to`: a count that varies by pair (0, 1, odd, chunk
// boundaries and larger), and data that says where it came from.
std::uint64_t pair_count(int from, int to, std::uint64_t scale) {
  static const std::uint64_t pattern[] = {0, 1, 1023, 1024, 1025, 5001, 77, 2048};
  return pattern[static_cast<unsigned>(from * 3 + to * 5 + from * to) % 8] * scale;
}

template <class Codec>
std::vector<typename Codec::bits_type> block(int from, int to, std::uint64_t count) {
  return testing::make_tensor<typename Codec::element_type>(count, 0.01 * (from + 1), testing::distribution::gaussian,
                                                            static_cast<std::uint64_t>(from * 131 + to * 7) + count);
}

struct transfer_plan {
  std::vector<std::uint64_t> sendcounts, sdispls, recvcounts, rdispls;
  std::uint64_t send_total = 0, recv_total = 0;
};

transfer_plan plan_for(int r, int n, std::uint64_t scale) {
  transfer_plan p;
  for (int q = 0; q < n; ++q) {
    p.sendcounts.push_back(pair_count(r, q, scale));
    p.sdispls.push_back(p.send_total + 3 * static_cast<std::uint64_t>(q));  // gaps between blocks
    p.send_total = p.sdispls.back() + p.sendcounts.back();
    p.recvcounts.push_back(pair_count(q, r, scale));
    p.rdispls.push_back(p.recv_total + 5);
    p.recv_total = p.rdispls.back() + p.recvcounts.back();
  }
  return p;
}

// Runs all_to_all on n ranks; checks every received block; returns the bytes on the wire.
template <class Codec, class Strategy>
std::uint64_t run_and_check(int n, std::uint64_t scale, bool lockstep, const collective_options& opt) {
  using T = typename Codec::bits_type;
  local_world world(n, {}, test_timeout);
  std::vector<status> st(static_cast<std::size_t>(n), status::success);
  std::vector<std::vector<T>> got(static_cast<std::size_t>(n));
  const auto ref = block<Codec>(0, 1, 4096);
  const auto policy = testing::policy_for<Codec>(ref.data(), ref.size());
  auto body = [&](auto& t) {
    const int r = t.rank();
    const transfer_plan p = plan_for(r, n, scale);
    std::vector<T> send(p.send_total, T(0x7F7F)), recv(p.recv_total, T(0x5A5A));
    for (int q = 0; q < n; ++q) {
      const auto b = block<Codec>(r, q, p.sendcounts[q]);
      std::copy(b.begin(), b.end(), send.begin() + static_cast<std::ptrdiff_t>(p.sdispls[q]));
    }
    std::vector<std::uint8_t> ws(all_to_all_workspace<Codec, Strategy>(p.sendcounts.data(), p.recvcounts.data(), n, opt));
    st[static_cast<std::size_t>(r)] =
        all_to_all<Codec, Strategy>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(),
                                    p.recvcounts.data(), p.rdispls.data(), t, ws.data(), ws.size(), opt, policy);
    got[static_cast<std::size_t>(r)] = std::move(recv);
  };
  world.run([&](local_transport& t) {
    if (lockstep) {
      testing::lockstep_transport l{t};
      body(l);
    } else {
      body(t);
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(st[static_cast<std::size_t>(r)] == status::success);
    const transfer_plan p = plan_for(r, n, scale);
    std::uint64_t prev_end = 0;
    for (int q = 0; q < n; ++q) {
      INFO("block from rank " << q);
      const auto expect = block<Codec>(q, r, p.recvcounts[q]);
      const auto& g = got[static_cast<std::size_t>(r)];
      REQUIRE(std::equal(expect.begin(), expect.end(), g.begin() + static_cast<std::ptrdiff_t>(p.rdispls[q])));
      for (std::uint64_t i = prev_end; i < p.rdispls[q]; ++i) REQUIRE(g[i] == T(0x5A5A));  // gaps untouched
      prev_end = p.rdispls[q] + p.recvcounts[q];
    }
  }
  return world.total_bytes();
}

collective_options small_chunks() {
  collective_options o;
  o.codec.chunk_elems = 1024;
  o.codec.checksum = true;
  return o;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("all_to_all delivers every block exactly, on every path", "[collective][all_to_all][host]",
                        testing::host_codecs) {
  collective_options slow = small_chunks();
  slow.model.link_bytes_per_second = 0.1e9;  // adaptive compresses the larger blocks only
  for (int n : {1, 2, 3, 4, 8}) {
    INFO(n << " ranks");
    run_and_check<TestType, strategy::never>(n, 1, false, small_chunks());
    run_and_check<TestType, strategy::always>(n, 1, false, small_chunks());
    run_and_check<TestType, strategy::always>(n, 1, true, small_chunks());
    run_and_check<TestType, strategy::adaptive>(n, 1, false, slow);
    // in lock step the pairs' paths differ within one step (a compressed block out, a plain one
    // in): each direction's tail travels on its own (this once waited for a tail never sent)
    run_and_check<TestType, strategy::adaptive>(n, 1, true, slow);
  }
}

TEST_CASE("all_to_all cuts the bytes on the wire", "[collective][all_to_all][host]") {
  using C = codec<bf16, codebook::histogram>;
  const std::uint64_t plain = run_and_check<C, strategy::never>(4, 16, false, small_chunks());
  const std::uint64_t packed = run_and_check<C, strategy::always>(4, 16, false, small_chunks());
  INFO("plain " << plain << " bytes, compressed " << packed);
  CHECK(static_cast<double>(plain) / static_cast<double>(packed) >= 1.38);
}

TEST_CASE("all_to_all failures become errors on every rank", "[collective][all_to_all][host]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = std::uint16_t;
  const int n = 4;
  SECTION("a rank expects another count than its peer sends") {
    for (int path = 0; path < 2; ++path) {
      local_world world(n, {}, test_timeout);
      std::vector<status> st(n, status::success);
      world.run([&](local_transport& t) {
        transfer_plan p = plan_for(t.rank(), n, 1);
        if (t.rank() == 2) p.recvcounts[1] += 1;  // 1 sends one element fewer than 2 expects (gaps absorb it)
        std::vector<T> send(p.send_total + 1), recv(p.recv_total + 8);
        const auto o = small_chunks();
        if (path == 0) {
          std::vector<std::uint8_t> ws(all_to_all_workspace<C>(p.sendcounts.data(), p.recvcounts.data(), n, o));
          st[static_cast<std::size_t>(t.rank())] =
              all_to_all<C>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(), p.recvcounts.data(),
                            p.rdispls.data(), t, ws.data(), ws.size(), o);
        } else {
          st[static_cast<std::size_t>(t.rank())] = all_to_all<C, strategy::never>(
              send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(), p.recvcounts.data(), p.rdispls.data(),
              t, nullptr, 0, o);
        }
      });
      INFO("path " << path);
      for (status s : st) CHECK(s != status::success);
    }
  }
  SECTION("on 8 ranks, one pair's mismatch reaches every rank promptly, on every path") {
    // ranks that never talk to the pair finish their own exchanges first; the closing agreement
    // still makes each of them return an error (issue 10)
    for (int path = 0; path < 3; ++path)
      for (int victim : {0, 5}) {
        const int ranks = 8;
        local_world world(ranks, {}, test_timeout);
        std::vector<status> st(ranks, status::success);
        const auto t0 = std::chrono::steady_clock::now();
        world.run([&](local_transport& lt) {
          transfer_plan p = plan_for(lt.rank(), ranks, 1);
          if (lt.rank() == victim) p.recvcounts[(victim + 3) % ranks] += 1;
          std::vector<T> send(p.send_total + 1), recv(p.recv_total + 8);
          const auto o = small_chunks();
          std::vector<std::uint8_t> ws(all_to_all_workspace<C>(p.sendcounts.data(), p.recvcounts.data(), ranks, o));
          testing::lockstep_transport l{lt};
          status& mine = st[static_cast<std::size_t>(lt.rank())];
          if (path == 0)
            mine = all_to_all<C>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(), p.recvcounts.data(),
                                 p.rdispls.data(), lt, ws.data(), ws.size(), o);
          else if (path == 1)
            mine = all_to_all<C, strategy::never>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(),
                                                  p.recvcounts.data(), p.rdispls.data(), lt, nullptr, 0, o);
          else
            mine = all_to_all<C, strategy::never>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(),
                                                  p.recvcounts.data(), p.rdispls.data(), l, nullptr, 0, o);
        });
        INFO("path " << path << " victim " << victim);
        for (status s : st) CHECK(s != status::success);
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
      }
  }
  SECTION("a corrupt block") {
    // rank 1 flips a byte in the middle of every long message it sends
    local_world world(n, {}, test_timeout);
    std::vector<status> st(n, status::success);
    world.run([&](local_transport& lt) {
      testing::flaky_transport t(lt, 1, 0x40);
      const transfer_plan p = plan_for(t.rank(), n, 4);
      std::vector<T> send(p.send_total, T(0x3C00)), recv(p.recv_total);
      const auto o = small_chunks();
      std::vector<std::uint8_t> ws(all_to_all_workspace<C>(p.sendcounts.data(), p.recvcounts.data(), n, o));
      st[static_cast<std::size_t>(t.rank())] =
          all_to_all<C>(send.data(), p.sendcounts.data(), p.sdispls.data(), recv.data(), p.recvcounts.data(),
                        p.rdispls.data(), t, ws.data(), ws.size(), o);
    });
    for (status s : st) CHECK(s != status::success);
  }
  SECTION("bad arguments on one rank") {
    local_world world(n, {}, test_timeout);
    std::vector<status> st(n, status::success);
    world.run([&](local_transport& t) {
      const transfer_plan p = plan_for(t.rank(), n, 1);
      std::vector<T> send(p.send_total), recv(p.recv_total);
      const auto o = small_chunks();
      std::vector<std::uint8_t> ws(all_to_all_workspace<C>(p.sendcounts.data(), p.recvcounts.data(), n, o));
      st[static_cast<std::size_t>(t.rank())] =
          all_to_all<C>(send.data(), p.sendcounts.data(), t.rank() == 3 ? nullptr : p.sdispls.data(), recv.data(),
                        p.recvcounts.data(), p.rdispls.data(), t, ws.data(), ws.size(), o);
    });
    CHECK(st[3] == status::invalid_argument);
    for (int r = 0; r < 3; ++r) CHECK(st[static_cast<std::size_t>(r)] == status::peer_failed);
  }
}
