// transport::cuda_local (gpu): N ranks of one process on one GPU, matched on the host. Messages
// arrive intact and in order with a thread per rank and with one thread for all ranks (a group
// spanning them), a size that differs, an abort from another thread and a deadline end every
// rank's call with an error instead of a hang, the link model holds a transfer for its time, every
// rank's work captured in one graph replays 100 times, and bad calls are refused. gpu-check.sh also
// runs this test under CUDA_MODULE_LOADING=LAZY, CUDA_DEVICE_MAX_CONNECTIONS=1,
// CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer, where a transport whose kernels wait for each
// other would stall.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <zipccl/cuda/detail/wait_streams.cuh>
#include <zipccl/transport/cuda_local.cuh>

#include "../support/cuda_test.cuh"

using namespace zipccl;
using transport::cuda_local_transport;
using transport::cuda_local_world;

namespace {

std::vector<std::uint8_t> pattern(int r, std::size_t bytes, int step = 0) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(r) * 31 + static_cast<std::size_t>(step) * 5);
  return v;
}

// A rank's buffers: `steps` outgoing blocks (step k's pattern) and as many incoming ones.
struct rank_state {
  std::size_t bytes;
  int steps;
  testing::device_buffer<std::uint8_t> out, in;
  rank_state(std::size_t b, int r, int k = 1) : bytes(b), steps(k), out(b * k + 1), in(b * k + 1) {
    REQUIRE(cudaMemset(in.p, 0, b * static_cast<std::size_t>(k) + 1) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<std::uint8_t> all;
    for (int s = 0; s < k; ++s) {
      const auto v = pattern(r, b, s);
      all.insert(all.end(), v.begin(), v.end());
    }
    if (!all.empty()) out.put(all.data(), all.size());
  }
  std::uint8_t* out_at(int s) { return out.p + bytes * static_cast<std::size_t>(s); }
  std::uint8_t* in_at(int s) { return in.p + bytes * static_cast<std::size_t>(s); }
  bool got_from(int peer) {
    const auto v = in.get(bytes * static_cast<std::size_t>(steps));
    for (int s = 0; s < steps; ++s)
      if (!std::equal(v.begin() + static_cast<std::ptrdiff_t>(bytes) * s,
                      v.begin() + static_cast<std::ptrdiff_t>(bytes) * (s + 1), pattern(peer, bytes, s).begin()))
        return false;
    return true;
  }
};

// Ring step s on rank r: send block s to r + 1, receive r - 1's block s, as one group.
status ring_step(cuda_local_transport& t, rank_state& st, int s, cudaStream_t stream) {
  const int n = t.size(), r = t.rank();
  if (const status g = t.group_start(); g != status::success) return g;
  const status a = t.send((r + 1) % n, st.out_at(s), st.bytes, stream);
  const status b = t.recv((r + n - 1) % n, st.in_at(s), st.bytes, stream);
  const status c = t.group_end();
  return a != status::success ? a : b != status::success ? b : c;
}

std::vector<std::unique_ptr<rank_state>> make_ranks(int n, std::size_t bytes, int steps = 1) {
  std::vector<std::unique_ptr<rank_state>> st;
  for (int r = 0; r < n; ++r) st.emplace_back(new rank_state(bytes, r, steps));
  return st;
}

}  // namespace

TEST_CASE("cuda_local: ring steps deliver every byte, one host thread per rank", "[gpu][cuda_local]") {
  for (int n : {1, 2, 3, 4, 8, 16}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{3} << 20}) {
      INFO(n << " ranks, " << bytes << " bytes");
      auto st = make_ranks(n, bytes, 3);
      cuda_local_world world(n);
      const testing::watchdog guard(60, "ring steps on " + std::to_string(n) + " ranks of " + std::to_string(bytes) +
                                            " bytes, one host thread per rank");
      const auto got = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
        status s = status::success;
        for (int step = 0; step < 3 && s == status::success; ++step) s = ring_step(t, *st[t.rank()], step, stream);
        return s == status::success ? cuda::detail::check(cudaStreamSynchronize(stream), "test") : s;
      });
      for (int r = 0; r < n; ++r) {
        CHECK(got[r] == status::success);
        CHECK(st[r]->got_from((r + n - 1) % n));
      }
      CHECK(world.error_state() == status::success);
    }
  }
}

