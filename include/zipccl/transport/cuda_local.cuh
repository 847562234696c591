// zipccl: transport::cuda_local, N ranks of one process on one GPU or several: the device
// collectives' test bed and a simulator of a cluster on one GPU (NCCL refuses two ranks on one GPU).
//
//   zipccl::transport::cuda_local_world world(8, zipccl::transport::link_model{25e9, 5e-6});  // 25 GB/s, 5 us
//   std::vector<zipccl::status> st = world.run([&](zipccl::transport::cuda_local_transport& t,
//                                                   cudaStream_t stream) {
//     return zipccl::cuda::all_gather<codec>(send[t.rank()], recv[t.rank()], count, t, ...);
//   });
//
// The contract (docs/design.md, "The device transport", which also says how a message moves): no
// device work of the transport waits for other device work except through an event recorded
// earlier in host time, and the only device-side wait is on the clock (the link model's hold).
// Host submission order is then a valid order of all device work, whatever the scheduler does
// (streams that share a hardware queue, lazy module loading, CUDA_LAUNCH_BLOCKING, a profiler):
// the transport cannot stall the device. Sends and receives are matched on the host
// (transport/detail/matcher.hpp); a call waits on the host only for its peer's matching call.
//
// Errors end the world (mismatched sizes, abort() from any thread, the rendezvous deadline): every
// waiting call on every rank returns, later ones too, until reset(). A call refused for its
// arguments (invalid_argument) has published nothing. cuda_local_transport and cuda_local_world
// below say exactly what each call waits for and refuses.
//
// Graphs: world.capture(per_rank, &graph) captures every rank's work in one CUDA graph; a rank's
// work cannot be captured in a graph of its own (a message's copy depends on both ranks' streams).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../cuda/runtime.cuh"
#include "../error.hpp"
#include "detail/matcher.hpp"
#include "device.hpp"
#include "local.hpp"

