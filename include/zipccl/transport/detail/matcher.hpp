// zipccl: the host-side matcher of point-to-point messages between the ranks of one process.
//
// A message has two halves, a send and a receive, published by the calls of two ranks (or of one
// rank, for a message to itself). The matcher pairs the k-th send from rank a to rank b with the
// k-th receive of b from a; the call that publishes the second half of a pair runs the message
// (an executor given to exchange(): transport::cuda_local enqueues the copy there), and every call
// returns once each of its halves has been run or has failed. It is plain C++ without CUDA, so the
// protocol (publish, match, wait, abort, deadline, limits) is tested on the host like any code.
//
// Guarantees:
// - exchange() publishes all of its halves before it waits for any, so a group of operations (a
//   ring step: a send to one peer and a receive from another; several ranks' operations published
//   by one thread) never waits for itself. Two calls wait for each other only where a program of
//   blocking sends and receives would.
// - A pair whose sizes differ runs nothing: both halves end with size_mismatch, and the world
//   ends (the ranks' later messages could not be matched as their callers meant).
// - abort() ends the world: every half not yet paired ends with peer_failed at once, every call
//   waiting for one returns, and later calls return peer_failed until reset(). A message whose
//   executor already runs is waited for (an executor is bounded host work: it never waits for
//   another call).
// - With a deadline, a call that waits longer ends the world and returns timed_out.
// - An executor's error ends both halves with it and ends the world.
// All state is behind one mutex; executors run outside it, on the thread of the call that paired
// the message, and may run side by side for different messages (also of one link).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../error.hpp"

namespace zipccl::transport::detail {

// One half of a message, owned by the call that publishes it (it must stay valid until that call
// returns). The caller sets rank, peer, send, bytes and context; the matcher the rest.
struct message_half {
  int rank = 0;              // the rank whose operation this is
  int peer = 0;              // the other end (rank itself: a message to itself)
  bool send = false;         // a send (rank -> peer) or a receive (peer -> rank)
  std::uint64_t bytes = 0;   // the size; both halves of a pair must agree
  void* context = nullptr;   // the executor's (buffers, streams, events)

  // The matcher's: the outcome, and where the half stands.
  status result = status::success;
  enum class phase : unsigned char { idle, pending, running, done };
  phase state = phase::idle;
  message_half* partner = nullptr;  // set when it is paired
  bool run_here = false;            // this half's call runs the pair's executor
};

class matcher {
 public:
  // ranks >= 1; max_ops: the most halves one exchange() may publish (>= 1). Throws
  // std::invalid_argument for values outside these ranges.
  matcher(int ranks, std::uint32_t max_ops) : n_(ranks), cap_(max_ops) {
    if (ranks < 1 || max_ops < 1) throw std::invalid_argument("transport matcher: ranks and max_ops must be >= 1");
    links_.resize(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks));
    for (link& l : links_) l.ring.assign(max_ops, nullptr);
    busy_.assign(static_cast<std::size_t>(ranks), 0);
  }
  matcher(const matcher&) = delete;
  matcher& operator=(const matcher&) = delete;

  int ranks() const { return n_; }
  std::uint32_t max_ops() const { return cap_; }

