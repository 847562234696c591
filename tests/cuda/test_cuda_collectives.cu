// The device collectives (gpu) on transport::cuda_local, every rank on one GPU with a host thread
// of its own (world.run; world.capture for graphs), on one stream and pipelined (cuda::pipeline:
// codec and transfers on two streams): results bit-identical to the host collectives and to the
// plain device path, for 1..8 ranks and sizes 0, 1, odd, segment boundaries and 64 MiB
// ([large]); all_to_all with variable counts; a compressed all_reduce of every rank captured in
// one CUDA graph and replayed 100 times; a corrupt segment, mismatched counts, an abort from
// another thread and a segment over its wire budget give an error on every rank, never a hang;
// send / recv; bad arguments.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/cuda/collective.cuh>
#include <zipccl/cuda/communicator.cuh>
#include <zipccl/cuda/detail/wait_streams.cuh>
#include <zipccl/transport/cuda_local.cuh>

#include "../support/cuda_test.cuh"
#include "../support/device_collectives.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;
using namespace zipccl::testing::device_collectives;
using transport::cuda_local_transport;
using transport::cuda_local_world;

namespace {

using device_codecs = std::tuple<codec<bf16, codebook::analytic_gaussian>, codec<fp16, codebook::histogram>,
                                 codec<fp32, codebook::analytic_gaussian>>;

}  // namespace

// (a named namespace: the adapter's abort() is the concept's, which no collective calls)
namespace test_transports {
// A device transport adapter (the kind a user writes around their own communicator): rank `bad`
// flips one byte in the middle of every message over 64 bytes it sends.
struct corrupting_transport {
  cuda_local_transport& inner;
  int bad;
  int rank() const { return inner.rank(); }
  int size() const { return inner.size(); }
  status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream);
  status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) { return inner.recv(peer, buf, bytes, stream); }
  status group_start() { return inner.group_start(); }
  status group_end() { return inner.group_end(); }
  status async_error() { return inner.async_error(); }
  void abort(status why) { inner.abort(why); }
};
__global__ void flip_kernel(std::uint8_t* p) { *p ^= 0x5A; }
status corrupting_transport::send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) {
  if (inner.rank() == bad && bytes > 64) {
    flip_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint8_t*>(const_cast<void*>(buf)) + bytes / 2);
    if (cudaPeekAtLastError() != cudaSuccess) return status::cuda_error;
  }
  return inner.send(peer, buf, bytes, stream);
}
}  // namespace test_transports
using test_transports::corrupting_transport;

TEMPLATE_LIST_TEST_CASE("device collectives equal the host collectives and the plain device path, bit for bit",
                        "[gpu][cuda_collective]", device_codecs) {
  collective_options opt;
  opt.pipeline.segment_elems = 16384;  // two device chunks per segment: boundaries are cheap to hit
  for (int n : {1, 2, 3, 4, 8}) {
    for (std::uint64_t count : {0ull, 1ull, 12345ull, 16384ull, 16385ull, 3ull * 16384 - 1}) {
      for (int which = 0; which < 3; ++which) {
        for (op reduction : {op::sum, op::avg}) {
          if (which == 0 && reduction == op::avg) continue;
          INFO(name_of(which) << ", " << n << " ranks, count " << count << (reduction == op::avg ? ", avg" : ""));
          CHECK(check_every_path<TestType>(which, n, count, reduction, opt, n % 2 == 0) == "");
        }
      }
    }
  }
}

// The small case gpu-check.sh runs again under CUDA_MODULE_LOADING=LAZY, CUDA_DEVICE_MAX_CONNECTIONS=1,
// CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer: every collective, compressed (one stream and
// pipelined) and plain, on 4 ranks of one GPU.
TEST_CASE("every collective on 4 ranks, whatever serialises the GPU's streams", "[gpu][cuda_collective][hostile]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  collective_options opt;
  opt.pipeline.segment_elems = 16384;
  for (int which = 0; which < 3; ++which) {
    INFO(name_of(which));
    CHECK(check_every_path<C>(which, 4, 2 * 16384 + 3, op::sum, opt, true) == "");
  }
}

TEMPLATE_LIST_TEST_CASE("the device writes the fixed-size wire byte for byte as the host reference, and reads it alike",
                        "[gpu][cuda_collective][fixed_wire]", device_codecs) {
  check_fixed_wire_bytes<TestType>(collective_options{});
}

TEST_CASE("one segment per block (segment_elems 0) and the adaptive strategy on the device", "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  collective_options opt;
  opt.pipeline.segment_elems = 0;  // the device caps it
  ranks_on_gpu g(4);
  cuda_local_world world(4, world_options());
  g.attach(world);
  const auto want = host_reference<C>(2, 4, 300000, op::sum);
  const auto a = on_device<C, strategy::always>(2, 4, 300000, op::sum, opt, g, world);
  for (int r = 0; r < 4; ++r) CHECK(a[r] == want[r]);
  opt.model.link_bytes_per_second = 1e9;  // a slow link: adaptive compresses
  const auto b = on_device<C, strategy::adaptive>(2, 4, 300000, op::sum, opt, g, world);
  opt.model.link_bytes_per_second = 1e13;  // a link faster than coding: adaptive stays plain
  const auto c = on_device<C, strategy::adaptive>(2, 4, 300000, op::sum, opt, g, world);
  for (int r = 0; r < 4; ++r) {
    CHECK(g.statuses[r] == status::success);
    CHECK(b[r] == want[r]);
    CHECK(c[r] == want[r]);
  }
}