namespace zipccl::transport {

namespace cuda_local_detail {

// The link model's hold: returns once `ns` nanoseconds of the GPU's global timer have passed
// since it started. It waits on nothing but the clock.
template <class = void>
__global__ void hold_kernel(unsigned long long ns) {
  if (threadIdx.x != 0) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
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
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  bool ok() const { return ok_; }
  cudaError_t error() const { return error_; }  // cudaSetDevice's, where it failed

 private:
  int previous_ = -1;
  bool ok_ = false;
  cudaError_t error_ = cudaSuccess;
};

// What the executor needs of one half: its buffer, stream, GPU and ready event.
struct half_context {
  void* buf = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  int device = 0;
};

// The open groups of one host thread: the ranks they span (linked through their handles), and
// how deep they nest.
struct thread_groups {
  const void* world = nullptr;
  void* first = nullptr;  // cuda_local_transport*
  int depth = 0;
};
inline thread_groups& groups_of_this_thread() {
  thread_local thread_groups g;
  return g;
}
// This thread's number as a rank's owner: never 0 (a free rank) and never given to another
// thread, also after this one ends (a thread_local's address could be).
inline std::uint64_t this_thread_number() {
  static std::atomic<std::uint64_t> last{0};
  thread_local const std::uint64_t mine = ++last;
  return mine;
}

}  // namespace cuda_local_detail

class cuda_local_world;

// One rank's handle on a cuda_local_world; a model of the device transport concept (device.hpp).
//
// What waits on the host: a send or receive outside a group returns once its peer has made the
// matching call (never for GPU work); group_end() publishes all of its group's operations, then
// waits for their peers the same way, so ring steps complete with a host thread per rank. Groups
// are per host thread and nest: one thread may open a group on several ranks of one world (each
// rank joins with its own group_start(), as with ncclGroupStart over several communicators), and
// the outermost group_end() publishes all of their operations at once, so such a group matches
// without waiting for another thread. The device collectives call the transport between their
// kernels, so they need a host thread per rank: world.run() gives each rank one.
//
// Errors: a message whose halves differ in size moves nothing; both calls return size_mismatch
// and the world ends. abort() (any thread) ends the world: every waiting call on every rank
// returns peer_failed, later calls too, and async_error() tells why, until reset(). With
// options::rendezvous_seconds, a call whose peer does not come in time ends the world with
// timed_out. A call returns invalid_argument for a bad peer, a null buffer with bytes, a message
// to itself outside a group, a stream of another GPU or a default stream's handle, and a group
// of more than max_group_ops operations; such a call has published nothing, and a group in which
// one operation was refused is refused as a whole at group_end(). A call that fails before it
// publishes (those, or CUDA refusing its ready event) leaves the world as it was, as NCCL leaves
// a communicator after a local error: its peers wait for it until the caller ends the world
// (abort(), or run(), which does so when a rank returns an error) or the deadline passes.
//
// Limits: rank(r) is used by one host thread at a time: an operation or group_start() on a rank
// that another thread is in (an operation, an open group) returns invalid_argument. The world
// must outlive the work enqueued on it (destroy it once every rank's stream has been
// synchronised); a group holds at most max_group_ops operations over all ranks it spans. The
// link model runs a link's messages one after another on its stream: a
// simulation of a network, not a network. Across GPUs, buffers from cudaMallocAsync pools need
// cudaMemPoolSetAccess for the peers.
class cuda_local_transport {
 public:
  int rank() const { return rank_; }
  inline int size() const;
  int device() const { return device_; }
  inline status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream);
  inline status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream);
  inline status group_start();
  inline status group_end();
  inline status async_error();
  inline void abort(status why);
  // Optional member of the concept: any stream of the rank's GPU carries its work, but not the
  // default streams' handles (0, cudaStreamLegacy, cudaStreamPerThread), which name another
  // stream on each host thread: a message's waits are enqueued from the thread that pairs it.
  inline bool accepts_stream(cudaStream_t stream) const;

  cuda_local_transport(const cuda_local_transport&) = delete;
  cuda_local_transport& operator=(const cuda_local_transport&) = delete;
  inline ~cuda_local_transport();

 private:
  friend class cuda_local_world;
  inline cuda_local_transport(cuda_local_world& w, int rank, int device, std::uint32_t max_ops);
  inline status add(bool send, int peer, void* buf, std::uint64_t bytes, cudaStream_t stream);
  inline status run_now(std::size_t first, std::size_t count);
  // Leaves every rank of this thread's open group (nothing published); whether one was open.
  static inline bool close_group();
  // The rank's claim by one host thread (its this_thread_number()): taken by an operation
  // outside a group for its duration, and by a group from group_start() to its outermost end.
  enum class claim { refused, single, grouped };
  inline claim take();

  cuda_local_world* world_;
  int rank_, device_;
  std::vector<detail::message_half> halves_;
  std::vector<cuda_local_detail::half_context> contexts_;
  std::vector<cudaEvent_t> ready_;       // one per half, on the rank's GPU
  std::vector<detail::message_half*> gathered_;  // an outermost group's halves, of every rank it spans
  std::size_t used_ = 0;                 // halves of the open group
  bool in_group_ = false;
  bool refused_ = false;                 // an operation of the open group was refused
  cuda_local_transport* next_in_group_ = nullptr;
  std::atomic<std::uint64_t> owner_{0};  // the thread that uses the rank now, 0 if none (see take())
};

class cuda_local_world {
 public:
  struct options {
    link_model link{};                  // per link: 0 bytes_per_second = unlimited
    std::vector<int> devices{};         // rank r runs on devices[r % devices.size()]; empty: current
    std::uint32_t max_group_ops = 64;   // operations in one group, over every rank it spans
    // A call that waits longer for its peers ends the world with timed_out (infinity: no deadline).
    double rendezvous_seconds = std::numeric_limits<double>::infinity();
  };

