// Shared by the device collective tests (gpu): every rank of a transport::cuda_local world on one
// GPU (its stream, a cuda::pipeline each), the host collectives' answer, and one call of a
// collective on every rank, a host thread each (world.run), on one stream or pipelined.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include <zipccl/collective.hpp>
#include <zipccl/cuda/collective.cuh>
#include <zipccl/cuda/detail/wait_streams.cuh>
#include <zipccl/transport/cuda_local.cuh>

#include "cuda_test.cuh"
#include "test_data.hpp"

namespace zipccl::testing::device_collectives {

using transport::cuda_local_transport;
using transport::cuda_local_world;

// The tests' worlds: a rendezvous deadline below the watchdogs' (60 s), so that a call whose peer
// never comes fails the test with timed_out, on every rank, before a watchdog ends the process.
inline cuda_local_world::options world_options(transport::link_model link = {}) {
  cuda_local_world::options o;
  o.link = link;
  o.rendezvous_seconds = 30;
  return o;
}

// Every rank's stream, pipeline (events, on its world's transfer stream), status word and workspace.
struct ranks_on_gpu {
  int n;
  std::vector<cudaStream_t> streams;  // the test's own until attach(), then the world's
  bool own_streams = true;
  cuda_local_world* world = nullptr;  // where the streams and the pipelines' GPUs come from (attach)
  const cuda_local_world* pipes_of = nullptr;
  std::vector<std::unique_ptr<zipccl::cuda::pipeline>> pipes;
  status* statuses = nullptr;  // managed: n words
  std::vector<std::unique_ptr<testing::device_buffer<std::uint8_t>>> ws;
  explicit ranks_on_gpu(int ranks) : n(ranks), streams(static_cast<std::size_t>(ranks)) {
    for (auto& s : streams) REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaMallocManaged(&statuses, sizeof(status) * static_cast<std::size_t>(ranks)) == cudaSuccess);
    for (int r = 0; r < ranks; ++r) statuses[r] = static_cast<status>(-1);
  }
  ~ranks_on_gpu() {  // (the world, made after this, is gone already: its destructor ended it)
    pipes.clear();
    if (own_streams)
      for (auto& s : streams) cudaStreamDestroy(s);
    cudaFree(statuses);
  }
  // The ranks run on the world's streams (world.stream(r), which world.run hands them; the test's
  // own streams are gone), and their pipelines are made for the world's ranks.
  void attach(cuda_local_world& w) {
    REQUIRE(w.size() == n);
    for (int r = 0; r < n; ++r) {
      if (own_streams) cudaStreamDestroy(streams[static_cast<std::size_t>(r)]);
      streams[static_cast<std::size_t>(r)] = w.stream(r);
    }
    own_streams = false;
    world = &w;
  }
  // Rank r's lanes: its stream alone, or pipelined (make_pipeline on the world's rank r) with
  // `slots` segment slots.
  zipccl::cuda::lanes lanes(int r, bool pipelined, std::uint32_t slots = 1) {
    if (!pipelined) return streams[static_cast<std::size_t>(r)];
    REQUIRE(world != nullptr);
    if (pipes_of != world) {
      pipes.clear();
      for (int q = 0; q < n; ++q) {
        pipes.push_back(zipccl::cuda::make_pipeline(world->rank(q), 1));
        REQUIRE(pipes.back() != nullptr);
      }
      pipes_of = world;
    }
    REQUIRE(pipes[static_cast<std::size_t>(r)]->reserve(slots) == status::success);
    return pipes[static_cast<std::size_t>(r)]->on(streams[static_cast<std::size_t>(r)]);
  }
  void workspace(std::uint64_t bytes) {
    ws.clear();
    for (int r = 0; r < n; ++r) ws.emplace_back(new testing::device_buffer<std::uint8_t>(bytes ? bytes : 1));
  }
  // Every rank's lanes, made here on the test's thread (lanes() uses Catch2's macros).
  std::vector<zipccl::cuda::lanes> all_lanes(bool pipelined, std::uint32_t slots = 1) {
    std::vector<zipccl::cuda::lanes> v;
    for (int r = 0; r < n; ++r) v.push_back(lanes(r, pipelined, slots));
    return v;
  }
  // Waits for every stream, at most `seconds`: a hang is a failure, not a stuck test.
  bool finish(double seconds = 30) {
    std::vector<cudaStream_t> all = streams;
    for (auto& p : pipes) all.push_back(p->transfer_stream());
    if (drained(all, seconds)) return true;
    UNSCOPED_INFO("the ranks' streams did not drain in " << seconds << " s");
    return false;
  }
  static bool drained(const std::vector<cudaStream_t>& all, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    return zipccl::cuda::detail::wait_streams(all, until, std::chrono::milliseconds(1), "test: drained") ==
           status::success;
  }
};

