// zipccl: transport::local, ranks as threads of one process, host memory.
//
// The test bed and the simulator of the collectives, not a replacement for NCCL or MPI:
//   - every ordered pair of ranks is a link with a FIFO of messages; send() copies and returns
//     (like an eager send), recv() waits for the next message from its source;
//   - an optional link model (bandwidth, latency) delays each message's delivery as a link of that
//     speed would: messages on one link are serialised, links work in parallel;
//   - every link counts the bytes and messages that crossed it;
//   - abort() from any rank, or a timeout, ends every waiting operation with an error, so a failed
//     rank never hangs the others;
//   - isend() does not copy: the receiver copies straight from the sender's buffer, and the
//     sender's wait() returns once it has (as a NIC's DMA would; one copy per message, none of
//     send()'s allocation). irecv() takes the message at once if it has arrived, else records
//     the receive for wait() to perform, so the link model's clock keeps running while the caller
//     codes the next segment (and a buffer still in use by a posted receive is written early, as a
//     real network would).
//
//   zipccl::transport::local_world world(4, {1e9, 5e-6});   // 1 GB/s, 5 us per link
//   world.run([&](zipccl::transport::local_transport& t) { ... collective on t ... });
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../error.hpp"
#include "transport.hpp"

namespace zipccl::transport {

// A link's speed. bytes_per_second == 0 means unlimited.
struct link_model {
  double bytes_per_second = 0;
  double latency_seconds = 0;
};

class local_world;

// One rank's handle on a local_world; use it from that rank's thread.
class local_transport {
 public:
  local_transport(local_world& world, int rank) : world_(&world), rank_(rank) {}
  int rank() const { return rank_; }
  inline int size() const;
  inline status send(int dst, const void* buf, std::uint64_t bytes);
  inline status recv(int src, void* buf, std::uint64_t bytes);
  status sendrecv(int dst, const void* sbuf, std::uint64_t sbytes, int src, void* rbuf, std::uint64_t rbytes) {
    const status s = send(dst, sbuf, sbytes);  // sends never block, so this cannot deadlock
    return s != status::success ? s : recv(src, rbuf, rbytes);
  }
  inline void abort(status why);

  // How far the receiver has got with a message that isend() lent it.
  struct handoff {
    int state = 0;  // 0: queued, 1: being copied, 2: taken
    int src = 0, dst = 0;
  };
  // The optional request-based operations (transport.hpp). A request still pending when it is
  // destroyed (a stack unwound by an exception, a request dropped without wait()) is withdrawn:
  // a send's buffer is never read afterwards (a copy already under way is waited for), and the
  // world is aborted, since the pair's message order can no longer be kept; every rank's pending
  // and later operations then fail with peer_failed instead of waiting or reading freed memory.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept { take(o); }
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        withdraw();
        take(o);
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { withdraw(); }

   private:
    friend class local_transport;
    inline void withdraw() noexcept;
    void take(request& o) noexcept {
      world = o.world;
      result = o.result;
      src = o.src;
      buf = o.buf;
      bytes = o.bytes;
      sent = std::move(o.sent);
      o.src = -1;
      o.world = nullptr;
    }
    local_world* world = nullptr;
    status result = status::success;
    int src = -1;  // >= 0: a receive still to perform
    void* buf = nullptr;
    std::uint64_t bytes = 0;
    std::shared_ptr<handoff> sent;  // a send still lent to its receiver
  };
  inline request isend(int dst, const void* buf, std::uint64_t bytes);
  inline request irecv(int src, void* buf, std::uint64_t bytes);
  inline status wait(request& q);

 private:
  local_world* world_;
  int rank_;
};

class local_world {
 public:
  using clock = std::chrono::steady_clock;

