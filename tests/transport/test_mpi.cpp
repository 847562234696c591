// transport::mpi under mpirun (label mpi): delivery, the collectives bit-identical to the plain
// ring across processes, size mismatches and aborts reported instead of hanging. Every rank runs
// every test case in the same order (transports are built collectively).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

#include <chrono>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/transport/mpi.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;

namespace {
constexpr auto timeout = std::chrono::seconds(20);

template <class Codec>
std::vector<typename Codec::bits_type> input(int r, std::uint64_t count) {
  return testing::make_tensor<typename Codec::element_type>(count, 0.01 * (r + 1), testing::distribution::gaussian,
                                                            static_cast<std::uint64_t>(r) * 7919 + count);
}
}  // namespace

TEST_CASE("ring exchange over MPI", "[mpi]") {
  transport::mpi t(MPI_COMM_WORLD, timeout);
  const int n = t.size(), r = t.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int round = 0; round < 4; ++round) {
    const std::size_t out_n = static_cast<std::size_t>((r * 131 + round * 70001) % 300000);
    const std::size_t in_n = static_cast<std::size_t>((prev * 131 + round * 70001) % 300000);
    std::vector<std::uint8_t> out(out_n), in(in_n);
    for (std::size_t i = 0; i < out_n; ++i) out[i] = static_cast<std::uint8_t>(i * 7 + r + round);
    REQUIRE(t.sendrecv(next, out.data(), out_n, prev, in.data(), in_n) == status::success);
    for (std::size_t i = 0; i < in_n; i += 101) REQUIRE(in[i] == static_cast<std::uint8_t>(i * 7 + prev + round));
  }
}

TEMPLATE_LIST_TEST_CASE("collectives over MPI equal the plain ring bit for bit", "[mpi]", testing::host_codecs) {
  using T = typename TestType::bits_type;
  collective_options opt;
  opt.codec.chunk_elems = 1024;
  opt.pipeline.segment_elems = 2048;  // 5001 elements: three segments in flight
  for (std::uint64_t count : {0ull, 1ull, 1025ull, 5001ull}) {
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    const auto ref = input<TestType>(0, count * n);
    const auto policy = testing::policy_for<TestType>(ref.data(), ref.size());
    INFO("count " << count);
    // all_gather
    const auto in = input<TestType>(r, count);
    std::vector<T> a(count * n), b(count * n);
    std::vector<std::uint8_t> ws(all_gather_workspace<TestType>(count, n, opt));
    REQUIRE(all_gather<TestType, strategy::never>(in.data(), a.data(), count, t, nullptr, 0, opt, policy) == status::success);
    REQUIRE(all_gather<TestType>(in.data(), b.data(), count, t, ws.data(), ws.size(), opt, policy) == status::success);
    REQUIRE(a == b);
    for (int q = 0; q < n; ++q) {
      const auto iq = input<TestType>(q, count);
      REQUIRE(std::equal(iq.begin(), iq.end(), a.begin() + static_cast<std::ptrdiff_t>(q * count)));
    }
    // reduce_scatter and all_reduce
    const auto big = input<TestType>(r, count * n);
    std::vector<T> c(count), d(count);
    std::vector<std::uint8_t> ws2(reduce_scatter_workspace<TestType>(count, opt));
    std::vector<std::uint8_t> ws3(reduce_scatter_workspace<TestType, strategy::never>(count, opt) + 16);
    REQUIRE(reduce_scatter<TestType, strategy::never>(big.data(), c.data(), count, op::sum, t, ws3.data(), ws3.size(), opt, policy) == status::success);
    REQUIRE(reduce_scatter<TestType>(big.data(), d.data(), count, op::sum, t, ws2.data(), ws2.size(), opt, policy) == status::success);
    REQUIRE(c == d);
    std::vector<std::uint8_t> ws4(all_reduce_workspace<TestType, strategy::never>(count, n, opt) + 16);
    std::vector<std::uint8_t> ws5(all_reduce_workspace<TestType>(count, n, opt));
    REQUIRE(all_reduce<TestType, strategy::never>(in.data(), c.data(), count, op::avg, t, ws4.data(), ws4.size(), opt, policy) == status::success);
    REQUIRE(all_reduce<TestType>(in.data(), d.data(), count, op::avg, t, ws5.data(), ws5.size(), opt, policy) == status::success);
    REQUIRE(c == d);
    // all_to_all: rank r sends (r + p) % 3 * count / 2 + p elements to rank p
    std::vector<std::uint64_t> sc(n), sd(n), rc(n), rd(n);
    std::uint64_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = (r + p) % 3 * count / 2 + p;
      rc[p] = (p + r) % 3 * count / 2 + r;
      sd[p] = st;
      rd[p] = rt;
      st += sc[p];
      rt += rc[p];
    }
    const auto src = input<TestType>(r, st);
    std::vector<T> e(rt), f(rt);
    std::vector<std::uint8_t> ws6(all_to_all_workspace<TestType>(sc.data(), rc.data(), n, opt));
    REQUIRE(all_to_all<TestType, strategy::never>(src.data(), sc.data(), sd.data(), e.data(), rc.data(), rd.data(), t,
                                                  nullptr, 0, opt, policy) == status::success);
    REQUIRE(all_to_all<TestType>(src.data(), sc.data(), sd.data(), f.data(), rc.data(), rd.data(), t, ws6.data(),
                                 ws6.size(), opt, policy) == status::success);
    REQUIRE(e == f);
    // send / recv between pairs of ranks (0 -> 1, 2 -> 3)
    if (r + 1 < n || r % 2 == 1) {
      std::vector<T> g(count);
      std::vector<std::uint8_t> ws7(send_recv_workspace<TestType>(count, opt));
      if (r % 2 == 0) {
        REQUIRE(send<TestType>(in.data(), count, r + 1, t, ws7.data(), ws7.size(), opt, policy) == status::success);
      } else {
        REQUIRE(recv<TestType>(g.data(), count, r - 1, t, ws7.data(), ws7.size(), opt) == status::success);
        REQUIRE(g == input<TestType>(r - 1, count));
      }
    }
  }
}

