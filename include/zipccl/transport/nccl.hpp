// zipccl: transport::nccl, the device transport (device.hpp) over a user's NCCL communicator.
//
//   ncclComm_t comm = ...;                       // the user's, set up as usual
//   zipccl::transport::nccl t(comm);
//   zipccl::cuda::all_reduce<codec, strategy::always>(grad, grad, n, op::sum, t, ws, ws_bytes,
//                                                     status_dev, stream);
//
// Not part of the umbrella header: only code that includes this header needs NCCL's headers and
// links libnccl. The wrapper owns nothing: the communicator stays the user's. Copies of a wrapper
// share one state (rank, size, device, whether it was aborted, the checked mode's cache), so an
// abort through one copy is seen by all.
//
// Promises (docs/design.md, "Errors, as NCCL's model has them"; the class comment below has the
// detail): a local error returns its status and leaves the communicator as it was; neither the
// wrapper nor the device collectives ever abort it, only the caller does. abort() may come from
// another thread and ends a call that polls inside a non-blocking communicator. Every
// ncclGroupStart is closed. A non-blocking communicator still initialising is awaited, with a
// deadline. The opt-in checked mode turns a count that differs between ranks (NCCL's undefined
// case, in practice a hang) into size_mismatch on every rank.
//
// Use one thread per communicator (or one process per GPU), and never call a zipccl collective
// inside your own ncclGroupStart / ncclGroupEnd: a collective enqueues its kernels between its
// transfers, and an enclosing group would hold the transfers back until the group ends, after
// the kernels that need their data (examples/nccl_all_reduce.cu).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../cuda/runtime.cuh"
#include "../error.hpp"
#include "device.hpp"

namespace zipccl::transport {

// Errors, as NCCL's model has them and zipccl applies it:
//   - A local error (bad arguments, a send to oneself outside a group, a call after abort(), NCCL
//     refusing the call with ncclInvalidArgument / ncclInvalidUsage before it enqueued anything)
//     returns its status and leaves the communicator as it was. Neither this wrapper nor the
//     device collectives ever abort it: only the caller does.
//   - A failure after a call enqueued transfers (a device collective that returns an error part
//     way, an asynchronous error): the peers may wait for this rank. The caller must then do what
//     NCCL asks: poll async_error(), and end the communicator with abort() (ncclCommAbort, this
//     rank; the other ranks' watchdogs end theirs), then make a new one.
//   - A failure of an NCCL call is status::cuda_error with the ncclResult_t in
//     cuda::last_error().library (invalid_argument where NCCL refused a call for its arguments
//     before enqueueing it, peer_failed for ncclRemoteError). An asynchronous error, or a part of
//     a launched group NCCL refused, is never invalid_argument: cuda_error, its code kept.
//   - timed_out from a non-blocking communicator's enqueue (options::settle_seconds) leaves
//     NCCL's call in progress: every later call returns timed_out, and only abort() may follow.
//
// abort() may come from another thread (a watchdog): it is atomic and happens once for all
// copies. A call that is inside NCCL holds the wrapper's lock, and abort() waits for it to return:
// with a blocking communicator that is every call until NCCL returns, without a deadline. A call
// that polls lets the lock go between short steps, so abort() gets in and the polling call
// returns peer_failed; polls also end at their deadline (timed_out) and on an asynchronous error.
// The wrapper polls a non-blocking communicator's enqueue (ncclConfig_t::blocking = 0: use one
// for a watchdog that must end a call stuck in NCCL) and, with either kind, the checked mode's
// wait for its all-reduce. While one call polls, the wrapper's other calls from other threads
// wait for it (async_error() and abort() do not); that wait has no deadline of its own. An abort() while this thread holds a group open is
// carried out at group_end(), after ncclGroupEnd() has closed the thread's NCCL group (every
// ncclGroupStart is closed).
//
// A non-blocking communicator still initialising is awaited in the constructor, at most
// options::init_seconds; init_status() says how that went (size() is 0 and every call
// invalid_argument unless it is success).
//
// Checked mode (options::checked): NCCL needs the same count on both ends of a transfer, and a
// count that differs between ranks is its undefined case (in practice a hang). The device
// collectives call agree() first, which in checked mode runs one 16-byte ncclAllReduce of the
// call's signature (collective, count, element type, codec, options) on a stream of its own and
// waits for it, so a call that differs returns size_mismatch on every rank before any transfer
// is enqueued (send / recv: a 16-byte exchange with the peer). A signature that passed is cached
// per communicator (and peer) and not checked again, so the check costs one small all-reduce per
// kind of call, and calls of a cached signature may be captured in a graph (an uncached one is
// refused in a capture: invalid_argument). The cache is the same on every rank as long as their
// calls agree; a rank whose call differs from a signature that the others have cached is not
// caught (they skip the check): checked mode finds the first-day mistakes, not every later one.
class nccl {
 public:
  struct options {
    double init_seconds = 60;  // how long the constructor awaits a non-blocking communicator's init
    // a non-blocking call's enqueue, and the checked mode's wait for its agreement
    double settle_seconds = std::numeric_limits<double>::infinity();
    bool checked = false;      // agree() checks each new call signature with an all-reduce
  };