  explicit cuda_local_world(int ranks, link_model link = {}) : cuda_local_world(ranks, options{link}) {}
  // Throws zipccl::error: invalid_argument for ranks < 1, max_group_ops < 1, a negative or NaN
  // deadline or GPUs without peer access; cuda_error when CUDA refuses a stream or an event.
  cuda_local_world(int ranks, const options& opt)
      : n_(ranks), link_(opt.link), deadline_(opt.rendezvous_seconds),
        match_(ranks < 1 ? 1 : ranks, opt.max_group_ops < 1 ? 1 : opt.max_group_ops) {
    if (ranks < 1 || opt.max_group_ops < 1 || !(opt.rendezvous_seconds > 0))
      throw error(status::invalid_argument,
                  "cuda_local_world: ranks and max_group_ops must be >= 1 and rendezvous_seconds > 0");
    std::vector<int> devices = opt.devices;
    if (devices.empty()) {
      int d = 0;
      if (cudaGetDevice(&d) != cudaSuccess) throw error(status::cuda_error, "cuda_local_world: no CUDA device");
      devices.push_back(d);
    }
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
    home_ = devices.front();
    try {
      for (int r = 0; r < ranks; ++r) {
        const int dev = devices[static_cast<std::size_t>(r) % devices.size()];
        ranks_.emplace_back(new cuda_local_transport(*this, r, dev, opt.max_group_ops));
        streams_.push_back(make_stream(dev));
      }
      for (int src = 0; src < ranks; ++src)
        for (int dst = 0; dst < ranks; ++dst) {
          links_.emplace_back(new link_state);
          link_state& l = *links_.back();
          l.device = ranks_[static_cast<std::size_t>(dst)]->device_;
          l.stream = make_stream(l.device);
          l.done = make_event(l.device);
          l.joined = make_event(l.device);
        }
      origin_ = make_stream(home_);
      fork_ = make_event(home_);
      for (int r = 0; r < ranks; ++r) rank_joined_.push_back(make_event(ranks_[static_cast<std::size_t>(r)]->device_));
    } catch (...) {
      release();
      throw;
    }
  }
  cuda_local_world(const cuda_local_world&) = delete;
  cuda_local_world& operator=(const cuda_local_world&) = delete;
  // Ends the world first, so that a call still waiting for a peer returns.
  ~cuda_local_world() {
    abort(status::peer_failed);
    release();
  }

  int size() const { return n_; }
  cuda_local_transport& rank(int r) { return *ranks_.at(static_cast<std::size_t>(r)); }
  // Rank r's stream, made by the world (non-blocking, on the rank's GPU). Any other stream of
  // that GPU serves as well.
  cudaStream_t stream(int r) const { return streams_.at(static_cast<std::size_t>(r)); }
  int device(int r) const { return ranks_.at(static_cast<std::size_t>(r))->device_; }
  const link_model& link() const { return link_; }

  // Runs per_rank(rank(r), stream(r)) for every rank, each in a thread of its own with the rank's
  // GPU current, and returns their statuses once all have returned. per_rank returns a status
  // (void counts as success). A rank whose function returns an error or throws ends the world
  // (as a launcher does when one process of a job fails), so that the other ranks' calls return
  // instead of waiting for it; the first exception is rethrown once every thread has ended.
  template <class PerRank>
  std::vector<status> run(PerRank&& per_rank) {
    return run_on(per_rank, streams_);
  }

