// zipccl: transport::cuda_local, N ranks as N streams of one process: the device collectives'
// test bed and a simulator of a cluster on one GPU (NCCL refuses two ranks on one GPU).
//
//   zipccl::transport::cuda_local_world world(8, {25e9, 5e-6});   // 8 ranks, 25 GB/s, 5 us links
//   // rank r's thread (or one thread for all ranks, with group calls in each rank's order):
//   auto& t = world.rank(r);
//   zipccl::cuda::all_gather<codec, strategy::always>(send, recv, count, t, stream_r, ...);
//
// Ranks live on one GPU, or spread over several (`devices`; peer access is enabled between them).
// Every ordered pair of ranks is a link with a ring of message slots in device memory. A send
// enqueues a kernel that posts its buffer's address and size in the next slot; the matching
// receive enqueues a one-block kernel that waits until the slot is posted, a copy kernel on the
// receiver's device that reads the sender's buffer (device to device, through peer access across
// GPUs), and a one-block kernel that holds the transfer for as long as the link model says
// (latency + bytes / bandwidth after the later of its posting and the link's previous transfer)
// and then marks the slot taken; the send's stream waits for that mark. Matching needs no host
// synchronisation and no event shared between streams, so each rank's work can be captured in a
// graph of its own and replayed (the slots return to their empty state after each message).
//
// Waits spin in one block of 32 threads each, polling with __nanosleep; they also watch the
// world's abort word (mapped host memory), so abort() from any rank (or a size mismatch found by
// a receive) ends every pending and later wait: nothing new moves after that (a copy already
// under way finishes, and its sender waits for it, so no buffer is read after its owner moved
// on), async_error() reports the error on every rank, and the world is spent until reset().
//
// Forward progress: a wait spins until a kernel of another stream (or the host's abort) releases
// it, so the ranks' kernels must run side by side, which CUDA allows but does not promise. Two
// things that serialise them: a shared hardware queue (the runtime's mapping of streams to queues
// is undocumented: the world creates its streams so that they should get queues of their own,
// then checks that they run side by side, and throws timed_out, not a later stall, where they do
// not; run_together() checks streams of the caller's the same way) and a kernel's lazy
// load, which may wait for the whole context (the world loads its own kernels when it is made;
// kernels that the caller launches between transport calls, e.g. the codecs', still load on
// their first launch and may wait the same way: to be safe, set CUDA_MODULE_LOADING=EAGER before
// the first CUDA call, as the gpu tests do). A world that stalls anyway can be inspected with
// pending_slots() (which messages are posted, taken, copied) and ended with abort().
//
// Streams: each rank's calls go to a non-blocking stream (world.stream(r), or the caller's own;
// the legacy default stream and blocking streams are refused, as a device-synchronising host
// call would then wait for a rank that waits for a rank not yet enqueued). A receive blocked at
// the head of a hardware queue holds back whatever is queued behind it, its sender's post
// included, so the ranks of one GPU need a hardware queue each: the world refuses more ranks per
// GPU than CUDA_DEVICE_MAX_CONNECTIONS (8 unless set, up to 32, before the first CUDA call), and
// creates its rank streams one after another so that they get distinct queues (and checks it).
// A caller's own streams: check them with run_together() first, or use the world's. Pipelined calls
// (cuda/pipeline.cuh) run a rank's transfers on a second stream: the world creates those right
// after the rank streams when every GPU has 2 queues per rank and they pass the same check
// (transfer_stream(r); else nullptr, and the collectives refuse pipelined lanes on this
// transport); make_pipeline(rank) uses it, and
// the pipelined collectives refuse a caller's stream the rules above refuse (accepts_stream).
// Groups: between group_start() and
// group_end() a rank's sends are posted first, then its receives, then its sends wait, so ring
// steps (send to r + 1, receive from r - 1) cannot deadlock. Outside a group a send is posted and
// waits at once.
//
// Limits: a group holds at most `max_group_ops` operations and at most `slots` sends to one peer;
// rank(r) is used by one host thread at a time; the world must outlive the work enqueued on it
// (destroy it once every rank's stream is synchronised). As with NCCL, a rank's send to itself
// must share a group with the matching receive (alone it is invalid_argument). Messages are
// matched by host-side counters that advance when a call is enqueued (or captured): every rank
// must enqueue, capture and replay its calls alike, on streams ordered as its calls are. The link
// model runs a group's receives one after another and compares timers of the sender's and the
// receiver's GPU: a simulation, not a network. Across GPUs, buffers from cudaMallocAsync pools
// need cudaMemPoolSetAccess for the peers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "../cuda/detail/wait_streams.cuh"
#include "../cuda/runtime.cuh"
#include "../error.hpp"
#include "device.hpp"
#include "local.hpp"

