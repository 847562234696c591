// A training engine's compressed gradient all_reduce over its own NCCL communicator and stream.
//
// One process per GPU (or, on one machine, one process driving every GPU). The engine owns the
// communicator and the stream; zipccl only enqueues work on them:
//
//   ./zipccl_nccl_all_reduce                    every GPU of this machine, a thread per GPU
//   mpirun -np 8 ./zipccl_nccl_all_reduce --mpi one process per GPU (built with ZIPCCL_EXAMPLE_MPI:
//                                               rank 0's ncclUniqueId goes out by MPI_Bcast;
//                                               across machines as any NCCL job)
//
// It all-reduces 16 Mi bf16 "gradients" per rank (op::avg) compressed and plain on the engine's
// stream, then captures the compressed call pipelined (a zipccl::cuda::pipeline: NCCL's transfers
// on a second stream, overlapping the codec kernels) in a CUDA graph and replays it 10 times,
// checks that the results are bit-identical to the plain device path, and prints the wire's size
// next to the plain bytes.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#ifdef ZIPCCL_EXAMPLE_MPI
#include <mpi.h>
#endif

#include <zipccl/convert.hpp>
#include <zipccl/cuda/collective.cuh>
#include <zipccl/transport/nccl.hpp>

using C = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    const cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)
#define CHECK_NCCL(x)                                                                 \
  do {                                                                                \
    const ncclResult_t r_ = (x);                                                      \
    if (r_ != ncclSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r_));                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

