// The host executor's fork-join helper: every part runs exactly once, on a thread or, where no
// thread can be started, on the calling thread; exceptions reach the caller after every join.
// And the span a part's encoder reads ahead: its own next chunk, never another part's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <zipccl/host/detail/parallel.hpp>
#include <zipccl/host/detail/read_ahead.hpp>

using zipccl::host::detail::fork_join;

namespace {
// Starts `allowed` threads, then fails as pthread_create does under a process limit.
struct failing_spawn {
  int allowed;
  std::atomic<int>* started;
  template <class G>
  std::thread operator()(G&& g) const {
    if (started->load() >= allowed) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++*started;
    return std::thread(std::forward<G>(g));
  }
};
}  // namespace

TEST_CASE("fork_join runs every part once when threads cannot be started", "[host][parallel]") {
  // issue 10: a failed thread start ended the process with std::terminate
  for (unsigned parts : {1u, 2u, 3u, 8u})
    for (int allowed = 0; allowed <= static_cast<int>(parts); ++allowed) {
      const std::uint64_t items = 1000;
      std::vector<std::atomic<int>> seen(items);
      std::vector<std::atomic<int>> part_runs(parts);
      std::atomic<int> started{0};
      fork_join(
          parts, items,
          [&](unsigned p, std::uint64_t b, std::uint64_t e) {
            ++part_runs[p];
            for (std::uint64_t i = b; i < e; ++i) ++seen[i];
          },
          failing_spawn{allowed, &started});
      INFO("parts " << parts << ", threads allowed " << allowed);
      for (auto& s : seen) REQUIRE(s.load() == 1);
      for (auto& r : part_runs) REQUIRE(r.load() == 1);
      CHECK(started.load() == std::min(allowed, static_cast<int>(parts) - 1));
    }
}

TEST_CASE("fork_join rethrows a part's exception after joining every thread", "[host][parallel]") {
  for (unsigned thrower : {0u, 2u}) {
    std::atomic<int> done{0};
    CHECK_THROWS_WITH(fork_join(4, 400,
                                [&](unsigned p, std::uint64_t, std::uint64_t) {
                                  if (p == thrower) throw std::runtime_error("part failed");
                                  ++done;
                                }),
                      "part failed");
    CHECK(done.load() == 3);  // the other parts ran to the end before the rethrow
  }
}

TEST_CASE("read_ahead names the next chunk of the caller's range, none after its last", "[host][parallel]") {
  using zipccl::host::detail::read_ahead;
  std::vector<std::uint8_t> buf(4096);
  const std::uint8_t* in = buf.data();
  // 1000 two-byte elements in chunks of 256 (256, 256, 256, 232), as the collectives ask: the
  // chunk from element `next` on
  const read_ahead a = read_ahead::from(in, 256, 1000, 256, 2);
  CHECK(a.at == in + 512);
  CHECK(a.bytes == 512);
  const read_ahead b = read_ahead::from(in, 768, 1000, 256, 2);  // the short last chunk
  CHECK(b.at == in + 1536);
  CHECK(b.bytes == 464);
  const read_ahead c = read_ahead::from(in, 1000, 1000, 256, 2);  // after the last
  CHECK(c.at == nullptr);
  CHECK(c.bytes == 0);
  // host::compress's parts: 1000 four-byte elements in chunks of 256 (256, 256, 256, 232), a part
  // of chunks 0 and 1 and a part of chunks 2 and 3
  const read_ahead d = read_ahead::in_part(in, 0, 2, 1000, 256, 4);
  CHECK(d.at == in + 1024);
  CHECK(d.bytes == 1024);
  const read_ahead e = read_ahead::in_part(in, 1, 2, 1000, 256, 4);  // (chunk 2 is the other part's)
  CHECK(e.at == nullptr);
  CHECK(e.bytes == 0);
  const read_ahead f = read_ahead::in_part(in, 2, 4, 1000, 256, 4);
  CHECK(f.at == in + 3072);
  CHECK(f.bytes == 928);
  const read_ahead g = read_ahead::in_part(in, 3, 4, 1000, 256, 4);
  CHECK(g.at == nullptr);
  CHECK(g.bytes == 0);
  // one part of every chunk
  const read_ahead h = read_ahead::in_part(in, 1, 4, 1000, 256, 4);
  CHECK(h.at == in + 2048);
  CHECK(h.bytes == 1024);
}
