// transport::cuda_local (gpu): N ranks as N streams of one process. Messages arrive intact in
// order, ring steps in groups never deadlock (one host thread per rank, or one for all), a size
// that differs and an abort end every rank's waits with an error instead of a hang, the link model
// holds a transfer for its time, a rank's work captured in a CUDA graph replays, the check
// that streams run side by side passes the world's and fails, in time, on a stream listed twice,
// and the deadline wait on streams behind it times out instead of hanging.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <zipccl/cuda/detail/wait_streams.cuh>
#include <zipccl/transport/cuda_local.cuh>

#include "../support/cuda_test.cuh"

using namespace zipccl;
using transport::cuda_local_world;

namespace {

// A rank's buffers, and its stream: the world's (world.stream(r), set once the world is made),
// whose hardware queue the world has checked, not one of the test's own.
struct rank_state {
  cudaStream_t stream = nullptr;
  testing::device_buffer<std::uint8_t> out, in;
  rank_state(std::size_t bytes, int r) : out(bytes), in(bytes) {
    std::vector<std::uint8_t> v(bytes);
    for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(r) * 31);
    out.put(v.data(), bytes);
  }
};

// Gives every rank its world's stream.
void on_world_streams(std::vector<std::unique_ptr<rank_state>>& st, const cuda_local_world& world) {
  for (std::size_t r = 0; r < st.size(); ++r) st[r]->stream = world.stream(static_cast<int>(r));
}

// One ring step on rank r: send `out` to r + 1, receive r - 1's into `in`, as one group.
status ring_step(transport::cuda_local_transport& t, rank_state& s, std::size_t bytes) {
  const int n = t.size(), r = t.rank();
  if (t.group_start() != status::success) return status::invalid_argument;
  status a = t.send((r + 1) % n, s.out.p, bytes, s.stream);
  status b = t.recv((r + n - 1) % n, s.in.p, bytes, s.stream);
  const status c = t.group_end();
  return a != status::success ? a : b != status::success ? b : c;
}

std::vector<std::uint8_t> expected_from(int r, std::size_t bytes) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(r) * 31);
  return v;
}

}  // namespace

TEST_CASE("cuda_local: ring steps deliver every byte, one host thread per rank", "[gpu][cuda_local]") {
  for (int n : {1, 2, 3, 4, 8}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{3} << 20}) {
      INFO(n << " ranks, " << bytes << " bytes");
      // the ranks' buffers outlive the world, whose end releases any wait before they are freed
      std::vector<std::unique_ptr<rank_state>> st;
      for (int r = 0; r < n; ++r) st.emplace_back(new rank_state(bytes, r));
      cuda_local_world world(n);
      on_world_streams(st, world);
      const testing::watchdog guard(30, "ring steps on " + std::to_string(n) + " ranks of " + std::to_string(bytes) +
                                            " bytes, one host thread per rank",
                                    [&] { return testing::pending_slots_of(world); });
      std::vector<status> got(static_cast<std::size_t>(n), status::success);
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          for (int step = 0; step < 3 && got[r] == status::success; ++step)
            got[r] = ring_step(world.rank(r), *st[r], bytes);
          if (got[r] == status::success && cudaStreamSynchronize(st[r]->stream) != cudaSuccess)
            got[r] = status::cuda_error;
        });
      for (auto& th : threads) th.join();
      for (int r = 0; r < n; ++r) {
        CHECK(got[r] == status::success);
        CHECK(world.rank(r).async_error() == status::success);
        CHECK(st[r]->in.get(bytes) == expected_from((r + n - 1) % n, bytes));
      }
    }
  }
}

TEST_CASE("cuda_local: one host thread can drive every rank", "[gpu][cuda_local]") {
  const int n = 4;
  const std::size_t bytes = 1 << 16;
  // the ranks' buffers outlive the world, whose end releases any wait before they are freed
  std::vector<std::unique_ptr<rank_state>> st;
  for (int r = 0; r < n; ++r) st.emplace_back(new rank_state(bytes, r));
  cuda_local_world world(n);
  on_world_streams(st, world);
  const testing::watchdog guard(30, "ring step on 4 ranks, one host thread for all",
                                [&] { return testing::pending_slots_of(world); });
  for (int r = 0; r < n; ++r) REQUIRE(ring_step(world.rank(r), *st[r], bytes) == status::success);
  for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(st[r]->stream) == cudaSuccess);
  for (int r = 0; r < n; ++r) CHECK(st[r]->in.get(bytes) == expected_from((r + n - 1) % n, bytes));
}