  explicit local_world(int ranks, link_model link = {}, std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : ranks_(ranks < 1 ? 1 : ranks), model_(link), timeout_(timeout),
        links_(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(ranks_)) {}

  int size() const { return ranks_; }
  const link_model& link() const { return model_; }
  local_transport transport(int rank) { return local_transport(*this, rank); }

  // Runs f(local_transport&) once per rank, each on its own thread; returns when all have returned.
  // A rank that throws aborts the world (the others' operations fail instead of waiting for it);
  // once every rank has returned, the first exception is rethrown here. So is a failure to start
  // a thread, after the ranks already started have been aborted and joined.
  template <class F>
  void run(F&& f) {
    std::exception_ptr first;
    std::mutex first_mu;
    auto failed = [&](std::exception_ptr e) {
      abort();
      std::lock_guard<std::mutex> lock(first_mu);
      if (!first) first = std::move(e);
    };
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(ranks_));
    try {
      for (int r = 0; r < ranks_; ++r)
        threads.emplace_back([this, r, &f, &failed] {
          try {
            local_transport t(*this, r);
            f(t);
          } catch (...) {
            failed(std::current_exception());
          }
        });
    } catch (...) {
      failed(std::current_exception());
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

  // Bytes and messages sent from src to dst since construction or the last reset.
  std::uint64_t bytes(int src, int dst) const {
    std::lock_guard<std::mutex> lock(mu_);
    return at(src, dst).bytes;
  }
  std::uint64_t messages(int src, int dst) const {
    std::lock_guard<std::mutex> lock(mu_);
    return at(src, dst).messages;
  }
  std::uint64_t total_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t t = 0;
    for (const auto& l : links_) t += l.bytes;
    return t;
  }
  // Clears counters, queued messages and a previous abort, for the next experiment.
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : links_) l = link_state{};
    aborted_ = false;
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }

 private:
  friend class local_transport;

  struct message {
    std::vector<std::uint8_t> data;  // send(): a copy
    const std::uint8_t* lent = nullptr;  // isend(): the sender's buffer, until it is taken
    std::uint64_t size = 0;
    std::shared_ptr<local_transport::handoff> handoff;
    clock::time_point ready;
  };
  struct link_state {
    std::deque<message> queue;
    clock::time_point free_at{};
    std::uint64_t bytes = 0, messages = 0;
  };

  link_state& at(int src, int dst) { return links_[static_cast<std::size_t>(src) * ranks_ + dst]; }
  const link_state& at(int src, int dst) const { return links_[static_cast<std::size_t>(src) * ranks_ + dst]; }
  bool valid(int r) const { return r >= 0 && r < ranks_; }

  // Queues a message: a copy of buf, or (lend) buf itself with a handoff the sender waits on.
  status send(int src, int dst, const void* buf, std::uint64_t bytes,
              const std::shared_ptr<local_transport::handoff>& lend = nullptr) {
    if (!valid(src) || !valid(dst) || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    message m;
    m.size = bytes;
    if (lend) {
      m.lent = static_cast<const std::uint8_t*>(buf);
      m.handoff = lend;
    } else {
      m.data.resize(bytes);
      if (bytes) std::memcpy(m.data.data(), buf, bytes);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return status::peer_failed;
      link_state& l = at(src, dst);
      const auto now = clock::now();
      const auto start = std::max(now, l.free_at);
      const double wire = model_.bytes_per_second > 0 ? static_cast<double>(bytes) / model_.bytes_per_second : 0.0;
      l.free_at = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(wire));
      m.ready = l.free_at + std::chrono::duration_cast<clock::duration>(
                                std::chrono::duration<double>(model_.latency_seconds));
      l.bytes += bytes;
      ++l.messages;
      l.queue.push_back(std::move(m));
    }
    cv_.notify_all();
    return status::success;
  }

  // Waits until the receiver has taken a lent message. On an abort or the timeout a message still
  // queued is withdrawn (so nobody reads the buffer later); one being copied is waited for.
  status wait_taken(const std::shared_ptr<local_transport::handoff>& h) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = clock::now() + timeout_;
    for (;;) {
      if (h->state == 2) return status::success;
      const bool late = clock::now() >= deadline;
      if ((aborted_ || late) && h->state == 0) {
        auto& q = at(h->src, h->dst).queue;
        for (auto it = q.begin(); it != q.end(); ++it)
          if (it->handoff == h) {
            q.erase(it);
            break;
          }
        return aborted_ ? status::peer_failed : status::timed_out;
      }
      cv_.wait_until(lock, late ? clock::now() + std::chrono::milliseconds(1) : deadline);
    }
  }

  // A request destroyed before wait(): a lent message still queued is taken back, one being
  // copied is waited for; then everyone is told to give up (the link's order is broken).
  void cancel(const std::shared_ptr<local_transport::handoff>& h) noexcept {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (h) {
        if (h->state == 0) {
          auto& q = at(h->src, h->dst).queue;
          for (auto it = q.begin(); it != q.end(); ++it)
            if (it->handoff == h) {
              q.erase(it);
              break;
            }
          h->state = 2;
        }
        while (h->state != 2) cv_.wait(lock);  // a copy under way ends without the lock
      }
      aborted_ = true;
    }
    cv_.notify_all();
  }

  // wait == false: returns timed_out at once when no message has arrived yet.
  status recv(int dst, int src, void* buf, std::uint64_t bytes, bool wait = true) {
    if (!valid(src) || !valid(dst) || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = clock::now() + timeout_;
    link_state& l = at(src, dst);
    for (;;) {
      if (aborted_) return status::peer_failed;
      const auto now = clock::now();
      if (!l.queue.empty() && l.queue.front().ready <= now) break;
      if (now >= deadline || !wait) return status::timed_out;
      const auto wake = l.queue.empty() ? deadline : std::min(deadline, l.queue.front().ready);
      cv_.wait_until(lock, wake);
    }
    message m = std::move(l.queue.front());
    l.queue.pop_front();
    if (m.handoff) m.handoff->state = 1;
    lock.unlock();
    const bool fits = m.size == bytes;
    if (fits && bytes) std::memcpy(buf, m.handoff ? m.lent : m.data.data(), bytes);
    if (m.handoff) {
      {
        std::lock_guard<std::mutex> relock(mu_);
        m.handoff->state = 2;
      }
      cv_.notify_all();
    }
    return fits ? status::success : status::size_mismatch;
  }

  void abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

  int ranks_;
  link_model model_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<link_state> links_;
  bool aborted_ = false;
};

