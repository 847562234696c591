// zipccl: what the host collectives share: reduction ops, path strategies, options, and the
// closing agreement that turns an error on one rank into an error on every rank.
#pragma once

#include <cstdint>

#include "../error.hpp"
#include "../host/compress.hpp"
#include "../transport/transport.hpp"

namespace zipccl {

enum class op { sum, avg };

// Which path a collective takes.
namespace strategy {
struct always {};    // compress every message
struct never {};     // plain bytes, the reference path
struct adaptive {};  // per call, the path the cost model (collective_options::model) predicts faster
}  // namespace strategy

// The alpha-beta cost model behind strategy::adaptive. Times are per rank, for the ring
// algorithms of this library, without pipelining (each message is coded whole, then moved):
//   plain all_gather of S bytes per rank:      (n-1) (a + S/b)
//   compressed:                                 S/c + (n-1) a + (n-1) (a + S/(r b)) + (n-1) S/d
//   plain reduce_scatter of B bytes per block:  (n-1) (a + B/b)
//   compressed:                                 (n-1) (B/c + 2a + B/(r b) + B/d)
// with a = link latency, b = link bandwidth, c and d = compress and decompress throughput, r = ratio.
// calibrate() measures them on a transport; every rank must hold the same model (calibrate makes
// sure), so that every rank takes the same path.
struct cost_model {
  double latency_seconds = 5e-6;
  double link_bytes_per_second = 10e9;
  double compress_bytes_per_second = 5e9;
  double decompress_bytes_per_second = 8e9;
  double ratio = 1.4;

  struct plan {
    bool compress;
    double plain_seconds, compressed_seconds;
  };
  plan all_gather(std::uint64_t bytes_per_rank, int ranks) const {
    const double s = static_cast<double>(bytes_per_rank), hops = ranks - 1;
    const double plain = hops * (latency_seconds + s / link_bytes_per_second);
    const double packed = s / compress_bytes_per_second + hops * latency_seconds +
                          hops * (latency_seconds + s / (ratio * link_bytes_per_second)) +
                          hops * s / decompress_bytes_per_second;
    return {ranks > 1 && packed < plain, plain, packed};
  }
  plan reduce_scatter(std::uint64_t bytes_per_block, int ranks) const {
    const double b = static_cast<double>(bytes_per_block), hops = ranks - 1;
    const double plain = hops * (latency_seconds + b / link_bytes_per_second);
    const double packed = hops * (b / compress_bytes_per_second + 2 * latency_seconds +
                                  b / (ratio * link_bytes_per_second) + b / decompress_bytes_per_second);
    return {ranks > 1 && packed < plain, plain, packed};
  }
};

struct collective_options {
  host::compress_options codec{};  // chunk size, checksums, coding threads of the compressed path
  cost_model model{};              // consulted by strategy::adaptive
};

namespace collective::detail {

inline int ring_next(int r, int n) { return (r + 1) % n; }
inline int ring_prev(int r, int n) { return (r + n - 1) % n; }
inline int ring_block(int r, int k, int n) { return ((r - k) % n + n) % n; }

// Every rank learns the worst status of all (a ring of n - 1 one-byte steps). A rank whose own
// status was success but another's was not returns peer_failed; a rank with an error keeps it.
template <class Transport>
status agree(Transport& t, status mine) {
  const int n = t.size(), r = t.rank();
  std::uint8_t worst = static_cast<std::uint8_t>(mine);
  for (int step = 0; step + 1 < n; ++step) {
    std::uint8_t in = 0;
    const status s = t.sendrecv(ring_next(r, n), &worst, 1, ring_prev(r, n), &in, 1);
    if (s != status::success) return mine != status::success ? mine : status::peer_failed;
    worst = in > worst ? in : worst;
  }
  if (mine != status::success) return mine;
  return worst == 0 ? status::success : status::peer_failed;
}

// A failed transfer ends the collective on every rank: the transport's abort() makes the other
// ranks' pending and later operations fail instead of waiting.
template <class Transport>
status fail(Transport& t, status s) {
  t.abort(s);
  return s;
}

}  // namespace collective::detail
}  // namespace zipccl