  // Publishes ops[0, count) (halves of one rank or of several), runs execute(send, recv) for each
  // pair it completes, and waits until every half of ops has been run or has failed, at most
  // `seconds` (infinity: no deadline). Returns success; invalid_argument (nothing published) for
  // more than max_ops halves, a rank or peer out of range, a rank that another call is using, or
  // messages to itself whose sends and receives are not all in ops (they would wait for
  // themselves); else the first error among the halves (size_mismatch, the executor's error;
  // else peer_failed when the world ended, timed_out where this call's deadline ended it). execute returns a status and
  // must not call back into this matcher.
  template <class Execute>
  status exchange(message_half* const* ops, std::size_t count, Execute&& execute,
                  double seconds = std::numeric_limits<double>::infinity()) {
    static_assert(noexcept(execute(std::declval<message_half&>(), std::declval<message_half&>())),
                  "transport matcher: the executor must be noexcept (a half it leaves running would hang its peer)");
    if (count == 0) return status::success;
    if (ops == nullptr || !(seconds >= 0)) return status::invalid_argument;
    std::unique_lock<std::mutex> lock(mutex_);
    if (ended_) return status::peer_failed;
    if (const status s = admissible(ops, count); s != status::success) return s;
    for (std::size_t i = 0; i < count; ++i) busy_[static_cast<std::size_t>(ops[i]->rank)] = 1;
    for (std::size_t i = 0; i < count; ++i) publish(*ops[i]);
    // run the pairs this call completed, outside the lock
    for (std::size_t i = 0; i < count; ++i) {
      message_half& h = *ops[i];
      if (!h.run_here) continue;
      message_half& snd = h.send ? h : *h.partner;
      message_half& rcv = h.send ? *h.partner : h;
      const bool live = !ended_;
      lock.unlock();
      const status s = live ? execute(snd, rcv) : status::peer_failed;
      lock.lock();
      settle(snd, rcv, s);
    }
    // wait for the halves that others complete
    const bool timed = seconds != std::numeric_limits<double>::infinity();
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(timed ? seconds : 0.0));
    bool late = false;
    const auto all_done = [&] {
      for (std::size_t i = 0; i < count; ++i)
        if (ops[i]->state != message_half::phase::done) return false;
      return true;
    };
    while (!all_done()) {
      if (!timed || late) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, until) == std::cv_status::timeout && !all_done()) {
        late = true;
        end(status::timed_out);  // pending halves end now; running ones are waited for
      }
    }
    // a half's own error (size_mismatch, the executor's) before the peer_failed of halves that
    // the world's end took with it
    status first = status::success;
    for (std::size_t i = 0; i < count; ++i) {
      busy_[static_cast<std::size_t>(ops[i]->rank)] = 0;
      const status r = ops[i]->result;
      if (first == status::success || (first == status::peer_failed && r != status::success)) first = r;
    }
    if (late && first == status::peer_failed) first = status::timed_out;
    return first;
  }

  // Ends the world (why: the error to report; success counts as peer_failed). The first end stays.
  void abort(status why) {
    const std::lock_guard<std::mutex> lock(mutex_);
    end(why == status::success ? status::peer_failed : why);
  }
  // success, or what ended the world.
  status error_state() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return ended_ ? why_ : status::success;
  }
  // Makes an ended world usable again; invalid_argument while a call is in exchange().
  status reset() {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (unsigned char b : busy_)
      if (b) return status::invalid_argument;
    for (link& l : links_) l.head = l.size = 0;
    ended_ = false;
    why_ = status::success;
    return status::success;
  }

 private:
  // The halves of one ordered pair not yet paired: sends from src to dst, or receives of dst from
  // src (never both), oldest first.
  struct link {
    std::vector<message_half*> ring;
    std::size_t head = 0, size = 0;
    bool sends = false;
  };

  status admissible(message_half* const* ops, std::size_t count) const {
    if (count > cap_) return status::invalid_argument;
    for (std::size_t i = 0; i < count; ++i) {
      const message_half* h = ops[i];
      if (h == nullptr || h->rank < 0 || h->rank >= n_ || h->peer < 0 || h->peer >= n_) return status::invalid_argument;
      if (busy_[static_cast<std::size_t>(h->rank)]) return status::invalid_argument;
      for (std::size_t j = 0; j < i; ++j)
        if (ops[j] == h) return status::invalid_argument;  // one half listed twice
    }
    // a rank's messages to itself: as many sends as receives in this call (the link to itself is
    // empty between calls, as every call waits for all of its halves)
    for (std::size_t i = 0; i < count; ++i) {
      if (ops[i]->peer != ops[i]->rank) continue;
      long balance = 0;
      for (std::size_t j = 0; j < count; ++j)
        if (ops[j]->rank == ops[i]->rank && ops[j]->peer == ops[j]->rank) balance += ops[j]->send ? 1 : -1;
      if (balance != 0) return status::invalid_argument;
    }
    return status::success;
  }

  link& link_of(const message_half& h) {
    const int src = h.send ? h.rank : h.peer, dst = h.send ? h.peer : h.rank;
    return links_[static_cast<std::size_t>(src) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(dst)];
  }

  // Pairs h with the oldest half of the other kind on its link, or queues it.
  void publish(message_half& h) {
    h.result = status::success;
    h.partner = nullptr;
    h.run_here = false;
    if (ended_) {  // (an earlier half of this call ended the world: nothing may wait in a ring now)
      h.state = message_half::phase::done;
      h.result = status::peer_failed;
      return;
    }
    link& l = link_of(h);
    if (l.size > 0 && l.sends != h.send) {
      message_half& other = *l.ring[l.head];
      l.head = (l.head + 1) % l.ring.size();
      --l.size;
      h.partner = &other;
      other.partner = &h;
      if (other.bytes != h.bytes) {
        h.state = other.state = message_half::phase::done;
        h.result = other.result = status::size_mismatch;
        end(status::size_mismatch);
        return;
      }
      h.state = other.state = message_half::phase::running;
      h.run_here = true;
      return;
    }
    // (admissible() bounds a call's halves by the ring's size, and every call waits for its own,
    // so a link never holds more than one call's worth of one kind)
    l.sends = h.send;
    l.ring[(l.head + l.size) % l.ring.size()] = &h;
    ++l.size;
    h.state = message_half::phase::pending;
  }

  void settle(message_half& snd, message_half& rcv, status s) {
    snd.result = rcv.result = s;
    snd.state = rcv.state = message_half::phase::done;
    if (s != status::success) end(s);
    cv_.notify_all();
  }

  // (the lock held) Ends the world: every queued half fails now.
  void end(status why) {
    if (!ended_) {
      ended_ = true;
      why_ = why;
    }
    for (link& l : links_) {
      for (std::size_t k = 0; k < l.size; ++k) {
        message_half& h = *l.ring[(l.head + k) % l.ring.size()];
        h.state = message_half::phase::done;
        h.result = status::peer_failed;
      }
      l.head = l.size = 0;
    }
    cv_.notify_all();
  }

  int n_;
  std::uint32_t cap_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<link> links_;
  std::vector<unsigned char> busy_;  // ranks with a call in exchange()
  bool ended_ = false;
  status why_ = status::success;
};

}  // namespace zipccl::transport::detail