TEST_CASE("cuda_local: one host thread drives every rank through a group that spans them", "[gpu][cuda_local][hostile]") {
  for (int n : {2, 4, 8}) {
    INFO(n << " ranks");
    const std::size_t bytes = 1 << 16;
    auto st = make_ranks(n, bytes, 2);
    cuda_local_world world(n);
    const testing::watchdog guard(30, "ring steps from one host thread");
    for (int step = 0; step < 2; ++step) {
      for (int r = 0; r < n; ++r) REQUIRE(world.rank(r).group_start() == status::success);
      for (int r = 0; r < n; ++r) {
        auto& t = world.rank(r);
        REQUIRE(t.send((r + 1) % n, st[r]->out_at(step), bytes, world.stream(r)) == status::success);
        REQUIRE(t.recv((r + n - 1) % n, st[r]->in_at(step), bytes, world.stream(r)) == status::success);
      }
      // the inner ends only close their level; the outermost publishes every rank's operations
      for (int r = n - 1; r >= 0; --r) REQUIRE(world.rank(r).group_end() == status::success);
    }
    for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(world.stream(r)) == cudaSuccess);
    for (int r = 0; r < n; ++r) CHECK(st[r]->got_from((r + n - 1) % n));
  }
}

TEST_CASE("cuda_local: a size that differs ends every rank with an error before anything moves", "[gpu][cuda_local][hostile]") {
  const int n = 3;
  auto st = make_ranks(n, 4096, 2);
  cuda_local_world world(n);
  const testing::watchdog guard(30, "a size that differs");
  const auto got = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    const int r = t.rank();
    (void)t.group_start();
    (void)t.send((r + 1) % n, st[r]->out_at(0), r == 1 ? 4000 : 4096, stream);
    (void)t.recv((r + n - 1) % n, st[r]->in_at(0), 4096, stream);
    const status first = t.group_end();
    const status later = ring_step(t, *st[r], 1, stream);  // a later step is refused, or ends too
    (void)cudaStreamSynchronize(stream);
    return first != status::success ? first : later;
  });
  // ranks 1 and 2 met the odd message; rank 0 fails with them, or sees the world ended
  CHECK(got[1] == status::size_mismatch);
  CHECK(got[2] == status::size_mismatch);
  CHECK((got[0] == status::peer_failed || got[0] == status::success));
  for (int r = 0; r < n; ++r) CHECK(world.rank(r).async_error() == status::size_mismatch);
  CHECK(st[2]->in.get(4096) == std::vector<std::uint8_t>(4096, 0));  // nothing moved into rank 2
  CHECK(world.rank(0).send(1, st[0]->out.p, 16, world.stream(0)) == status::peer_failed);
  world.reset();
  const auto again = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    const status s = ring_step(t, *st[t.rank()], 1, stream);
    return s == status::success ? cuda::detail::check(cudaStreamSynchronize(stream), "test") : s;
  });
  for (int r = 0; r < n; ++r) CHECK(again[r] == status::success);
  for (int r = 0; r < n; ++r) {
    const auto v = st[r]->in.get(2 * 4096);
    CHECK(std::vector<std::uint8_t>(v.begin() + 4096, v.end()) == pattern((r + n - 1) % n, 4096, 1));
  }
}

TEST_CASE("cuda_local: abort from another thread wakes every rank that waits", "[gpu][cuda_local][hostile]") {
  const int n = 4;
  auto st = make_ranks(n, 1024);
  cuda_local_world world(n);
  const testing::watchdog guard(30, "abort from another thread");
  std::atomic<int> in_call{0};
  std::thread aborter([&] {
    while (in_call < n) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    world.abort(status::invalid_argument);
  });
  const auto got = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    ++in_call;
    return t.recv((t.rank() + 1) % n, st[t.rank()]->in.p, 1024, stream);  // nobody sends
  });
  aborter.join();
  for (status s : got) CHECK(s == status::peer_failed);
  CHECK(world.error_state() == status::invalid_argument);
  for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(world.stream(r)) == cudaSuccess);
}