TEMPLATE_LIST_TEST_CASE("64 MiB per rank: every collective equals the host's, on one stream and pipelined",
                        "[gpu][cuda_collective][large]", device_codecs) {
  CHECK(every_collective_differences_64mib<TestType>(collective_options{}) == "");
}

TEST_CASE("a compressed all_reduce captured in CUDA graphs replays 100 times with identical results",
          "[gpu][cuda_collective][graph]") {
  using C = codec<bf16, codebook::histogram>;
  using T = C::bits_type;
  const int n = 4;
  const std::uint64_t count = 100000;
  collective_options opt;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(count, n, opt);
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    const auto v = input_of<C>(count, r);
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count));
  }
  const bool pipelined = GENERATE(false, true);
  INFO((pipelined ? "pipelined" : "one stream"));
  const auto on = g.all_lanes(pipelined, zipccl::cuda::pipeline_slots((count + n - 1) / n, opt));
  // every rank's call in one graph: a message's copy depends on both of its ranks' streams
  cudaGraph_t graph = nullptr;
  const auto st = world.capture(
      [&](cuda_local_transport& t, cudaStream_t stream) {
        zipccl::cuda::lanes mine = on[t.rank()];
        mine.stream = stream;  // (the world's rank stream, forked from the capture's origin)
        return zipccl::cuda::all_reduce<C>(in[t.rank()]->p, out[t.rank()]->p, count, op::sum, t, g.ws[t.rank()]->p,
                                           ws_bytes, &g.statuses[t.rank()], mine, opt);
      },
      &graph);
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(graph != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  cudaGraphDestroy(graph);
  const auto want = host_reference<C>(2, n, count, op::sum);
  for (int rep = 0; rep < 100; ++rep) {
    for (int r = 0; r < n; ++r) g.statuses[r] = static_cast<status>(-1);
    REQUIRE(cudaGraphLaunch(exec, g.streams[0]) == cudaSuccess);
    REQUIRE(g.finish());
    if (rep % 33 == 0 || rep == 99)
      for (int r = 0; r < n; ++r) {
        CHECK(g.statuses[r] == status::success);
        CHECK(out[r]->get(count) == want[r]);
      }
  }
  cudaGraphExecDestroy(exec);
}

TEST_CASE("a corrupt segment is an error on every rank, never a hang", "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 4;
  const std::uint64_t count = 50000;
  collective_options opt;
  opt.codec.checksum = true;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(count, n, opt);
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  std::vector<corrupting_transport> ts;
  for (int r = 0; r < n; ++r) {
    const auto v = input_of<C>(count, r);
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count));
    ts.push_back({world.rank(r), 2});
  }
  const bool pipelined = GENERATE(false, true);
  INFO((pipelined ? "pipelined" : "one stream"));
  const auto on = g.all_lanes(pipelined, 8);
  const auto st = on_every_rank(world, [&](int r) {
    return zipccl::cuda::all_reduce<C>(in[r]->p, out[r]->p, count, op::sum, ts[r], g.ws[r]->p, ws_bytes, &g.statuses[r],
                                       on[r], opt);
  });
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(g.finish());
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(g.statuses[r] != status::success);
  }
  CHECK(g.statuses[3] == status::checksum_mismatch);  // rank 2's successor decodes the damage first
}

// Ranks 0-2 wait in their calls for rank 3, which comes only once another thread has ended the
// world: every rank's call returns peer_failed and writes it to its status word (rank 3's too: it
// begins on an ended world), and every stream drains.
TEST_CASE("an abort from another thread while ranks wait in a collective is an error on every rank",
          "[gpu][cuda_collective][hostile]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 4;
  const std::uint64_t count = 50000;
  const bool pipelined = GENERATE(false, true);
  INFO((pipelined ? "pipelined" : "one stream"));
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(count, n);
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    const auto v = input_of<C>(count, r);
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count));
  }
  const auto on = g.all_lanes(pipelined, 8);
  const testing::watchdog guard(60, "an abort while ranks wait in all_reduce");
  std::atomic<int> calling{0};
  // The abort lands before or during the waiting ranks' rendezvous, depending on the scheduler;
  // both end in peer_failed, which is what the test asks.
  std::thread aborter([&] {
    while (calling < n - 1) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    world.abort(status::invalid_argument);
  });
  struct joined {  // joins the aborter however the test leaves this scope (a failed REQUIRE throws)
    std::thread& t;
    ~joined() {
      if (t.joinable()) t.join();
    }
  } join_aborter{aborter};
  const auto st = on_every_rank(world, [&](int r) {
    if (r == n - 1) {
      while (world.error_state() == status::success) std::this_thread::yield();
    } else {
      ++calling;
    }
    return zipccl::cuda::all_reduce<C>(in[r]->p, out[r]->p, count, op::sum, world.rank(r), g.ws[r]->p, ws_bytes,
                                       &g.statuses[r], on[r]);
  });
  aborter.join();
  REQUIRE(g.finish());
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(st[r] == status::peer_failed);
    CHECK(g.statuses[r] == status::peer_failed);
  }
  CHECK(world.error_state() == status::invalid_argument);
}