namespace {

// One rank's buffers: gradients, results of the compressed and plain paths, workspace, status.
struct rank_buffers {
  std::uint16_t *grad = nullptr, *packed = nullptr, *plain = nullptr;
  void* ws = nullptr;
  std::uint64_t ws_bytes = 0;
  zipccl::status* status = nullptr;  // mapped host memory: read after the stream is done
  cudaStream_t stream = nullptr;
  std::unique_ptr<zipccl::cuda::pipeline> pipe;  // a transfer stream and events, on the rank's GPU
  cudaGraphExec_t graph = nullptr;
};

std::vector<std::uint16_t> gradients(std::uint64_t n, int rank) {
  std::mt19937_64 rng(7 + static_cast<std::uint64_t>(rank));
  std::normal_distribution<float> g(0.0f, 1e-3f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = zipccl::to_bits<zipccl::bf16>(g(rng));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t count = 16ull << 20;
  int ranks = 0, first_rank = 0, local = 0;
  ncclUniqueId id;
#ifdef ZIPCCL_EXAMPLE_MPI
  const bool mpi = argc > 1 && std::strcmp(argv[1], "--mpi") == 0;
#else
  const bool mpi = false;
  (void)argc;
  (void)argv;
#endif
  if (mpi) {
#ifdef ZIPCCL_EXAMPLE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &first_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int devices = 0;
    CHECK_CUDA(cudaGetDeviceCount(&devices));
    if (first_rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    local = 1;
    CHECK_CUDA(cudaSetDevice(first_rank % devices));
#endif
  } else {
    CHECK_CUDA(cudaGetDeviceCount(&ranks));
    if (ranks == 0) {
      std::printf("no CUDA device: nothing to run\n");
      return 0;
    }
    local = ranks;
    CHECK_NCCL(ncclGetUniqueId(&id));
  }

  // the engine's own communicators and streams
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(local));
  std::vector<rank_buffers> b(static_cast<std::size_t>(local));
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < local; ++i) {
    if (!mpi) CHECK_CUDA(cudaSetDevice(i));
    CHECK_NCCL(ncclCommInitRank(&comms[i], ranks, id, first_rank + i));
  }
  CHECK_NCCL(ncclGroupEnd());

  zipccl::collective_options opt;
  std::vector<zipccl::transport::nccl> ts;
  for (int i = 0; i < local; ++i) ts.emplace_back(comms[i]);
  for (int i = 0; i < local; ++i) {
    rank_buffers& r = b[i];
    if (!mpi) CHECK_CUDA(cudaSetDevice(i));
    CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    r.pipe = zipccl::cuda::make_pipeline(ts[i], zipccl::cuda::pipeline_slots((count + ranks - 1) / ranks, opt));
    CHECK_CUDA(cudaMalloc(&r.grad, count * 2));
    CHECK_CUDA(cudaMalloc(&r.packed, count * 2));
    CHECK_CUDA(cudaMalloc(&r.plain, count * 2));
    r.ws_bytes = zipccl::cuda::all_reduce_workspace<C, zipccl::strategy::adaptive>(count, ranks, opt);
    CHECK_CUDA(cudaMalloc(&r.ws, r.ws_bytes));
    CHECK_CUDA(cudaHostAlloc(&r.status, 2 * sizeof(zipccl::status), cudaHostAllocMapped));
    const auto g = gradients(count, first_rank + i);
    CHECK_CUDA(cudaMemcpy(r.grad, g.data(), count * 2, cudaMemcpyHostToDevice));
  }

  // One thread per local rank, each with its own communicator and stream, as an engine runs them
  // (never wrap a zipccl call in ncclGroupStart/End: it enqueues its kernels between its
  // transfers, and a group would hold the transfers back until its end).
  std::vector<int> failed(static_cast<std::size_t>(local), 0);
  auto rank_main = [&](int i) {
    rank_buffers& r = b[i];
    if (!mpi && cudaSetDevice(i) != cudaSuccess) return void(failed[i] = 1);
    // 1. compressed and plain, enqueued directly
    zipccl::status s = zipccl::cuda::all_reduce<C>(r.grad, r.packed, count, zipccl::op::avg, ts[i], r.ws, r.ws_bytes,
                                                   &r.status[0], r.stream, opt);
    if (s == zipccl::status::success)
      s = zipccl::cuda::all_reduce<C, zipccl::strategy::never>(r.grad, r.plain, count, zipccl::op::avg, ts[i], r.ws,
                                                               r.ws_bytes, &r.status[1], r.stream, opt);
    // 2. the compressed all_reduce, pipelined, captured in a graph and replayed
    cudaGraph_t graph = nullptr;
    if (s == zipccl::status::success && cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      s = zipccl::cuda::all_reduce<C>(r.grad, r.packed, count, zipccl::op::avg, ts[i], r.ws, r.ws_bytes, &r.status[0],
                                      r.pipe->on(r.stream), opt);
      if (cudaStreamEndCapture(r.stream, &graph) != cudaSuccess || cudaGraphInstantiate(&r.graph, graph, 0) != cudaSuccess)
        s = zipccl::status::cuda_error;
      if (graph) cudaGraphDestroy(graph);
      for (int rep = 0; rep < 10 && s == zipccl::status::success; ++rep)
        if (cudaGraphLaunch(r.graph, r.stream) != cudaSuccess) s = zipccl::status::cuda_error;
    }
    if (s != zipccl::status::success) {
      std::fprintf(stderr, "rank %d: all_reduce: %s (%s)\n", first_rank + i, zipccl::to_string(s),
                   zipccl::cuda::last_error_string().c_str());
      failed[i] = 1;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < local; ++i) threads.emplace_back(rank_main, i);
  for (auto& t : threads) t.join();
  for (int f : failed)
    if (f) return 1;

  int bad = 0;
  for (int i = 0; i < local; ++i) {
    if (!mpi) CHECK_CUDA(cudaSetDevice(i));
    CHECK_CUDA(cudaStreamSynchronize(b[i].stream));
    std::vector<std::uint16_t> x(count), y(count);
    CHECK_CUDA(cudaMemcpy(x.data(), b[i].packed, count * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(y.data(), b[i].plain, count * 2, cudaMemcpyDeviceToHost));
    const bool same = x == y;
    std::printf("rank %d: compressed %s, plain %s, bit-identical: %s\n", first_rank + i,
                zipccl::to_string(b[i].status[0]), zipccl::to_string(b[i].status[1]), same ? "yes" : "NO");
    bad += !same || b[i].status[0] != zipccl::status::success || b[i].status[1] != zipccl::status::success;
  }
  const std::uint64_t wire = zipccl::cuda::wire_bytes<C>((count + ranks - 1) / ranks, opt);
  std::printf("per ring step: %llu bytes plain, %llu on the fixed-size wire (%.3fx)\n",
              static_cast<unsigned long long>((count + ranks - 1) / ranks * 2),
              static_cast<unsigned long long>(wire),
              static_cast<double>((count + ranks - 1) / ranks * 2) / static_cast<double>(wire ? wire : 1));
  for (int i = 0; i < local; ++i) {
    if (b[i].graph) cudaGraphExecDestroy(b[i].graph);
    cudaFree(b[i].grad);
    cudaFree(b[i].packed);
    cudaFree(b[i].plain);
    cudaFree(b[i].ws);
    cudaFreeHost(b[i].status);
    b[i].pipe.reset();
    cudaStreamDestroy(b[i].stream);
    ncclCommDestroy(comms[i]);
  }
#ifdef ZIPCCL_EXAMPLE_MPI
  if (mpi) MPI_Finalize();
#endif
  return bad ? 1 : 0;
}
