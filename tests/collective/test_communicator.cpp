// communicator<Codec, Strategy, Transport> over a host transport: the same results as the raw
// calls, a workspace that grows on demand and never shrinks, calibrate() keeping the model every
// rank shares, and an allocation that throws aborting the transport so the other ranks fail fast.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <zipccl/communicator.hpp>
#include <zipccl/zipccl.hpp>

#include "../support/codecs.hpp"
#include "../support/test_data.hpp"

using namespace zipccl;
using transport::local_transport;
using transport::local_world;

TEMPLATE_LIST_TEST_CASE("a communicator's collectives equal the raw calls", "[communicator][host]", testing::host_codecs) {
  using T = typename TestType::bits_type;
  collective_options opt;
  opt.codec.chunk_elems = 1024;
  opt.pipeline.segment_elems = 4096;
  for (int n : {1, 2, 3, 5}) {
    INFO(n << " ranks");
    const std::uint64_t count = 10007;
    std::vector<std::vector<T>> raw(static_cast<std::size_t>(n)), ours(static_cast<std::size_t>(n));
    std::vector<std::vector<T>> gathered(static_cast<std::size_t>(n)), scattered(static_cast<std::size_t>(n));
    std::vector<status> st(static_cast<std::size_t>(n), status::success);
    local_world world(n);
    world.run([&](local_transport& t) {
      const int r = t.rank();
      const auto in = testing::make_tensor<typename TestType::element_type>(count * n, 0.02, testing::distribution::gaussian, 50 + r);
      const auto cb = testing::policy_for<TestType>(in.data(), in.size());
      communicator<TestType, strategy::always, local_transport> comm(t, opt, cb);
      ours[r].resize(count);
      status s = comm.all_reduce(in.data(), ours[r].data(), count, op::sum);
      raw[r].resize(count);
      std::vector<std::uint8_t> ws(all_reduce_workspace<TestType>(count, n, opt));
      if (s == status::success)
        s = all_reduce<TestType>(in.data(), raw[r].data(), count, op::sum, t, ws.data(), ws.size(), opt, cb);
      const std::uint64_t grown = comm.workspace_bytes();
      gathered[r].resize(count * n);
      if (s == status::success) s = comm.all_gather(in.data(), gathered[r].data(), count);
      scattered[r].resize(count);
      if (s == status::success) s = comm.reduce_scatter(in.data(), scattered[r].data(), count, op::avg);
      if (s == status::success && comm.workspace_bytes() < grown) s = status::corrupt;  // never shrinks
      if (s == status::success && n > 1) {  // a pair of ranks: 0 sends, 1 receives
        std::vector<T> back(count);
        if (r == 0) s = comm.send(in.data(), count, 1);
        if (r == 1) s = comm.recv(back.data(), count, 0);
        const auto sent = testing::make_tensor<typename TestType::element_type>(count * n, 0.02, testing::distribution::gaussian, 50);
        if (r == 1 && s == status::success && back != std::vector<T>(sent.begin(), sent.begin() + count)) s = status::corrupt;
      }
      st[r] = s;
    });
    for (int r = 0; r < n; ++r) {
      CHECK(st[r] == status::success);
      CHECK(ours[r] == raw[r]);
      for (int q = 0; q < n; ++q) {  // rank q's first block, gathered
        const auto in_q = testing::make_tensor<typename TestType::element_type>(count * n, 0.02, testing::distribution::gaussian, 50 + q);
        CHECK(std::equal(in_q.begin(), in_q.begin() + count, gathered[r].begin() + q * count));
      }
    }
  }
}

TEST_CASE("a communicator's all_to_all and calibrated adaptive path", "[communicator][host]") {
  using C = codec<bf16, codebook::analytic_gaussian>;
  const int n = 3;
  const std::uint64_t per = 5000;
  std::vector<status> st(n, status::success);
  std::vector<double> ratio(n, 0);
  local_world world(n);
  world.run([&](local_transport& t) {
    const int r = t.rank();
    communicator<C, strategy::adaptive, local_transport> comm(t);
    const auto sample = testing::make_tensor<bf16>(1 << 16, 0.02);
    status s = comm.calibrate(sample.data(), sample.size());
    ratio[r] = comm.options().model.ratio;
    std::vector<std::uint64_t> counts(n, per), displs(n);
    for (int p = 0; p < n; ++p) displs[p] = per * p;
    const auto in = testing::make_tensor<bf16>(per * n, 0.02, testing::distribution::gaussian, 9 + r);
    std::vector<std::uint16_t> out(per * n);
    if (s == status::success)
      s = comm.all_to_all(in.data(), counts.data(), displs.data(), out.data(), counts.data(), displs.data());
    for (int p = 0; p < n && s == status::success; ++p) {
      const auto from = testing::make_tensor<bf16>(per * n, 0.02, testing::distribution::gaussian, 9 + p);
      if (!std::equal(from.begin() + per * r, from.begin() + per * (r + 1), out.begin() + per * p)) s = status::corrupt;
    }
    st[r] = s;
  });
  for (int r = 0; r < n; ++r) {
    CHECK(st[r] == status::success);
    CHECK(ratio[r] == ratio[0]);  // every rank holds the same model
    CHECK(ratio[r] > 1.2);
  }
}

#if defined(__SANITIZE_ADDRESS__)
#define ZIPCCL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZIPCCL_TEST_ASAN 1
#endif
#endif

TEST_CASE("a workspace that cannot be allocated aborts the transport: the other ranks fail fast", "[communicator][host]") {
#ifdef ZIPCCL_TEST_ASAN
  WARN("AddressSanitizer ends the process on an absurd allocation instead of throwing: this case runs in the "
       "default build");
  return;
#endif
  using C = codec<bf16, codebook::analytic_gaussian>;
  const int n = 2;
  std::vector<status> st(n, status::success);
  std::vector<int> threw(n, 0);
  local_world world(n);
  world.run([&](local_transport& t) {
    communicator<C, strategy::always, local_transport> comm(t);
    std::vector<std::uint16_t> buf(16);
    if (t.rank() == 0) {
      try {  // an absurd count: the workspace cannot be allocated
        (void)comm.all_gather(buf.data(), buf.data(), std::uint64_t{1} << 60);
      } catch (const std::exception&) {
        threw[0] = 1;
      }
    } else {
      std::vector<std::uint16_t> out(32);
      st[1] = comm.all_gather(buf.data(), out.data(), 16);
    }
  });
  CHECK(threw[0] == 1);
  CHECK(st[1] != status::success);
}
