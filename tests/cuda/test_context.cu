// cuda::codec_context and cuda::device_buffer (cuda/context.cuh, cuda/memory.cuh): the owning
// layer gives the raw calls' bytes and statuses, grows its temp block as sizes grow, works under
// graph capture once reserved, reports a failing allocator as cuda_error with its cause, and its
// buffers move without double frees. Needs a GPU; without one it exits with the skip code 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <zipccl/cuda/codec.cuh>

#include "../support/codecs.hpp"
#include "../support/cuda_test.cuh"
#include "../support/test_data.hpp"

using namespace zipccl;

#define CUDA_OK(x) REQUIRE((x) == cudaSuccess)

namespace {

using tuning = zipccl::cuda::default_tuning;
constexpr std::uint32_t chunk = tuning::chunk_elems;
using testing::device_buffer;

// An allocator that refuses everything (a full pool).
struct refusing_allocator {
  void* allocate(std::size_t, cudaStream_t) const { return nullptr; }
  void deallocate(void*, std::size_t, cudaStream_t) const {}
};

// Counts live blocks, to catch leaks and double frees.
struct counting_allocator {
  std::shared_ptr<int> live = std::make_shared<int>(0);
  void* allocate(std::size_t bytes, cudaStream_t stream) const {
    void* p = zipccl::cuda::async_allocator{}.allocate(bytes, stream);
    if (p) ++*live;
    return p;
  }
  void deallocate(void* p, std::size_t bytes, cudaStream_t stream) const {
    --*live;
    zipccl::cuda::async_allocator{}.deallocate(p, bytes, stream);
  }
};

// Destroys the stream after everything declared later (contexts free their blocks on it).
struct stream_owner {
  cudaStream_t s = nullptr;
  stream_owner() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
  ~stream_owner() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("codec_context: the raw calls' bytes, a growing temp block", "[gpu]", testing::all_codecs) {
  using E = typename TestType::element_type;
  using T = typename TestType::bits_type;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    zipccl::cuda::codec_context<TestType, tuning, counting_allocator> ctx(stream);
    std::size_t last_temp = 0;
    for (std::uint64_t n : {100ull, 3ull * chunk + 1, 40ull * chunk, 5ull}) {
      INFO("n = " << n);
      const auto v = testing::make_tensor<E>(n, 0.1, testing::distribution::gaussian, n);
      const auto policy = testing::policy_for<TestType>(v.data(), n);
      host::compress_options opt;
      opt.chunk_elems = chunk;
      const auto want = host::compress<TestType>(v.data(), n, opt, policy);
      device_buffer<std::uint8_t> in(n * sizeof(T)), out(ctx.max_compressed_size(n)), back(n * sizeof(T));
      device_buffer<std::uint64_t> size(1), count(1);
      device_buffer<status> st(1);
      in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * sizeof(T));
      REQUIRE(ctx.compress(in.p, n, out.p, out.n, size.p, {}, policy) == status::success);
      REQUIRE(ctx.decompress(out.p, out.n, back.p, n * sizeof(T), st.p, count.p) == status::success);
      CUDA_OK(cudaStreamSynchronize(stream));
      REQUIRE(out.get(size.get(1)[0]) == want);
      REQUIRE(st.get(1)[0] == status::success);
      REQUIRE(count.get(1)[0] == n);
      REQUIRE(std::memcmp(back.get(n * sizeof(T)).data(), v.data(), n * sizeof(T)) == 0);
      CHECK(ctx.temp_bytes() >= last_temp);  // grows, never shrinks
      last_temp = ctx.temp_bytes();
      // argument errors are the raw call's
      CHECK(ctx.compress(in.p, n, out.p, out.n - 1, size.p, {}, policy) == status::buffer_too_small);
      CHECK(ctx.decompress(out.p, out.n, back.p, n * sizeof(T), nullptr) == status::invalid_argument);
    }
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

TEST_CASE("codec_context: reserved ahead, then captured into a graph", "[gpu]") {
  using C = codec<bf16, codebook::histogram>;
  const std::uint64_t n = 9 * chunk + 7;
  const auto v = testing::make_tensor<bf16>(n, 1.0);
  stream_owner owner;
  cudaStream_t stream = owner.s;
  zipccl::cuda::codec_context<C> ctx(stream);
  REQUIRE(ctx.reserve_for(n) == status::success);
  const std::size_t reserved = ctx.temp_bytes();
  device_buffer<std::uint8_t> in(n * 2), out(ctx.max_compressed_size(n)), back(n * 2);
  device_buffer<std::uint64_t> size(1);
  device_buffer<status> st(1);
  in.put(reinterpret_cast<const std::uint8_t*>(v.data()), n * 2);
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  REQUIRE(ctx.compress(in.p, n, out.p, out.n, size.p) == status::success);
  REQUIRE(ctx.decompress(out.p, out.n, back.p, n * 2, st.p) == status::success);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CHECK(ctx.temp_bytes() == reserved);  // no allocation inside the capture
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK(st.get(1)[0] == status::success);
  CHECK(std::memcmp(back.get(n * 2).data(), v.data(), n * 2) == 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("codec_context and device_buffer: a refusing allocator, moves, batches", "[gpu]") {
  using C = codec<fp16, codebook::analytic_gaussian>;
  stream_owner owner;
  cudaStream_t stream = owner.s;
  device_buffer<std::uint8_t> in(1024), out(4096);
  device_buffer<std::uint64_t> size(1);
  zipccl::cuda::codec_context<C, tuning, refusing_allocator> broke(stream);
  zipccl::cuda::clear_last_error();
  CHECK(broke.compress(in.p, 512, out.p, out.n, size.p) == status::cuda_error);
  CHECK(broke.reserve(1) == status::cuda_error);

  counting_allocator counter;
  {
    zipccl::cuda::device_buffer<float, counting_allocator> a(1000, stream, counter);
    CHECK(*counter.live == 1);
    zipccl::cuda::device_buffer<float, counting_allocator> b(std::move(a));
    CHECK(a.data() == nullptr);
    CHECK(b.capacity() == 1000);
    REQUIRE(b.reserve(500) == status::success);  // never shrinks
    CHECK(b.capacity() == 1000);
    REQUIRE(b.reserve(5000) == status::success);
    CHECK(b.capacity() == 5000);
    CHECK(*counter.live == 1);
    zipccl::cuda::device_buffer<float, counting_allocator> c(stream, counter);
    c = std::move(b);
    CHECK(*counter.live == 1);
  }
  CHECK(*counter.live == 0);
  CHECK_THROWS_AS((zipccl::cuda::device_buffer<float, refusing_allocator>(10, stream)), zipccl::error);

  // a batch through the context: one status per tensor
  using T = std::uint16_t;
  const std::vector<std::uint64_t> sizes = {3000, 0, 2 * chunk + 5};
  std::vector<std::vector<T>> tensors;
  std::vector<std::unique_ptr<device_buffer<std::uint8_t>>> ins, outs, backs;
  device_buffer<std::uint64_t> out_sizes(sizes.size());
  std::vector<zipccl::cuda::compress_item> items;
  zipccl::cuda::codec_context<C> ctx(stream);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    tensors.push_back(testing::make_tensor<fp16>(sizes[i], 0.5, testing::distribution::gaussian, i));
    ins.push_back(std::make_unique<device_buffer<std::uint8_t>>(sizes[i] * 2));
    ins.back()->put(reinterpret_cast<const std::uint8_t*>(tensors[i].data()), sizes[i] * 2);
    outs.push_back(std::make_unique<device_buffer<std::uint8_t>>(ctx.max_compressed_size(sizes[i])));
    items.push_back({ins.back()->p, sizes[i], outs.back()->p, outs.back()->n, out_sizes.p + i});
  }
  device_buffer<zipccl::cuda::compress_item> items_dev(items.size());
  items_dev.put(items.data(), items.size());
  REQUIRE(ctx.compress_batch(items.data(), items_dev.p, 3) == status::success);
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto stream_sizes = out_sizes.get(3);
  std::vector<zipccl::cuda::decompress_item> ditems;
  std::uint64_t max_in = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    backs.push_back(std::make_unique<device_buffer<std::uint8_t>>(sizes[i] * 2));
    ditems.push_back({outs[i]->p, stream_sizes[i], backs.back()->p, sizes[i] * 2});
    max_in = std::max(max_in, stream_sizes[i]);
  }
  device_buffer<zipccl::cuda::decompress_item> ditems_dev(3);
  ditems_dev.put(ditems.data(), 3);
  device_buffer<status> st(3);
  REQUIRE(ctx.decompress_batch(ditems_dev.p, 3, max_in, st.p) == status::success);
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto statuses = st.get(3);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(statuses[i] == status::success);
    REQUIRE(std::memcmp(backs[i]->get(sizes[i] * 2).data(), tensors[i].data(), sizes[i] * 2) == 0);
  }
}

int main(int argc, char** argv) { return zipccl::testing::run_gpu_tests(argc, argv); }