TEST_CASE("cuda_local: a peer that never comes ends the world at the rendezvous deadline", "[gpu][cuda_local]") {
  cuda_local_world::options opt;
  opt.rendezvous_seconds = 0.1;
  cuda_local_world world(2, opt);
  rank_state a(64, 0);
  const testing::watchdog guard(30, "the rendezvous deadline");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(world.rank(0).send(1, a.out.p, 64, world.stream(0)) == status::timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(90));
  CHECK(world.rank(1).async_error() == status::timed_out);
  REQUIRE(cudaStreamSynchronize(world.stream(0)) == cudaSuccess);
}

TEST_CASE("cuda_local: the link model holds a transfer for its time", "[gpu][cuda_local][hostile]") {
  // 1 MiB over a 1 GB/s link with 100 us latency: at least about 1.15 ms
  cuda_local_world world(2, transport::link_model{1e9, 100e-6});
  const std::size_t bytes = 1 << 20;
  rank_state a(bytes, 0), b(bytes, 1);
  cudaEvent_t start, stop;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  const auto got = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    if (t.rank() == 0) return t.send(1, a.out.p, bytes, stream);
    status s = cuda::detail::check(cudaEventRecord(start, stream), "test");
    if (s == status::success) s = t.recv(0, b.in.p, bytes, stream);
    if (s == status::success) s = cuda::detail::check(cudaEventRecord(stop, stream), "test");
    return s;
  });
  CHECK(got == std::vector<status>{status::success, status::success});
  REQUIRE(cudaStreamSynchronize(world.stream(0)) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(world.stream(1)) == cudaSuccess);
  float ms = 0;
  REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 1.1f);
  CHECK(b.in.get(bytes) == pattern(0, bytes));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

TEST_CASE("cuda_local: every rank's steps captured in one graph replay 100 times", "[gpu][cuda_local][hostile]") {
  for (int n : {2, 3, 8}) {
    INFO(n << " ranks");
    const std::size_t bytes = 1 << 14;
    auto st = make_ranks(n, bytes, 2);
    cuda_local_world world(n, transport::link_model{50e9, 2e-6});
    const testing::watchdog guard(60, "a captured ring");
    cudaGraph_t graph = nullptr;
    const auto got = world.capture(
        [&](cuda_local_transport& t, cudaStream_t stream) {
          status s = status::success;
          for (int step = 0; step < 2 && s == status::success; ++step) s = ring_step(t, *st[t.rank()], step, stream);
          return s;
        },
        &graph);
    for (status s : got) REQUIRE(s == status::success);
    REQUIRE(graph != nullptr);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    cudaGraphDestroy(graph);
    cudaStream_t launch;
    REQUIRE(cudaStreamCreateWithFlags(&launch, cudaStreamNonBlocking) == cudaSuccess);
    for (int rep = 0; rep < 100; ++rep) {
      // clear the incoming blocks on the launch stream, then replay: every replay delivers again
      for (int r = 0; r < n; ++r) REQUIRE(cudaMemsetAsync(st[r]->in.p, 0, 2 * bytes, launch) == cudaSuccess);
      REQUIRE(cudaGraphLaunch(exec, launch) == cudaSuccess);
      if (rep % 33 == 0 || rep == 99) {
        REQUIRE(cudaStreamSynchronize(launch) == cudaSuccess);
        for (int r = 0; r < n; ++r) CHECK(st[r]->got_from((r + n - 1) % n));
      }
    }
    CHECK(world.error_state() == status::success);
    cudaGraphExecDestroy(exec);
    cudaStreamDestroy(launch);
  }
}