namespace zipccl::transport {

namespace cuda_local_detail {

// One message slot of a link, in device memory (of the first rank's GPU; peers reach it through
// peer access). `state` moves 0 idle -> 1 posted -> 2 taken (the copy is running) -> 3 copied ->
// 0 (the sender's wait), or 1 -> 4 withdrawn (the world ended before a receiver took it), always
// by system-scope atomics, so that a sender never goes on while a receiver still reads its buffer.
struct alignas(64) mailbox {
  unsigned long long ptr;      // the sender's buffer
  unsigned long long bytes;    // its size
  unsigned long long sent_ns;  // when the sender's stream reached the send (global timer)
  unsigned int state;
  unsigned int live;           // the receive's own: 1 when its take succeeded (copy and finish)
};
enum : unsigned int { slot_idle = 0, slot_posted = 1, slot_taken = 2, slot_copied = 3, slot_withdrawn = 4 };

struct alignas(64) link_clock {
  unsigned long long busy_until_ns;  // the link's previous transfer ends here
};

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned int load_state(mailbox* mb) {
  return atomicAdd_system(&mb->state, 0u);
}
// The world's end, set by the host (abort) or a kernel: the first code written stays, up to a
// race between two writers that both end it (either code is then reported).
__device__ __forceinline__ void end_world(int* abort, status why) {
  volatile int* a = abort;
  if (*a == 0) *a = static_cast<int>(why);
  __threadfence_system();
}

template <class = void>
__global__ void post_kernel(mailbox* mb, const void* buf, unsigned long long bytes) {
  if (threadIdx.x != 0) return;
  volatile mailbox* v = mb;
  v->ptr = reinterpret_cast<unsigned long long>(buf);
  v->bytes = bytes;
  v->sent_ns = now_ns();
  __threadfence_system();
  atomicExch_system(&mb->state, static_cast<unsigned int>(slot_posted));
}

// The receive's first step: waits for the slot and takes it (unless the world ends first); a
// size that differs ends the world, and nothing is copied.
template <class = void>
__global__ void take_kernel(mailbox* mb, unsigned long long bytes, int* abort) {
  if (threadIdx.x != 0) return;
  const volatile int* ab = abort;
  volatile mailbox* v = mb;
  v->live = 0u;
  while (true) {
    if (*ab != 0) return;  // the world ended: give up (a sender withdraws its slot)
    if (load_state(mb) == slot_posted) break;
    __nanosleep(200);
  }
  if (atomicCAS_system(&mb->state, static_cast<unsigned int>(slot_posted), static_cast<unsigned int>(slot_taken)) !=
      slot_posted)
    return;  // withdrawn by its sender meanwhile
  __threadfence_system();
  if (v->bytes != bytes) end_world(abort, status::size_mismatch);
  v->live = v->bytes == bytes ? 1u : 2u;  // 2: taken, nothing to copy
  __threadfence_system();
}

// The copy, when the take succeeded: the sender waits for it even after the world ends.
template <class = void>
__global__ void copy_kernel(const mailbox* mb, void* dst, unsigned long long bytes) {
  __shared__ unsigned long long from;  // one read of the slot per block, not per thread
  __shared__ unsigned int live;
  if (threadIdx.x == 0) {
    live = static_cast<const volatile mailbox*>(mb)->live;
    from = static_cast<const volatile mailbox*>(mb)->ptr;
  }
  __syncthreads();
  if (live != 1u) return;
  const auto* src = reinterpret_cast<const unsigned char*>(from);
  auto* out = static_cast<unsigned char*>(dst);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(out)) & 15u) == 0) {
    const unsigned long long vecs = bytes / 16;
    for (unsigned long long i = first; i < vecs; i += stride)
      reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(src)[i];
    for (unsigned long long i = vecs * 16 + first; i < bytes; i += stride) out[i] = src[i];
  } else {
    for (unsigned long long i = first; i < bytes; i += stride) out[i] = src[i];
  }
}

// The receive's last step: holds the transfer for the link's time (not once the world has
// ended), then releases the sender.
template <class = void>
__global__ void finish_kernel(mailbox* mb, link_clock* clock, unsigned long long bytes, double bytes_per_ns,
                              double latency_ns, const int* abort) {
  if (threadIdx.x != 0) return;
  volatile mailbox* v = mb;
  if (v->live == 0u) return;  // never taken
  const volatile int* ab = abort;
  if (*ab == 0 && (bytes_per_ns > 0 || latency_ns > 0)) {
    volatile link_clock* c = clock;
    const unsigned long long start = v->sent_ns > c->busy_until_ns ? v->sent_ns : c->busy_until_ns;
    const unsigned long long end =
        start + static_cast<unsigned long long>(latency_ns + (bytes_per_ns > 0 ? bytes / bytes_per_ns : 0.0));
    c->busy_until_ns = end;
    while (now_ns() < end && *ab == 0) __nanosleep(500);
  }
  __threadfence_system();
  atomicExch_system(&mb->state, static_cast<unsigned int>(slot_copied));
}

