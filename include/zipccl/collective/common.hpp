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

// The alpha-beta cost model behind strategy::adaptive: per rank, for this library's algorithms,
// with a = link latency, b = link bandwidth, c and d = compress and decompress throughput (of one
// rank while every rank codes), r = ratio, g = segment bytes (pipeline.segment_elems elements; a
// message of S bytes has k = ceil(S / g) segments of q = min(S, g) bytes). Both paths are
// pipelined by segments: a link is busy for a segment's bytes only, and the latency is paid once
// per hop of the pipeline, not once per segment; coding overlaps the transfers except for the
// first and the last segment, by the fraction `overlap` (o below) of the shorter of the two:
//   x ++ y = max(x, y) + (1 - o) min(x, y)
// o = 1 where a NIC moves the bytes while the cores code; o near 0 where the transport itself
// copies the bytes on the cores that code (transport::local with more rank threads than cores, or
// MPI over shared memory). calibrate() measures it.
//   all_gather, S bytes per rank:
//     plain       (n-1) (a + S/b)
//     compressed  q/c + q/d + ((n-1) (a + S/(r b))  ++  (n-1) S/d + (S-q)/c)
//   reduce_scatter, B bytes per block (every hop decodes, reduces and recodes each segment):
//     plain       (n-1) (a + B/b)
//     compressed  (n-1) (a + q/c + q/d) + (n-1) k (q/(r b) ++ q/c + q/d)
//   send / recv, S bytes:
//     plain       a + S/b
//     compressed  q/c + q/d + (a + S/(r b) ++ max((S-q)/c, (S-q)/d))
//   all_to_all, B bytes per peer (pairwise steps, one segment per peer):
//     plain       (n-1) (a + B/b)
//     compressed  B/c + B/d + (n-1) (a + B/(r b) ++ B/c + B/d)
// The compressed path is taken when it is predicted faster by at least the factor `margin`, so
// that errors of the model near the break-even point cost little. calibrate() measures a, b, c, d
// and r on a transport; every rank must hold the same model (calibrate makes sure), so that every
// rank takes the same path. docs/PERFORMANCE.md checks the model against measurements.
struct cost_model {
  double latency_seconds = 5e-6;
  double link_bytes_per_second = 10e9;
  double compress_bytes_per_second = 5e9;
  double decompress_bytes_per_second = 8e9;
  double ratio = 1.4;
  double segment_bytes = 512.0 * 1024;
  double overlap = 1.0;
  double margin = 1.05;

  struct plan {
    bool compress;
    double plain_seconds, compressed_seconds;
  };
  plan all_gather(std::uint64_t bytes_per_rank, int ranks) const {
    const double S = static_cast<double>(bytes_per_rank), h = ranks - 1, q = piece(S);
    const double plain = h * (latency_seconds + S / link_bytes_per_second);
    const double packed = q / compress_bytes_per_second + q / decompress_bytes_per_second +
                          both(h * (latency_seconds + S / wire_rate()),
                               h * S / decompress_bytes_per_second + (S - q) / compress_bytes_per_second);
    return decide(ranks > 1 && S > 0, plain, packed);
  }
  plan reduce_scatter(std::uint64_t bytes_per_block, int ranks) const {
    const double B = static_cast<double>(bytes_per_block), h = ranks - 1;
    const double k = segments(B), q = piece(B);
    const double code = q / compress_bytes_per_second + q / decompress_bytes_per_second;
    const double plain = h * (latency_seconds + B / link_bytes_per_second);
    const double packed = h * (latency_seconds + code) + h * k * both(q / wire_rate(), code);
    return decide(ranks > 1 && B > 0, plain, packed);
  }
  plan send_recv(std::uint64_t bytes) const {
    const double S = static_cast<double>(bytes), q = piece(S);
    const double plain = latency_seconds + S / link_bytes_per_second;
    const double packed = q / compress_bytes_per_second + q / decompress_bytes_per_second +
                          both(latency_seconds + S / wire_rate(),
                               max2((S - q) / compress_bytes_per_second, (S - q) / decompress_bytes_per_second));
    return decide(S > 0, plain, packed);
  }
  plan all_to_all(std::uint64_t bytes_per_peer, int ranks) const {
    const double B = static_cast<double>(bytes_per_peer), h = ranks - 1;
    const double code = B / compress_bytes_per_second + B / decompress_bytes_per_second;
    const double plain = h * (latency_seconds + B / link_bytes_per_second);
    const double packed = code + h * both(latency_seconds + B / wire_rate(), code);
    return decide(ranks > 1 && B > 0, plain, packed);
  }

 private:
  static double max2(double x, double y) { return x > y ? x : y; }
  // x and y run side by side, `overlap` of the shorter one hidden behind the longer
  double both(double x, double y) const {
    const double o = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
    return max2(x, y) + (1 - o) * (x < y ? x : y);
  }
  double wire_rate() const { return ratio * link_bytes_per_second; }
  double segments(double bytes) const {
    if (segment_bytes <= 0 || bytes <= segment_bytes) return 1;
    const double k = bytes / segment_bytes;
    return static_cast<double>(static_cast<std::uint64_t>(k)) < k ? static_cast<double>(static_cast<std::uint64_t>(k)) + 1 : k;
  }
  double piece(double bytes) const { return segment_bytes > 0 && bytes > segment_bytes ? segment_bytes : bytes; }
  plan decide(bool worth, double plain, double packed) const {
    return {worth && packed * margin < plain, plain, packed};
  }
};

// How the compressed paths pipeline a message: it is cut into segments of segment_elems elements
// (rounded up to whole chunks; 0: one segment per message), and a rank keeps up to `depth`
// outgoing segments in flight ahead of the one it receives. Pipelining needs a transport with
// request-based operations (transport.hpp); on others the same segments go in lock step.
struct pipeline_options {
  std::uint64_t segment_elems = 1u << 18;
  unsigned depth = 2;  // >= 1
};

struct collective_options {
  host::compress_options codec{};  // chunk size and checksums of the compressed path (coding
                                   // runs on the calling thread: codec.threads is not used)
  pipeline_options pipeline{};
  cost_model model{};  // consulted by strategy::adaptive
};

namespace collective::detail {

inline int ring_next(int r, int n) { return (r + 1) % n; }
inline int ring_prev(int r, int n) { return (r + n - 1) % n; }
inline int ring_block(int r, int k, int n) { return ((r - k) % n + n) % n; }

inline bool valid_options(const collective_options& o) {
  return format::valid_chunk_elems(o.codec.chunk_elems) && o.pipeline.depth >= 1;
}

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
