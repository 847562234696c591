// zipccl: transport::mpi, a host transport over a user-owned MPI communicator.
//
//   zipccl::transport::mpi t(MPI_COMM_WORLD);        // collective: duplicates the communicator
//   zipccl::all_reduce<codec>(send, recv, n, zipccl::op::sum, t, ws, ws_bytes);
//
// The constructor duplicates the communicator (MPI_Comm_dup, so zipccl's messages never mix with
// the user's) and sets MPI_ERRORS_RETURN on the duplicate. Each message is an 8-byte size followed
// by the data in pieces of at most 1 GiB (MPI counts are int). Waiting operations poll, so that they
// end with status::peer_failed when any rank calls abort() (a one-byte message on a separate tag to
// every rank) and with status::timed_out after the timeout. isend() / irecv() post the size word
// and every piece at once (MPI_Isend / MPI_Irecv); wait() polls them. Data passes through buffers
// the transport owns (one copy on each side), so that after an abort MPI never reads or writes the
// caller's memory: operations cut short keep their buffers until the transport is destroyed. After
// an error the transport is not reused: build a new one. Needs MPI_THREAD_SINGLE or better; one
// transport per thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "../error.hpp"
#include "transport.hpp"

namespace zipccl::transport {

class mpi {
 public:
  explicit mpi(MPI_Comm comm, std::chrono::milliseconds timeout = std::chrono::seconds(60)) : timeout_(timeout) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  // Operations cut short by an error are finished here where MPI lets them; the buffers of any
  // that never finish are left allocated, since MPI may still write to them. After an abort the
  // duplicated communicator is not freed either: messages of the failed exchange may still be
  // queued at a peer, and Open MPI, reusing the freed communicator's context id for the next
  // one, then stalled that communicator's operations until their timeout. So each transport that
  // saw a failure keeps one communicator (one context id) until MPI_Finalize: a job that rebuilds
  // its transport after every failure should expect that cost.
  ~mpi() {
    for (auto& o : orphans_) {
      int done = 0;
      if (MPI_Testall(static_cast<int>(o->reqs.size()), o->reqs.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
          !done)
        o.release();
    }
    if (!aborted_) MPI_Comm_free(&comm_);
  }
  mpi(const mpi&) = delete;
  mpi& operator=(const mpi&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // One posted operation: the size word and the pieces of the data. The data goes through a
  // buffer the transport owns (a copy of what is sent, a landing place for what is received), so
  // that an operation cut short by an abort never touches the caller's memory afterwards: its
  // buffer is kept, with the operation, until the transport is destroyed.
  //
  // A request destroyed before wait() (a stack unwound by an exception) hands its operations and
  // buffers to the transport, which cancels them, keeps the buffers until it is destroyed and
  // aborts, so that the peers fail instead of waiting. The transport must outlive its requests.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept : st_(std::move(o.st_)), early_(o.early_), owner_(o.owner_) {}
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        drop();
        st_ = std::move(o.st_);
        early_ = o.early_;
        owner_ = o.owner_;
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { drop(); }

   private:
    friend class mpi;
    void drop() noexcept {
      if (st_ && owner_ != nullptr) owner_->withdraw(std::move(st_));
      st_.reset();
    }
    struct state {
      std::uint64_t header = 0;    // the size word sent, or received
      std::uint64_t expected = 0;  // a receive: the size the caller asked for
      bool receiving = false;
      void* user = nullptr;        // a receive: where the data goes once it is in
      std::vector<std::uint8_t> bounce;
      std::vector<MPI_Request> reqs;
    };
    std::unique_ptr<state> st_;
    status early_ = status::success;  // a failure found when posting
    mpi* owner_ = nullptr;
  };

  request isend(int dst, const void* buf, std::uint64_t bytes) {
    request q = start(dst, const_cast<void*>(buf), bytes, false);
    if (q.early_ == status::success) {
      q.st_->header = bytes;
      q.st_->bounce.assign(static_cast<const std::uint8_t*>(buf), static_cast<const std::uint8_t*>(buf) + bytes);
      q.early_ = post(dst, &q.st_->header, q.st_->bounce.data(), bytes, true, &q.st_->reqs);
    }
    return q;
  }

  // The size word and every piece are posted at once, so the data can flow before wait().
  request irecv(int src, void* buf, std::uint64_t bytes) {
    request q = start(src, buf, bytes, true);
    if (q.early_ == status::success) {
      q.st_->bounce.resize(bytes);
      q.early_ = post(src, &q.st_->header, q.st_->bounce.data(), bytes, false, &q.st_->reqs);
    }
    return q;
  }

  status wait(request& q) {
    if (!q.st_) return q.early_;
    std::unique_ptr<request::state> st = std::move(q.st_);
    const status s = q.early_ != status::success ? q.early_ : wait_all(*st);
    if (s == status::success) {
      if (st->receiving && st->expected) std::memcpy(st->user, st->bounce.data(), st->expected);
      return s;
    }
    for (auto& r : st->reqs)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    orphans_.push_back(std::move(st));  // MPI may still use its buffer
    return s;
  }

  status send(int dst, const void* buf, std::uint64_t bytes) {
    request q = isend(dst, buf, bytes);
    return wait(q);
  }

  status recv(int src, void* buf, std::uint64_t bytes) {
    request q = irecv(src, buf, bytes);
    return wait(q);
  }

  status sendrecv(int dst, const void* sbuf, std::uint64_t sbytes, int src, void* rbuf, std::uint64_t rbytes) {
    request out = isend(dst, sbuf, sbytes);
    request in = irecv(src, rbuf, rbytes);
    const status r = wait(in);
    const status w = wait(out);
    return r != status::success ? r : w;
  }

  // The optional native plain all_gather (transport.hpp): every rank's `bytes` from send, rank
  // r's at recv + r * bytes. The ranks first agree on the size with an MPI_Iallreduce, polled like
  // every other wait (aborts, timeout), so a rank with another count makes every rank return an
  // error and a rank that failed before the call cannot leave the others waiting; then
  // MPI_Allgather.
  status all_gather_bytes(const void* send, void* recv, std::uint64_t bytes) {
    if ((bytes != 0 && (send == nullptr || recv == nullptr)) || bytes > static_cast<std::uint64_t>(INT32_MAX))
      return status::invalid_argument;
    if (aborted_) return status::peer_failed;
    auto st = std::make_unique<request::state>();
    st->bounce.resize(32);  // this rank's (size, -size), then the maxima: owned, as MPI may outlive an abort
    auto* agree = reinterpret_cast<std::int64_t*>(st->bounce.data());
    agree[0] = static_cast<std::int64_t>(bytes);
    agree[1] = -agree[0];
    st->reqs.resize(1);
    if (MPI_Iallreduce(agree, agree + 2, 2, MPI_INT64_T, MPI_MAX, comm_, &st->reqs[0]) != MPI_SUCCESS)
      return status::invalid_argument;
    status s = wait_all(*st);
    if (s == status::success && agree[2] != -agree[3]) s = status::size_mismatch;  // max != min
    if (s == status::success && bytes != 0) {
      // every rank has agreed, so every rank is here: the blocking call cannot wait on an aborted
      // one (Open MPI's non-blocking MPI_Iallgather is slower on shared memory)
      auto* out = static_cast<std::uint8_t*>(recv);
      const void* in = send == out + static_cast<std::uint64_t>(rank_) * bytes ? MPI_IN_PLACE : send;
      if (MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_) !=
          MPI_SUCCESS)
        s = status::invalid_argument;
    }
    if (s != status::success) orphans_.push_back(std::move(st));  // MPI may still use its buffer
    return s;
  }

