// zipccl: transport::mpi, a host transport over a user-owned MPI communicator.
//
//   zipccl::transport::mpi t(MPI_COMM_WORLD);        // collective: duplicates the communicator
//   zipccl::all_reduce<codec>(send, recv, n, zipccl::op::sum, t, ws, ws_bytes);
//
// The constructor duplicates the communicator (MPI_Comm_dup, so zipccl's messages never mix with
// the user's) and sets MPI_ERRORS_RETURN on the duplicate. Each message is an 8-byte size followed
// by the data in pieces of at most 1 GiB (MPI counts are int). Waiting operations poll, so that they
// end with status::peer_failed when any rank calls abort() (a one-byte message on a separate tag to
// every rank) and with status::timed_out after the timeout. After an error the transport is not
// reused: build a new one. Needs MPI_THREAD_SINGLE or better; one transport per thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
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
  ~mpi() { MPI_Comm_free(&comm_); }
  mpi(const mpi&) = delete;
  mpi& operator=(const mpi&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  status send(int dst, const void* buf, std::uint64_t bytes) {
    std::vector<MPI_Request> reqs;
    std::uint64_t header = bytes;
    const status s = post_send(dst, buf, bytes, &header, &reqs);
    return s != status::success ? s : wait(reqs);
  }

  status recv(int src, void* buf, std::uint64_t bytes) {
    if (!valid(src) || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    if (aborted_) return status::peer_failed;
    std::uint64_t header = 0;
    std::vector<MPI_Request> reqs(1);
    if (MPI_Irecv(&header, 8, MPI_BYTE, src, data_tag, comm_, &reqs[0]) != MPI_SUCCESS) return status::invalid_argument;
    status s = wait(reqs);
    if (s != status::success) return s;
    if (header != bytes) return status::size_mismatch;
    reqs.clear();
    s = post_pieces(src, buf, bytes, false, &reqs);
    return s != status::success ? s : wait(reqs);
  }

  status sendrecv(int dst, const void* sbuf, std::uint64_t sbytes, int src, void* rbuf, std::uint64_t rbytes) {
    std::vector<MPI_Request> sends;
    std::uint64_t header = sbytes;
    status s = post_send(dst, sbuf, sbytes, &header, &sends);
    if (s != status::success) return s;
    s = recv(src, rbuf, rbytes);
    const status w = wait(sends);
    return s != status::success ? s : w;
  }

  void abort(status why) {
    if (aborted_) return;
    aborted_ = true;
    std::uint8_t b = static_cast<std::uint8_t>(why);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request req;
      if (MPI_Isend(&b, 1, MPI_BYTE, r, abort_tag, comm_, &req) == MPI_SUCCESS) MPI_Request_free(&req);
    }
  }

 private:
  static constexpr int data_tag = 0x5A50;
  static constexpr int abort_tag = 0x5A51;
  static constexpr std::uint64_t piece = 1ull << 30;

  bool valid(int r) const { return r >= 0 && r < size_; }

  status post_pieces(int peer, void* buf, std::uint64_t bytes, bool sending, std::vector<MPI_Request>* reqs) {
    auto* p = static_cast<std::uint8_t*>(buf);
    for (std::uint64_t off = 0; off < bytes; off += piece) {
      const int n = static_cast<int>(bytes - off < piece ? bytes - off : piece);
      MPI_Request req;
      const int rc = sending ? MPI_Isend(p + off, n, MPI_BYTE, peer, data_tag, comm_, &req)
                             : MPI_Irecv(p + off, n, MPI_BYTE, peer, data_tag, comm_, &req);
      if (rc != MPI_SUCCESS) return status::invalid_argument;
      reqs->push_back(req);
    }
    return status::success;
  }

  status post_send(int dst, const void* buf, std::uint64_t bytes, std::uint64_t* header, std::vector<MPI_Request>* reqs) {
    if (!valid(dst) || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    if (aborted_) return status::peer_failed;
    MPI_Request req;
    if (MPI_Isend(header, 8, MPI_BYTE, dst, data_tag, comm_, &req) != MPI_SUCCESS) return status::invalid_argument;
    reqs->push_back(req);
    return post_pieces(dst, const_cast<void*>(buf), bytes, true, reqs);
  }

  // Waits for every request, watching for aborts from other ranks and for the timeout.
  status wait(std::vector<MPI_Request>& reqs) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (unsigned spin = 0;; ++spin) {
      int done = 0;
      if (reqs.empty()) return status::success;
      if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return status::size_mismatch;  // e.g. a truncated piece: the peer's sizes differ
      if (done) return status::success;
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, abort_tag, comm_, &flag, MPI_STATUS_IGNORE);
      if (flag || aborted_ || std::chrono::steady_clock::now() > deadline) {
        for (auto& r : reqs)
          if (r != MPI_REQUEST_NULL) {
            MPI_Cancel(&r);
            MPI_Request_free(&r);
          }
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
};

static_assert(is_host_transport_v<mpi>, "transport::mpi must model the host transport concept");

}  // namespace zipccl::transport
