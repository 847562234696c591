// transport::local: delivery, order, counters, the link model, and failures that never hang.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <random>
#include <vector>

#include <zipccl/transport/local.hpp>

using namespace zipccl;
using transport::local_transport;
using transport::local_world;

TEST_CASE("ring exchange delivers every message intact and in order", "[transport][host]") {
  for (int ranks : {1, 2, 3, 4, 8}) {
    local_world world(ranks);
    std::atomic<int> failures{0};
    world.run([&](local_transport& t) {
      const int next = (t.rank() + 1) % t.size(), prev = (t.rank() + t.size() - 1) % t.size();
      for (int round = 0; round < 5; ++round) {
        // sizes differ per round and rank, including 0
        const std::size_t out_n = static_cast<std::size_t>((t.rank() * 131 + round * 977) % 5000);
        const std::size_t in_n = static_cast<std::size_t>((prev * 131 + round * 977) % 5000);
        std::vector<std::uint8_t> out(out_n), in(in_n);
        for (std::size_t i = 0; i < out_n; ++i) out[i] = static_cast<std::uint8_t>(i * 7 + t.rank() + round);
        if (t.sendrecv(next, out.data(), out_n, prev, in.data(), in_n) != status::success) ++failures;
        for (std::size_t i = 0; i < in_n; ++i)
          if (in[i] != static_cast<std::uint8_t>(i * 7 + prev + round)) ++failures;
      }
    });
    INFO(ranks << " ranks");
    CHECK(failures == 0);
    std::uint64_t expect = 0;
    for (int r = 0; r < ranks; ++r)
      for (int round = 0; round < 5; ++round) expect += static_cast<std::uint64_t>((r * 131 + round * 977) % 5000);
    CHECK(world.total_bytes() == expect);
    CHECK(world.messages(0, 1 % ranks) == 5);
  }
}

TEST_CASE("a size mismatch is reported, nothing is written past the buffer", "[transport][host]") {
  local_world world(2);
  std::vector<status> got(2, status::success);
  std::vector<std::uint8_t> small(8, 0xEE);
  world.run([&](local_transport& t) {
    if (t.rank() == 0) {
      std::vector<std::uint8_t> big(100, 1);
      got[0] = t.send(1, big.data(), big.size());
    } else {
      got[1] = t.recv(0, small.data(), 4);
    }
  });
  CHECK(got[0] == status::success);
  CHECK(got[1] == status::size_mismatch);
  for (auto b : small) CHECK(b == 0xEE);
}

TEST_CASE("abort and timeouts end waiting operations instead of hanging", "[transport][host]") {
  SECTION("one rank aborts: every other rank's pending receive fails") {
    local_world world(4);
    std::vector<status> got(4, status::success);
    world.run([&](local_transport& t) {
      std::uint8_t b = 0;
      if (t.rank() == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        t.abort(status::corrupt);
        got[2] = status::peer_failed;
      } else {
        got[static_cast<std::size_t>(t.rank())] = t.recv(2, &b, 1);  // rank 2 never sends
      }
    });
    for (status s : got) CHECK(s == status::peer_failed);
    CHECK(world.aborted());
    world.reset();
    CHECK_FALSE(world.aborted());
  }
  SECTION("a receive with no sender times out") {
    local_world world(2, {}, std::chrono::milliseconds(50));
    std::uint8_t b = 0;
    auto t = world.transport(0);
    CHECK(t.recv(1, &b, 1) == status::timed_out);
  }
  SECTION("bad arguments") {
    local_world world(2);
    auto t = world.transport(0);
    std::uint8_t b = 0;
    CHECK(t.send(2, &b, 1) == status::invalid_argument);
    CHECK(t.send(-1, &b, 1) == status::invalid_argument);
    CHECK(t.recv(1, nullptr, 5) == status::invalid_argument);
    CHECK(t.send(1, &b, 0) == status::success);  // empty messages are fine
  }
}