  // Captures every rank's work in one CUDA graph: per_rank(rank(r), stream(r)) runs as in run(),
  // with the rank streams forked from an origin stream under capture (relaxed mode) and joined
  // back, the links' streams with them. *graph is the graph where every rank returned success
  // (cudaGraphInstantiate it, launch it on any stream of the world's first GPU), else nullptr.
  // Returns the ranks' statuses; cuda_error in every entry when the capture itself failed. An
  // exception from per_rank is rethrown once the capture has ended (no graph, no stream left
  // capturing).
  template <class PerRank>
  std::vector<status> capture(PerRank&& per_rank, cudaGraph_t* graph) {
    if (graph == nullptr) return std::vector<status>(static_cast<std::size_t>(n_), status::invalid_argument);
    *graph = nullptr;
    std::vector<status> out(static_cast<std::size_t>(n_), status::cuda_error);
    const cuda_local_detail::device_scope on(home_);
    if (!on.ok() || cudaStreamBeginCapture(origin_, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
      (void)cuda::detail::fail(on.ok() ? cudaGetLastError() : on.error(), "cuda_local_world::capture: begin");
      return out;
    }
    bool forked = cudaEventRecord(fork_, origin_) == cudaSuccess;
    for (int r = 0; r < n_ && forked; ++r) forked = cudaStreamWaitEvent(streams_[static_cast<std::size_t>(r)], fork_, 0) == cudaSuccess;
    std::exception_ptr thrown;  // rethrown once the capture has ended
    if (forked) {
      try {
        out = run_on(per_rank, streams_);
      } catch (...) {
        thrown = std::current_exception();
        for (status& s : out) s = status::peer_failed;
      }
    }
    // join every stream of the capture back into the origin: the ranks', and the links' that took part
    bool joined = forked;
    for (int r = 0; r < n_ && forked; ++r) {
      const cuda_local_detail::device_scope at(device(r));
      joined = cudaEventRecord(rank_joined_[static_cast<std::size_t>(r)], streams_[static_cast<std::size_t>(r)]) == cudaSuccess &&
               cudaStreamWaitEvent(origin_, rank_joined_[static_cast<std::size_t>(r)], 0) == cudaSuccess && joined;
    }
    for (auto& lp : links_) {
      link_state& l = *lp;
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(l.stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusActive) continue;
      const cuda_local_detail::device_scope at(l.device);
      joined = cudaEventRecord(l.joined, l.stream) == cudaSuccess && cudaStreamWaitEvent(origin_, l.joined, 0) == cudaSuccess &&
               joined;
    }
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(origin_, &g);
    if (!joined || ended != cudaSuccess) {
      (void)cuda::detail::fail(ended != cudaSuccess ? ended : cudaErrorStreamCaptureUnjoined,
                               "cuda_local_world::capture: joining the streams");
      if (g) (void)cudaGraphDestroy(g);
      if (thrown) std::rethrow_exception(thrown);
      for (status& s : out)
        if (s == status::success) s = status::cuda_error;
      return out;
    }
    for (status s : out)
      if (s != status::success) {
        (void)cudaGraphDestroy(g);
        if (thrown) std::rethrow_exception(thrown);
        return out;
      }
    *graph = g;
    return out;
  }

  // success, or the error that ended the world (an abort, a mismatched size, a deadline).
  status error_state() const { return match_.error_state(); }
  // Ends the world: every waiting call on every rank returns peer_failed, later ones too.
  void abort(status why) { match_.abort(why); }
  // Makes an ended world usable again. Call it once no rank is in a call or an open group (and,
  // after an abort, once the ranks' streams are synchronised, so that no copy still reads a
  // buffer); throws zipccl::error (invalid_argument) otherwise. A group that a thread left open
  // must be closed by that thread (group_end(), which then fails); run() closes those itself.
  // The check is not atomic with a call that starts while reset() runs: that is the caller's
  // promise above, not something reset() can see.
  void reset() {
    for (const auto& t : ranks_)
      if (t->owner_.load() != 0)
        throw error(status::invalid_argument, "cuda_local_world::reset: a rank is in a call or an open group");
    if (match_.reset() != status::success)
      throw error(status::invalid_argument, "cuda_local_world::reset: a rank is still in a call");
  }

 private:
  friend class cuda_local_transport;
  struct link_state {
    int device = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr, joined = nullptr;
    std::mutex mutex;  // one message's enqueueing at a time (the done event is the link's)
  };

  static cudaStream_t make_stream(int device) {
    const cuda_local_detail::device_scope on(device);
    cudaStream_t s = nullptr;
    if (!on.ok() || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
      throw error(status::cuda_error, "cuda_local_world: cudaStreamCreateWithFlags");
    return s;
  }
  static cudaEvent_t make_event(int device) {
    const cuda_local_detail::device_scope on(device);
    cudaEvent_t e = nullptr;
    if (!on.ok() || cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
      throw error(status::cuda_error, "cuda_local_world: cudaEventCreateWithFlags");
    return e;
  }
  void release() {
    for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
    for (auto& lp : links_) {
      link_state& l = *lp;
      if (l.stream) (void)cudaStreamDestroy(l.stream);
      if (l.done) (void)cudaEventDestroy(l.done);
      if (l.joined) (void)cudaEventDestroy(l.joined);
    }
    for (cudaEvent_t e : rank_joined_) (void)cudaEventDestroy(e);
    if (origin_) (void)cudaStreamDestroy(origin_);
    if (fork_) (void)cudaEventDestroy(fork_);
    streams_.clear();
    links_.clear();
    rank_joined_.clear();
    origin_ = nullptr;
    fork_ = nullptr;
    ranks_.clear();
  }

  template <class PerRank>
  std::vector<status> run_on(PerRank& per_rank, const std::vector<cudaStream_t>& streams) {
    std::vector<status> out(static_cast<std::size_t>(n_), status::success);
    std::vector<std::exception_ptr> thrown(static_cast<std::size_t>(n_));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r)
      threads.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        try {
          if (cudaSetDevice(device(r)) != cudaSuccess) {
            out[i] = cuda::detail::fail(cudaGetLastError(), "cuda_local_world::run: cudaSetDevice");
          } else if constexpr (std::is_void_v<decltype(per_rank(rank(r), streams[i]))>) {
            per_rank(rank(r), streams[i]);
          } else {
            out[i] = per_rank(rank(r), streams[i]);
          }
        } catch (...) {
          thrown[i] = std::current_exception();
          out[i] = status::peer_failed;
        }
        // a group left open published nothing, and its peers would wait for it
        if (cuda_local_transport::close_group() && out[i] == status::success) out[i] = status::invalid_argument;
        if (out[i] != status::success) abort(out[i]);
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : thrown)
      if (e) std::rethrow_exception(e);
    return out;
  }

  // Runs the message of two paired halves: called by the matcher, on the thread that paired them.
  status execute(const detail::message_half& snd, const detail::message_half& rcv) noexcept {
    if (snd.bytes == 0) return status::success;
    const auto& from = *static_cast<const cuda_local_detail::half_context*>(snd.context);
    const auto& to = *static_cast<const cuda_local_detail::half_context*>(rcv.context);
    link_state& l = *links_[static_cast<std::size_t>(snd.rank) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(rcv.rank)];
    const std::lock_guard<std::mutex> lock(l.mutex);
    const cuda_local_detail::device_scope on(l.device);
    if (!on.ok()) return cuda::detail::fail(on.error(), "cuda_local: cudaSetDevice");
    status s = cuda::detail::check(cudaStreamWaitEvent(l.stream, from.ready, 0), "cuda_local: cudaStreamWaitEvent");
    if (s == status::success)
      s = cuda::detail::check(cudaStreamWaitEvent(l.stream, to.ready, 0), "cuda_local: cudaStreamWaitEvent");
    const double ns = (link_.latency_seconds > 0 ? link_.latency_seconds * 1e9 : 0.0) +
                      (link_.bytes_per_second > 0 ? static_cast<double>(snd.bytes) / link_.bytes_per_second * 1e9 : 0.0);
    if (s == status::success && ns >= 1)
      s = cuda::detail::launch("cuda_local: hold", dim3(1), dim3(32), l.stream, cuda_local_detail::hold_kernel<>,
                               static_cast<unsigned long long>(ns));
    if (s == status::success)
      s = cuda::detail::check(cudaMemcpyAsync(to.buf, from.buf, static_cast<std::size_t>(snd.bytes), cudaMemcpyDefault, l.stream),
                              "cuda_local: cudaMemcpyAsync");
    if (s == status::success) s = cuda::detail::check(cudaEventRecord(l.done, l.stream), "cuda_local: cudaEventRecord");
    if (s == status::success)
      s = cuda::detail::check(cudaStreamWaitEvent(from.stream, l.done, 0), "cuda_local: cudaStreamWaitEvent");
    if (s == status::success)
      s = cuda::detail::check(cudaStreamWaitEvent(to.stream, l.done, 0), "cuda_local: cudaStreamWaitEvent");
    return s;
  }

  int n_;
  link_model link_;
  double deadline_;
  int home_ = 0;
  detail::matcher match_;
  std::vector<std::unique_ptr<cuda_local_transport>> ranks_;
  std::vector<cudaStream_t> streams_;
  std::vector<std::unique_ptr<link_state>> links_;  // src * size + dst
  std::vector<cudaEvent_t> rank_joined_;
  cudaStream_t origin_ = nullptr;
  cudaEvent_t fork_ = nullptr;
};

cuda_local_transport::cuda_local_transport(cuda_local_world& w, int rank, int device, std::uint32_t max_ops)
    : world_(&w), rank_(rank), device_(device), halves_(max_ops), contexts_(max_ops), gathered_(max_ops) {
  ready_.reserve(max_ops);
  for (std::uint32_t i = 0; i < max_ops; ++i) ready_.push_back(cuda_local_world::make_event(device));
}

cuda_local_transport::~cuda_local_transport() {
  for (cudaEvent_t e : ready_) (void)cudaEventDestroy(e);
}

int cuda_local_transport::size() const { return world_->n_; }

bool cuda_local_transport::accepts_stream(cudaStream_t stream) const {
  // the default streams' handles mean another stream on each thread that uses them, and the
  // waits on an owner's stream are enqueued by whichever rank's thread pairs the message
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return false;
  int d = -1;
  if (cudaStreamGetDevice(stream, &d) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return d == device_;
}

// Adds one operation to the open group, or runs it alone now.
status cuda_local_transport::add(bool send, int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) {
  // the rank first: another thread's group or call on it must not see this one's writes
  const claim held = take();
  if (held == claim::refused) return status::invalid_argument;
  struct release_single {
    cuda_local_transport* t;
    bool single;
    ~release_single() {
      if (single) t->owner_.store(0);
    }
  } const release{this, held == claim::single};
  status bad = status::success;
  if (peer < 0 || peer >= world_->n_ || (buf == nullptr && bytes != 0) || !accepts_stream(stream) ||
      (peer == rank_ && !in_group_) || (in_group_ && used_ >= halves_.size()))
    bad = status::invalid_argument;  // (a message to itself outside a group would wait for itself)
  else if (world_->error_state() != status::success)
    bad = status::peer_failed;
  if (bad != status::success) {
    // inside a group, a refused operation refuses the whole group at its end: publishing the rest
    // would pair the peers' later messages with the wrong ones
    if (in_group_) refused_ = true;
    return bad;
  }
  const std::size_t i = in_group_ ? used_ : 0;
  detail::message_half& h = halves_[i];
  h = detail::message_half{};
  h.rank = rank_;
  h.peer = peer;
  h.send = send;
  h.bytes = bytes;
  contexts_[i] = cuda_local_detail::half_context{buf, stream, ready_[i], device_};
  h.context = &contexts_[i];
  if (in_group_) {
    ++used_;
    return status::success;
  }
  return run_now(0, 1);
}

// Records the ready events of halves [first, first + count) of the gathered list and publishes them.
status cuda_local_transport::run_now(std::size_t first, std::size_t count) {
  detail::message_half* const* ops = nullptr;
  if (first == 0 && count == 1 && !in_group_) {
    gathered_[0] = &halves_[0];
    ops = gathered_.data();
  } else {
    ops = gathered_.data() + first;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const auto& c = *static_cast<const cuda_local_detail::half_context*>(ops[i]->context);
    if (ops[i]->bytes == 0) continue;
    const cuda_local_detail::device_scope on(c.device);
    if (!on.ok()) return cuda::detail::fail(on.error(), "cuda_local: cudaSetDevice");
    if (const status s = cuda::detail::check(cudaEventRecord(c.ready, c.stream), "cuda_local: cudaEventRecord");
        s != status::success)
      return s;
  }
  cuda_local_world& w = *world_;
  return w.match_.exchange(
      ops, count, [&w](detail::message_half& snd, detail::message_half& rcv) noexcept { return w.execute(snd, rcv); },
      w.deadline_);
}

status cuda_local_transport::send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream) {
  return add(true, peer, const_cast<void*>(buf), bytes, stream);
}

status cuda_local_transport::recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream) {
  return add(false, peer, buf, bytes, stream);
}