TEST_CASE("a count that differs on one rank is size_mismatch on every rank, never a hang",
          "[gpu][cuda_collective][hostile]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 4;
  const bool pipelined = GENERATE(false, true);
  INFO((pipelined ? "pipelined" : "one stream"));
  for (int which = 0; which < 3; ++which) {
    INFO(name_of(which));
    ranks_on_gpu g(n);
    cuda_local_world world(n, world_options());
    g.attach(world);
    collective_options opt;
    opt.pipeline.segment_elems = 16384;
    const std::uint64_t big = 100000;
    const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(big * n, n, opt) +
                                   zipccl::cuda::all_gather_workspace<C>(big, n, opt) +
                                   zipccl::cuda::reduce_scatter_workspace<C>(big, opt);
    g.workspace(ws_bytes);
    std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
    for (int r = 0; r < n; ++r) {
      in.emplace_back(new testing::device_buffer<T>(big * n + 1));
      out.emplace_back(new testing::device_buffer<T>(big * n + 1));
      REQUIRE(cudaMemset(in.back()->p, 0, (big * n + 1) * sizeof(T)) == cudaSuccess);
    }
    const auto on = g.all_lanes(pipelined, zipccl::cuda::pipeline_slots(big, opt));
    const auto st = on_every_rank(world, [&](int r) {
      const std::uint64_t count = r == 1 ? 40000 : 70000;  // other segment counts, not only sizes
      if (which == 0)
        return zipccl::cuda::all_gather<C>(in[r]->p, out[r]->p, count, world.rank(r), g.ws[r]->p, ws_bytes,
                                           &g.statuses[r], on[r], opt);
      if (which == 1)
        return zipccl::cuda::reduce_scatter<C>(in[r]->p, out[r]->p, count, op::sum, world.rank(r), g.ws[r]->p,
                                               ws_bytes, &g.statuses[r], on[r], opt);
      return zipccl::cuda::all_reduce<C>(in[r]->p, out[r]->p, count, op::sum, world.rank(r), g.ws[r]->p, ws_bytes,
                                         &g.statuses[r], on[r], opt);
    });
    // the host calls end with the world once two halves of different sizes meet
    for (status s : st) CHECK((s == status::success || s == status::peer_failed || s == status::size_mismatch));
    REQUIRE(g.finish(30));
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      CHECK(g.statuses[r] == status::size_mismatch);
    }
  }
}

TEST_CASE("a segment over its wire budget is wire_overflow, never a wrong value", "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 3;
  const std::uint64_t count = 40000;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  collective_options opt;
  const std::uint64_t ws_bytes = zipccl::cuda::all_gather_workspace<C>(count, n, opt);
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    const auto v = r == 1 ? testing::random_bits<bf16>(count, 5) : input_of<C>(count, r);  // rank 1: noise
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count * n));
  }
  const auto st = on_every_rank(world, [&](int r) {
    return zipccl::cuda::all_gather<C>(in[r]->p, out[r]->p, count, world.rank(r), g.ws[r]->p, ws_bytes, &g.statuses[r],
                                       g.streams[r], opt);
  });
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(g.finish());
  CHECK(g.statuses[1] == status::wire_overflow);  // the sender knows
  CHECK(g.statuses[2] == status::wire_overflow);  // and so does the first receiver
  CHECK(g.statuses[0] != status::success);
}

