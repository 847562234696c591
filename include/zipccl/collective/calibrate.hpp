// zipccl: calibrate(), which measures a transport and the codec on this machine and fills the
// cost_model that strategy::adaptive consults. Collective: every rank calls it with the same
// arguments; every rank ends with the same model (the ranks' measurements are averaged).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "all_gather.hpp"
#include "common.hpp"

namespace zipccl {

namespace collective::detail {
// What calibrate() measures on one rank; the ranks' figures are averaged field by field.
struct calibration {
  double latency_seconds = 0, link_bytes_per_second = 0, compress_bytes_per_second = 0,
         decompress_bytes_per_second = 0, ratio = 0, overlap = 1;

  // f(field) for every field, in a fixed order (how the ranks exchange and average them)
  template <class F>
  void each(F&& f) {
    f(latency_seconds);
    f(link_bytes_per_second);
    f(compress_bytes_per_second);
    f(decompress_bytes_per_second);
    f(ratio);
    f(overlap);
  }
  static constexpr int fields = 6;
  // the cost model these figures give, with the segment size the collectives use
  cost_model model(double segment_bytes, const cost_model& base = {}) const {
    cost_model m = base;
    m.latency_seconds = latency_seconds;
    m.link_bytes_per_second = link_bytes_per_second;
    m.compress_bytes_per_second = compress_bytes_per_second;
    m.decompress_bytes_per_second = decompress_bytes_per_second;
    m.ratio = ratio;
    m.overlap = overlap;
    m.segment_bytes = segment_bytes;
    return m;
  }
};
}  // namespace collective::detail

template <class Codec, class Transport>
status calibrate(cost_model* model, Transport& t, const void* sample, std::uint64_t n, const collective_options& opt = {},
                 const typename Codec::codebook_type& cb = {}) {
  using clock = std::chrono::steady_clock;
  const collective::detail::abort_on_unwind<Transport> guard(t);  // e.g. std::bad_alloc below
  using collective::detail::ring_next;
  using collective::detail::ring_prev;
  if (model == nullptr || (sample == nullptr && n != 0)) return collective::detail::fail(t, status::invalid_argument);
  const int ranks = t.size(), r = t.rank();
  collective::detail::calibration mine;

  // The codec as the collectives run it (detail/wire.hpp, on the calling thread), on the sample.
  // Every rank codes at the same time (they start together and each codes for at least
  // `codec_seconds`), so where ranks share cores the figures say what one rank gets.
  const std::uint64_t raw = n * Codec::element_size;
  using W = collective::detail::wire<Codec>;
  const std::uint64_t chunk = opt.codec.chunk_elems;
  if (!collective::detail::valid_options(opt)) return collective::detail::fail(t, status::invalid_argument);
  std::vector<std::uint8_t> fixed(W::fixed_bytes(n, chunk) + W::spill_bytes(chunk)), tail(W::max_bytes(n, chunk) + 16),
      scratch(W::scratch_bytes(chunk)), back(raw + 16);
  std::uint64_t tail_bytes = 0;
  const collective::detail::wire_place place{n, static_cast<std::uint64_t>(Codec::type) << 56};  // segment 0
  const double codec_seconds = 0.02;
  auto timed = [&](auto&& work) {
    int reps = 0;
    const auto start = clock::now();
    double spent = 0;
    do {
      work();
      ++reps;
      spent = std::chrono::duration<double>(clock::now() - start).count();
    } while (spent < codec_seconds || reps < 2);
    return spent / reps;
  };
  status s0 = collective::detail::agree(t, status::success);  // start together
  if (s0 != status::success) return s0;
  const double cs = timed([&] {
    tail_bytes = W::encode(cb, sample, n, chunk, opt.codec.checksum, place, fixed.data(), tail.data());
  });
  status decoded = status::success;
  const double ds = timed([&] {
    decoded = W::decode_into(fixed.data(), tail.data(), tail_bytes, n, chunk, opt.codec.checksum, place, back.data(),
                             scratch.data());
  });
  if (decoded != status::success) return collective::detail::fail(t, decoded);
  mine.compress_bytes_per_second = cs > 0 && raw ? raw / cs : 1e12;
  mine.decompress_bytes_per_second = ds > 0 && raw ? raw / ds : 1e12;
  const std::uint64_t bytes = W::fixed_bytes(n, chunk) + tail_bytes;
  mine.ratio = bytes ? static_cast<double>(raw) / static_cast<double>(bytes) : 1.0;

  if (ranks > 1) {
    // latency: one-byte ring steps, after the ranks have lined up again (the codec timings end at
    // different times); the fastest of three rounds, as a rank that is descheduled for a moment
    // would otherwise count as latency
    std::uint8_t a = 0, b = 0;
    const int small_reps = 10;
    const status lined_up = collective::detail::agree(t, status::success);
    if (lined_up != status::success) return lined_up;
    mine.latency_seconds = 1e30;
    auto t0 = clock::now(), t1 = t0;
    for (int round = 0; round < 3; ++round) {
      t0 = clock::now();
      for (int i = 0; i < small_reps; ++i) {
        const status s = t.sendrecv(ring_next(r, ranks), &a, 1, ring_prev(r, ranks), &b, 1);
        if (s != status::success) return collective::detail::fail(t, s);
      }
      t1 = clock::now();
      const double per = std::chrono::duration<double>(t1 - t0).count() / small_reps;
      mine.latency_seconds = per < mine.latency_seconds ? per : mine.latency_seconds;
    }
    // bandwidth: the plain all_gather of a sample-sized message per rank, pipelined as the
    // collectives run it, so the figure includes what moving the bytes costs this machine
    const std::uint64_t big = raw > (1u << 20) ? raw : (1u << 20);
    using R = codec<fp32, codebook::fixed>;  // plain bytes: only the element size matters
    const std::uint64_t words = big / 4;
    std::vector<std::uint8_t> out(words * 4, 1), in(words * 4 * static_cast<std::uint64_t>(ranks));
    const int reps = 3;
    status s1 = all_gather<R, strategy::never>(out.data(), in.data(), words, t, nullptr, 0, opt);  // warm up
    if (s1 != status::success) return s1;
    t0 = clock::now();
    for (int i = 0; i < reps && s1 == status::success; ++i)
      s1 = all_gather<R, strategy::never>(out.data(), in.data(), words, t, nullptr, 0, opt);
    if (s1 != status::success) return s1;
    t1 = clock::now();
    const double hops = ranks - 1;
    const double step = std::chrono::duration<double>(t1 - t0).count() / reps / hops - mine.latency_seconds;
    mine.link_bytes_per_second = step > 0 ? static_cast<double>(words * 4) / step : 1e12;
  } else {
    mine.link_bytes_per_second = 1e12;
  }

  // overlap: how much of the coding a compressed all_gather of the sample actually hides behind
  // its transfers, from its measured time and the model's two parts (cost_model in common.hpp)
  double overlap = 1.0;
  if (ranks > 1 && n > 0) {
    std::vector<std::uint8_t> ws(all_gather_workspace<Codec>(n, ranks, opt)), gathered(raw * ranks);
    status sa = all_gather<Codec>(sample, gathered.data(), n, t, ws.data(), ws.size(), opt, cb);  // warm up
    const int reps = 2;
    const auto t0 = clock::now();
    for (int i = 0; i < reps && sa == status::success; ++i)
      sa = all_gather<Codec>(sample, gathered.data(), n, t, ws.data(), ws.size(), opt, cb);
    if (sa != status::success) return sa;
    const double measured = std::chrono::duration<double>(clock::now() - t0).count() / reps;
    cost_model probe = mine.model(static_cast<double>(opt.pipeline.segment_elems * Codec::element_size));
    probe.overlap = 1;
    const double hidden = probe.all_gather(raw, ranks).compressed_seconds;  // all of the shorter part hidden
    probe.overlap = 0;
    const double serial = probe.all_gather(raw, ranks).compressed_seconds;  // none of it
    overlap = serial - hidden > 0 ? (serial - measured) / (serial - hidden) : 1.0;
    overlap = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
    if (measured > serial) {
      // slower than coding and moving one after the other: the coding itself ran slower than it
      // did alone (ranks and transfers competing for cores); scale c and d to fit
      probe.overlap = 0;
      probe.compress_bytes_per_second = probe.decompress_bytes_per_second = 1e30;
      const double moving = probe.all_gather(raw, ranks).compressed_seconds;
      const double scale = (serial - moving) > 0 ? (measured - moving) / (serial - moving) : 1.0;
      mine.compress_bytes_per_second /= scale;
      mine.decompress_bytes_per_second /= scale;
    }
  }
  mine.overlap = overlap;

  // every rank takes the average of all ranks' measurements, summed in rank order
  using collective::detail::calibration;
  double packed[calibration::fields];
  int k = 0;
  mine.each([&](double& v) { packed[k++] = v; });
  std::vector<double> all(static_cast<std::size_t>(calibration::fields * ranks));
  const status s = all_gather<codec<fp32, codebook::fixed>, strategy::never>(
      static_cast<const void*>(packed), all.data(), 2 * calibration::fields, t, nullptr, 0);  // as fp32 words
  if (s != status::success) return s;
  calibration avg;
  avg.each([](double& v) { v = 0; });
  for (int q = 0; q < ranks; ++q) {
    k = 0;
    avg.each([&](double& v) { v += all[static_cast<std::size_t>(calibration::fields * q + k++)] / ranks; });
  }
  *model = avg.model(static_cast<double>(opt.pipeline.segment_elems * Codec::element_size), *model);
  return status::success;
}

}  // namespace zipccl