TEST_CASE("cuda_local: a size that differs ends every rank with an error, never a hang", "[gpu][cuda_local]") {
  const int n = 3;
  // the ranks' buffers outlive the world, whose end releases any wait before they are freed
  std::vector<std::unique_ptr<rank_state>> st;
  for (int r = 0; r < n; ++r) st.emplace_back(new rank_state(4096, r));
  cuda_local_world world(n);
  on_world_streams(st, world);
  const testing::watchdog guard(30, "a size that differs", [&] { return testing::pending_slots_of(world); });
  for (int r = 0; r < n; ++r) {
    auto& t = world.rank(r);
    REQUIRE(t.group_start() == status::success);
    REQUIRE(t.send((r + 1) % n, st[r]->out.p, r == 1 ? 4000 : 4096, st[r]->stream) == status::success);
    REQUIRE(t.recv((r + n - 1) % n, st[r]->in.p, 4096, st[r]->stream) == status::success);
    REQUIRE(t.group_end() == status::success);
    // more steps after the failed one: they must end too (or be refused, once the error is seen)
    const status later = ring_step(t, *st[r], 4096);
    CHECK((later == status::success || later == status::peer_failed));
  }
  for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(st[r]->stream) == cudaSuccess);
  for (int r = 0; r < n; ++r) CHECK(world.rank(r).async_error() == status::size_mismatch);
  // the world is spent until reset(); later calls say so
  CHECK(world.rank(0).send(1, st[0]->out.p, 16, st[0]->stream) == status::peer_failed);
  world.reset();
  for (int r = 0; r < n; ++r) REQUIRE(ring_step(world.rank(r), *st[r], 4096) == status::success);
  for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(st[r]->stream) == cudaSuccess);
  for (int r = 0; r < n; ++r) CHECK(st[r]->in.get(4096) == expected_from((r + n - 1) % n, 4096));
}

