// transport/detail/matcher.hpp, the host-side matching that transport::cuda_local runs on: random
// programs of sends, receives and groups on 2 to 16 ranks, with a thread per rank and with one
// thread for all ranks; abort, mismatched sizes, the deadline and bad calls. No program may hang: a
// test-side deadline ends the world and fails the case.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <zipccl/transport/detail/matcher.hpp>

using namespace zipccl;
using transport::detail::matcher;
using transport::detail::message_half;

namespace {

// The payload of message k from src to dst: its size and bytes follow from those alone, so a
// receive that got another message than the k-th of its link sees other bytes (or another size).
std::uint64_t size_of(std::uint64_t seed, int src, int dst, std::uint64_t k) {
  std::uint64_t h = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(src) << 40) ^
                    (static_cast<std::uint64_t>(dst) << 20) ^ k;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h % 97 == 0 ? 0 : h % 300;  // some empty messages
}
std::uint8_t byte_of(int src, int dst, std::uint64_t k, std::uint64_t i) {
  return static_cast<std::uint8_t>(src * 31 + dst * 17 + k * 7 + i);
}

// One operation of a program: a half and its buffer.
struct op {
  bool send;
  int rank, peer;
  std::uint64_t k;  // the message's index on its link
  std::vector<std::uint8_t> buf;
  message_half half;
  void ready(std::uint64_t seed) {
    const int src = send ? rank : peer, dst = send ? peer : rank;
    buf.assign(size_of(seed, src, dst, k), 0);
    if (send)
      for (std::uint64_t i = 0; i < buf.size(); ++i) buf[i] = byte_of(src, dst, k, i);
    half = message_half{};
    half.rank = rank;
    half.peer = peer;
    half.send = send;
    half.bytes = buf.size();
    half.context = buf.data();
  }
  bool intact() const {
    if (send) return true;
    for (std::uint64_t i = 0; i < buf.size(); ++i)
      if (buf[i] != byte_of(peer, rank, k, i)) return false;
    return true;
  }
};

// A step of the program: grouped (every rank publishes its operations of the step at once, in an
// order of its own; messages to itself allowed) or in order (every message one send and one
// receive, in a global order that each rank follows: a program of blocking calls that completes).
struct step {
  bool grouped;
  std::vector<std::vector<op>> per_rank;          // grouped: each rank's operations
  std::vector<std::pair<op, op>> ordered;         // in order: (send, receive)
};

struct program {
  int ranks;
  std::uint64_t seed;
  std::vector<step> steps;
};

program make_program(std::uint64_t seed, int ranks) {
  std::mt19937_64 rng(seed);
  program p{ranks, seed, {}};
  std::vector<std::uint64_t> sent(static_cast<std::size_t>(ranks * ranks), 0),
      received(static_cast<std::size_t>(ranks * ranks), 0);
  const auto at = [&](int src, int dst) { return static_cast<std::size_t>(src * ranks + dst); };
  const int steps = 1 + static_cast<int>(rng() % 6);
  for (int s = 0; s < steps; ++s) {
    step st;
    st.grouped = rng() % 3 != 0;
    const int messages = static_cast<int>(rng() % static_cast<std::uint64_t>(2 * ranks + 1));
    if (st.grouped) {
      st.per_rank.resize(static_cast<std::size_t>(ranks));
      for (int m = 0; m < messages; ++m) {
        const int src = static_cast<int>(rng() % static_cast<std::uint64_t>(ranks));
        const int dst = static_cast<int>(rng() % static_cast<std::uint64_t>(ranks));
        st.per_rank[static_cast<std::size_t>(src)].push_back(op{true, src, dst, 0, {}, {}});
        st.per_rank[static_cast<std::size_t>(dst)].push_back(op{false, dst, src, 0, {}, {}});
      }
      // each rank's own order; the k-th send of a link meets the k-th receive, whatever the order
      for (auto& ops : st.per_rank) {
        std::shuffle(ops.begin(), ops.end(), rng);
        for (op& o : ops) o.k = o.send ? sent[at(o.rank, o.peer)]++ : received[at(o.peer, o.rank)]++;
      }
    } else {
      for (int m = 0; m < messages; ++m) {
        const int src = static_cast<int>(rng() % static_cast<std::uint64_t>(ranks));
        int dst = static_cast<int>(rng() % static_cast<std::uint64_t>(ranks - 1));
        if (dst >= src) ++dst;  // (a blocking message to itself would wait for itself)
        st.ordered.push_back({op{true, src, dst, sent[at(src, dst)]++, {}, {}},
                              op{false, dst, src, received[at(src, dst)]++, {}, {}}});
      }
    }
    p.steps.push_back(std::move(st));
  }
  return p;
}