TEST_CASE("cuda_local: bad calls are refused and publish nothing", "[gpu][cuda_local]") {
  cuda_local_world::options opt;
  opt.max_group_ops = 2;
  cuda_local_world world(2, opt);
  rank_state a(16, 0);
  auto& t = world.rank(0);
  const cudaStream_t s = world.stream(0);
  CHECK(t.send(2, a.out.p, 16, s) == status::invalid_argument);
  CHECK(t.recv(-1, a.in.p, 16, s) == status::invalid_argument);
  CHECK(t.send(1, nullptr, 16, s) == status::invalid_argument);
  CHECK(t.group_end() == status::invalid_argument);                 // no group open
  CHECK(t.send(0, a.out.p, 16, s) == status::invalid_argument);     // to itself, outside a group
  // a group of more operations than it holds is refused as a whole
  REQUIRE(t.group_start() == status::success);
  CHECK(t.send(1, a.out.p, 16, s) == status::success);
  CHECK(t.send(1, a.out.p, 16, s) == status::success);
  CHECK(t.send(1, a.out.p, 16, s) == status::invalid_argument);
  CHECK(t.group_end() == status::invalid_argument);
  // a message to itself in a group, with its receive: delivered
  REQUIRE(t.group_start() == status::success);
  REQUIRE(t.send(0, a.out.p, 16, s) == status::success);
  REQUIRE(t.recv(0, a.in.p, 16, s) == status::success);
  REQUIRE(t.group_end() == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(a.in.get(16) == pattern(0, 16));
  // the default streams' handles are refused (another stream on each thread); inside a group the
  // refusal refuses the whole group, so the good operation beside it is not published either
  CHECK(t.send(1, a.out.p, 16, nullptr) == status::invalid_argument);
  CHECK(t.send(1, a.out.p, 16, cudaStreamPerThread) == status::invalid_argument);
  REQUIRE(t.group_start() == status::success);
  CHECK(t.send(0, a.out.p, 16, s) == status::success);
  CHECK(t.recv(0, a.in.p, 16, cudaStreamLegacy) == status::invalid_argument);
  CHECK(t.group_end() == status::invalid_argument);
  // (had the send been published, this exchange would receive it instead of its own message)
  REQUIRE(t.group_start() == status::success);
  REQUIRE(t.send(0, a.out.p + 8, 8, s) == status::success);
  REQUIRE(t.recv(0, a.in.p, 8, s) == status::success);
  REQUIRE(t.group_end() == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  const auto want = pattern(0, 16);
  CHECK(a.in.get(8) == std::vector<std::uint8_t>(want.begin() + 8, want.end()));
  CHECK(world.error_state() == status::success);  // none of the refusals ended the world
  CHECK_THROWS_AS(cuda_local_world(0), zipccl::error);
  cuda_local_world::options bad;
  bad.rendezvous_seconds = std::nan("");
  CHECK_THROWS_AS(cuda_local_world(2, bad), zipccl::error);
}

// A rank belongs to one host thread at a time: while one thread holds it in an open group,
// another thread's operations and group_start() on it are refused and leave the group intact; a
// group that run()'s function leaves open fails that rank and ends the world, and reset() works
// after it; an exception thrown during world.capture() leaves no stream capturing.
TEST_CASE("cuda_local: a rank in one thread's group is refused to another thread", "[gpu][cuda_local][hostile]") {
  cuda_local_world::options opt;
  opt.rendezvous_seconds = 30;
  cuda_local_world world(2, opt);
  rank_state a(64, 0), b(64, 1);
  auto& t0 = world.rank(0);
  const testing::watchdog guard(60, "a rank used by two threads");
  REQUIRE(t0.group_start() == status::success);
  REQUIRE(t0.send(0, a.out.p, 64, world.stream(0)) == status::success);
  status other_send = status::success, other_group = status::success, other_end = status::success;
  std::thread([&] {
    other_send = t0.send(1, a.out.p, 64, world.stream(0));
    other_group = t0.group_start();
    other_end = t0.group_end();
  }).join();
  CHECK(other_send == status::invalid_argument);
  CHECK(other_group == status::invalid_argument);
  CHECK(other_end == status::invalid_argument);
  // the group is as this thread left it: its send meets the receive added now
  REQUIRE(t0.recv(0, a.in.p, 64, world.stream(0)) == status::success);
  REQUIRE(t0.group_end() == status::success);
  REQUIRE(cudaStreamSynchronize(world.stream(0)) == cudaSuccess);
  CHECK(a.in.get(64) == pattern(0, 64));
  CHECK(world.error_state() == status::success);

  // a group left open by run()'s function: that rank fails, the other's wait ends
  const auto got = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    if (t.rank() == 0) return t.group_start();  // (never ended)
    return t.recv(0, b.in.p, 64, stream);
  });
  CHECK(got[0] == status::invalid_argument);
  CHECK(got[1] == status::peer_failed);
  CHECK(world.error_state() != status::success);
  REQUIRE_NOTHROW(world.reset());
  REQUIRE(world.run([&](cuda_local_transport& t, cudaStream_t stream) {
            return t.rank() == 0 ? t.send(1, a.out.p, 64, stream) : t.recv(0, b.in.p, 64, stream);
          }) == std::vector<status>(2, status::success));
  REQUIRE(cudaStreamSynchronize(world.stream(1)) == cudaSuccess);
  CHECK(b.in.get(64) == pattern(0, 64));

  // an exception in a capture: rethrown, nothing left capturing, the next capture works
  cudaGraph_t graph = nullptr;
  CHECK_THROWS_AS(world.capture(
                      [&](cuda_local_transport& t, cudaStream_t) -> status {
                        if (t.rank() == 1) throw std::runtime_error("a rank's function throws");
                        return status::success;
                      },
                      &graph),
                  std::runtime_error);
  CHECK(graph == nullptr);
  for (int r = 0; r < 2; ++r) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    REQUIRE(cudaStreamIsCapturing(world.stream(r), &cs) == cudaSuccess);
    CHECK(cs == cudaStreamCaptureStatusNone);
  }
  world.reset();
  const auto captured = world.capture(
      [&](cuda_local_transport& t, cudaStream_t stream) {
        return t.rank() == 0 ? t.send(1, a.out.p, 64, stream) : t.recv(0, b.in.p, 64, stream);
      },
      &graph);
  CHECK(captured == std::vector<status>(2, status::success));
  REQUIRE(graph != nullptr);
  cudaGraphDestroy(graph);
}