namespace {
// Rank r sends a2a_count(r, p) elements to rank p: zeros, odd sizes and segment boundaries.
std::uint64_t a2a_count(int r, int p) {
  static const std::uint64_t sizes[] = {0, 1, 777, 16384, 16385, 40000};
  return sizes[static_cast<std::size_t>(r * 5 + p * 3) % 6];
}
struct a2a_counts {
  std::vector<std::uint64_t> sc, sd, rc, rd;
  std::uint64_t send_total = 0, recv_total = 0;
  a2a_counts(int r, int n) {
    for (int p = 0; p < n; ++p) {
      sc.push_back(a2a_count(r, p));
      rc.push_back(a2a_count(p, r));
      sd.push_back(send_total + 3);  // gaps between the blocks
      rd.push_back(recv_total + 5);
      send_total += sc.back() + 3;
      recv_total += rc.back() + 5;
    }
  }
};
template <class Codec>
std::vector<typename Codec::bits_type> a2a_input(int r, const a2a_counts& c) {
  return testing::make_tensor<typename Codec::element_type>(c.send_total + 1, 0.02, testing::distribution::gaussian,
                                                            77 + static_cast<std::uint64_t>(r));
}
// The host all_to_all's answer, gaps zero.
template <class Codec>
std::vector<std::vector<typename Codec::bits_type>> a2a_reference(int n) {
  std::vector<std::vector<typename Codec::bits_type>> out(static_cast<std::size_t>(n));
  transport::local_world world(n);
  world.run([&](transport::local_transport& t) {
    const int r = t.rank();
    const a2a_counts c(r, n);
    const auto in = a2a_input<Codec>(r, c);
    out[r].assign(c.recv_total + 1, 0);
    REQUIRE(all_to_all<Codec, strategy::never>(in.data(), c.sc.data(), c.sd.data(), out[r].data(), c.rc.data(),
                                               c.rd.data(), t, nullptr, 0) == status::success);
  });
  return out;
}
template <class Codec, class Strategy>
std::vector<std::vector<typename Codec::bits_type>> a2a_on_device(int n, const collective_options& opt, ranks_on_gpu& g,
                                                                 cuda_local_world& world, bool pipelined) {
  using T = typename Codec::bits_type;
  g.attach(world);
  std::vector<a2a_counts> counts;
  std::uint64_t ws_bytes = 0;
  for (int r = 0; r < n; ++r) {
    counts.emplace_back(r, n);
    const std::uint64_t b =
        zipccl::cuda::all_to_all_workspace<Codec, Strategy>(counts[r].sc.data(), counts[r].rc.data(), n, opt);
    ws_bytes = b > ws_bytes ? b : ws_bytes;
  }
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    const auto v = a2a_input<Codec>(r, counts[r]);
    in.emplace_back(new testing::device_buffer<T>(v.size()));
    in.back()->put(v.data(), v.size());
    out.emplace_back(new testing::device_buffer<T>(counts[r].recv_total + 1));
    REQUIRE(cudaMemset(out.back()->p, 0, (counts[r].recv_total + 1) * sizeof(T)) == cudaSuccess);
  }
  const auto on = g.all_lanes(pipelined, 2);
  const auto st = on_every_rank(world, [&](int r) {
    const a2a_counts& c = counts[r];
    return zipccl::cuda::all_to_all<Codec, Strategy>(in[r]->p, c.sc.data(), c.sd.data(), out[r]->p, c.rc.data(),
                                                     c.rd.data(), world.rank(r), g.ws[r]->p, ws_bytes, &g.statuses[r],
                                                     on[r], opt);
  });
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(g.finish());
  std::vector<std::vector<T>> res;
  for (int r = 0; r < n; ++r) res.push_back(out[r]->get(counts[r].recv_total + 1));
  return res;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("device all_to_all with variable counts equals the host's, on one stream and pipelined",
                        "[gpu][cuda_collective][all_to_all]", device_codecs) {
  collective_options opt;
  opt.pipeline.segment_elems = 16384;
  opt.pipeline.depth = 3;  // three blocks coded ahead (two slots: min(depth, slots) = 2)
  for (int n : {1, 2, 3, 4, 8}) {
    INFO(n << " ranks");
    ranks_on_gpu g(n);
    cuda_local_world world(n, world_options());
    g.attach(world);
    const auto want = a2a_reference<TestType>(n);
    for (const bool pipelined : {false, true}) {
      INFO((pipelined ? "pipelined" : "one stream"));
      using T = typename TestType::bits_type;
      const auto packed = a2a_on_device<TestType, strategy::always>(n, opt, g, world, pipelined);
      CHECK(differences<T>(g, want, {{"compressed", &packed}}) == "");
      const auto plain = a2a_on_device<TestType, strategy::never>(n, opt, g, world, pipelined);
      CHECK(differences<T>(g, want, {{"plain", &plain}}) == "");
      collective_options slow = opt;
      slow.model.link_bytes_per_second = 1e9;  // adaptive: compresses the larger blocks only
      const auto adaptive = a2a_on_device<TestType, strategy::adaptive>(n, slow, g, world, pipelined);
      CHECK(differences<T>(g, want, {{"adaptive", &adaptive}}) == "");
    }
  }
}

TEST_CASE("a device all_to_all whose counts differ between a pair is size_mismatch on every rank",
          "[gpu][cuda_collective][all_to_all]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 4;
  const bool pipelined = GENERATE(false, true);
  INFO((pipelined ? "pipelined" : "one stream"));
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  collective_options opt;
  std::vector<std::uint64_t> counts(n, 5000), displs(n);
  for (int p = 0; p < n; ++p) displs[p] = static_cast<std::uint64_t>(p) * 6000;
  std::vector<std::uint64_t> odd = counts;
  odd[2] = 4999;  // rank 1 expects one element less from rank 2: another wire size, which cuda_local catches
  const std::uint64_t ws_bytes = zipccl::cuda::all_to_all_workspace<C>(counts.data(), counts.data(), n, opt);
  g.workspace(ws_bytes);
  testing::device_buffer<T> in(6000 * n);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> out;
  REQUIRE(cudaMemset(in.p, 0, 6000 * n * sizeof(T)) == cudaSuccess);
  for (int r = 0; r < n; ++r) out.emplace_back(new testing::device_buffer<T>(6000 * n));
  const auto on = g.all_lanes(pipelined, 2);
  const auto st = on_every_rank(world, [&](int r) {
    return zipccl::cuda::all_to_all<C>(in.p, counts.data(), displs.data(), out[r]->p,
                                       r == 1 ? odd.data() : counts.data(), displs.data(), world.rank(r), g.ws[r]->p,
                                       ws_bytes, &g.statuses[r], on[r], opt);
  });
  for (status s : st) CHECK((s == status::success || s == status::peer_failed || s == status::size_mismatch));
  REQUIRE(g.finish(30));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(g.statuses[r] != status::success);
  }
  CHECK(g.statuses[1] == status::size_mismatch);
}

