// transport::nccl (gpu): a one-rank communicator sends to itself inside a group and carries every
// device collective, eagerly, in checked mode and captured in a graph; every local error leaves
// the communicator usable for the next call; copies share one abort; checked agreements from two
// threads wait for each other; where the machine has several
// GPUs, one rank per GPU runs ring steps (ncclCommInitAll, one process).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <thread>
#include <vector>

#include <zipccl/cuda/collective.cuh>
#include <zipccl/transport/nccl.hpp>

#include "../support/cuda_test.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;

TEST_CASE("transport::nccl: a one-rank communicator sends to itself", "[gpu][nccl]") {
  ncclComm_t comm;
  int dev = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
  transport::nccl t(comm);
  CHECK(t.rank() == 0);
  CHECK(t.size() == 1);
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  std::vector<std::uint8_t> v(100000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(i * 13);
  testing::device_buffer<std::uint8_t> a(v.size()), b(v.size());
  a.put(v.data(), v.size());
  REQUIRE(t.group_start() == status::success);
  REQUIRE(t.send(0, a.p, v.size(), s) == status::success);
  REQUIRE(t.recv(0, b.p, v.size(), s) == status::success);
  REQUIRE(t.group_end() == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(b.get(v.size()) == v);
  CHECK(t.async_error() == status::success);
  // every local error, then a call that works on the same communicator
  CHECK(t.send(1, a.p, 16, s) == status::invalid_argument);
  CHECK(t.send(0, nullptr, 16, s) == status::invalid_argument);
  CHECK(t.send(0, a.p, 16, s) == status::invalid_argument);  // to itself, outside a group
  CHECK(t.group_end() == status::invalid_argument);          // no group open
  REQUIRE(t.group_start() == status::success);
  CHECK(t.group_start() == status::invalid_argument);  // no nesting
  REQUIRE(t.send(0, a.p, 16, s) == status::success);
  REQUIRE(t.recv(0, b.p, 16, s) == status::success);
  REQUIRE(t.group_end() == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(t.async_error() == status::success);
  CHECK(t.device() == dev);
  // copies share one state: an abort through one is seen by the other, and happens once
  transport::nccl copy = t;
  copy.abort(status::peer_failed);  // ends (and frees) the communicator
  t.abort(status::peer_failed);     // (a second abort does nothing)
  CHECK(t.aborted());
  CHECK(t.async_error() == status::peer_failed);
  CHECK(t.send(0, a.p, 16, s) == status::peer_failed);
  CHECK(t.group_start() == status::peer_failed);
  CHECK(t.group_end() == status::peer_failed);
  cudaStreamDestroy(s);
}

TEST_CASE("transport::nccl: a null communicator is refused, not a crash", "[gpu][nccl]") {
  transport::nccl t(nullptr);
  CHECK(t.size() == 0);
  CHECK(t.init_status() == status::invalid_argument);
  CHECK(t.send(0, nullptr, 0, nullptr) == status::invalid_argument);
  CHECK(t.group_start() == status::invalid_argument);
  CHECK(t.async_error() == status::invalid_argument);
  t.abort(status::peer_failed);  // nothing to end
}

TEST_CASE("transport::nccl: every device collective on one rank, eager, checked and captured; local errors leave "
          "the communicator usable",
          "[gpu][nccl][cuda_collective]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  ncclComm_t comm;
  int dev = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
  transport::nccl::options topt;
  topt.checked = GENERATE(false, true);
  INFO((topt.checked ? "checked" : "unchecked"));
  transport::nccl t(comm, topt);
  cudaStream_t s;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  const std::uint64_t count = 40000;
  collective_options opt;
  const auto v = testing::make_tensor<bf16>(count, 0.01, testing::distribution::gaussian, 5);
  testing::device_buffer<std::uint16_t> in(count), out(count);
  in.put(v.data(), count);
  const std::uint64_t ws_bytes = zipccl::cuda::all_reduce_workspace<C>(count, 1, opt) +
                                 zipccl::cuda::all_gather_workspace<C>(count, 1, opt);
  testing::device_buffer<std::uint8_t> ws(ws_bytes);
  status* st = nullptr;
  REQUIRE(cudaMallocManaged(&st, sizeof(status)) == cudaSuccess);
  const auto all = [&](cudaStream_t on) {
    status e = zipccl::cuda::all_gather<C>(in.p, out.p, count, t, ws.p, ws_bytes, st, on, opt);
    if (e == status::success)
      e = zipccl::cuda::reduce_scatter<C>(in.p, out.p, count, op::sum, t, ws.p, ws_bytes, st, on, opt);
    if (e == status::success) e = zipccl::cuda::all_reduce<C>(in.p, out.p, count, op::sum, t, ws.p, ws_bytes, st, on, opt);
    const std::uint64_t counts[] = {count}, displs[] = {0};
    if (e == status::success)
      e = zipccl::cuda::all_to_all<C>(in.p, counts, displs, out.p, counts, displs, t, ws.p, ws_bytes, st, on, opt);
    return e;
  };
  REQUIRE(all(s) == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(*st == status::success);
  CHECK(out.get(count) == v);
  // local errors: nothing enqueued, the communicator as it was
  CHECK(zipccl::cuda::all_gather<C>(nullptr, out.p, count, t, ws.p, ws_bytes, st, s, opt) == status::invalid_argument);
  CHECK(zipccl::cuda::all_gather<C>(in.p, out.p, count, t, ws.p, 16, st, s, opt) == status::invalid_argument);
  CHECK(zipccl::cuda::all_reduce<C>(in.p, out.p, count, op::sum, t, ws.p, ws_bytes, nullptr, s, opt) ==
        status::invalid_argument);
  zipccl::cuda::lanes broken(s, s, nullptr, 0);
  broken.transfer = reinterpret_cast<cudaStream_t>(1);  // pipelined lanes without events
  CHECK(zipccl::cuda::all_gather<C>(in.p, out.p, count, t, ws.p, ws_bytes, st, broken, opt) == status::invalid_argument);
  CHECK(t.async_error() == status::success);
  CHECK_FALSE(t.aborted());
  // and the next calls work: eagerly, and captured in a graph (checked mode: signatures seen above)
  REQUIRE(cudaMemsetAsync(out.p, 0, count * 2, s) == cudaSuccess);
  REQUIRE(all(s) == status::success);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(out.get(count) == v);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const status captured = all(s);
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(captured == status::success);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int rep = 0; rep < 10; ++rep) REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(*st == status::success);
  CHECK(out.get(count) == v);
  if (topt.checked) {
    // a signature not seen before cannot be checked inside a capture: refused, nothing enqueued
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    const status fresh = zipccl::cuda::all_gather<C>(in.p, out.p, count - 1, t, ws.p, ws_bytes, st, s, opt);
    cudaGraph_t g2 = nullptr;
    (void)cudaStreamEndCapture(s, &g2);
    if (g2) cudaGraphDestroy(g2);
    CHECK(fresh == status::invalid_argument);
    CHECK(t.async_error() == status::success);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(st);
  cudaStreamDestroy(s);
  ncclCommDestroy(comm);
}

// The checked mode's agreement polls with the wrapper's lock let go: a second thread's agreement
// waits for the first (they share the wrapper's device words), and an abort() ends the wrapper.
TEST_CASE("transport::nccl: checked agreements from two threads on a non-blocking communicator, then an abort",
          "[gpu][nccl]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  REQUIRE((r == ncclSuccess || r == ncclInProgress));
  transport::nccl::options o;
  o.checked = true;
  o.settle_seconds = 30;
  transport::nccl t(comm, o);
  REQUIRE(t.init_status() == status::success);
  const int each = 50;
  std::vector<status> got(2 * each, static_cast<status>(-1));
  std::thread other([&] {
    for (int i = 0; i < each; ++i) got[each + i] = t.agree(1000 + static_cast<std::uint64_t>(i), -1, nullptr);
  });
  for (int i = 0; i < each; ++i) got[i] = t.agree(5000 + static_cast<std::uint64_t>(i), -1, nullptr);
  other.join();
  for (int i = 0; i < 2 * each; ++i) {
    INFO("agreement " << i);
    CHECK(got[i] == status::success);
  }
  CHECK(t.async_error() == status::success);
  t.abort(status::peer_failed);
  CHECK(t.agree(9000, -1, nullptr) == status::peer_failed);
}

TEST_CASE("transport::nccl: one rank per GPU, ring steps", "[gpu][nccl]") {
  int n = 0;
  REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
  if (n < 2) {
    WARN("one GPU here: the multi-GPU case did not run");
    return;
  }
  std::vector<int> devs(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) devs[d] = d;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
  REQUIRE(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess);
  const std::size_t bytes = 1 << 20;
  std::vector<cudaStream_t> streams(n);
  std::vector<void*> out(n), in(n);
  for (int r = 0; r < n; ++r) {
    REQUIRE(cudaSetDevice(r) == cudaSuccess);
    REQUIRE(cudaStreamCreate(&streams[r]) == cudaSuccess);
    REQUIRE(cudaMalloc(&out[r], bytes) == cudaSuccess);
    REQUIRE(cudaMalloc(&in[r], bytes) == cudaSuccess);
    REQUIRE(cudaMemset(out[r], r + 1, bytes) == cudaSuccess);
  }
  std::vector<transport::nccl> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(comms[r]);
  // one thread drives every rank: NCCL needs the ranks' calls in one group then
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    REQUIRE(ts[r].send((r + 1) % n, out[r], bytes, streams[r]) == status::success);
    REQUIRE(ts[r].recv((r + n - 1) % n, in[r], bytes, streams[r]) == status::success);
  }
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    REQUIRE(cudaSetDevice(r) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(streams[r]) == cudaSuccess);
    std::vector<std::uint8_t> got(bytes);
    REQUIRE(cudaMemcpy(got.data(), in[r], bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(got == std::vector<std::uint8_t>(bytes, static_cast<std::uint8_t>((r + n - 1) % n + 1)));
    cudaFree(out[r]);
    cudaFree(in[r]);
    cudaStreamDestroy(streams[r]);
    ncclCommDestroy(comms[r]);
  }
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