// The send's last step: waits until its receiver has copied the slot; once the world has ended,
// withdraws a slot no receiver has taken (a taken one is still waited for: its copy runs).
template <class = void>
__global__ void wait_kernel(mailbox* mb, const int* abort) {
  if (threadIdx.x != 0) return;
  const volatile int* ab = abort;
  while (true) {
    const unsigned int st = load_state(mb);
    if (st == slot_copied) {
      atomicExch_system(&mb->state, static_cast<unsigned int>(slot_idle));
      return;
    }
    if (*ab != 0 && st == slot_posted &&
        atomicCAS_system(&mb->state, static_cast<unsigned int>(slot_posted), static_cast<unsigned int>(slot_withdrawn)) ==
            slot_posted)
      return;
    __nanosleep(200);
  }
}

// cuda_local_world::run_together's kernels. Each stream gets together_kernel, which arrives and
// spins until `target` kernels have arrived, then after_kernel, which waits for it. Where two of
// the streams share a hardware queue, the first one's after_kernel waits at the head of that queue
// for its spinning kernel, which waits for the other stream's, queued behind it: the spin runs out
// of time, marks this probe (`gen`) failed for every kernel of it, and says so in *report (mapped
// host memory). Streams with queues of their own all arrive within microseconds.
template <class = void>
__global__ void together_kernel(unsigned int* words, unsigned int target, unsigned int gen,
                                unsigned long long timeout_ns, int* report) {
  if (threadIdx.x != 0) return;
  atomicAdd_system(&words[0], 1u);  // words[0]: arrivals, over every probe since the last clear
  const unsigned long long t0 = now_ns();
  while (atomicAdd_system(&words[0], 0u) - target > 0x7FFFFFFFu) {  // (arrivals < target, mod 2^32)
    if (atomicAdd_system(&words[1], 0u) == gen) return;  // words[1]: the last probe that failed
    if (now_ns() - t0 > timeout_ns) {
      atomicExch_system(&words[1], gen);
      *static_cast<volatile int*>(report) = static_cast<int>(gen);
      __threadfence_system();
      return;
    }
    __nanosleep(1000);
  }
}
template <class = void>
__global__ void after_kernel() {}

// Loads the transport's kernels on the current device (cudaFuncGetAttributes loads a kernel that
// lazy loading has not loaded yet).
inline cudaError_t preload() {
  cudaFuncAttributes a{};
  cudaError_t e = cudaFuncGetAttributes(&a, post_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, take_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, copy_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, finish_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, wait_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, together_kernel<>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&a, after_kernel<>);
  return e;
}

// Makes `device` current for its lifetime, then restores the caller's device.
class device_scope {
 public:
  explicit device_scope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) error_ = cudaSetDevice(device);
    ok_ = error_ == cudaSuccess;
  }
  ~device_scope() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  bool ok() const { return ok_; }
  cudaError_t error() const { return error_; }  // cudaSetDevice's, where it failed

 private:
  int previous_ = -1;
  bool ok_ = false;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace cuda_local_detail

class cuda_local_world;

// One rank's handle on a cuda_local_world; a model of the device transport concept (device.hpp).
class cuda_local_transport {
 public:
  int rank() const { return rank_; }
  inline int size() const;
  inline status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream);
  inline status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream);
  inline status group_start();
  inline status group_end();
  inline status async_error();
  inline void abort(status why);
  // Optional member of the concept: a device-visible word that a kernel sets (when it is 0)
  // to a status code to end the world from the device; the device collectives do so when the
  // ranks' calls differ, so that no rank waits for a message that will never come.
  inline int* device_error_word();
  // Optional members of the concept for pipelined calls: the world's transfer stream for this
  // rank (nullptr: too few hardware queues, pipelined calls are refused), and whether a stream
  // may carry this rank's work (non-blocking, not the legacy or per-thread default stream).
  inline cudaStream_t transfer_stream() const;
  inline bool accepts_stream(cudaStream_t stream) const;
  int device() const { return device_; }

 private:
  friend class cuda_local_world;
  struct op {
    bool send;
    int peer;
    void* buf;
    std::uint64_t bytes;
    cudaStream_t stream;
    cuda_local_detail::mailbox* slot;
  };
  cuda_local_transport(cuda_local_world& w, int rank, int device, std::size_t max_group_ops)
      : world_(&w), rank_(rank), device_(device) {
    group_.reserve(max_group_ops);
  }
  inline status check(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) const;
  inline status enqueue(const op& o);
  inline status post(const op& o);
  inline status take(const op& o);
  inline status wait(const op& o);

  cuda_local_world* world_;
  int rank_, device_;
  std::vector<std::uint64_t> sent_, received_;  // messages so far, per peer
  std::vector<op> group_;
  bool in_group_ = false;
};

class cuda_local_world {
 public:
  struct options {
    link_model link{};                 // per link: 0 bytes_per_second = unlimited
    std::vector<int> devices{};        // rank r runs on devices[r % devices.size()]; empty: current
    std::uint32_t slots = 256;         // message slots per link
    std::size_t max_group_ops = 4096;  // operations in one group, per rank
  };