TEST_CASE("pipelined lanes with too few segment slots are refused before anything moves",
          "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  ranks_on_gpu g(2);
  cuda_local_world world(2, world_options());
  g.attach(world);
  collective_options opt;
  opt.pipeline.segment_elems = 8192;
  const std::uint64_t count = 5 * 8192;  // five segments per block: a reduce_scatter needs five slots
  REQUIRE(zipccl::cuda::pipeline_slots(count, opt) == 5);
  const std::uint64_t ws_bytes = zipccl::cuda::reduce_scatter_workspace<C>(count, opt);
  g.workspace(ws_bytes);
  testing::device_buffer<std::uint16_t> a(2 * count), b(count);
  CHECK(zipccl::cuda::reduce_scatter<C>(a.p, b.p, count, op::sum, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0],
                                        g.lanes(0, true, 4), opt) == status::invalid_argument);
  zipccl::cuda::lanes broken = g.lanes(0, true, 8);
  broken.events = nullptr;
  CHECK(zipccl::cuda::all_gather<C>(a.p, b.p, 100, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0], broken,
                                    opt) == status::invalid_argument);
  // a refusal enqueues nothing and leaves the transport as it was
  CHECK(world.error_state() == status::success);
  REQUIRE(cudaStreamSynchronize(g.streams[0]) == cudaSuccess);
}

namespace {
struct framework_stream {  // a framework's stream class, as PyTorch's CUDAStream converts
  cudaStream_t s;
  operator cudaStream_t() const { return s; }
};
static_assert(std::is_convertible_v<framework_stream, zipccl::cuda::lanes>, "a stream wrapper converts to lanes");
static_assert(std::is_convertible_v<cudaStream_t, zipccl::cuda::lanes>, "a stream converts to lanes");
static_assert(std::is_convertible_v<decltype(nullptr), zipccl::cuda::lanes>, "nullptr converts to lanes");
}  // namespace

TEST_CASE("a one-stream all_gather and all_reduce run in exactly their one-stream workspace; pipelined lanes "
          "need more",
          "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 5;
  const std::uint64_t count = 3 * 16384 + 7;
  collective_options opt;
  opt.pipeline.segment_elems = 16384;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  for (int which : {0, 2}) {
    INFO(name_of(which));
    const std::uint64_t small = which == 0 ? zipccl::cuda::all_gather_workspace<C>(count, n, opt, false)
                                           : zipccl::cuda::all_reduce_workspace<C>(count, n, opt, false);
    const std::uint64_t big = which == 0 ? zipccl::cuda::all_gather_workspace<C>(count, n, opt)
                                         : zipccl::cuda::all_reduce_workspace<C>(count, n, opt);
    REQUIRE(small < big);
    g.workspace(small);
    std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
    for (int r = 0; r < n; ++r) {
      const auto v = input_of<C>(count, r);
      in.emplace_back(new testing::device_buffer<T>(count));
      in.back()->put(v.data(), count);
      out.emplace_back(new testing::device_buffer<T>(count * n));
    }
    const auto st = on_every_rank(world, [&](int r) {
      return which == 0 ? zipccl::cuda::all_gather<C>(in[r]->p, out[r]->p, count, world.rank(r), g.ws[r]->p, small,
                                                      &g.statuses[r], framework_stream{g.streams[r]}, opt)
                        : zipccl::cuda::all_reduce<C>(in[r]->p, out[r]->p, count, op::sum, world.rank(r), g.ws[r]->p,
                                                      small, &g.statuses[r], g.streams[r], opt);
    });
    for (status s : st) REQUIRE(s == status::success);
    REQUIRE(g.finish());
    const auto want = host_reference<C>(which, n, count, op::sum);
    for (int r = 0; r < n; ++r) {
      CHECK(g.statuses[r] == status::success);
      CHECK(out[r]->get(which == 0 ? count * n : count) == want[r]);
    }
    const std::uint32_t slots = zipccl::cuda::pipeline_slots((count + n - 1) / n, opt);
    CHECK(zipccl::cuda::all_gather<C>(in[0]->p, out[0]->p, count, world.rank(0), g.ws[0]->p, small, &g.statuses[0],
                                      g.lanes(0, true, slots), opt) == status::invalid_argument);
    CHECK(world.error_state() == status::success);
  }
}

TEMPLATE_LIST_TEST_CASE("ranks on one stream and ranks pipelined run one collective together",
                        "[gpu][cuda_collective]", device_codecs) {
  collective_options opt;
  opt.pipeline.segment_elems = 16384;
  for (int n : {3, 4}) {
    for (int which = 0; which < 3; ++which) {
      INFO(name_of(which) << ", " << n << " ranks");
      const std::uint64_t count = 3 * 16384 + 1;
      ranks_on_gpu g(n);
      cuda_local_world world(n, world_options());
      const auto want = host_reference<TestType>(which, n, count, op::sum);
      const auto got = on_device<TestType, strategy::always>(which, n, count, op::sum, opt, g, world, false, true);
      CHECK(differences<typename TestType::bits_type>(g, want, {{"mixed", &got}}) == "");
    }
  }
}