  // Reads the communicator's rank, size and device; a null or failing communicator leaves
  // size() == 0 and every call returns invalid_argument (init_status() says why).
  explicit nccl(ncclComm_t comm) : nccl(comm, options{}) {}
  nccl(ncclComm_t comm, const options& opt) : s_(std::make_shared<state>()) {
    state& s = *s_;
    s.comm = comm;
    s.opt = opt;
    if (comm == nullptr || !(opt.init_seconds >= 0) || !(opt.settle_seconds > 0)) {
      s.init = status::invalid_argument;
      return;
    }
    // a non-blocking communicator may still be initialising: await it, with a deadline
    const auto until = deadline(opt.init_seconds);
    ncclResult_t async = ncclSuccess;
    while (true) {
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) async = ncclInternalError;
      if (async != ncclInProgress) break;
      if (std::chrono::steady_clock::now() > until) {
        s.init = status::timed_out;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    int r = 0, n = 0, d = -1;
    if (async != ncclSuccess || ncclCommUserRank(comm, &r) != ncclSuccess || ncclCommCount(comm, &n) != ncclSuccess ||
        ncclCommCuDevice(comm, &d) != ncclSuccess) {
      s.init = result(async != ncclSuccess ? async : ncclInternalError, "transport::nccl: the communicator");
      return;
    }
    s.rank = r;
    s.size = n;
    s.device = d;
    s.init = status::success;
  }

  int rank() const { return s_->rank; }
  int size() const { return s_->size; }
  // The communicator's GPU (ncclCommCuDevice): cuda::make_pipeline makes its stream and events there.
  int device() const { return s_->device; }
  ncclComm_t comm() const { return s_->comm; }
  status init_status() const { return s_->init; }

  status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) {
    std::unique_lock<std::mutex> lock = enter();
    if (const status s = usable(peer, buf, bytes); s != status::success) return s;
    return settle(lock, ncclSend(buf, static_cast<size_t>(bytes), ncclUint8, peer, s_->comm, stream),
                  "transport::nccl: ncclSend");
  }
  status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) {
    std::unique_lock<std::mutex> lock = enter();
    if (const status s = usable(peer, buf, bytes); s != status::success) return s;
    return settle(lock, ncclRecv(buf, static_cast<size_t>(bytes), ncclUint8, peer, s_->comm, stream),
                  "transport::nccl: ncclRecv");
  }
  status group_start() {
    std::unique_lock<std::mutex> lock = enter();
    if (s_->aborted.load()) return status::peer_failed;
    if (s_->wedged) return status::timed_out;
    if (s_->size == 0 || s_->in_group) return status::invalid_argument;
    const ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return result(r, "transport::nccl: ncclGroupStart");
    s_->in_group = true;
    return status::success;
  }
  // Closes the group (ncclGroupEnd) whatever happened since group_start; an abort() that came
  // meanwhile is carried out after it, and the group's outcome is then peer_failed.
  status group_end() {
    std::unique_lock<std::mutex> lock = enter();
    if (!s_->in_group) return s_->aborted.load() ? status::peer_failed : status::invalid_argument;
    s_->in_group = false;
    // (wedged inside the group: NCCL takes no call before the one in progress is done, so the
    // group stays open in NCCL until abort(), which the caller must call)
    const status s = s_->wedged ? status::timed_out : settle(lock, ncclGroupEnd(), "transport::nccl: ncclGroupEnd");
    if (s_->abort_pending) {
      s_->abort_pending = false;
      (void)ncclCommAbort(s_->comm);
      return status::peer_failed;
    }
    return s;
  }
  // Waits only for a call of another thread that holds the wrapper's lock (NCCL allows one thread
  // at a time on a communicator) and for an abort() in progress; it gets in between the polls of a
  // call that polls.
  status async_error() {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    if (s_->aborted.load()) return status::peer_failed;
    if (s_->size == 0) return status::invalid_argument;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(s_->comm, &async) != ncclSuccess) return status::peer_failed;
    // ncclInProgress: a non-blocking communicator still working, not an error
    return async == ncclSuccess || async == ncclInProgress ? status::success
                                                           : result(async, "transport::nccl: asynchronous error");
  }
  // Ends the communicator (ncclCommAbort, which also frees it: do not destroy it again). Once,
  // for every copy; from any thread.
  void abort(status) {
    bool expected = false;
    if (s_->size == 0 || !s_->aborted.compare_exchange_strong(expected, true)) return;
    std::unique_lock<std::mutex> lock(s_->mutex);  // (a non-blocking call in settle sees the flag and returns)
    if (s_->in_group) {
      s_->abort_pending = true;  // group_end closes the thread's group first
      return;
    }
    (void)ncclCommAbort(s_->comm);
    lock.unlock();
    s_->idle.notify_all();  // (calls waiting for a poller see the flag)
  }
  bool aborted() const { return s_->aborted.load(); }

  // The checked mode's agreement (see above): success where the mode is off, the signature is
  // cached, or every rank (peer >= 0: the peer, whose signature must be ~signature) passed the
  // same one; size_mismatch where they differ; invalid_argument for an uncached signature while
  // `stream` is being captured; an NCCL or CUDA error as the other calls. Waits on the host for
  // the small all-reduce (only on a signature's first call), at most options::settle_seconds from
  // the enqueue to its completion (timed_out; the all-reduce is then still enqueued: the caller
  // must abort; a blocking communicator's enqueue itself has no deadline), and returns
  // peer_failed as soon as abort() is called meanwhile, or the communicator's asynchronous error
  // as soon as NCCL reports one.
  status agree(std::uint64_t signature, int peer, cudaStream_t stream) {
    state& s = *s_;
    std::unique_lock<std::mutex> lock = enter();
    if (!s.opt.checked) return status::success;
    if (s.aborted.load()) return status::peer_failed;
    if (s.wedged) return status::timed_out;
    if (s.size == 0 || peer >= s.size || s.in_group) return status::invalid_argument;
    const std::uint64_t key = signature ^ (peer < 0 ? 0 : (static_cast<std::uint64_t>(peer) + 1) * 0x9E3779B97F4A7C15ull);
    if (std::find(s.agreed.begin(), s.agreed.end(), key) != s.agreed.end()) return status::success;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
      return status::invalid_argument;
    if (const status m = check_buffers(); m != status::success) return m;
    const std::uint64_t mine[2] = {signature, ~signature};
    std::uint64_t got[2] = {0, 0};
    if (cudaMemcpyAsync(s.words, mine, sizeof mine, cudaMemcpyHostToDevice, s.stream) != cudaSuccess)
      return cuda::detail::fail(cudaGetLastError(), "transport::nccl: agree");
    const auto until = deadline(s.opt.settle_seconds);  // (enqueue and completion together)
    status e = status::success;
    if (peer < 0) {
      // max of the signature and of its complement: every rank sees {max, ~min}
      e = settle(lock, ncclAllReduce(s.words, s.words + 2, 2, ncclUint64, ncclMax, s.comm, s.stream),
                 "transport::nccl: agree (ncclAllReduce)", until);
    } else {
      if (const ncclResult_t g = ncclGroupStart(); g != ncclSuccess)
        return result(g, "transport::nccl: agree (ncclGroupStart)");
      const ncclResult_t a = ncclSend(s.words, 1, ncclUint64, peer, s.comm, s.stream);
      const ncclResult_t b = ncclRecv(s.words + 2, 1, ncclUint64, peer, s.comm, s.stream);
      e = settle(lock, ncclGroupEnd(), "transport::nccl: agree (ncclGroupEnd)", until);
      if (e == status::success && a != ncclSuccess) e = after_enqueue(result(a, "transport::nccl: agree (ncclSend)"));
      if (e == status::success && b != ncclSuccess) e = after_enqueue(result(b, "transport::nccl: agree (ncclRecv)"));
    }
    // the all-reduce waits for every rank on the device: poll for it with the lock let go, so that
    // an abort() from another thread gets in, then read the words back
    if (e == status::success) e = drain(lock, s.stream, until);
    if (e != status::success) return e;
    if (cudaMemcpyAsync(got, s.words + 2, sizeof got, cudaMemcpyDeviceToHost, s.stream) != cudaSuccess ||
        cudaStreamSynchronize(s.stream) != cudaSuccess)
      return cuda::detail::fail(cudaGetLastError(), "transport::nccl: agree");
    const bool same = peer < 0 ? got[0] == signature && ~got[1] == signature : got[0] == ~signature;
    if (!same) return status::size_mismatch;
    s.agreed.push_back(key);
    return status::success;
  }

 private:
  struct state {
    ncclComm_t comm = nullptr;
    options opt{};
    int rank = 0, size = 0, device = -1;
    status init = status::invalid_argument;
    std::mutex mutex;  // one call at a time on the communicator, abort() included
    std::condition_variable idle;  // signalled when a polling call is done (busy false)
    std::atomic<bool> aborted{false};
    bool in_group = false, abort_pending = false;
    bool busy = false;  // a call polls with the lock let go: the other calls wait for it
    bool wedged = false;  // an enqueue timed out while NCCL still ran it: only abort() may follow
    std::vector<std::uint64_t> agreed;  // the checked mode's signatures (with their peer)
    std::uint64_t* words = nullptr;     // 4 words of device memory on the communicator's GPU
    cudaStream_t stream = nullptr;      // the checked mode's own
    ~state() {
      if (words) (void)cudaFree(words);
      if (stream) (void)cudaStreamDestroy(stream);
    }
  };

  static std::chrono::steady_clock::time_point deadline(double seconds) {
    if (!(seconds < 1e9)) return std::chrono::steady_clock::time_point::max();
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
  // The lock for a call: taken once no other call is polling (or the wrapper was aborted, which
  // the call then reports).
  std::unique_lock<std::mutex> enter() {
    std::unique_lock<std::mutex> lock(s_->mutex);
    s_->idle.wait(lock, [&] { return !s_->busy || s_->aborted.load(); });
    return lock;
  }
  // Marks the wrapper busy while a call polls with its lock let go (clears it however the call
  // leaves; the lock is held again by then).
  class polling {
   public:
    explicit polling(state& s) : s_(s) { s_.busy = true; }
    ~polling() {
      s_.busy = false;
      s_.idle.notify_all();
    }
    polling(const polling&) = delete;
    polling& operator=(const polling&) = delete;

   private:
    state& s_;
  };
  // One step of a poll: the lock let go for a moment (an abort() gets in), then the verdict so far:
  // peer_failed once aborted (the communicator may be gone), the communicator's asynchronous
  // error, timed_out past `until`, success to poll on.
  status poll_step(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point until,
                   ncclResult_t* async, const char* step) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
    // (abort() sets the flag before it takes the lock: seen here, the communicator may be gone)
    if (s_->aborted.load()) return status::peer_failed;
    if (ncclCommGetAsyncError(s_->comm, async) != ncclSuccess) *async = ncclInternalError;
    if (*async != ncclSuccess && *async != ncclInProgress) return after_enqueue(result(*async, step));
    if (std::chrono::steady_clock::now() > until) return status::timed_out;
    return status::success;
  }
  // The checked mode's words and stream, made on the communicator's GPU at its first use.
  status check_buffers() {
    state& s = *s_;
    if (s.words != nullptr) return status::success;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) return cuda::detail::fail(cudaGetLastError(), "transport::nccl: agree");
    status e = status::success;
    if (prev != s.device && cudaSetDevice(s.device) != cudaSuccess) e = status::cuda_error;
    if (e == status::success && cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
      s.stream = nullptr;
      e = status::cuda_error;
    }
    void* p = nullptr;
    if (e == status::success && cudaMalloc(&p, 4 * sizeof(std::uint64_t)) != cudaSuccess) e = status::cuda_error;
    s.words = static_cast<std::uint64_t*>(p);
    if (prev != s.device) (void)cudaSetDevice(prev);
    return e == status::success ? e : cuda::detail::fail(cudaGetLastError(), "transport::nccl: agree");
  }
  status usable(int peer, const void* buf, std::uint64_t bytes) const {
    if (s_->aborted.load()) return status::peer_failed;
    if (s_->wedged) return status::timed_out;
    if (s_->size == 0 || peer < 0 || peer >= s_->size || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    if (peer == s_->rank && !s_->in_group) return status::invalid_argument;  // would wait for its own receive
    return status::success;
  }
  // A non-blocking communicator answers ncclInProgress while it enqueues; NCCL wants it polled
  // until the enqueue is done before the next call (this waits for the enqueue, not the GPU).
  // Gives up at `until` (timed_out; by default the settle deadline) or once abort() is called
  // (peer_failed).
  status settle(std::unique_lock<std::mutex>& lock, ncclResult_t r, const char* step) {
    return settle(lock, r, step, deadline(s_->opt.settle_seconds));
  }
  status settle(std::unique_lock<std::mutex>& lock, ncclResult_t r, const char* step,
                std::chrono::steady_clock::time_point until) {
    if (r != ncclInProgress) return result(r, step);
    const polling mark(*s_);
    while (r == ncclInProgress)
      if (const status e = poll_step(lock, until, &r, step); e != status::success) {
        if (e == status::timed_out) s_->wedged = true;  // (NCCL's call is still in progress)
        return e;
      }
    return result(r, step);
  }
  // Waits for the checked mode's stream, polling with the lock let go between polls; gives up at
  // `until` (timed_out), once abort() is called (peer_failed) or on the communicator's
  // asynchronous error (a peer that failed: the all-reduce would never end).
  status drain(std::unique_lock<std::mutex>& lock, cudaStream_t stream, std::chrono::steady_clock::time_point until) {
    const polling mark(*s_);
    ncclResult_t async = ncclSuccess;
    while (true) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return status::success;
      if (q != cudaErrorNotReady) return cuda::detail::fail(q, "transport::nccl: agree (cudaStreamQuery)");
      if (const status e = poll_step(lock, until, &async, "transport::nccl: agree (asynchronous error)");
          e != status::success)
        return e;
    }
  }
  // An error of a call that NCCL had accepted (an asynchronous error, a part of a launched group):
  // never invalid_argument, which promises that nothing was enqueued.
  static status after_enqueue(status s) { return s == status::invalid_argument ? status::cuda_error : s; }
  static status result(ncclResult_t r, const char* step) {
    if (r == ncclSuccess || r == ncclInProgress) return status::success;
    (void)cuda::detail::fail_library(static_cast<int>(r), step);
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) return status::invalid_argument;
    if (r == ncclRemoteError) return status::peer_failed;
    return status::cuda_error;
  }

  std::shared_ptr<state> s_;
};

static_assert(is_device_transport_v<nccl>, "transport::nccl must model the device transport");

}  // namespace zipccl::transport