  explicit cuda_local_world(int ranks, link_model link = {}) : cuda_local_world(ranks, options{link}) {}
  // Throws zipccl::error when the world cannot be set up: invalid_argument, cuda_error, or
  // timed_out where its rank streams do not run side by side (see run_together).
  cuda_local_world(int ranks, const options& opt) : n_(ranks), slots_(opt.slots), link_(opt.link) {
    if (ranks < 1 || opt.slots < 1 || opt.max_group_ops < 1)
      throw error(status::invalid_argument, "cuda_local_world: ranks, slots and max_group_ops must be >= 1");
    std::vector<int> devices = opt.devices;
    if (devices.empty()) {
      int d = 0;
      if (cudaGetDevice(&d) != cudaSuccess) throw error(status::cuda_error, "cuda_local_world: no CUDA device");
      devices.push_back(d);
    }
    // peer access between the devices that hold ranks
    for (std::size_t a = 0; a < devices.size(); ++a)
      for (std::size_t b = 0; b < devices.size(); ++b) {
        if (devices[a] == devices[b]) continue;
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, devices[a], devices[b]) != cudaSuccess || !can)
          throw error(status::invalid_argument, "cuda_local_world: devices without peer access");
        const cuda_local_detail::device_scope on(devices[a]);
        const cudaError_t e = cudaDeviceEnablePeerAccess(devices[b], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else if (e != cudaSuccess) throw error(status::cuda_error, "cuda_local_world: cudaDeviceEnablePeerAccess");
      }
    // Spin-waiting kernels on the rank streams must not share a hardware queue: a receive
    // blocked at the head of a queue holds back its sender's post behind it. The runtime spreads
    // streams over CUDA_DEVICE_MAX_CONNECTIONS queues (8 unless set before the CUDA context is
    // created; 32 at most) in creation order, and the world creates its ranks' streams one after
    // another, so up to that many ranks per GPU get a queue each.
    const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const int asked = env ? std::atoi(env) : 0;
    const int queues = asked <= 0 ? 8 : asked > 32 ? 32 : asked;  // (CUDA gives at most 32)
    bool pipelinable = true;  // a second queue per rank for its transfers (cuda/pipeline.cuh)
    for (int d : devices) {
      int on_d = 0;
      for (int r = 0; r < ranks; ++r) on_d += devices[static_cast<std::size_t>(r) % devices.size()] == d ? 1 : 0;
      pipelinable = pipelinable && 2 * on_d <= queues;
      if (on_d > queues)
        throw error(status::invalid_argument,
                    "cuda_local_world: more ranks on one GPU than hardware queues; set CUDA_DEVICE_MAX_CONNECTIONS "
                    "(up to 32) before the first CUDA call, or spread the ranks over more GPUs");
    }
    const std::size_t links = static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks);
    bytes_ = links * sizeof(cuda_local_detail::link_clock) + links * opt.slots * sizeof(cuda_local_detail::mailbox) +
             64;  // (and run_together's two words)
    home_ = devices.front();
    {
      const cuda_local_detail::device_scope on(home_);
      void* p = nullptr;
      if (!on.ok() || cudaMalloc(&p, bytes_) != cudaSuccess)
        throw error(status::cuda_error, "cuda_local_world: cudaMalloc of the mailboxes");
      base_ = static_cast<unsigned char*>(p);
      void* h = nullptr;
      if (cudaHostAlloc(&h, 64, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaFree(base_);
        throw error(status::cuda_error, "cuda_local_world: cudaHostAlloc of the abort word");
      }
      std::memset(h, 0, 64);
      abort_ = static_cast<int*>(h);
    }
    clocks_ = reinterpret_cast<cuda_local_detail::link_clock*>(base_);
    boxes_ = reinterpret_cast<cuda_local_detail::mailbox*>(base_ + links * sizeof(cuda_local_detail::link_clock));
    probe_ = reinterpret_cast<unsigned int*>(base_ + bytes_ - 64);
    if (clear() != status::success) {
      release();
      throw error(status::cuda_error, "cuda_local_world: clearing the mailboxes");
    }
    for (int r = 0; r < ranks; ++r) {
      const int dev = devices[static_cast<std::size_t>(r) % devices.size()];
      ranks_.emplace_back(new cuda_local_transport(*this, r, dev, opt.max_group_ops));
      ranks_.back()->sent_.assign(static_cast<std::size_t>(ranks), 0);
      ranks_.back()->received_.assign(static_cast<std::size_t>(ranks), 0);
      const cuda_local_detail::device_scope on(dev);
      cudaStream_t st = nullptr;
      if (!on.ok() || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
        release();
        throw error(status::cuda_error, "cuda_local_world: cudaStreamCreateWithFlags");
      }
      streams_.push_back(st);
    }
    // the ranks' transfer streams, right after their rank streams: queues of their own
    for (int r = 0; r < ranks && pipelinable; ++r) {
      const cuda_local_detail::device_scope on(devices[static_cast<std::size_t>(r) % devices.size()]);
      cudaStream_t st = nullptr;
      if (!on.ok() || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
        release();
        throw error(status::cuda_error, "cuda_local_world: cudaStreamCreateWithFlags");
      }
      transfer_streams_.push_back(st);
    }
    // pending_slots()'s stream and pinned copy of the mailboxes, made now: a page-locked
    // allocation can wait for the device, which is what a stalled world's diagnosis cannot do.
    // (Created after the ranks' streams, the stream gets a queue of its own unless they took all.)
    {
      const cuda_local_detail::device_scope on(home_);
      void* h = nullptr;
      if (!on.ok() || cudaStreamCreateWithFlags(&diag_stream_, cudaStreamNonBlocking) != cudaSuccess) {
        diag_stream_ = nullptr;
        release();
        throw error(status::cuda_error, "cuda_local_world: cudaStreamCreateWithFlags");
      }
      if (cudaHostAlloc(&h, links * opt.slots * sizeof(cuda_local_detail::mailbox), cudaHostAllocDefault) !=
          cudaSuccess) {
        release();
        throw error(status::cuda_error, "cuda_local_world: cudaHostAlloc of the mailboxes' copy");
      }
      diag_ = static_cast<cuda_local_detail::mailbox*>(h);
    }
    // Under lazy loading (CUDA's default since 12.2) a kernel's first launch loads it, and a load
    // may wait for the whole context, spinning waits included: a rank's first post would then wait
    // for a receive that waits for that post. Load the world's kernels on each GPU now.
    for (int d : devices) {
      const cuda_local_detail::device_scope on(d);
      if (!on.ok() || cuda_local_detail::preload() != cudaSuccess) {
        release();
        throw error(status::cuda_error, "cuda_local_world: loading the transport's kernels");
      }
    }
    // The waits spin until a kernel of another stream releases them, so no two of the ranks'
    // streams may share a hardware queue, and CUDA does not say how it maps streams to queues:
    // check that they run side by side. Where the transfer streams are what breaks it, the world
    // goes on without them (pipelined calls are then refused); where the rank streams are, it
    // cannot work, and says so now instead of stalling in a later call.
    std::vector<std::pair<cudaStream_t, int>> ranked, all;
    for (int r = 0; r < ranks; ++r)
      ranked.emplace_back(streams_[static_cast<std::size_t>(r)], devices[static_cast<std::size_t>(r) % devices.size()]);
    all = ranked;
    for (std::size_t r = 0; r < transfer_streams_.size(); ++r)
      all.emplace_back(transfer_streams_[r], devices[r % devices.size()]);
    status together = probe(all, probe_seconds);
    if (together == status::timed_out) together = probe(all, probe_seconds);  // (once more: a passing hiccup)
    if (together == status::timed_out && !transfer_streams_.empty()) {
      for (cudaStream_t st : transfer_streams_) (void)cudaStreamDestroy(st);
      transfer_streams_.clear();
      together = probe(ranked, probe_seconds);
    }
    if (together != status::success) {
      release();
      throw error(together, together == status::timed_out
                                ? "cuda_local_world: the ranks' streams do not run side by side (two share a hardware "
                                  "queue, it seems, or CUDA_LAUNCH_BLOCKING is set): set CUDA_DEVICE_MAX_CONNECTIONS (up "
                                  "to 32) before the first CUDA call, or put fewer ranks on a GPU"
                                : "cuda_local_world: checking that the ranks' streams run side by side");
    }
  }
  cuda_local_world(const cuda_local_world&) = delete;
  cuda_local_world& operator=(const cuda_local_world&) = delete;
  // Ends the world first, so that a wait still pending (a caller that gave up on a hung stream)
  // returns instead of holding the frees below.
  ~cuda_local_world() {
    abort(status::peer_failed);
    release();
  }

  int size() const { return n_; }
  cuda_local_transport& rank(int r) { return *ranks_.at(static_cast<std::size_t>(r)); }
  // Rank r's stream, created by the world (non-blocking, on the rank's GPU, checked to run side by
  // side with the other ranks'): use it for rank r's calls, or a stream of your own that
  // run_together() has passed with the other ranks' streams.
  cudaStream_t stream(int r) const { return streams_.at(static_cast<std::size_t>(r)); }
  // Rank r's transfer stream for pipelined calls (cuda/pipeline.cuh), created by the world right
  // after the rank streams so that it has a hardware queue of its own; nullptr when the GPU has
  // fewer than 2 queues per rank (CUDA_DEVICE_MAX_CONNECTIONS), and pipelined calls are refused.
  cudaStream_t transfer_stream(int r) const {
    return transfer_streams_.empty() ? nullptr : transfer_streams_.at(static_cast<std::size_t>(r));
  }
  const link_model& link() const { return link_; }

  // For the diagnosis of a world that stalls: every message slot that is not idle (src -> dst,
  // its index on the link, state: 1 posted, 2 taken, 3 copied, 4 withdrawn; bytes as posted),
  // read on a stream of the world's own while the ranks' work may still wait: a snapshot, not
  // atomic across slots. cuda_error when the read fails or does not end within
  // `timeout_seconds` (where the ranks' streams take every hardware queue, the read shares one
  // and may wait behind a stalled rank), its cause in cuda::last_error() (cudaErrorNotReady for
  // a read that did not end); an infinite timeout waits for the read however long it takes, a
  // NaN one is invalid_argument. One host thread at a time.
  struct slot_view {
    int src, dst;
    std::uint32_t index;
    unsigned int state;
    std::uint64_t bytes;
  };
  status pending_slots(std::vector<slot_view>& out, double timeout_seconds = 2.0) {
    out.clear();
    if (std::isnan(timeout_seconds)) return status::invalid_argument;
    const cuda_local_detail::device_scope on(home_);
    const std::size_t boxes = static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_) * slots_;
    if (!on.ok()) return cuda::detail::fail(on.error(), "cuda_local: pending_slots: switching to the world's GPU");
    if (cuda::detail::check(cudaMemcpyAsync(diag_, boxes_, boxes * sizeof(cuda_local_detail::mailbox),
                                            cudaMemcpyDeviceToHost, diag_stream_),
                            "cuda_local: pending_slots") != status::success)
      return status::cuda_error;
    // (a deadline in double seconds, which may be infinite)
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    const cudaStream_t read[] = {diag_stream_};
    const status waited =
        cuda::detail::wait_streams(read, until, std::chrono::microseconds(0), "cuda_local: pending_slots");
    if (waited == status::timed_out)
      return cuda::detail::fail(cudaErrorNotReady, "cuda_local: pending_slots: the read did not end in time");
    if (waited != status::success) return waited;
    for (std::size_t i = 0; i < boxes; ++i)
      if (diag_[i].state != cuda_local_detail::slot_idle)
        out.push_back(slot_view{static_cast<int>(i / slots_ / static_cast<std::size_t>(n_)),
                                static_cast<int>(i / slots_ % static_cast<std::size_t>(n_)),
                                static_cast<std::uint32_t>(i % slots_), diag_[i].state, diag_[i].bytes});
    return status::success;
  }

  // Whether `streams` (idle, on `device`: one of the world's GPUs, the first rank's unless given)
  // run side by side: a kernel on each waits until all of them have started. timed_out where they
  // do not within `timeout_seconds` (two of them share a hardware queue, a stream is listed twice,
  // one is still busy with earlier work, or CUDA_LAUNCH_BLOCKING is set), cuda_error where a
  // launch fails, invalid_argument for a device the world does not use or a timeout outside
  // (0, 3600]. The world checks its own streams so when it is made; use this for streams of your
  // own before giving them to the ranks. Waits for the streams (and at most timeout_seconds + 10 s);
  // one host thread at a time, and not beside reset().
  status run_together(const std::vector<cudaStream_t>& streams, double timeout_seconds = probe_seconds,
                      int device = -1) {
    if (device >= 0) {
      bool ours = false;
      for (const auto& t : ranks_) ours = ours || t->device() == device;
      if (!ours) return status::invalid_argument;
    }
    std::vector<std::pair<cudaStream_t, int>> on;
    for (cudaStream_t st : streams) on.emplace_back(st, device < 0 ? home_ : device);
    return probe(on, timeout_seconds);
  }

  // success, or the error that ended the world (any rank's abort, a mismatched size).
  status error_state() const { return static_cast<status>(*static_cast<const volatile int*>(abort_)); }
  // Ends the world: every pending and later wait on it finishes without moving data.
  void abort(status why) {
    const int code = why == status::success ? static_cast<int>(status::peer_failed) : static_cast<int>(why);
    volatile int* a = abort_;
    if (*a == 0) *a = code;  // the first error stays (up to a race with a kernel ending it too)
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // Makes a spent world usable again: call it once every rank's stream has been synchronised
  // (after an abort too: a receive may still be copying from a sender's buffer until then).
  // Throws zipccl::error (cuda_error) when the mailboxes cannot be cleared.
  void reset() {
    if (clear() != status::success) throw error(status::cuda_error, "cuda_local_world::reset");
    for (auto& t : ranks_) {
      t->sent_.assign(static_cast<std::size_t>(n_), 0);
      t->received_.assign(static_cast<std::size_t>(n_), 0);
      t->group_.clear();
      t->in_group_ = false;
    }
  }

 private:
  friend class cuda_local_transport;
  status clear() {
    const cuda_local_detail::device_scope on(home_);
    *static_cast<volatile int*>(abort_) = 0;
    probe_arrivals_ = 0;  // (the memset below clears the count)
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // (the device first: a run_together kernel still queued must arrive before the count is
    // cleared, not after)
    if (!on.ok() || cudaDeviceSynchronize() != cudaSuccess || cudaMemset(base_, 0, bytes_) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
      return status::cuda_error;
    return status::success;
  }
  void release() {
    for (cudaStream_t st : streams_) (void)cudaStreamDestroy(st);
    for (cudaStream_t st : transfer_streams_) (void)cudaStreamDestroy(st);
    streams_.clear();
    transfer_streams_.clear();
    if (base_) (void)cudaFree(base_);
    if (abort_) (void)cudaFreeHost(abort_);
    if (diag_stream_) {  // (a read that timed out lands before its buffer goes)
      (void)cudaStreamSynchronize(diag_stream_);
      (void)cudaStreamDestroy(diag_stream_);
    }
    if (diag_) (void)cudaFreeHost(diag_);
    base_ = nullptr;
    abort_ = nullptr;
    diag_stream_ = nullptr;
    diag_ = nullptr;
  }
  // run_together's check on (stream, device) pairs. Each probe has its own number (gen) and
  // expects the kernels of every earlier one to have arrived (probe_arrivals_).
  status probe(const std::vector<std::pair<cudaStream_t, int>>& on, double timeout_seconds) {
    if (on.empty()) return status::success;
    if (!(timeout_seconds > 0) || timeout_seconds > 3600) return status::invalid_argument;
    if (++probe_gen_ == 0) probe_gen_ = 1;  // (0: no probe has failed)
    const unsigned int gen = probe_gen_, first = probe_arrivals_;
    const unsigned int target = first + static_cast<unsigned int>(on.size());
    const auto timeout_ns = static_cast<unsigned long long>(timeout_seconds * 1e9);
    int* report = abort_ + probe_report;
    unsigned int launched = 0;
    for (const auto& [st, dev] : on) {
      const cuda_local_detail::device_scope at(dev);
      status s = at.ok() ? status::success : status::cuda_error;
      if (s == status::success)
        s = cuda::detail::launch("cuda_local: together", dim3(1), dim3(32), st, cuda_local_detail::together_kernel<>,
                                 probe_, target, gen, timeout_ns, report);
      if (s != status::success) {
        probe_arrivals_ = first + launched;  // (those launched arrive, time out and end)
        return s;
      }
      ++launched;
      s = cuda::detail::launch("cuda_local: after", dim3(1), dim3(1), st, cuda_local_detail::after_kernel<>);
      if (s != status::success) {
        probe_arrivals_ = first + launched;
        return s;
      }
    }
    probe_arrivals_ = target;
    // every spin ends by itself: with the last arrival, or at its time limit
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds + 10);
    std::vector<cudaStream_t> streams;
    for (const auto& on_stream : on) streams.push_back(on_stream.first);
    const status waited =
        cuda::detail::wait_streams(streams, until, std::chrono::microseconds(100), "cuda_local: run_together");
    if (waited != status::success) return waited;
    return *static_cast<const volatile int*>(report) == static_cast<int>(gen) ? status::timed_out : status::success;
  }
  cuda_local_detail::mailbox* slot(int src, int dst, std::uint64_t seq) {
    const std::size_t link = static_cast<std::size_t>(src) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(dst);
    return boxes_ + link * slots_ + static_cast<std::size_t>(seq % slots_);
  }
  cuda_local_detail::link_clock* clock(int src, int dst) {
    return clocks_ + static_cast<std::size_t>(src) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(dst);
  }

  int n_;
  std::uint32_t slots_;
  link_model link_;
  std::size_t bytes_ = 0;
  int home_ = 0;  // the GPU that holds the mailboxes
  std::vector<cudaStream_t> streams_, transfer_streams_;
  unsigned char* base_ = nullptr;
  int* abort_ = nullptr;
  cuda_local_detail::mailbox* diag_ = nullptr;  // pending_slots()'s pinned copy of the mailboxes
  cudaStream_t diag_stream_ = nullptr;
  cuda_local_detail::link_clock* clocks_ = nullptr;
  cuda_local_detail::mailbox* boxes_ = nullptr;
  unsigned int* probe_ = nullptr;  // run_together's words: arrivals, the last probe that failed
  unsigned int probe_gen_ = 0, probe_arrivals_ = 0;
  static constexpr int probe_report = 8;  // the int of the mapped abort word's 64 bytes a failed probe writes
  static constexpr double probe_seconds = 2.0;
  std::vector<std::unique_ptr<cuda_local_transport>> ranks_;
};