  // Tells every other rank to give up (once per transport, whether or not this rank had already
  // found the failure itself: a size mismatch or a timeout marks it aborted, but only this
  // message tells the peers).
  void abort(status why) {
    aborted_ = true;
    if (told_) return;
    told_ = true;
    abort_byte_ = static_cast<std::uint8_t>(why);  // a member: MPI may read it after we return
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request req;
      if (MPI_Isend(&abort_byte_, 1, MPI_BYTE, r, abort_tag, comm_, &req) == MPI_SUCCESS) MPI_Request_free(&req);
    }
  }

 private:
  static constexpr int data_tag = 0x5A50;
  static constexpr int abort_tag = 0x5A51;
  static constexpr std::uint64_t piece = 1ull << 30;

  bool valid(int r) const { return r >= 0 && r < size_; }

  // A request's state with its arguments checked (early_ says why not, and nothing is posted).
  request start(int peer, void* buf, std::uint64_t bytes, bool receiving) {
    request q;
    q.owner_ = this;
    q.st_ = std::make_unique<request::state>();
    q.st_->expected = bytes;
    q.st_->receiving = receiving;
    q.st_->user = buf;
    if (!valid(peer) || (buf == nullptr && bytes != 0)) q.early_ = status::invalid_argument;
    else if (aborted_) q.early_ = status::peer_failed;
    return q;
  }

