// Adapting your own device communicator to zipccl's device collectives.
//
// `engine_comm` stands for the communicator a training engine already has: its own names, byte
// counts as size_t, batches instead of groups, and an error flag it raises itself. The adapter
// `engine_transport` is all zipccl needs (the device transport concept,
// include/zipccl/transport/device.hpp): rank, size, send, recv, group_start/end, async_error and
// abort. Here the engine's communicator is itself built on transport::cuda_local (4 ranks on one
// GPU, a host thread each), so the program runs anywhere there is one GPU: a compressed
// all_gather of bf16, checked against the plain one.
#include <cuda_runtime.h>

#include <cstdio>
#include <thread>
#include <vector>

#include <zipccl/cuda/collective.cuh>
#include <zipccl/transport/cuda_local.cuh>

// ---- the engine's communicator (not part of zipccl) ----
class engine_comm {
 public:
  engine_comm(zipccl::transport::cuda_local_world& w, int rank) : t_(w.rank(rank)) {}
  int my_rank() const { return t_.rank(); }
  int world_size() const { return t_.size(); }
  bool isend(const void* p, size_t n, int to, cudaStream_t s) { return t_.send(to, p, n, s) == zipccl::status::success; }
  bool irecv(void* p, size_t n, int from, cudaStream_t s) { return t_.recv(from, p, n, s) == zipccl::status::success; }
  bool begin_batch() { return t_.group_start() == zipccl::status::success; }
  bool end_batch() { return t_.group_end() == zipccl::status::success; }
  bool healthy() { return t_.async_error() == zipccl::status::success; }
  void shut_down() { t_.abort(zipccl::status::peer_failed); }

 private:
  zipccl::transport::cuda_local_transport& t_;
};

// ---- the adapter: a few lines per member ----
struct engine_transport {
  engine_comm& c;
  int rank() const { return c.my_rank(); }
  int size() const { return c.world_size(); }
  zipccl::status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t s) {
    return c.isend(buf, bytes, peer, s) ? zipccl::status::success : zipccl::status::peer_failed;
  }
  zipccl::status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t s) {
    return c.irecv(buf, bytes, peer, s) ? zipccl::status::success : zipccl::status::peer_failed;
  }
  zipccl::status group_start() { return c.begin_batch() ? zipccl::status::success : zipccl::status::invalid_argument; }
  zipccl::status group_end() { return c.end_batch() ? zipccl::status::success : zipccl::status::peer_failed; }
  zipccl::status async_error() { return c.healthy() ? zipccl::status::success : zipccl::status::peer_failed; }
  void abort(zipccl::status) { c.shut_down(); }
};
static_assert(zipccl::transport::is_device_transport_v<engine_transport>);

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to run\n");
    return 0;
  }
  using C = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
  const int n = 4;
  const std::uint64_t count = 1 << 20;
  zipccl::transport::cuda_local_world world(n);
  std::vector<engine_comm> comms;
  for (int r = 0; r < n; ++r) comms.emplace_back(world, r);
  std::vector<engine_transport> ts;
  for (int r = 0; r < n; ++r) ts.push_back({comms[r]});

  const zipccl::collective_options opt;
  const std::uint64_t ws_bytes = zipccl::cuda::all_gather_workspace<C>(count, n, opt);
  std::vector<cudaStream_t> streams(n);
  std::vector<void*> in(n), packed(n), plain(n), ws(n);
  zipccl::status* st = nullptr;
  if (cudaMallocManaged(&st, 2 * n * sizeof(zipccl::status)) != cudaSuccess) return 1;
  for (int r = 0; r < n; ++r) {
    std::vector<std::uint16_t> v(count);
    for (std::uint64_t i = 0; i < count; ++i) v[i] = static_cast<std::uint16_t>(0x3C00 + (i * 37 + r * 11) % 512);
    if (cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc(&in[r], count * 2) != cudaSuccess ||
        cudaMalloc(&packed[r], count * 2 * n) != cudaSuccess || cudaMalloc(&plain[r], count * 2 * n) != cudaSuccess ||
        cudaMalloc(&ws[r], ws_bytes) != cudaSuccess ||
        cudaMemcpy(in[r], v.data(), count * 2, cudaMemcpyHostToDevice) != cudaSuccess)
      return 1;
  }
  // a host thread per rank, as a process per GPU would have: cuda_local matches every message on
  // the host, and a call returns once its peers have made theirs
  std::vector<zipccl::status> enqueued(n, zipccl::status::success);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      zipccl::status s = zipccl::cuda::all_gather<C>(in[r], packed[r], count, ts[r], ws[r], ws_bytes, &st[r], streams[r], opt);
      if (s == zipccl::status::success)
        s = zipccl::cuda::all_gather<C, zipccl::strategy::never>(in[r], plain[r], count, ts[r], ws[r], ws_bytes,
                                                                 &st[n + r], streams[r], opt);
      if (s != zipccl::status::success) ts[r].abort(s);  // the others must not wait for this rank
      enqueued[r] = s;
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (enqueued[r] != zipccl::status::success) {
      std::printf("rank %d: %s\n", r, zipccl::to_string(enqueued[r]));
      return 1;
    }
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return 1;
    std::vector<std::uint16_t> a(count * n), b(count * n);
    cudaMemcpy(a.data(), packed[r], count * 2 * n, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), plain[r], count * 2 * n, cudaMemcpyDeviceToHost);
    const bool ok = a == b && st[r] == zipccl::status::success && st[n + r] == zipccl::status::success;
    std::printf("rank %d: compressed %s, plain %s, equal: %s\n", r, zipccl::to_string(st[r]), zipccl::to_string(st[n + r]),
                a == b ? "yes" : "NO");
    bad += !ok;
    cudaFree(in[r]);
    cudaFree(packed[r]);
    cudaFree(plain[r]);
    cudaFree(ws[r]);
    cudaStreamDestroy(streams[r]);
  }
  cudaFree(st);
  return bad ? 1 : 0;
}