// Runs call(r) for every rank r of the world, a host thread each (world.run: a rank whose call
// fails ends the world, so that the others return); the host statuses. call must not use Catch2's
// macros (they are not thread-safe).
template <class Call>
std::vector<status> on_every_rank(cuda_local_world& world, Call&& call) {
  return world.run([&](cuda_local_transport& t, cudaStream_t) { return call(t.rank()); });
}

// Rank r's input: Gaussian at a scale of its own. Past one tile (a prime number of elements, so
// that no block or segment boundary repeats with it) the tile is repeated with the copy's number
// mod 4 in the two low mantissa bits: every block of a large input differs from every other, and
// a block delivered to the wrong place fails the comparison (drawing 64 MiB per rank would cost
// the test more than the collective).
template <class Codec>
std::vector<typename Codec::bits_type> input_of(std::uint64_t n, int r) {
  using T = typename Codec::bits_type;
  constexpr std::uint64_t tile = 1048573;
  auto v = testing::make_tensor<typename Codec::element_type>(n < tile ? n : tile, 0.01 * (1 + r),
                                                              testing::distribution::gaussian,
                                                              1000 + static_cast<std::uint64_t>(r));
  if (n > tile) {
    v.resize(n);
    for (std::uint64_t i = tile; i < n; ++i) v[i] = static_cast<T>(v[i % tile] ^ static_cast<T>((i / tile) & 3));
  }
  return v;
}

// The host collectives' answer (plain ring on transport::local): what every device path must give.
template <class Codec>
std::vector<std::vector<typename Codec::bits_type>> host_reference(int which, int n, std::uint64_t count, op reduction) {
  using T = typename Codec::bits_type;
  std::vector<std::vector<T>> out(static_cast<std::size_t>(n));
  transport::local_world world(n);
  world.run([&](transport::local_transport& t) {
    const int r = t.rank();
    collective_options opt;
    if (which == 0) {  // all_gather
      const auto in = input_of<Codec>(count, r);
      out[r].resize(count * static_cast<std::uint64_t>(n));
      REQUIRE(all_gather<Codec, strategy::never>(in.data(), out[r].data(), count, t, nullptr, 0, opt) == status::success);
    } else if (which == 1) {  // reduce_scatter
      const auto in = input_of<Codec>(count * static_cast<std::uint64_t>(n), r);
      out[r].resize(count);
      std::vector<std::uint8_t> ws(reduce_scatter_workspace<Codec, strategy::never>(count, opt));
      REQUIRE(reduce_scatter<Codec, strategy::never>(in.data(), out[r].data(), count, reduction, t, ws.data(), ws.size(),
                                                     opt) == status::success);
    } else {  // all_reduce
      const auto in = input_of<Codec>(count, r);
      out[r].resize(count);
      std::vector<std::uint8_t> ws(all_reduce_workspace<Codec, strategy::never>(count, n, opt));
      REQUIRE(all_reduce<Codec, strategy::never>(in.data(), out[r].data(), count, reduction, t, ws.data(), ws.size(),
                                                 opt) == status::success);
    }
  });
  return out;
}