int cuda_local_transport::size() const { return world_->n_; }

cudaStream_t cuda_local_transport::transfer_stream() const { return world_->transfer_stream(rank_); }

bool cuda_local_transport::accepts_stream(cudaStream_t stream) const {
  // the legacy default stream, and blocking streams that wait for it, would make any
  // device-synchronising call of the host (cudaMemcpy, cudaFree) wait for a rank that waits for
  // a rank not yet enqueued
  unsigned flags = 0;
  return !(stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
           cudaStreamGetFlags(stream, &flags) != cudaSuccess || (flags & cudaStreamNonBlocking) == 0);
}

status cuda_local_transport::check(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) const {
  if (peer < 0 || peer >= world_->n_ || (buf == nullptr && bytes != 0)) return status::invalid_argument;
  if (!accepts_stream(stream)) return status::invalid_argument;
  if (world_->error_state() != status::success) return status::peer_failed;
  return status::success;
}

status cuda_local_transport::post(const op& o) {
  return cuda::detail::launch("cuda_local: post", dim3(1), dim3(32), o.stream, cuda_local_detail::post_kernel<>,
                              o.slot, static_cast<const void*>(o.buf), static_cast<unsigned long long>(o.bytes));
}

status cuda_local_transport::take(const op& o) {
  cuda_local_world& w = *world_;
  status s = cuda::detail::launch("cuda_local: take", dim3(1), dim3(32), o.stream, cuda_local_detail::take_kernel<>,
                                  o.slot, static_cast<unsigned long long>(o.bytes), w.abort_);
  if (s != status::success) return s;
  if (o.bytes != 0) {
    const unsigned long long blocks64 = (o.bytes + 16 * 256 - 1) / (16 * 256);
    const unsigned blocks = static_cast<unsigned>(blocks64 < 1024 ? blocks64 : 1024);
    s = cuda::detail::launch("cuda_local: copy", dim3(blocks), dim3(256), o.stream, cuda_local_detail::copy_kernel<>,
                             static_cast<const cuda_local_detail::mailbox*>(o.slot), o.buf,
                             static_cast<unsigned long long>(o.bytes));
    if (s != status::success) return s;
  }
  const double bytes_per_ns = w.link_.bytes_per_second > 0 ? w.link_.bytes_per_second * 1e-9 : 0.0;
  const double latency_ns = w.link_.latency_seconds > 0 ? w.link_.latency_seconds * 1e9 : 0.0;
  return cuda::detail::launch("cuda_local: finish", dim3(1), dim3(32), o.stream, cuda_local_detail::finish_kernel<>,
                              o.slot, w.clock(o.peer, rank_), static_cast<unsigned long long>(o.bytes), bytes_per_ns,
                              latency_ns, static_cast<const int*>(w.abort_));
}