// Copies the payload: the executor of the tests.
status copy_payload(message_half& snd, message_half& rcv) noexcept {
  if (snd.bytes) std::memcpy(rcv.context, snd.context, snd.bytes);
  return status::success;
}

// Ends the world when a run lasts longer than `seconds`, and remembers that it had to.
class deadline {
 public:
  deadline(matcher& m, double seconds)
      : thread_([this, &m, seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
            fired_ = true;
            m.abort(status::timed_out);
          }
        }) {}
  ~deadline() { stop(); }
  bool stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

// Runs the program with a thread per rank; "" when every call succeeded and every receive got its
// message, else what went wrong.
std::string run_threads(program& p, matcher& m) {
  std::vector<std::string> errors(static_cast<std::size_t>(p.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < p.ranks; ++r)
    threads.emplace_back([&, r] {
      std::string& e = errors[static_cast<std::size_t>(r)];
      for (std::size_t s = 0; s < p.steps.size() && e.empty(); ++s) {
        step& st = p.steps[s];
        if (st.grouped) {
          auto& ops = st.per_rank[static_cast<std::size_t>(r)];
          std::vector<message_half*> halves;
          for (op& o : ops) {
            o.ready(p.seed);
            halves.push_back(&o.half);
          }
          const status got = m.exchange(halves.data(), halves.size(), copy_payload);
          if (got != status::success) e = "step " + std::to_string(s) + ": " + to_string(got);
          for (const op& o : ops)
            if (e.empty() && !o.intact()) e = "step " + std::to_string(s) + ": a receive got other bytes";
        } else {
          for (auto& [snd, rcv] : st.ordered) {
            op* mine = snd.rank == r ? &snd : rcv.rank == r ? &rcv : nullptr;
            if (mine == nullptr) continue;
            mine->ready(p.seed);
            message_half* h = &mine->half;
            const status got = m.exchange(&h, 1, copy_payload);
            if (got != status::success) e = "step " + std::to_string(s) + ": " + to_string(got);
            else if (!mine->intact()) e = "step " + std::to_string(s) + ": a receive got other bytes";
            if (!e.empty()) break;
          }
        }
      }
      if (!e.empty()) m.abort(status::peer_failed);  // the others must not wait for this rank
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p.ranks; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty()) return "rank " + std::to_string(r) + ", " + errors[static_cast<std::size_t>(r)];
  return "";
}

// The same program from one thread: a grouped step is one exchange of every rank's operations (a
// group spanning all ranks), an ordered message one exchange of its two halves.
std::string run_one_thread(program& p, matcher& m) {
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    step& st = p.steps[s];
    std::vector<std::pair<op*, message_half*>> all;
    if (st.grouped) {
      std::vector<message_half*> halves;
      for (auto& ops : st.per_rank)
        for (op& o : ops) {
          o.ready(p.seed);
          halves.push_back(&o.half);
        }
      const status got = m.exchange(halves.data(), halves.size(), copy_payload);
      if (got != status::success) return "step " + std::to_string(s) + ": " + to_string(got);
      for (auto& ops : st.per_rank)
        for (const op& o : ops)
          if (!o.intact()) return "step " + std::to_string(s) + ": a receive got other bytes";
    } else {
      for (auto& [snd, rcv] : st.ordered) {
        snd.ready(p.seed);
        rcv.ready(p.seed);
        message_half* both[] = {&rcv.half, &snd.half};
        const status got = m.exchange(both, 2, copy_payload);
        if (got != status::success) return "step " + std::to_string(s) + ": " + to_string(got);
        if (!rcv.intact()) return "step " + std::to_string(s) + ": a receive got other bytes";
      }
    }
  }
  return "";
}

}  // namespace