TEST_CASE("size mismatches and aborts end with errors, not hangs", "[mpi]") {
  {
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    // ring where rank 0 sends one byte more than its neighbour expects
    std::vector<std::uint8_t> out(100 + (r == 0 ? 1 : 0)), in(100);
    const status s = t.sendrecv((r + 1) % n, out.data(), out.size(), (r + n - 1) % n, in.data(), in.size());
    if (r == 1 % n && n > 1) CHECK(s == status::size_mismatch);
    else CHECK(s == status::success);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    if (n > 1) {
      const auto t0 = std::chrono::steady_clock::now();
      std::uint8_t b = 0;
      if (r == n - 1) {
        t.abort(status::corrupt);
      } else {
        CHECK(t.recv(n - 1, &b, 1) == status::peer_failed);  // rank n-1 never sends
      }
      CHECK(std::chrono::steady_clock::now() - t0 < timeout);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    // a collective where one rank fails up front: every rank reports an error
    using C = codec<bf16, codebook::histogram>;
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    const auto in = input<C>(r, 3000);
    std::vector<std::uint16_t> out(3000 * n);
    std::vector<std::uint8_t> ws(all_gather_workspace<C>(3000, n));
    const status s = all_gather<C>(in.data(), out.data(), 3000, t, ws.data(), r == 0 ? 10 : ws.size());
    if (n > 1) CHECK(s != status::success);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    // an exchange cut short by an abort leaves small sends nobody receives; the next transport's
    // operations must not stall on them (they did, until the timeout: the freed communicator's
    // context id was reused while those messages were still queued)
    {
      transport::mpi t(MPI_COMM_WORLD, timeout);
      const int n = t.size(), r = t.rank();
      if (r == 0) {
        t.abort(status::corrupt);
      } else {
        std::uint8_t a[24] = {}, b[24];
        CHECK(t.sendrecv(0, a, sizeof a, 0, b, sizeof b) == status::peer_failed);
      }
      (void)n;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    std::vector<std::uint8_t> mine(64, static_cast<std::uint8_t>(r)), all(64 * static_cast<std::size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(t.all_gather_bytes(mine.data(), all.data(), mine.size()) == status::success);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    for (int q = 0; q < n; ++q) CHECK(all[static_cast<std::size_t>(q) * 64] == q);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    // the native plain all_gather with a rank whose count differs: an error on every rank (the
    // size agreement finds it; a rank that hears another's abort first reports peer_failed)
    using C = codec<bf16, codebook::histogram>;
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    const std::uint64_t count = r == n - 1 ? 2999 : 3000;
    const auto in = input<C>(r, count);
    std::vector<std::uint16_t> out(3000 * n);
    const status s = all_gather<C, strategy::never>(in.data(), out.data(), count, t, nullptr, 0);
    INFO("rank " << r << ": " << to_string(s));
    if (n > 1) CHECK((s == status::size_mismatch || s == status::peer_failed));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int path = 0; path < 2; ++path) {
    // all_reduce where the last rank's count is one less (the same ceil(count / n) blocks): every
    // process returns size_mismatch before any data moves (issue 10: all returned success)
    using C = codec<bf16, codebook::histogram>;
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    const std::uint64_t count = r == n - 1 ? 2999 : 3000;
    const auto in = input<C>(r, 3000);
    std::vector<std::uint16_t> out(3000);
    std::vector<std::uint8_t> ws(all_reduce_workspace<C>(3000, n) + all_reduce_workspace<C, strategy::never>(3000, n));
    const status s = path == 0 ? all_reduce<C>(in.data(), out.data(), count, op::sum, t, ws.data(), ws.size())
                               : all_reduce<C, strategy::never>(in.data(), out.data(), count, op::sum, t, ws.data(),
                                                                ws.size());
    INFO("rank " << r << " path " << path << ": " << to_string(s));
    if (n > 1) CHECK(s == status::size_mismatch);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  for (int path = 0; path < 2; ++path) {
    // all_to_all where rank 0 expects one element more from rank 1 than rank 1 sends: found by
    // the pair in mid-collective; every process must hear of it at once, not after the timeout
    // (transport::mpi's abort() sent nothing once the transport had marked itself failed)
    using C = codec<bf16, codebook::histogram>;
    transport::mpi t(MPI_COMM_WORLD, timeout);
    const int n = t.size(), r = t.rank();
    if (n < 2) break;
    std::vector<std::uint64_t> sc(static_cast<std::size_t>(n), 1000), rc(sc), sd(sc.size()), rd(sc.size());
    for (int q = 0; q < n; ++q) sd[static_cast<std::size_t>(q)] = rd[static_cast<std::size_t>(q)] = 1100 * static_cast<std::uint64_t>(q);
    if (r == 0) rc[1] = 1001;
    std::vector<std::uint16_t> in(1100 * static_cast<std::size_t>(n)), out(in.size());
    std::vector<std::uint8_t> ws(all_to_all_workspace<C>(sc.data(), rc.data(), n));
    const auto t0 = std::chrono::steady_clock::now();
    const status s = path == 0 ? all_to_all<C>(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), t,
                                               ws.data(), ws.size())
                               : all_to_all<C, strategy::never>(in.data(), sc.data(), sd.data(), out.data(), rc.data(),
                                                                rd.data(), t, nullptr, 0);
    INFO("rank " << r << " path " << path << ": " << to_string(s));
    CHECK(s != status::success);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (rank != 0) session.configData().outputFilename = "%debug";  // one report, from rank 0
  int failed = session.run(argc, argv);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
