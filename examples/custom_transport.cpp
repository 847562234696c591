// Adapting your own communicator to zipccl's collectives.
//
// `mailbox_comm` below stands for the communicator a training engine already has (here: ranks are
// threads exchanging byte vectors through mailboxes). The adapter `mailbox_transport` is all zipccl
// needs: rank, size, send, recv, sendrecv and abort (the host transport concept,
// include/zipccl/transport/transport.hpp). The program runs a compressed all_reduce on 4 ranks and
// checks it against the plain ring.
#include <zipccl/collective.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

// ---- the user's communicator (not part of zipccl) ----
class mailbox_comm {
 public:
  explicit mailbox_comm(int ranks) : ranks_(ranks) {}
  int ranks() const { return ranks_; }
  void post(int from, int to, std::vector<char> msg) {
    std::lock_guard<std::mutex> lock(mu_);
    boxes_[{from, to}].push_back(std::move(msg));
    cv_.notify_all();
  }
  // Waits for the next message from `from` to `to`; false once the communicator is shut down.
  bool take(int from, int to, std::vector<char>* msg) {
    std::unique_lock<std::mutex> lock(mu_);
    auto& box = boxes_[{from, to}];
    cv_.wait(lock, [&] { return down_ || !box.empty(); });
    if (box.empty()) return false;
    *msg = std::move(box.front());
    box.pop_front();
    return true;
  }
  void shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    down_ = true;
    cv_.notify_all();
  }

 private:
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> boxes_;
  bool down_ = false;
};

// ---- the adapter: a few dozen lines ----
struct mailbox_transport {
  mailbox_comm& comm;
  int me;

  int rank() const { return me; }
  int size() const { return comm.ranks(); }
  zipccl::status send(int dst, const void* buf, std::uint64_t bytes) {
    if (dst < 0 || dst >= size()) return zipccl::status::invalid_argument;
    const char* p = static_cast<const char*>(buf);
    comm.post(me, dst, std::vector<char>(p, p + bytes));
    return zipccl::status::success;
  }
  zipccl::status recv(int src, void* buf, std::uint64_t bytes) {
    if (src < 0 || src >= size()) return zipccl::status::invalid_argument;
    std::vector<char> msg;
    if (!comm.take(src, me, &msg)) return zipccl::status::peer_failed;
    if (msg.size() != bytes) return zipccl::status::size_mismatch;
    if (bytes) std::memcpy(buf, msg.data(), bytes);
    return zipccl::status::success;
  }
  zipccl::status sendrecv(int dst, const void* sbuf, std::uint64_t sbytes, int src, void* rbuf, std::uint64_t rbytes) {
    const zipccl::status s = send(dst, sbuf, sbytes);  // posting never blocks: no deadlock
    return s != zipccl::status::success ? s : recv(src, rbuf, rbytes);
  }
  void abort(zipccl::status) { comm.shutdown(); }
};
static_assert(zipccl::transport::is_host_transport_v<mailbox_transport>);

int main() {
  using codec = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
  constexpr int ranks = 4;
  constexpr std::uint64_t count = 1 << 18;
  mailbox_comm comm(ranks);
  std::vector<std::vector<std::uint16_t>> packed(ranks), plain(ranks);
  std::vector<zipccl::status> st(ranks, zipccl::status::success);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      mailbox_transport t{comm, r};
      std::vector<std::uint16_t> grad(count);  // a bf16 gradient: the top halves of small floats
      for (std::uint64_t i = 0; i < count; ++i) {
        const float f = 1e-3f * static_cast<float>(static_cast<int>((i * 2654435761u + r * 97u) % 2001) - 1000) / 1000.0f;
        std::uint32_t b;
        std::memcpy(&b, &f, 4);
        grad[i] = static_cast<std::uint16_t>(b >> 16);
      }
      packed[r].resize(count);
      plain[r].resize(count);
      std::vector<std::uint8_t> ws(zipccl::all_reduce_workspace<codec>(count, ranks));
      st[r] = zipccl::all_reduce<codec>(grad.data(), packed[r].data(), count, zipccl::op::avg, t, ws.data(), ws.size());
      if (st[r] == zipccl::status::success)
        st[r] = zipccl::all_reduce<codec, zipccl::strategy::never>(grad.data(), plain[r].data(), count, zipccl::op::avg,
                                                                   t, ws.data(), ws.size());
    });
  for (auto& t : threads) t.join();
  bool ok = true;
  for (int r = 0; r < ranks; ++r) ok = ok && st[r] == zipccl::status::success && packed[r] == plain[r];
  std::printf("all_reduce over a custom communicator, %d ranks x %llu bf16: %s\n", ranks,
              static_cast<unsigned long long>(count),
              ok ? "compressed result bit-identical to the plain ring" : "MISMATCH");
  return ok ? 0 : 1;
}