namespace {
// Runs `seeds` random programs (seed k on 2 + k % 15 ranks, salted) with `run` under a test-side
// deadline; the failures, each in words (at most three).
template <class Run>
std::vector<std::string> random_programs(std::uint64_t seeds, std::uint64_t salt, Run run) {
  std::vector<std::string> failures;
  for (std::uint64_t seed = 1; seed <= seeds && failures.size() < 3; ++seed) {
    const int ranks = 2 + static_cast<int>(seed % 15);
    program p = make_program(seed * salt, ranks);
    matcher m(ranks, 256);
    deadline guard(m, 30);
    const std::string e = run(p, m);
    const bool late = guard.stop();
    if (!e.empty() || late)
      failures.push_back("seed " + std::to_string(seed) + ", " + std::to_string(ranks) + " ranks: " +
                         (late ? "did not complete in time; " : "") + e);
  }
  return failures;
}
}  // namespace

TEST_CASE("random programs of sends, receives and groups complete with a thread per rank", "[matcher]") {
  CHECK(random_programs(1500, 1, run_threads) == std::vector<std::string>{});
}

TEST_CASE("random programs complete from one thread, a group spanning every rank", "[matcher]") {
  CHECK(random_programs(3000, 7919, run_one_thread) == std::vector<std::string>{});
}

TEST_CASE("a ring step of a send and a receive completes on every rank, the link's messages in order", "[matcher]") {
  for (int ranks : {2, 3, 8, 16}) {
    matcher m(ranks, 4);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        const int next = (r + 1) % ranks, prev = (r + ranks - 1) % ranks;
        for (std::uint64_t round = 0; round < 200; ++round) {
          std::uint64_t out = (static_cast<std::uint64_t>(r) << 32) | round, in = ~0ull;
          message_half s, v;
          s.rank = v.rank = r;
          s.peer = next;
          s.send = true;
          v.peer = prev;
          s.bytes = v.bytes = sizeof out;
          s.context = &out;
          v.context = &in;
          message_half* group[] = {&s, &v};
          if (m.exchange(group, 2, copy_payload) != status::success ||
              in != ((static_cast<std::uint64_t>(prev) << 32) | round))
            ++bad;
        }
      });
    for (auto& t : threads) t.join();
    INFO(ranks << " ranks");
    CHECK(bad == 0);
  }
}

TEST_CASE("abort from another thread wakes every waiting call on every rank", "[matcher]") {
  const int ranks = 6;
  matcher m(ranks, 8);
  std::vector<status> got(ranks, status::success);
  std::vector<std::thread> threads;
  std::atomic<int> waiting{0};
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      // every rank receives from the next, which never sends: all wait
      std::uint8_t b = 0;
      message_half h;
      h.rank = r;
      h.peer = (r + 1) % ranks;
      h.bytes = 1;
      h.context = &b;
      message_half* one = &h;
      ++waiting;
      got[static_cast<std::size_t>(r)] = m.exchange(&one, 1, copy_payload);
    });
  while (waiting < ranks) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  m.abort(status::invalid_argument);
  for (auto& t : threads) t.join();
  for (status s : got) CHECK(s == status::peer_failed);
  CHECK(m.error_state() == status::invalid_argument);
  // later calls fail at once, until reset
  std::uint8_t b = 0;
  message_half a, c;
  a.rank = 0;
  a.peer = 1;
  a.send = true;
  a.bytes = c.bytes = 1;
  a.context = c.context = &b;
  c.rank = 1;
  c.peer = 0;
  message_half* pair[] = {&a, &c};
  CHECK(m.exchange(pair, 2, copy_payload) == status::peer_failed);
  CHECK(m.reset() == status::success);
  CHECK(m.error_state() == status::success);
  CHECK(m.exchange(pair, 2, copy_payload) == status::success);
  CHECK(b == 0);
  // the first reason stays
  m.abort(status::size_mismatch);
  m.abort(status::timed_out);
  CHECK(m.error_state() == status::size_mismatch);
}

