// Test transports wrapped around transport::local: one without the request-based operations (the
// collectives then run in lock step), one whose chosen rank corrupts what it sends, and one whose
// chosen rank throws from its transport calls after a number of them.
#pragma once

#include <cstdint>
#include <stdexcept>
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

// The exception a throwing_transport throws.
struct transport_fault : std::runtime_error {
  transport_fault() : std::runtime_error("injected transport fault") {}
};

// transport::local with requests, except that rank bad_rank throws transport_fault from every
// call after its first `calls` ones (as a user's communicator wrapper might on a lost link).
struct throwing_transport {
  using request = transport::local_transport::request;
  transport::local_transport& inner;
  int bad_rank;
  int calls;
  int made = 0;
  void tick() {
    if (inner.rank() == bad_rank && made++ >= calls) throw transport_fault();
  }
  int rank() const { return inner.rank(); }
  int size() const { return inner.size(); }
  status send(int dst, const void* buf, std::uint64_t bytes) {
    tick();
    return inner.send(dst, buf, bytes);
  }
  status recv(int src, void* buf, std::uint64_t bytes) {
    tick();
    return inner.recv(src, buf, bytes);
  }
  status sendrecv(int dst, const void* sb, std::uint64_t sn, int src, void* rb, std::uint64_t rn) {
    tick();
    return inner.sendrecv(dst, sb, sn, src, rb, rn);
  }
  request isend(int dst, const void* buf, std::uint64_t bytes) {
    tick();
    return inner.isend(dst, buf, bytes);
  }
  request irecv(int src, void* buf, std::uint64_t bytes) {
    tick();
    return inner.irecv(src, buf, bytes);
  }
  status wait(request& q) {
    tick();
    return inner.wait(q);
  }
  void abort(status why) { inner.abort(why); }  // never throws: it is how the others learn
};
static_assert(transport::has_requests_v<throwing_transport>);

}  // namespace zipccl::testing