  // A request dropped before wait(): its operations are cancelled and its buffers kept (MPI may
  // still use them); when anything had been posted, the peers are told to give up.
  void withdraw(std::unique_ptr<request::state> st) noexcept {
    if (st->reqs.empty()) return;
    for (auto& r : st->reqs)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    try {
      orphans_.push_back(std::move(st));
    } catch (...) {
      (void)st.release();  // no room to keep it: leak it rather than free what MPI may use
    }
    abort(status::peer_failed);
  }

  // Posts the size word and the data's pieces (sends or receives).
  status post(int peer, std::uint64_t* header, void* buf, std::uint64_t bytes, bool sending,
              std::vector<MPI_Request>* reqs) {
    auto* p = static_cast<std::uint8_t*>(buf);
    auto one = [&](void* at, std::uint64_t n) {
      MPI_Request req;
      const int rc = sending ? MPI_Isend(at, static_cast<int>(n), MPI_BYTE, peer, data_tag, comm_, &req)
                             : MPI_Irecv(at, static_cast<int>(n), MPI_BYTE, peer, data_tag, comm_, &req);
      if (rc == MPI_SUCCESS) reqs->push_back(req);
      return rc == MPI_SUCCESS;
    };
    if (!one(header, 8)) return status::invalid_argument;
    for (std::uint64_t off = 0; off < bytes; off += piece)
      if (!one(p + off, bytes - off < piece ? bytes - off : piece)) return status::invalid_argument;
    return status::success;
  }

  // Waits for a request's operations, watching for aborts from other ranks, for the timeout and,
  // on a receive, for a size word that differs from the size asked for.
  status wait_all(request::state& st) {
    std::vector<MPI_Request>& reqs = st.reqs;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    bool header_checked = !st.receiving;
    for (unsigned spin = 0;; ++spin) {
      if (reqs.empty()) return status::success;
      if (!header_checked) {
        int got = 0;
        if (MPI_Test(&reqs[0], &got, MPI_STATUS_IGNORE) != MPI_SUCCESS) got = -1;
        if (got != 0) {
          header_checked = true;
          if (got < 0 || st.header != st.expected) {
            aborted_ = true;  // the pieces of both sides no longer line up
            return status::size_mismatch;
          }
        }
      }
      int done = 0;
      if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
        aborted_ = true;
        return status::size_mismatch;  // e.g. a truncated piece: the peer's sizes differ
      }
      if (done) {
        if (st.receiving && st.header != st.expected) return status::size_mismatch;
        return status::success;
      }
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, abort_tag, comm_, &flag, MPI_STATUS_IGNORE);
      if (flag || aborted_ || std::chrono::steady_clock::now() > deadline) {
        const bool failed = flag || aborted_;
        aborted_ = true;
        return failed ? status::peer_failed : status::timed_out;
      }
      if (spin > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
  bool told_ = false;  // abort() has sent its message
  std::uint8_t abort_byte_ = 0;
  std::vector<std::unique_ptr<request::state>> orphans_;
};

static_assert(is_host_transport_v<mpi>, "transport::mpi must model the host transport concept");
static_assert(has_requests_v<mpi>, "transport::mpi offers request-based operations");
static_assert(has_native_all_gather_v<mpi>, "transport::mpi offers a native all_gather");

}  // namespace zipccl::transport
