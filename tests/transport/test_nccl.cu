// transport::nccl (gpu): a one-rank communicator sends to itself inside a group; where the
// machine has several GPUs, one rank per GPU runs ring steps (ncclCommInitAll, one process).
// Bad arguments and an aborted communicator are errors, not crashes.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <vector>

#include <zipccl/transport/nccl.hpp>

#include "../support/cuda_test.cuh"

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
  CHECK(t.send(1, a.p, 16, s) == status::invalid_argument);
  CHECK(t.send(0, nullptr, 16, s) == status::invalid_argument);
  t.abort(status::peer_failed);  // ends (and frees) the communicator
  CHECK(t.async_error() == status::peer_failed);
  CHECK(t.send(0, a.p, 16, s) == status::peer_failed);
  cudaStreamDestroy(s);
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