TEST_CASE("cuda_local: after an abort a sender still waits for a copy under way, and withdraws one not taken",
          "[gpu][cuda_local]") {
  // 64 MiB over a 10 GB/s link: the copy and its hold take milliseconds; the abort comes
  // meanwhile, and the sender's stream must not go on (and free its buffer) before the copy ends
  cuda_local_world world(2, transport::link_model{10e9, 0});
  const std::size_t bytes = 64u << 20;
  rank_state a(bytes, 0), b(bytes, 1);
  a.stream = world.stream(0);
  b.stream = world.stream(1);
  REQUIRE(world.rank(1).recv(0, b.in.p, bytes, b.stream) == status::success);
  REQUIRE(world.rank(0).send(1, a.out.p, bytes, a.stream) == status::success);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  world.abort(status::peer_failed);
  REQUIRE(cudaStreamSynchronize(a.stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(b.stream) == cudaSuccess);
  // a send nobody receives: withdrawn once the world has ended
  world.reset();
  REQUIRE(world.rank(0).send(1, a.out.p, 64, a.stream) == status::success);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(cudaStreamQuery(a.stream) == cudaErrorNotReady);
  world.abort(status::peer_failed);
  REQUIRE(cudaStreamSynchronize(a.stream) == cudaSuccess);
  CHECK(world.rank(0).async_error() == status::peer_failed);
}

TEST_CASE("cuda_local: abort releases a receive whose sender never comes", "[gpu][cuda_local]") {
  cuda_local_world world(2);
  rank_state a(1024, 0);
  a.stream = world.stream(0);
  REQUIRE(world.rank(0).recv(1, a.in.p, 1024, a.stream) == status::success);  // rank 1 never sends
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(cudaStreamQuery(a.stream) == cudaErrorNotReady);  // still waiting
  world.rank(1).abort(status::peer_failed);
  REQUIRE(cudaStreamSynchronize(a.stream) == cudaSuccess);
  CHECK(world.rank(0).async_error() == status::peer_failed);
}

TEST_CASE("cuda_local: the link model holds a transfer for its time", "[gpu][cuda_local]") {
  // 1 MiB over a 1 GB/s link with 100 us latency: at least about 1.15 ms
  cuda_local_world world(2, transport::link_model{1e9, 100e-6});
  const std::size_t bytes = 1 << 20;
  rank_state a(bytes, 0), b(bytes, 1);
  a.stream = world.stream(0);
  b.stream = world.stream(1);
  cudaEvent_t start, stop;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  REQUIRE(cudaEventRecord(start, b.stream) == cudaSuccess);
  REQUIRE(world.rank(1).recv(0, b.in.p, bytes, b.stream) == status::success);
  REQUIRE(cudaEventRecord(stop, b.stream) == cudaSuccess);
  REQUIRE(world.rank(0).send(1, a.out.p, bytes, a.stream) == status::success);
  REQUIRE(cudaStreamSynchronize(a.stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(b.stream) == cudaSuccess);
  float ms = 0;
  REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 1.1f);
  CHECK(b.in.get(bytes) == expected_from(0, bytes));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

TEST_CASE("cuda_local: each rank's steps captured in a graph replay 100 times", "[gpu][cuda_local]") {
  const int n = 3;
  const std::size_t bytes = 1 << 14;
  // the ranks' buffers outlive the world, whose end releases any wait before they are freed
  std::vector<std::unique_ptr<rank_state>> st;
  for (int r = 0; r < n; ++r) st.emplace_back(new rank_state(bytes, r));
  cuda_local_world world(n);
  on_world_streams(st, world);
  std::vector<cudaGraphExec_t> exec(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    cudaGraph_t g;
    REQUIRE(cudaStreamBeginCapture(st[r]->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    const status s = ring_step(world.rank(r), *st[r], bytes);
    REQUIRE(cudaStreamEndCapture(st[r]->stream, &g) == cudaSuccess);
    REQUIRE(s == status::success);
    REQUIRE(cudaGraphInstantiate(&exec[r], g, 0) == cudaSuccess);
    cudaGraphDestroy(g);
  }
  for (int rep = 0; rep < 100; ++rep)
    for (int r = 0; r < n; ++r) REQUIRE(cudaGraphLaunch(exec[r], st[r]->stream) == cudaSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(cudaStreamSynchronize(st[r]->stream) == cudaSuccess);
  for (int r = 0; r < n; ++r) {
    CHECK(world.rank(r).async_error() == status::success);
    CHECK(st[r]->in.get(bytes) == expected_from((r + n - 1) % n, bytes));
    cudaGraphExecDestroy(exec[r]);
  }
}

TEST_CASE("cuda_local: the world's streams run side by side; run_together says timed_out, not a hang, where streams "
          "do not",
          "[gpu][cuda_local]") {
  cuda_local_world world(4);
  std::vector<cudaStream_t> mine;
  for (int r = 0; r < 4; ++r) {
    mine.push_back(world.stream(r));
    if (world.transfer_stream(r) != nullptr) mine.push_back(world.transfer_stream(r));
  }
  CHECK(world.run_together(mine) == status::success);
  // a stream listed twice: its second waiting kernel is queued behind its first, which waits for
  // it (what two streams sharing a hardware queue would do)
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(world.run_together({world.stream(0), world.stream(1), world.stream(0)}, 0.2) == status::timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(world.run_together(mine, 0) == status::invalid_argument);
  CHECK(world.run_together(mine, 1.0, 4096) == status::invalid_argument);  // a device the world does not use
  // the streams are idle again, later checks count right, and the world still moves messages
  CHECK(world.run_together(mine) == status::success);
  CHECK(world.run_together({}) == status::success);
  std::vector<std::unique_ptr<rank_state>> st;
  for (int r = 0; r < 4; ++r) st.emplace_back(new rank_state(4097, r));
  on_world_streams(st, world);
  const testing::watchdog guard(30, "a ring step after run_together", [&] { return testing::pending_slots_of(world); });
  for (int r = 0; r < 4; ++r) REQUIRE(ring_step(world.rank(r), *st[r], 4097) == status::success);
  for (int r = 0; r < 4; ++r) REQUIRE(cudaStreamSynchronize(st[r]->stream) == cudaSuccess);
  for (int r = 0; r < 4; ++r) CHECK(st[r]->in.get(4097) == expected_from((r + 3) % 4, 4097));
}

TEST_CASE("cuda_local: bad arguments are invalid_argument", "[gpu][cuda_local]") {
  cuda_local_world world(2);
  rank_state a(16, 0);
  a.stream = world.stream(0);
  auto& t = world.rank(0);
  CHECK(t.send(2, a.out.p, 16, a.stream) == status::invalid_argument);
  CHECK(t.recv(-1, a.in.p, 16, a.stream) == status::invalid_argument);
  CHECK(t.send(1, nullptr, 16, a.stream) == status::invalid_argument);
  CHECK(t.group_end() == status::invalid_argument);  // no group open
  CHECK(t.send(1, a.out.p, 16, nullptr) == status::invalid_argument);  // the legacy default stream
  cudaStream_t blocking;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  CHECK(t.send(1, a.out.p, 16, blocking) == status::invalid_argument);  // waits for the legacy stream
  cudaStreamDestroy(blocking);
  CHECK(t.send(0, a.out.p, 16, a.stream) == status::invalid_argument);  // to itself, outside a group
  REQUIRE(t.group_start() == status::success);
  CHECK(t.group_start() == status::invalid_argument);  // groups do not nest
  REQUIRE(t.group_end() == status::success);
  CHECK_THROWS_AS(cuda_local_world(0), zipccl::error);
  CHECK_THROWS_AS(cuda_local_world(33), zipccl::error);  // more ranks than hardware queues on one GPU
  CHECK(world.rank(0).async_error() == status::success);
  // pending_slots: a NaN timeout is refused; an infinite one waits as long as the read takes
  std::vector<cuda_local_world::slot_view> slots;
  CHECK(world.pending_slots(slots, std::nan("")) == status::invalid_argument);
  CHECK(world.pending_slots(slots, HUGE_VAL) == status::success);
  CHECK(slots.empty());
}

// The deadline wait that run_together, pending_slots and the tests' stall checks share
// (cuda::detail::wait_streams): a stream held by a host function is timed_out at the deadline, not
// a hang; once the test lets it go, success; with an infinite deadline, success once a thread lets
// it go. pending_slots refuses a NaN timeout. (Its cuda_error path, a stream that reports an error,
// is not provoked here: a faulting kernel, the usual cause, leaves a sticky error that would end
// the context the other tests use.)
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
  // a deadline in double seconds may be infinite (pending_slots' timeout): the wait lasts until
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
