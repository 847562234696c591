// zipccl: what the host collectives share: reduction ops, path strategies, options, and the
// closing agreement that turns an error on one rank into an error on every rank.
#pragma once

#include <cstdint>

#include "../error.hpp"
#include "../host/compress.hpp"
#include "../transport/transport.hpp"

namespace zipccl {

enum class op { sum, avg };

// Which path a collective takes. (An adaptive, cost-model strategy is planned.)
namespace strategy {
struct always {};  // compress every message
struct never {};   // plain bytes, the reference path
}  // namespace strategy

struct collective_options {
  host::compress_options codec{};  // chunk size, checksums, coding threads of the compressed path
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