status cuda_local_transport::wait(const op& o) {
  return cuda::detail::launch("cuda_local: wait", dim3(1), dim3(32), o.stream, cuda_local_detail::wait_kernel<>,
                              o.slot, static_cast<const int*>(world_->abort_));
}

status cuda_local_transport::send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) {
  if (const status s = check(peer, buf, bytes, stream); s != status::success) return s;
  if (peer == rank_ && !in_group_) return status::invalid_argument;  // would wait for its own receive
  const op o{true, peer, const_cast<void*>(buf), bytes, stream,
             world_->slot(rank_, peer, sent_[static_cast<std::size_t>(peer)]++)};
  return enqueue(o);
}

status cuda_local_transport::recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) {
  if (const status s = check(peer, buf, bytes, stream); s != status::success) return s;
  if (peer == rank_ && !in_group_) return status::invalid_argument;
  const op o{false, peer, buf, bytes, stream, world_->slot(peer, rank_, received_[static_cast<std::size_t>(peer)]++)};
  return enqueue(o);
}

// An operation of a group waits for group_end(); alone, it is enqueued now.
status cuda_local_transport::enqueue(const op& o) {
  if (in_group_) {
    if (group_.size() == group_.capacity()) {  // (no allocation inside a call)
      abort(status::invalid_argument);
      return status::invalid_argument;
    }
    group_.push_back(o);
    return status::success;
  }
  const cuda_local_detail::device_scope on(device_);
  if (!on.ok()) return cuda::detail::fail(on.error(), "cuda_local: cudaSetDevice");
  if (!o.send) return take(o);
  const status s = post(o);
  return s != status::success ? s : wait(o);
}