TEST_CASE("halves of different sizes move nothing and fail on both ends; the rest of the world ends", "[matcher]") {
  matcher m(3, 4);
  std::vector<std::uint8_t> out(10, 0xAB), in(9, 0);
  std::uint8_t spare = 0;
  status r0 = status::success, r1 = status::success, r2 = status::success;
  std::atomic<bool> third_waits{false};
  std::thread third([&] {
    message_half h;  // rank 2 waits for rank 0, which fails first
    h.rank = 2;
    h.peer = 0;
    h.bytes = 1;
    h.context = &spare;
    message_half* one = &h;
    third_waits = true;
    r2 = m.exchange(&one, 1, copy_payload);
  });
  while (!third_waits) std::this_thread::yield();
  std::thread receiver([&] {
    message_half h;
    h.rank = 1;
    h.peer = 0;
    h.bytes = in.size();
    h.context = in.data();
    message_half* one = &h;
    r1 = m.exchange(&one, 1, copy_payload);
  });
  message_half h;
  h.rank = 0;
  h.peer = 1;
  h.send = true;
  h.bytes = out.size();
  h.context = out.data();
  message_half* one = &h;
  r0 = m.exchange(&one, 1, copy_payload);
  receiver.join();
  third.join();
  CHECK(r0 == status::size_mismatch);
  CHECK(r1 == status::size_mismatch);
  CHECK(r2 == status::peer_failed);
  CHECK(m.error_state() == status::size_mismatch);
  CHECK(std::count(in.begin(), in.end(), 0) == 9);  // nothing moved
}

TEST_CASE("a call whose peer does not come by the deadline ends the world with timed_out", "[matcher]") {
  matcher m(2, 4);
  std::uint8_t b = 0;
  message_half h;
  h.rank = 0;
  h.peer = 1;
  h.send = true;
  h.bytes = 1;
  h.context = &b;
  message_half* one = &h;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(m.exchange(&one, 1, copy_payload, 0.05) == status::timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));
  CHECK(m.error_state() == status::timed_out);
  // the late peer finds the world ended, not a half to pair with
  message_half late;
  late.rank = 1;
  late.peer = 0;
  late.bytes = 1;
  late.context = &b;
  message_half* other = &late;
  CHECK(m.exchange(&other, 1, copy_payload) == status::peer_failed);
}

TEST_CASE("an executor's error fails both halves and ends the world", "[matcher]") {
  matcher m(2, 4);
  std::uint8_t a = 1, b = 0;
  message_half s, r;
  s.rank = 0;
  s.peer = 1;
  s.send = true;
  r.rank = 1;
  r.peer = 0;
  s.bytes = r.bytes = 1;
  s.context = &a;
  r.context = &b;
  message_half* pair[] = {&s, &r};
  const auto failing = [](message_half&, message_half&) noexcept { return status::cuda_error; };
  CHECK(m.exchange(pair, 2, failing) == status::cuda_error);
  CHECK(s.result == status::cuda_error);
  CHECK(r.result == status::cuda_error);
  CHECK(m.error_state() == status::cuda_error);
}