status cuda_local_transport::group_start() {
  auto& g = cuda_local_detail::groups_of_this_thread();
  if (g.depth > 0 && g.world != world_) return status::invalid_argument;  // one world per thread's group
  const claim held = take();
  if (held == claim::refused) return status::invalid_argument;
  if (held == claim::single) {  // the rank joins this thread's group
    in_group_ = true;
    used_ = 0;
    refused_ = false;
    next_in_group_ = static_cast<cuda_local_transport*>(g.first);
    g.first = this;
  }
  g.world = world_;
  ++g.depth;
  return status::success;
}

bool cuda_local_transport::close_group() {
  auto& g = cuda_local_detail::groups_of_this_thread();
  const bool open = g.depth > 0;
  for (auto* t = static_cast<cuda_local_transport*>(g.first); t != nullptr;) {
    cuda_local_transport* next = t->next_in_group_;
    t->in_group_ = false;
    t->used_ = 0;
    t->refused_ = false;
    t->next_in_group_ = nullptr;
    t->owner_.store(0);
    t = next;
  }
  g = cuda_local_detail::thread_groups{};
  return open;
}

// single: the rank was free and is now this thread's (until the operation or group releases it);
// grouped: it is already in this thread's open group; refused: another thread uses it.
cuda_local_transport::claim cuda_local_transport::take() {
  const auto& g = cuda_local_detail::groups_of_this_thread();
  const std::uint64_t me = cuda_local_detail::this_thread_number();
  std::uint64_t was = 0;
  if (owner_.compare_exchange_strong(was, me)) return claim::single;
  return was == me && in_group_ && g.depth > 0 ? claim::grouped : claim::refused;
}

status cuda_local_transport::group_end() {
  auto& g = cuda_local_detail::groups_of_this_thread();
  if (owner_.load() != cuda_local_detail::this_thread_number() || !in_group_ || g.depth == 0 || g.world != world_)
    return status::invalid_argument;
  if (--g.depth > 0) return status::success;
  // the outermost end: gather the operations of every rank the group spans into this rank's list
  std::size_t total = 0;
  bool fits = true;
  for (auto* t = static_cast<cuda_local_transport*>(g.first); t != nullptr; t = t->next_in_group_) {
    fits = fits && !t->refused_;
    for (std::size_t i = 0; i < t->used_; ++i) {
      if (total == gathered_.size()) fits = false;
      else gathered_[total++] = &t->halves_[i];
    }
  }
  const bool ended = world_->error_state() != status::success;
  status s = !fits ? status::invalid_argument : ended ? status::peer_failed : status::success;
  if (s == status::success) s = run_now(0, total);
  (void)close_group();
  return s;
}

status cuda_local_transport::async_error() { return world_->error_state(); }

void cuda_local_transport::abort(status why) { world_->abort(why); }

static_assert(is_device_transport_v<cuda_local_transport>, "cuda_local_transport must model the device transport");

}  // namespace zipccl::transport