// Runs collective `which` (0 all_gather, 1 reduce_scatter, 2 all_reduce) on every rank of a
// cuda_local world; returns every rank's output, and the statuses in g.statuses.
template <class Codec, class Strategy>
std::vector<std::vector<typename Codec::bits_type>> on_device(int which, int n, std::uint64_t count, op reduction,
                                                             const collective_options& opt, ranks_on_gpu& g,
                                                             cuda_local_world& world, bool pipelined = false,
                                                             bool mixed = false) {
  using T = typename Codec::bits_type;
  g.attach(world);
  static const char* const names[] = {"all_gather", "reduce_scatter", "all_reduce"};
  const testing::watchdog guard(60, std::string(names[which]) + " on " + std::to_string(n) + " ranks, count " +
                                        std::to_string(count) +
                                        (mixed ? ", mixed lanes" : pipelined ? ", pipelined" : ", one stream") +
                                        (std::is_same_v<Strategy, strategy::never> ? ", plain" : ", compressed"));
  const std::uint64_t in_count = which == 1 ? count * static_cast<std::uint64_t>(n) : count;
  const std::uint64_t out_count = which == 0 ? count * static_cast<std::uint64_t>(n) : count;
  const std::uint64_t ws_bytes = which == 0   ? zipccl::cuda::all_gather_workspace<Codec, Strategy>(count, n, opt)
                                 : which == 1 ? zipccl::cuda::reduce_scatter_workspace<Codec, Strategy>(count, opt)
                                              : zipccl::cuda::all_reduce_workspace<Codec, Strategy>(count, n, opt);
  g.workspace(ws_bytes);
  std::vector<std::unique_ptr<testing::device_buffer<T>>> in, out;
  for (int r = 0; r < n; ++r) {
    const auto v = input_of<Codec>(in_count, r);
    in.emplace_back(new testing::device_buffer<T>(in_count + 1));
    in.back()->put(v.data(), in_count);
    out.emplace_back(new testing::device_buffer<T>(out_count + 1));
  }
  const std::uint64_t block = which == 2 ? (count + static_cast<std::uint64_t>(n) - 1) / static_cast<std::uint64_t>(n) : count;
  // mixed: the odd ranks pipelined, the even ones on one stream (the messages are the same)
  std::vector<zipccl::cuda::lanes> on;
  for (int r = 0; r < n; ++r) on.push_back(g.lanes(r, mixed ? r % 2 == 1 : pipelined, zipccl::cuda::pipeline_slots(block, opt)));
  const auto st = on_every_rank(world, [&](int r) {
    cuda_local_transport& t = world.rank(r);
    if (which == 0)
      return zipccl::cuda::all_gather<Codec, Strategy>(in[r]->p, out[r]->p, count, t, g.ws[r]->p, ws_bytes,
                                                       &g.statuses[r], on[r], opt);
    if (which == 1)
      return zipccl::cuda::reduce_scatter<Codec, Strategy>(in[r]->p, out[r]->p, count, reduction, t, g.ws[r]->p,
                                                           ws_bytes, &g.statuses[r], on[r], opt);
    return zipccl::cuda::all_reduce<Codec, Strategy>(in[r]->p, out[r]->p, count, reduction, t, g.ws[r]->p, ws_bytes,
                                                     &g.statuses[r], on[r], opt);
  });
  for (status s : st) REQUIRE(s == status::success);
  REQUIRE(g.finish());
  std::vector<std::vector<T>> res;
  for (int r = 0; r < n; ++r) res.push_back(out[r]->get(out_count));
  return res;
}