TEST_CASE("communicators over cuda_local pipeline their calls on streams of the ranks' GPU",
          "[gpu][cuda_collective][communicator]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  using comm_t = communicator<C, strategy::always, cuda_local_transport>;
  const int n = 16;  // more ranks than the GPU has hardware queues by default: no rule about queues
  const std::uint64_t count = 20000;
  cuda_local_world world(n, world_options());
  std::vector<std::unique_ptr<comm_t>> comms;
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    comms.emplace_back(new comm_t(world.rank(r)));
    CHECK(comms.back()->pipelined());
    const auto v = input_of<C>(count, r);
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count * n));
  }
  const auto st = world.run([&](cuda_local_transport& t, cudaStream_t stream) {
    const status s = comms[t.rank()]->all_gather(in[t.rank()]->p, out[t.rank()]->p, count, stream);
    return s == status::success ? zipccl::cuda::detail::check(cudaStreamSynchronize(stream), "test") : s;
  });
  for (status s : st) REQUIRE(s == status::success);
  const auto want = host_reference<C>(0, n, count, op::sum);
  for (int r = 0; r < n; ++r) {
    CHECK(comms[r]->result() == status::success);
    CHECK(out[r]->get(count * n) == want[r]);
  }
}

TEMPLATE_LIST_TEST_CASE("device send and recv carry a tensor, and report a mismatch on both ends",
                        "[gpu][cuda_collective]", device_codecs) {
  using T = typename TestType::bits_type;
  collective_options opt;
  opt.pipeline.segment_elems = 16384;  // several segments: one message each
  // the two ends may run different executors: the messages are the same
  const int mode = GENERATE(0, 1, 2);  // both on one stream, both pipelined, the sender pipelined only
  INFO("mode " << mode);
  for (std::uint64_t count : {0ull, 1ull, 100001ull}) {
    INFO("count " << count);
    ranks_on_gpu g(2);
    cuda_local_world world(2, world_options());
    g.attach(world);
    const std::uint64_t ws_bytes = zipccl::cuda::send_recv_workspace<TestType>(count + 1, opt);
    g.workspace(ws_bytes);
    const auto v = input_of<TestType>(count, 0);
    testing::device_buffer<T> a(count + 1), b(count + 1);
    a.put(v.data(), count);
    const zipccl::cuda::lanes on0 = g.lanes(0, mode != 0), on1 = g.lanes(1, mode == 1);
    const auto st = on_every_rank(world, [&](int r) {
      return r == 0 ? zipccl::cuda::send<TestType>(a.p, count, 1, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0],
                                                   on0, opt)
                    : zipccl::cuda::recv<TestType>(b.p, count, 0, world.rank(1), g.ws[1]->p, ws_bytes, &g.statuses[1],
                                                   on1, opt);
    });
    for (status s : st) REQUIRE(s == status::success);
    REQUIRE(g.finish());
    CHECK(g.statuses[0] == status::success);
    CHECK(g.statuses[1] == status::success);
    CHECK(b.get(count) == v);
    // another count on the receiving end
    const auto mismatched = on_every_rank(world, [&](int r) {
      return r == 0 ? zipccl::cuda::send<TestType>(a.p, count, 1, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0],
                                                   g.streams[0], opt)
                    : zipccl::cuda::recv<TestType>(b.p, count + 1, 0, world.rank(1), g.ws[1]->p, ws_bytes,
                                                   &g.statuses[1], g.streams[1], opt);
    });
    for (status s : mismatched) CHECK((s == status::success || s == status::peer_failed || s == status::size_mismatch));
    REQUIRE(g.finish(30));
    CHECK(g.statuses[0] == status::size_mismatch);
    CHECK(g.statuses[1] == status::size_mismatch);
  }
}

