// zipccl: what the host collectives share: reduction ops, path strategies, options, and the
// agreements that turn an error or a mismatched call on one rank into an error on every rank.
#pragma once

#include <cstdint>
#include <exception>
#include <type_traits>

#include "../codebook/entropy.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
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
// rank takes the same path. docs/design.md ("The cost model") checks it against measurements.
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

// The fixed-size wire of the device collectives (detail/fixed_wire.hpp, docs/format.md): a
// segment of m elements travels as one message with room for ceil(m * spill_permille / 1000)
// bytes of escapes (and of the rest of chunks that fall back to stored). A segment whose escapes
// exceed it fails with status::wire_overflow on every rank. 40 fits Gaussian-like tensors with
// the 3-bit policies at a small cost in ratio. codebook::entropy keeps only each chunk's header
// and zero-mask room in place, so its spill holds the whole rANS body and needs far more (and far
// less for row-sparse gradients). spill_permille_for() measures what a sample needs. The host
// collectives send a segment's tails in a message of their own and ignore it.
struct fixed_wire_options {
  std::uint32_t spill_permille = 40;  // 0 .. 4000
};

struct collective_options {
  host::compress_options codec{};  // chunk size and checksums of the compressed path (coding
                                   // runs on the calling thread: codec.threads is not used)
  pipeline_options pipeline{};
  cost_model model{};  // consulted by strategy::adaptive
  fixed_wire_options device_wire{};
};

namespace collective::detail {

template <class S>
inline constexpr bool is_strategy_v = std::is_same_v<S, strategy::always> || std::is_same_v<S, strategy::never> ||
                                      std::is_same_v<S, strategy::adaptive>;

// The one place where a Strategy becomes a path: never -> plain, always -> compressed, adaptive ->
// what `predict()` (the cost model, which every rank evaluates alike) says.
template <class Strategy, class Predict>
bool takes_compressed(Predict&& predict) {
  static_assert(is_strategy_v<Strategy>, "Strategy must be strategy::always, strategy::never or strategy::adaptive");
  if constexpr (std::is_same_v<Strategy, strategy::never>) return false;
  else if constexpr (std::is_same_v<Strategy, strategy::always>) return true;
  else return static_cast<bool>(predict());
}
// Calls f(strategy::always{}) or f(strategy::never{}), the path Strategy takes.
template <class Strategy, class Predict, class F>
decltype(auto) on_path(Predict&& predict, F&& f) {
  if (takes_compressed<Strategy>(predict)) return f(strategy::always{});
  return f(strategy::never{});
}
// The workspace of a call under Strategy: bytes(strategy::always{}) or bytes(strategy::never{}),
// and for adaptive the larger of the two (the path is chosen per call).
template <class Strategy, class Bytes>
std::uint64_t workspace_for(Bytes&& bytes) {
  static_assert(is_strategy_v<Strategy>, "Strategy must be strategy::always, strategy::never or strategy::adaptive");
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    const std::uint64_t a = bytes(strategy::always{}), b = bytes(strategy::never{});
    return a > b ? a : b;
  } else {
    return bytes(Strategy{});
  }
}

// A reduce_scatter writes every hop's partial result into recvbuff (one block of `block` bytes),
// so with more than one rank it must not overlap the n input blocks at sendbuff (as NCCL's
// in-place convention, recvbuff == sendbuff + r * block, would): both executors refuse it.
inline bool reduce_overlaps(const void* sendbuff, const void* recvbuff, std::uint64_t block, int n) {
  const auto* s = static_cast<const std::uint8_t*>(sendbuff);
  const auto* r = static_cast<const std::uint8_t*>(recvbuff);
  return n > 1 && block != 0 && s != nullptr && r != nullptr && r < s + block * static_cast<std::uint64_t>(n) &&
         s < r + block;
}

inline int ring_next(int r, int n) { return (r + 1) % n; }
inline int ring_prev(int r, int n) { return (r + n - 1) % n; }
inline int ring_block(int r, int k, int n) { return ((r - k) % n + n) % n; }

inline bool valid_options(const collective_options& o) {
  return format::valid_chunk_elems(o.codec.chunk_elems) && o.pipeline.depth >= 1;  // (device_wire: device calls)
}