// The device's block_coder::encode writes the fixed-size wire byte for byte as the host reference
// (fixed_wire::encode) at opt's spill budget, and its unpack and decode read what the
// host wrote, intact or damaged, with the host's verdict (segments of three default chunks).
// zero_rows: most rows of 512 elements all +0.0 (zero groups; with codebook::entropy, zero masks).
template <class Codec>
void check_fixed_wire_bytes(collective_options opt, bool zero_rows = false) {
  using T = typename Codec::bits_type;
  using F = collective::detail::fixed_wire<Codec>;
  using tuning = zipccl::cuda::default_tuning;
  opt.pipeline.segment_elems = 3 * 8192;
  for (std::uint64_t count : {1ull, 8191ull, 3ull * 8192, 100000ull}) {
    INFO("count " << count);
    auto in = input_of<Codec>(count, 3);
    if (zero_rows)
      for (std::uint64_t i = 0; i < count; ++i)
        if ((i / 512) % 5 != 2) in[i] = 0;  // four rows in five
    const auto g = zipccl::cuda::collective_detail::geometry<Codec, tuning>(count, opt);
    testing::device_buffer<T> src(count);
    src.put(in.data(), count);
    testing::device_buffer<std::uint8_t> staging(g.staging_bytes() + 1), wire(g.total_bytes() + 1);
    testing::device_buffer<std::uint64_t> spans(g.chunks() + 1), key(1);
    testing::device_buffer<T> back(count);
    const std::uint64_t none = ~0ull;
    key.put(&none, 1);
    collective_options checked = opt;
    checked.codec.checksum = true;
    const typename Codec::codebook_type cb{};
    const auto blocks = zipccl::cuda::collective_detail::coder<Codec, tuning>(
        nullptr, g, checked, cb, reinterpret_cast<unsigned long long*>(key.p), staging.p, spans.p);
    REQUIRE(blocks.encode(reinterpret_cast<const std::uint8_t*>(src.p), wire.p, 1) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(key.get(1)[0] == none);
    const auto dev = wire.get(g.total_bytes());
    // the host reference, segment by segment
    std::vector<std::uint8_t> host(g.total_bytes()), scratch(F::scratch_bytes(8192));
    for (std::uint64_t seg = 0; seg < g.segments; ++seg)
      REQUIRE(F::encode({}, in.data() + seg * g.seg, g.seg_elems(seg), 8192, true, count, seg, opt.device_wire.spill_permille,
                        host.data() + g.seg_offset(seg), scratch.data()) == status::success);
    CHECK(dev == host);
    // and the device reads what the host wrote, with the host's verdict on a damaged copy
    // (damage 1: byte 40 of chunk 0, a plane bit, or for codebook::entropy its zero mask or the
    // first bytes of its body; damage 3: the middle of the first segment's spill bytes in use,
    // escapes or, for codebook::entropy, a rANS body; damage 4: the first unused spill byte,
    // which must stay zero)
    std::uint64_t used = 0;
    REQUIRE(F::open(host.data(), g.seg_elems(0), 8192, count, 0, opt.device_wire.spill_permille, &used) ==
            status::success);
    const std::uint64_t spill = F::preamble + collective::detail::wire<Codec>::fixed_bytes(g.seg_elems(0), 8192);
    const std::uint64_t room = F::spill_bytes(g.seg_elems(0), opt.device_wire.spill_permille);
    for (int damage = 0; damage < 5; ++damage) {
      if ((damage == 3 && used == 0) || (damage == 4 && used == room)) continue;
      auto bytes = host;
      if (damage == 1) bytes[16 + 40] ^= 0x04;
      if (damage == 2) bytes[8] ^= 0x01;  // the preamble's segment index
      if (damage == 3) bytes[spill + used / 2] ^= 0x10;
      if (damage == 4) bytes[spill + used] = 0x01;
      wire.put(bytes.data(), bytes.size());
      key.put(&none, 1);
      REQUIRE(blocks.unpack(wire.p, 2) == status::success);
      REQUIRE(blocks.template decode<zipccl::cuda::detail::decode_mode::store>(reinterpret_cast<std::uint8_t*>(back.p),
                                                                               nullptr, nullptr, 2) == status::success);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const status got = zipccl::cuda::detail::key_status(key.get(1)[0]);
      std::vector<T> ref(count);
      status want = status::success;
      for (std::uint64_t seg = 0; seg < g.segments && want == status::success; ++seg)
        want = F::decode_into(bytes.data() + g.seg_offset(seg), g.seg_elems(seg), 8192, true, count, seg,
                              opt.device_wire.spill_permille, ref.data() + seg * g.seg, scratch.data());
      INFO("damage " << damage);
      CHECK(got == want);
      if (damage == 0) CHECK(back.get(count) == in);
    }
  }
}

inline const char* name_of(int which) { return which == 0 ? "all_gather" : which == 1 ? "reduce_scatter" : "all_reduce"; }

// "" when every rank's call succeeded and every named result equals the host's answer on every
// rank; otherwise the first difference, in words (a CHECK on it shows where).
template <class T>
std::string differences(const ranks_on_gpu& g, const std::vector<std::vector<T>>& want,
                        std::initializer_list<std::pair<const char*, const std::vector<std::vector<T>>*>> got) {
  for (int r = 0; r < g.n; ++r) {
    if (g.statuses[r] != status::success)
      return "rank " + std::to_string(r) + ": " + zipccl::to_string(g.statuses[r]);
    for (const auto& [name, res] : got)
      if ((*res)[static_cast<std::size_t>(r)] != want[static_cast<std::size_t>(r)])
        return std::string(name) + ": rank " + std::to_string(r) + " differs from the host";
  }
  return "";
}

// Collective `which` on n ranks of a fresh world, compressed on one stream, compressed pipelined
// and plain (pipelined where `plain_pipelined`), each against the host's answer: differences().
template <class Codec>
std::string check_every_path(int which, int n, std::uint64_t count, op reduction, const collective_options& opt,
                             bool plain_pipelined = false) {
  using T = typename Codec::bits_type;
  ranks_on_gpu g(n);
  cuda_local_world world(n, world_options());
  const auto want = host_reference<Codec>(which, n, count, reduction);
  const auto packed = on_device<Codec, strategy::always>(which, n, count, reduction, opt, g, world);
  if (auto d = differences<T>(g, want, {{"compressed", &packed}}); !d.empty()) return d;
  const auto piped = on_device<Codec, strategy::always>(which, n, count, reduction, opt, g, world, true);
  if (auto d = differences<T>(g, want, {{"pipelined", &piped}}); !d.empty()) return d;
  const auto plain = on_device<Codec, strategy::never>(which, n, count, reduction, opt, g, world, plain_pipelined);
  return differences<T>(g, want, {{"plain", &plain}});
}

// check_every_path for every collective on 1, 2, 3, 4 and 8 ranks and counts 0, 1, odd and at
// the segment boundaries (segments of 16,384 elements): "" when all pass, else each failure on a
// line of its own, with the case it failed in.
template <class Codec>
std::string every_collective_differences(collective_options opt) {
  opt.pipeline.segment_elems = 16384;
  std::string failures;
  for (int n : {1, 2, 3, 4, 8}) {
    for (std::uint64_t count : {0ull, 1ull, 12345ull, 16384ull, 3ull * 16384 + 1}) {
      for (int which = 0; which < 3; ++which) {
        const op reduction = which == 2 && n == 3 ? op::avg : op::sum;
        const std::string d = check_every_path<Codec>(which, n, count, reduction, opt);
        if (!d.empty())
          failures += std::string(name_of(which)) + ", " + std::to_string(n) + " ranks, count " +
                      std::to_string(count) + ": " + d + "\n";
      }
    }
  }
  return failures;
}

// check_every_path for every collective on 1, 2, 3, 4 and 8 ranks with 64 MiB of input per rank
// (reduce_scatter: its sendbuff): "" when all pass, else each failure on a line of its own.
template <class Codec>
std::string every_collective_differences_64mib(const collective_options& opt) {
  const std::uint64_t elems = (64ull << 20) / sizeof(typename Codec::bits_type);
  std::string failures;
  for (int n : {1, 2, 3, 4, 8}) {
    for (int which = 0; which < 3; ++which) {
      const std::uint64_t count = which == 1 ? elems / static_cast<std::uint64_t>(n) : elems;
      const std::string d = check_every_path<Codec>(which, n, count, op::sum, opt, n == 8);
      if (!d.empty())
        failures += std::string(name_of(which)) + ", " + std::to_string(n) + " ranks, count " + std::to_string(count) +
                    ": " + d + "\n";
    }
  }
  return failures;
}

}  // namespace zipccl::testing::device_collectives