TEST_CASE("calls that could never complete are refused before anything is published", "[matcher]") {
  matcher m(3, 2);
  std::uint8_t b = 0;
  const auto half = [&](int rank, int peer, bool send) {
    message_half h;
    h.rank = rank;
    h.peer = peer;
    h.send = send;
    h.bytes = 1;
    h.context = &b;
    return h;
  };
  message_half x = half(0, 1, true), y = half(0, 2, true), z = half(0, 1, false);
  message_half* three[] = {&x, &y, &z};
  CHECK(m.exchange(three, 3, copy_payload) == status::invalid_argument);  // more than max_ops
  message_half bad_peer = half(0, 3, true), bad_rank = half(-1, 0, true);
  message_half* one = &bad_peer;
  CHECK(m.exchange(&one, 1, copy_payload) == status::invalid_argument);
  one = &bad_rank;
  CHECK(m.exchange(&one, 1, copy_payload) == status::invalid_argument);
  // a message to itself: its send and receive in one call, or refused
  message_half self_send = half(1, 1, true), self_recv = half(1, 1, false);
  one = &self_send;
  CHECK(m.exchange(&one, 1, copy_payload) == status::invalid_argument);
  message_half* both[] = {&self_send, &self_recv};
  std::uint8_t from = 42, to = 0;
  self_send.context = &from;
  self_recv.context = &to;
  CHECK(m.exchange(both, 2, copy_payload) == status::success);
  CHECK(to == 42);
  message_half* twice[] = {&x, &x};
  CHECK(m.exchange(twice, 2, copy_payload) == status::invalid_argument);  // one half listed twice
  CHECK(m.exchange(nullptr, 1, copy_payload) == status::invalid_argument);
  CHECK(m.exchange(&one, 1, copy_payload, -1.0) == status::invalid_argument);
  CHECK(m.error_state() == status::success);  // none of these ended the world
  CHECK_THROWS_AS(matcher(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(matcher(1, 0), std::invalid_argument);
}

TEST_CASE("a rank that another thread is using is refused, and reset waits for no call", "[matcher]") {
  matcher m(2, 2);
  std::uint8_t b = 0;
  message_half w;
  w.rank = 0;
  w.peer = 1;
  w.bytes = 1;
  w.context = &b;
  std::atomic<bool> in{false};
  status first = status::success;
  std::thread t([&] {
    message_half* one = &w;
    in = true;
    first = m.exchange(&one, 1, copy_payload);
  });
  while (!in) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  message_half again = w;
  message_half* one = &again;
  // (with a deadline: were rank 0 not in its call yet, this one would wait, not hang)
  CHECK(m.exchange(&one, 1, copy_payload, 5.0) == status::invalid_argument);  // rank 0 is in a call
  CHECK(m.reset() == status::invalid_argument);                          // so reset refuses
  m.abort(status::peer_failed);
  t.join();
  CHECK(first == status::peer_failed);
  CHECK(m.reset() == status::success);
}

TEST_CASE("a call reports its own half's error before the peer_failed of halves the end took", "[matcher]") {
  matcher m(3, 4);
  std::uint8_t out[10] = {}, in[9] = {}, spare = 0;
  message_half never, snd;  // rank 0: a receive from rank 2, which never sends, then a send to rank 1
  never.rank = 0;
  never.peer = 2;
  never.bytes = 1;
  never.context = &spare;
  snd.rank = 0;
  snd.peer = 1;
  snd.send = true;
  snd.bytes = sizeof out;
  snd.context = out;
  status r0 = status::success;
  std::atomic<bool> published{false};
  std::thread zero([&] {
    message_half* group[] = {&never, &snd};
    published = true;
    r0 = m.exchange(group, 2, copy_payload, 30.0);
  });
  while (!published) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  message_half rcv;
  rcv.rank = 1;
  rcv.peer = 0;
  rcv.bytes = sizeof in;
  rcv.context = in;
  message_half* one = &rcv;
  const status r1 = m.exchange(&one, 1, copy_payload, 30.0);
  zero.join();
  CHECK(r1 == status::size_mismatch);
  CHECK(r0 == status::size_mismatch);  // not the peer_failed of its receive from rank 2
  CHECK(never.result == status::peer_failed);
}

TEST_CASE("halves published after the world ended inside the same call fail at once, not wait", "[matcher]") {
  // one thread, one group over three ranks: rank 0's receive from 2 is queued, then rank 0's send
  // to 1 meets a receive of another size and ends the world; rank 2's send to 0 comes after
  matcher m(3, 8);
  std::uint8_t out[10] = {}, in[9] = {}, a = 0, b = 0;
  message_half r0, r1, s0, s2;
  r0.rank = 0;
  r0.peer = 2;
  r0.bytes = 1;
  r0.context = &a;
  r1.rank = 1;
  r1.peer = 0;
  r1.bytes = sizeof in;
  r1.context = in;
  s0.rank = 0;
  s0.peer = 1;
  s0.send = true;
  s0.bytes = sizeof out;
  s0.context = out;
  s2.rank = 2;
  s2.peer = 0;
  s2.send = true;
  s2.bytes = 1;
  s2.context = &b;
  message_half* group[] = {&r0, &r1, &s0, &s2};
  // (a deadline: with the defect this call waited for ever; now it returns at once)
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(m.exchange(group, 4, copy_payload, 5.0) == status::size_mismatch);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(s2.result == status::peer_failed);
  CHECK(m.error_state() == status::size_mismatch);
}
