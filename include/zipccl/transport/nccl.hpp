// zipccl: transport::nccl, the device transport (device.hpp) over a user's NCCL communicator.
//
//   ncclComm_t comm = ...;                       // the user's, set up as usual
//   zipccl::transport::nccl t(comm);
//   zipccl::cuda::all_reduce<codec, strategy::always>(grad, grad, n, op::sum, t, stream, ...);
//
// Not part of the umbrella header: only code that includes this header needs NCCL's headers and
// links libnccl. The wrapper owns nothing: the communicator stays the user's, except that abort()
// calls ncclCommAbort, which ends (and frees) it on this rank, as NCCL's own error handling does;
// the user then must not destroy it again, and later calls on the wrapper return peer_failed.
//
// Use one thread per communicator (or one process per GPU), and never call a zipccl collective
// inside your own ncclGroupStart / ncclGroupEnd: a collective enqueues its kernels between its
// transfers, and an enclosing group would hold the transfers back until the group ends, after
// the kernels that need their data (examples/nccl_all_reduce.cu).
//
// Byte ranges travel as ncclUint8. NCCL needs the same count on both ends of a transfer: every
// message size of the device collectives follows from the counts, and the ranks check their calls
// first, but NCCL offers no way for a kernel to end the communicator, so calls whose counts differ
// are reported (size_mismatch in the status word) only after transfers that may never complete:
// as with NCCL itself, an application that cannot rule this out runs a watchdog on every rank
// (async_error(), a timeout, then abort()). abort() ends this rank's communicator only; NCCL
// reaches no peer. Non-blocking communicators are polled until each enqueue is done. A failure of an NCCL call is status::cuda_error with the
// ncclResult_t in cuda::last_error().library (invalid_argument for NCCL's argument errors,
// peer_failed for ncclRemoteError).
#pragma once

#include <nccl.h>

#include <cstdint>

#include "../cuda/runtime.cuh"
#include "../error.hpp"
#include "device.hpp"

namespace zipccl::transport {

class nccl {
 public:
  // Reads the communicator's rank and size; a null or failing communicator leaves size() == 0
  // and every call returns invalid_argument.
  explicit nccl(ncclComm_t comm) : comm_(comm) {
    int r = 0, n = 0;
    if (comm != nullptr && ncclCommUserRank(comm, &r) == ncclSuccess && ncclCommCount(comm, &n) == ncclSuccess) {
      rank_ = r;
      size_ = n;
    }
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  ncclComm_t comm() const { return comm_; }

  status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) {
    if (const status s = usable(peer, buf, bytes); s != status::success) return s;
    return result(settle(ncclSend(buf, static_cast<size_t>(bytes), ncclUint8, peer, comm_, stream)),
                  "transport::nccl: ncclSend");
  }
  status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) {
    if (const status s = usable(peer, buf, bytes); s != status::success) return s;
    return result(settle(ncclRecv(buf, static_cast<size_t>(bytes), ncclUint8, peer, comm_, stream)),
                  "transport::nccl: ncclRecv");
  }
  status group_start() {
    if (aborted_ || size_ == 0) return aborted_ ? status::peer_failed : status::invalid_argument;
    return result(ncclGroupStart(), "transport::nccl: ncclGroupStart");
  }
  status group_end() {
    if (aborted_ || size_ == 0) return aborted_ ? status::peer_failed : status::invalid_argument;
    return result(settle(ncclGroupEnd()), "transport::nccl: ncclGroupEnd");
  }
  status async_error() {
    if (aborted_) return status::peer_failed;
    if (size_ == 0) return status::invalid_argument;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) return status::peer_failed;
    // ncclInProgress: a non-blocking communicator still working, not an error
    return async == ncclSuccess || async == ncclInProgress ? status::success
                                                           : result(async, "transport::nccl: asynchronous error");
  }
  void abort(status) {
    if (aborted_ || comm_ == nullptr) return;
    aborted_ = true;
    (void)ncclCommAbort(comm_);
  }

 private:
  status usable(int peer, const void* buf, std::uint64_t bytes) const {
    if (aborted_) return status::peer_failed;
    if (size_ == 0 || peer < 0 || peer >= size_ || (buf == nullptr && bytes != 0)) return status::invalid_argument;
    return status::success;
  }
  // A non-blocking communicator answers ncclInProgress while it enqueues; NCCL wants it polled
  // until the enqueue is done before the next call (this waits for the enqueue, not the GPU).
  ncclResult_t settle(ncclResult_t r) const {
    while (r == ncclInProgress)
      if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) return ncclInternalError;
    return r;
  }
  static status result(ncclResult_t r, const char* step) {
    if (r == ncclSuccess || r == ncclInProgress) return status::success;
    (void)cuda::detail::fail_library(static_cast<int>(r), step);
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) return status::invalid_argument;
    if (r == ncclRemoteError) return status::peer_failed;
    return status::cuda_error;
  }

  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 0;
  bool aborted_ = false;
};

static_assert(is_device_transport_v<nccl>, "transport::nccl must model the device transport");

}  // namespace zipccl::transport