// Every rank learns the worst status of all ranks and whether all of them passed the same
// `signature` (call_signature below), in ceil(log2 n) rounds of 24-byte messages: in round k a
// rank sends what it knows to r + 2^k and hears from r - 2^k, so after the last round each rank
// has heard, directly or not, from every other. Returns the rank's own error if it has one;
// else peer_failed when another rank's status was an error (or the exchange itself failed);
// else size_mismatch, on every rank alike, when the signatures differ; else success.
template <class Transport>
status agree(Transport& t, status mine, std::uint64_t signature = 0) {
  const std::int64_t n = t.size(), r = t.rank();
  std::uint64_t worst = static_cast<std::uint64_t>(mine), lo = signature, hi = signature;
  for (std::int64_t d = 1; d < n; d *= 2) {
    std::uint8_t out[24], in[24] = {};
    format::store_le<std::uint64_t>(out, worst);
    format::store_le<std::uint64_t>(out + 8, lo);
    format::store_le<std::uint64_t>(out + 16, hi);
    const status s =
        t.sendrecv(static_cast<int>((r + d) % n), out, sizeof out, static_cast<int>((r - d + n) % n), in, sizeof in);
    if (s != status::success) {  // a failed exchange: the others must not go on without this rank
      t.abort(s);
      return mine != status::success ? mine : status::peer_failed;
    }
    const std::uint64_t w = format::load_le<std::uint64_t>(in), l = format::load_le<std::uint64_t>(in + 8),
                        h = format::load_le<std::uint64_t>(in + 16);
    worst = w > worst ? w : worst;
    lo = l < lo ? l : lo;
    hi = h > hi ? h : hi;
  }
  if (mine != status::success) return mine;
  if (worst != 0) return status::peer_failed;
  return lo == hi ? status::success : status::size_mismatch;
}

// What every rank of one call must agree on before any data moves: which collective, the
// element type, the path (compressed or plain), the count, and the settings both ends must share
// (`settings`: settings_word() below). Two calls that differ in any of them get different
// signatures (up to a 2^-64 chance).
enum class call_kind : std::uint64_t { all_gather = 1, reduce_scatter, all_reduce, all_to_all, send_recv };
inline std::uint64_t signature_mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// (The wire's layout is in it too, whatever the path: codebook::entropy lays chunks out unlike
// the 3-bit policies, which share theirs, and a call's later stages may be compressed when its
// first is not, as all_reduce's all_gather after a plain reduce_scatter. So is the wire's
// revision, wire_revision: ranks built from versions whose wires differ get size_mismatch.)
// Revision 2: every chunk's check is bound to its place (detail/wire.hpp, wire_place).
inline constexpr std::uint64_t wire_revision = 2;
template <class Codec>
std::uint64_t call_signature(call_kind kind, bool compressed, std::uint64_t count, std::uint64_t settings = 0) {
  const std::uint64_t rans = codebook::is_entropy_v<typename Codec::codebook_type> ? 1 : 0;
  const std::uint64_t x = count * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(kind) |
                                                          static_cast<std::uint64_t>(Codec::type) << 8 |
                                                          static_cast<std::uint64_t>(compressed) << 16 |
                                                          rans << 24 | wire_revision << 32);
  return signature_mix(signature_mix(x) ^ settings);
}
// The options that change what travels (chunk and segment sizes, checksums) and the reduction
// (reduce_scatter, all_reduce; -1 for the others): ranks that differ in them get size_mismatch
// up front instead of an error in mid-stream, or (the reduction) silently mixed results.
inline std::uint64_t settings_word(const collective_options& o, int reduction = -1) {
  return signature_mix(o.codec.chunk_elems ^ signature_mix(o.pipeline.segment_elems) ^
                       (static_cast<std::uint64_t>(o.codec.checksum) << 40) ^
                       (static_cast<std::uint64_t>(reduction + 1) << 48));
}

// abort() while an exception unwinds the stack: whatever it throws is dropped, the first
// exception is already on its way.
template <class Transport>
void abort_quietly(Transport& t) noexcept {
  try {
    t.abort(status::peer_failed);
  } catch (...) {
  }
}

// Held by every collective call: should an exception leave the call (a user's transport or
// hook threw), the transport is aborted on the way out, so that the other ranks fail at once
// instead of waiting for this one until their timeout.
template <class Transport>
class abort_on_unwind {
 public:
  explicit abort_on_unwind(Transport& t) : t_(t), pending_(std::uncaught_exceptions()) {}
  abort_on_unwind(const abort_on_unwind&) = delete;
  abort_on_unwind& operator=(const abort_on_unwind&) = delete;
  ~abort_on_unwind() {
    if (std::uncaught_exceptions() > pending_) abort_quietly(t_);
  }

 private:
  Transport& t_;
  int pending_;
};

// A failed transfer ends the collective on every rank: the transport's abort() makes the other
// ranks' pending and later operations fail instead of waiting.
template <class Transport>
status fail(Transport& t, status s) {
  t.abort(s);
  return s;
}

}  // namespace collective::detail
}  // namespace zipccl