TEST_CASE("device collectives refuse bad arguments and leave the transport as it was", "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  ranks_on_gpu g(2);
  cuda_local_world world(2, world_options());
  g.attach(world);
  collective_options opt;
  const std::uint64_t ws_bytes = zipccl::cuda::all_gather_workspace<C>(1000, 2, opt);
  g.workspace(ws_bytes);
  testing::device_buffer<std::uint16_t> a(2000);
  CHECK(zipccl::cuda::all_gather<C>(nullptr, a.p, 1000, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0], g.streams[0],
                                    opt) == status::invalid_argument);
  CHECK(zipccl::cuda::all_gather<C>(a.p, a.p + 1000, 1000, world.rank(0), g.ws[0]->p, ws_bytes - 1, &g.statuses[0],
                                    g.streams[0], opt) == status::invalid_argument);
  CHECK(zipccl::cuda::all_gather<C>(a.p, a.p + 1000, 1000, world.rank(0), g.ws[0]->p, ws_bytes, nullptr, g.streams[0],
                                    opt) == status::invalid_argument);
  CHECK(zipccl::cuda::send<C>(a.p, 10, 0, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0], g.streams[0], opt) ==
        status::invalid_argument);  // to itself
  collective_options bad = opt;
  bad.device_wire.spill_permille = 5000;
  CHECK(zipccl::cuda::all_gather<C>(a.p, a.p + 1000, 1000, world.rank(0), g.ws[0]->p, ws_bytes, &g.statuses[0],
                                    g.streams[0], bad) == status::invalid_argument);
  CHECK(world.error_state() == status::success);  // nothing reached the transport
  // and the next call on the same transport succeeds
  testing::device_buffer<std::uint16_t> back0(1000), back1(1000);
  std::uint16_t* back[] = {back0.p, back1.p};
  const auto st = on_every_rank(world, [&](int r) {
    return zipccl::cuda::all_gather<C>(a.p, back[r], 500, world.rank(r), g.ws[r]->p, ws_bytes, &g.statuses[r],
                                       g.streams[r], opt);
  });
  for (status s : st) CHECK(s == status::success);
  REQUIRE(g.finish());
  CHECK(g.statuses[0] == status::success);
  CHECK(g.statuses[1] == status::success);
}

