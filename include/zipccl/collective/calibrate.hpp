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

template <class Codec, class Transport>
status calibrate(cost_model* model, Transport& t, const void* sample, std::uint64_t n, const collective_options& opt = {},
                 const typename Codec::codebook_type& cb = {}) {
  using clock = std::chrono::steady_clock;
  using collective::detail::ring_next;
  using collective::detail::ring_prev;
  if (model == nullptr || (sample == nullptr && n != 0)) return collective::detail::fail(t, status::invalid_argument);
  const int ranks = t.size(), r = t.rank();
  double m[5] = {0, 0, 0, 0, 0};  // latency, bandwidth, compress, decompress, ratio

  // the codec, on the sample
  const std::uint64_t raw = n * Codec::element_size;
  std::vector<std::uint8_t> stream(host::max_compressed_size<Codec>(n, opt.codec.chunk_elems)), back(raw);
  std::uint64_t bytes = 0;
  const int reps = 3;
  auto t0 = clock::now();
  for (int i = 0; i < reps; ++i)
    if (host::compress<Codec>(sample, n, stream.data(), stream.size(), &bytes, opt.codec, cb) != status::success)
      return collective::detail::fail(t, status::invalid_argument);
  auto t1 = clock::now();
  for (int i = 0; i < reps; ++i) host::decompress(stream.data(), bytes, back.data(), back.size());
  auto t2 = clock::now();
  const double cs = std::chrono::duration<double>(t1 - t0).count() / reps;
  const double ds = std::chrono::duration<double>(t2 - t1).count() / reps;
  m[2] = cs > 0 ? raw / cs : 1e12;
  m[3] = ds > 0 ? raw / ds : 1e12;
  m[4] = bytes ? static_cast<double>(raw) / static_cast<double>(bytes) : 1.0;

  if (ranks > 1) {
    // latency: one-byte ring steps; bandwidth: ring steps of the sample's size
    std::uint8_t a = 0, b = 0;
    const int small_reps = 20;
    t0 = clock::now();
    for (int i = 0; i < small_reps; ++i) {
      const status s = t.sendrecv(ring_next(r, ranks), &a, 1, ring_prev(r, ranks), &b, 1);
      if (s != status::success) return collective::detail::fail(t, s);
    }
    t1 = clock::now();
    m[0] = std::chrono::duration<double>(t1 - t0).count() / small_reps;
    const std::uint64_t big = raw > (1u << 20) ? raw : (1u << 20);
    std::vector<std::uint8_t> out(big, 1), in(big);
    t0 = clock::now();
    for (int i = 0; i < reps; ++i) {
      const status s = t.sendrecv(ring_next(r, ranks), out.data(), big, ring_prev(r, ranks), in.data(), big);
      if (s != status::success) return collective::detail::fail(t, s);
    }
    t1 = clock::now();
    const double step = std::chrono::duration<double>(t1 - t0).count() / reps - m[0];
    m[1] = step > 0 ? big / step : 1e12;
  } else {
    m[1] = 1e12;
  }

  // every rank takes the average of all ranks' measurements, summed in rank order
  std::vector<double> all(static_cast<std::size_t>(5 * ranks));
  const status s = all_gather<codec<fp32, codebook::fixed>, strategy::never>(
      reinterpret_cast<const void*>(m), all.data(), 10, t, nullptr, 0);  // 5 doubles = 10 fp32 words
  if (s != status::success) return s;
  double avg[5] = {0, 0, 0, 0, 0};
  for (int q = 0; q < ranks; ++q)
    for (int k = 0; k < 5; ++k) avg[k] += all[static_cast<std::size_t>(5 * q + k)] / ranks;
  model->latency_seconds = avg[0];
  model->link_bytes_per_second = avg[1];
  model->compress_bytes_per_second = avg[2];
  model->decompress_bytes_per_second = avg[3];
  model->ratio = avg[4];
  model->segment_bytes = static_cast<double>(opt.pipeline.segment_elems * Codec::element_size);
  return status::success;
}

}  // namespace zipccl
