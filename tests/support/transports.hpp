// Test transports wrapped around transport::local: one without the request-based operations (the
// collectives then run in lock step), and one whose chosen rank corrupts what it sends.
#pragma once

#include <cstdint>
#include <vector>

#include <zipccl/transport/local.hpp>

namespace zipccl::testing {

// The same transport without isend / irecv / wait.
struct lockstep_transport {
  transport::local_transport& inner;
  int rank() const { return inner.rank(); }
  int size() const { return inner.size(); }
  status send(int dst, const void* buf, std::uint64_t bytes) { return inner.send(dst, buf, bytes); }
  status recv(int src, void* buf, std::uint64_t bytes) { return inner.recv(src, buf, bytes); }
  status sendrecv(int dst, const void* sb, std::uint64_t sn, int src, void* rb, std::uint64_t rn) {
    const status s = send(dst, sb, sn);  // local sends never block
    return s != status::success ? s : recv(src, rb, rn);
  }
  void abort(status why) { inner.abort(why); }
};
static_assert(!transport::has_requests_v<lockstep_transport>);
static_assert(transport::has_requests_v<transport::local_transport>);

// Rank bad_rank flips `mask` into the middle byte of every message longer than 64 bytes it sends
// (no request-based operations, so the collectives run in lock step).
struct flaky_transport : lockstep_transport {
  int bad_rank;
  std::uint8_t mask = 0x11;
  flaky_transport(transport::local_transport& t, int bad, std::uint8_t m = 0x11)
      : lockstep_transport{t}, bad_rank(bad), mask(m) {}
  status send(int dst, const void* buf, std::uint64_t bytes) {
    if (inner.rank() != bad_rank || bytes <= 64) return inner.send(dst, buf, bytes);
    std::vector<std::uint8_t> copy(static_cast<const std::uint8_t*>(buf), static_cast<const std::uint8_t*>(buf) + bytes);
    copy[bytes / 2] ^= mask;
    return inner.send(dst, copy.data(), bytes);
  }
  status sendrecv(int dst, const void* sb, std::uint64_t sn, int src, void* rb, std::uint64_t rn) {
    const status s = send(dst, sb, sn);
    return s != status::success ? s : recv(src, rb, rn);
  }
};

}  // namespace zipccl::testing