TEST_CASE("a device communicator grows its workspace, reports through result(), and refuses to grow in a capture",
          "[gpu][cuda_collective][communicator]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 3;
  const std::uint64_t count = 70000;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  using comm_t = communicator<C, strategy::always, cuda_local_transport>;
  std::vector<std::unique_ptr<comm_t>> comms;
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    comms.emplace_back(new comm_t(world.rank(r)));
    const auto v = input_of<C>(count, r);
    in.emplace_back(new testing::device_buffer<T>(count));
    in.back()->put(v.data(), count);
    out.emplace_back(new testing::device_buffer<T>(count));
  }
  // a capture before any call: the workspace would have to grow inside it
  cudaGraph_t graph;
  REQUIRE(cudaStreamBeginCapture(g.streams[0], cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(comms[0]->all_reduce(in[0]->p, out[0]->p, count, op::sum, g.streams[0]) == status::invalid_argument);
  (void)cudaStreamEndCapture(g.streams[0], &graph);
  if (graph) cudaGraphDestroy(graph);
  CHECK(world.error_state() == status::success);  // the refusal left the transport alone
  const auto st = on_every_rank(world, [&](int r) {
    return comms[r]->all_reduce(in[r]->p, out[r]->p, count, op::sum, g.streams[r]);
  });
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(g.finish());
  const auto want = host_reference<C>(2, n, count, op::sum);
  for (int r = 0; r < n; ++r) {
    CHECK(comms[r]->result() == status::success);
    CHECK(comms[r]->workspace_bytes() >= zipccl::cuda::all_reduce_workspace<C>(count, n));
    CHECK(out[r]->get(count) == want[r]);
  }
}

TEST_CASE("a device communicator frees a grown workspace only after every stream that used it",
          "[gpu][cuda_collective][communicator][hostile]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  using comm_t = communicator<C, strategy::always, cuda_local_transport>;
  const int n = 2;
  const std::uint64_t small = 5000, big = 300000;
  // a slow link: the first call, on stream a, is still moving data when the second, on stream b,
  // grows the workspace (compute-sanitizer's memcheck sees a use after free, were it one)
  cuda_local_world world(n, world_options(transport::link_model{2e9, 20e-6}));
  std::vector<std::unique_ptr<comm_t>> comms;
  std::vector<cudaStream_t> a(n), b(n);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out1, out2;
  for (int r = 0; r < n; ++r) {
    comms.emplace_back(new comm_t(world.rank(r)));
    REQUIRE(cudaStreamCreateWithFlags(&a[r], cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&b[r], cudaStreamNonBlocking) == cudaSuccess);
    const auto v = input_of<C>(big, r);
    in.emplace_back(new testing::device_buffer<T>(big));
    in.back()->put(v.data(), big);
    out1.emplace_back(new testing::device_buffer<T>(small * n));
    out2.emplace_back(new testing::device_buffer<T>(big));
  }
  const auto st = on_every_rank(world, [&](int r) {
    status s = comms[r]->all_gather(in[r]->p, out1[r]->p, small, a[r]);
    if (s == status::success) s = comms[r]->all_reduce(in[r]->p, out2[r]->p, big, op::sum, b[r]);
    return s;
  });
  for (status s : st) REQUIRE(s == status::success);
  for (int r = 0; r < n; ++r) {
    REQUIRE(cudaStreamSynchronize(a[r]) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(b[r]) == cudaSuccess);
  }
  const auto want_g = host_reference<C>(0, n, small, op::sum);
  const auto want_r = host_reference<C>(2, n, big, op::sum);
  for (int r = 0; r < n; ++r) {
    CHECK(comms[r]->result() == status::success);
    CHECK(out2[r]->get(big) == want_r[r]);
  }
  // the small all_gather read its inputs' first elements: compare against the host's on those
  for (int r = 0; r < n; ++r) {
    const auto got = out1[r]->get(small * n);
    for (int q = 0; q < n; ++q) {
      const auto v = input_of<C>(big, q);
      CHECK(std::vector<T>(got.begin() + q * small, got.begin() + (q + 1) * small) ==
            std::vector<T>(v.begin(), v.begin() + small));
    }
  }
  (void)want_g;
  for (int r = 0; r < n; ++r) {
    cudaStreamDestroy(a[r]);
    cudaStreamDestroy(b[r]);
  }
}

// A one-rank communicator (its calls move no messages) with zeroed buffers of `big` elements and
// a stream of its own, warmed up by one eager all_reduce of 1000 elements.
struct solo_communicator {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  cuda_local_world world{1, world_options()};
  communicator<C, strategy::always, cuda_local_transport> comm{world.rank(0)};
  testing::device_buffer<T> in, out;
  cudaStream_t s = nullptr;
  std::uint64_t warmed = 0;  // the workspace after the warm-up
  explicit solo_communicator(std::uint64_t big) : in(big), out(big) {
    REQUIRE(cudaMemset(in.p, 0, big * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(comm.all_reduce(in.p, out.p, 1000, op::sum, s) == status::success);  // grows eagerly
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    warmed = comm.workspace_bytes();
  }
  ~solo_communicator() { cudaStreamDestroy(s); }
  solo_communicator(const solo_communicator&) = delete;
  solo_communicator& operator=(const solo_communicator&) = delete;
};

TEST_CASE("once a device communicator's call is captured in a graph, its workspace stays where it is",
          "[gpu][cuda_collective][communicator]") {
  const std::uint64_t big = 100000;
  solo_communicator x(big);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(x.s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const status captured = x.comm.all_reduce(x.in.p, x.out.p, 1000, op::sum, x.s);
  const status bigger = x.comm.all_reduce(x.in.p, x.out.p, big, op::sum, x.s);  // would have to grow inside it
  REQUIRE(cudaStreamEndCapture(x.s, &graph) == cudaSuccess);
  CHECK(captured == status::success);
  CHECK(bigger == status::invalid_argument);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, x.s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(x.s) == cudaSuccess);
  // after the capture too: the graph holds the block
  CHECK(x.comm.all_reduce(x.in.p, x.out.p, big, op::sum, x.s) == status::invalid_argument);
  CHECK(x.comm.workspace_bytes() == x.warmed);
  CHECK(x.comm.all_reduce(x.in.p, x.out.p, 1000, op::sum, x.s) == status::success);
  REQUIRE(cudaStreamSynchronize(x.s) == cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A call refused for its arguments in a capture enqueued nothing: the graph holds no use of the
// workspace, which still grows for a later eager call.
TEST_CASE("a device communicator's call refused in a capture leaves its workspace free to grow",
          "[gpu][cuda_collective][communicator]") {
  const std::uint64_t big = 100000;
  solo_communicator x(big);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(x.s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const status refused = x.comm.all_reduce(nullptr, x.out.p, 1000, op::sum, x.s);  // a null sendbuff
  REQUIRE(cudaStreamEndCapture(x.s, &graph) == cudaSuccess);
  CHECK(refused == status::invalid_argument);
  if (graph) cudaGraphDestroy(graph);
  CHECK(x.comm.all_reduce(x.in.p, x.out.p, big, op::sum, x.s) == status::success);
  REQUIRE(cudaStreamSynchronize(x.s) == cudaSuccess);
  CHECK(x.comm.result() == status::success);
  CHECK(x.comm.workspace_bytes() > x.warmed);
  CHECK(x.out.get(big) == std::vector<solo_communicator::T>(big, 0));
}

// A transport that refuses an operation after the call began (here: rank 0 is in another thread's
// open group) is cuda_error, never invalid_argument, which promises that nothing was enqueued: the
// opening agreement's kernel had already written the workspace.
TEST_CASE("a transport refusal part way through a collective is cuda_error, not invalid_argument",
          "[gpu][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  using T = C::bits_type;
  const int n = 2;
  const std::uint64_t count = 20000;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  g.attach(world);
  const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(count, n, collective_options{}, false);
  g.workspace(ws_bytes);
  testing::device_buffer<T> in(count), out(count);
  REQUIRE(cudaMemset(in.p, 0, count * sizeof(T)) == cudaSuccess);
  const testing::watchdog guard(60, "a refusal part way");
  REQUIRE(world.rank(0).group_start() == status::success);  // this thread holds rank 0
  status got = status::success;
  zipccl::cuda::failure why{};
  std::thread([&] {
    zipccl::cuda::clear_last_error();
    got = zipccl::cuda::all_reduce<C>(in.p, out.p, count, op::sum, world.rank(0), g.ws[0]->p, ws_bytes,
                                      &g.statuses[0], g.streams[0]);
    why = zipccl::cuda::last_error();
  }).join();
  REQUIRE(world.rank(0).group_end() == status::success);
  CHECK(got == status::cuda_error);
  CHECK(why.library == static_cast<int>(status::invalid_argument));
  world.abort(status::peer_failed);  // (rank 1 never came: end the world for the streams' sake)
  REQUIRE(g.finish());
  CHECK(g.statuses[0] != status::success);
  CHECK(g.statuses[0] != static_cast<status>(-1));  // (the outcome was written)
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