// The deadline wait of the tests' stall checks (cuda::detail::wait_streams): a stream held by a
// host function is timed_out at the deadline, not a hang; once the test lets it go, success; with
// an infinite deadline, success once a thread lets it go. (Its cuda_error path, a stream that
// reports an error, is not provoked here: a faulting kernel, the usual cause, leaves a sticky
// error that would end the context the other tests use.)
TEST_CASE("cuda_local: wait_streams times out on a held stream, then sees it finish", "[gpu][cuda_local]") {
  using zipccl::cuda::detail::wait_streams;
  cudaStream_t held, idle;
  REQUIRE(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking) == cudaSuccess);
  // the host function holds its stream until `go` is set; the guard sets it however the test ends
  // (static: a host function still polling after a failed check must not read a dead frame)
  static std::atomic<bool> go;
  go = false;
  struct release {
    std::atomic<bool>& go;
    ~release() { go = true; }
  } guard{go};
  const auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  REQUIRE(cudaLaunchHostFunc(held, hold, &go) == cudaSuccess);
  const std::vector<cudaStream_t> both = {idle, held};
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(wait_streams(both, t0 + std::chrono::milliseconds(50), std::chrono::microseconds(100), "test") ==
        status::timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50));
  CHECK(cudaStreamQuery(held) == cudaErrorNotReady);  // (still held: the wait gave up, it did not end it)
  go = true;
  REQUIRE(wait_streams(both, std::chrono::steady_clock::now() + std::chrono::duration<double>(30.0),
                       std::chrono::microseconds(0), "test") == status::success);
  CHECK(cudaStreamQuery(held) == cudaSuccess);
  // a deadline in double seconds may be infinite: the wait lasts until
  // the stream is let go, here by a thread after 20 ms
  go = false;
  REQUIRE(cudaLaunchHostFunc(held, hold, &go) == cudaSuccess);
  const auto t1 = std::chrono::steady_clock::now();  // (before the thread starts its 20 ms)
  std::thread later([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    go = true;
  });
  const status endless =
      wait_streams(both, t1 + std::chrono::duration<double>(HUGE_VAL), std::chrono::microseconds(100), "test");
  later.join();
  CHECK(endless == status::success);
  CHECK(std::chrono::steady_clock::now() - t1 >= std::chrono::milliseconds(20));
  REQUIRE(cudaStreamDestroy(held) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(idle) == cudaSuccess);
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