status cuda_local_transport::group_start() {
  if (in_group_) return status::invalid_argument;
  in_group_ = true;
  group_.clear();
  return status::success;
}

status cuda_local_transport::group_end() {
  if (!in_group_) return status::invalid_argument;
  in_group_ = false;
  // at most `slots` sends to one peer, or a slot would be posted twice before it is taken; the
  // peers expect this group's messages, so a group refused here ends the world
  for (const op& a : group_) {
    if (!a.send) continue;
    std::uint32_t same = 0;
    for (const op& b : group_) same += b.send && b.peer == a.peer ? 1u : 0u;
    if (same > world_->slots_) {
      group_.clear();
      abort(status::invalid_argument);
      return status::invalid_argument;
    }
  }
  const cuda_local_detail::device_scope on(device_);
  if (!on.ok()) return cuda::detail::fail(on.error(), "cuda_local: cudaSetDevice");
  status s = status::success;
  for (const op& o : group_)
    if (o.send && s == status::success) s = post(o);
  for (const op& o : group_)
    if (!o.send && s == status::success) s = take(o);
  for (const op& o : group_)
    if (o.send && s == status::success) s = wait(o);
  group_.clear();
  if (s != status::success) abort(status::peer_failed);  // a half-enqueued group: the peers must not wait
  return s;
}

status cuda_local_transport::async_error() { return world_->error_state(); }

void cuda_local_transport::abort(status why) { world_->abort(why); }

int* cuda_local_transport::device_error_word() { return world_->abort_; }

static_assert(is_device_transport_v<cuda_local_transport>, "cuda_local_transport must model the device transport");

}  // namespace zipccl::transport