int local_transport::size() const { return world_->size(); }
status local_transport::send(int dst, const void* buf, std::uint64_t bytes) {
  return world_->send(rank_, dst, buf, bytes);
}
status local_transport::recv(int src, void* buf, std::uint64_t bytes) { return world_->recv(rank_, src, buf, bytes); }
local_transport::request local_transport::isend(int dst, const void* buf, std::uint64_t bytes) {
  request q;
  q.sent = std::make_shared<handoff>();
  q.sent->src = rank_;
  q.sent->dst = dst;
  q.result = world_->send(rank_, dst, buf, bytes, q.sent);
  if (q.result != status::success) q.sent.reset();
  else q.world = world_;
  return q;
}
status local_transport::wait(request& q) {
  if (q.src >= 0) {
    q.result = world_->recv(rank_, q.src, q.buf, q.bytes);
    q.src = -1;
  }
  if (q.sent) {
    q.result = world_->wait_taken(q.sent);
    q.sent.reset();
  }
  q.world = nullptr;
  return q.result;
}
local_transport::request local_transport::irecv(int src, void* buf, std::uint64_t bytes) {
  const status now = world_->recv(rank_, src, buf, bytes, false);
  request q;
  if (now == status::timed_out) {  // not there yet: wait() receives it
    q.src = src;
    q.buf = buf;
    q.bytes = bytes;
    q.world = world_;
  } else {
    q.result = now;
  }
  return q;
}
void local_transport::abort(status) { world_->abort(); }
void local_transport::request::withdraw() noexcept {
  if (world != nullptr && (src >= 0 || sent)) world->cancel(sent);
  world = nullptr;
  src = -1;
  sent.reset();
}

static_assert(is_host_transport_v<local_transport>, "local_transport must model the host transport concept");
static_assert(has_requests_v<local_transport>, "local_transport offers request-based operations");

}  // namespace zipccl::transport