TEST_CASE("the link model delays delivery by size / bandwidth + latency", "[transport][host]") {
  // A correctness check of the model, with generous margins: 2 MB at 1 GB/s cannot arrive in
  // under 2 ms, and links are serialised, so two messages take at least twice as long.
  local_world world(2, {1e9, 1e-3});
  std::vector<std::uint8_t> a(2'000'000, 3), b(a.size());
  std::chrono::steady_clock::time_point sent, done;
  world.run([&](local_transport& t) {
    if (t.rank() == 0) {
      sent = std::chrono::steady_clock::now();
      REQUIRE(t.send(1, a.data(), a.size()) == status::success);
      REQUIRE(t.send(1, a.data(), a.size()) == status::success);
    } else {
      REQUIRE(t.recv(0, b.data(), b.size()) == status::success);
      REQUIRE(t.recv(0, b.data(), b.size()) == status::success);
      done = std::chrono::steady_clock::now();
    }
  });
  // the second message cannot be ready before two wire times and one latency after the first send
  const double elapsed = std::chrono::duration<double>(done - sent).count();
  CHECK(elapsed >= 2 * 2e-3 + 1e-3);
  CHECK(b == a);
  CHECK(world.bytes(0, 1) == 4'000'000);
  CHECK(world.bytes(1, 0) == 0);
}

TEST_CASE("a request destroyed before wait() is withdrawn and aborts the world", "[transport][host]") {
  SECTION("a lent send: its buffer is never read after the request is gone") {
    local_world world(2, {}, std::chrono::seconds(10));
    std::vector<status> got(2, status::success);
    std::atomic<bool> dropped{false};
    world.run([&](local_transport& t) {
      if (t.rank() == 0) {
        {
          auto buf = std::make_unique<std::vector<std::uint8_t>>(4096, 7);
          auto q = t.isend(1, buf->data(), buf->size());
          (void)q;
        }  // the request, then the buffer, go before the receiver looks (issue 10: a use after free)
        dropped = true;
      } else {
        while (!dropped) std::this_thread::yield();
        std::vector<std::uint8_t> in(4096);
        got[1] = t.recv(0, in.data(), in.size());
      }
    });
    CHECK(got[1] == status::peer_failed);
    CHECK(world.aborted());
  }
  SECTION("a posted receive") {
    local_world world(2, {}, std::chrono::seconds(10));
    status sender = status::success;
    world.run([&](local_transport& t) {
      if (t.rank() == 1) {
        std::uint8_t b = 0;
        auto q = t.irecv(0, &b, 1);  // nothing sent yet: the receive is left for wait()
        (void)q;
      }
    });
    CHECK(world.aborted());
    world.reset();
    world.run([&](local_transport& t) {
      std::uint8_t b = 1;
      if (t.rank() == 0) sender = t.send(1, &b, 1);
      else CHECK(t.recv(0, &b, 1) == status::success);
    });
    CHECK(sender == status::success);  // reset() makes the world usable again
  }
  SECTION("a moved-from request owns nothing; waiting the moved-to one completes the send") {
    local_world world(2);
    world.run([&](local_transport& t) {
      std::vector<std::uint8_t> b(64, 3);
      if (t.rank() == 0) {
        local_transport::request a = t.isend(1, b.data(), b.size());
        local_transport::request c = std::move(a);
        CHECK(t.wait(c) == status::success);
      } else {
        CHECK(t.recv(0, b.data(), b.size()) == status::success);
      }
    });
    CHECK_FALSE(world.aborted());
  }
}

TEST_CASE("a rank that throws inside run() aborts the others; run() rethrows once all have returned",
          "[transport][host]") {
  local_world world(4, {}, std::chrono::seconds(20));
  std::vector<status> got(4, status::success);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(world.run([&](local_transport& t) {
                      if (t.rank() == 3) throw std::runtime_error("rank 3 gave up");
                      std::uint8_t b = 0;
                      got[static_cast<std::size_t>(t.rank())] = t.recv(3, &b, 1);
                    }),
                    "rank 3 gave up");
  for (int r = 0; r < 3; ++r) CHECK(got[static_cast<std::size_t>(r)] == status::peer_failed);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}
