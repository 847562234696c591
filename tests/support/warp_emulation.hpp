// Test support: one CUDA warp as 32 host threads, so that device code written for a single warp
// (cuda/detail/warp_rans.cuh: the rANS decoder by warps, the warp's table check, the group step
// that block_decode shares) runs and is compared with the host reference on a machine without a
// GPU (test_warp_rans.cpp).
//
// Include this before anything of zipccl's, in a translation unit that nvcc does not compile (and
// build it with -Wno-unknown-pragmas: the device code's `#pragma unroll`, which GCC's diagnostic
// pragmas cannot silence in C++): it
// defines __device__ and __forceinline__ for the host, a thread-local threadIdx, and the warp
// intrinsics those headers use (__ballot_sync, __shfl_sync, __shfl_up_sync, __shfl_xor_sync,
// __any_sync, __all_sync, __syncwarp, __popc, __ffs, __ldg). Every lane must reach every intrinsic
// together, as a converged warp does with a full mask: each one is a barrier of the 32 threads
// (the mask is not looked at), and a lane that skipped one would leave the others waiting, which
// the barrier reports after 10 s (std::abort) rather than hanging the test run; a lane that
// reached a different intrinsic (a different round count) would mix two rounds' values, which
// the comparisons with the host then catch. Shared memory is
// whatever object the lanes are handed by reference; the barriers order their accesses. Speed
// means nothing here.
#pragma once

#ifdef __CUDACC__
#error "warp_emulation.hpp is for host translation units only"
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline

struct zipccl_emulated_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local zipccl_emulated_dim3 threadIdx;

namespace zipccl::testing::warp_emulation {

// The 32 lanes' meeting point. An intrinsic is one barrier: each lane leaves its value in its slot
// of this round's array, waits for the others, and reads; the next intrinsic writes the other
// array, and the one after that can only begin once every lane has passed the barrier in between,
// so no slot is overwritten before it is read. The waits spin with yields (the lanes are 32
// threads on however few cores): a futex per round costs far more.
struct warp_state {
  std::atomic<unsigned> arrived{0};
  std::atomic<std::uint64_t> generation{0};
  std::uint64_t slot[2][32] = {};

  void barrier() {
    const std::uint64_t g = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) == 31) {
      arrived.store(0, std::memory_order_relaxed);
      generation.store(g + 1, std::memory_order_release);
      return;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (unsigned spin = 0; generation.load(std::memory_order_acquire) == g; ++spin) {
      std::this_thread::yield();
      if (spin % 1024 == 0 && std::chrono::steady_clock::now() > until) {
        std::fprintf(stderr, "warp_emulation: a lane never reached the warp's intrinsic (diverged?)\n");
        std::abort();
      }
    }
  }
};

inline thread_local warp_state* current = nullptr;
inline thread_local unsigned round = 0;  // this lane's intrinsics so far (which slot array)

inline unsigned lane() { return threadIdx.x % 32; }

template <class T>
std::uint64_t to_slot(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp_emulation: exchanged values are words");
  std::uint64_t s = 0;
  std::memcpy(&s, &v, sizeof(T));
  return s;
}
template <class T>
T from_slot(std::uint64_t s) {
  T v;
  std::memcpy(&v, &s, sizeof(T));
  return v;
}

// Every lane's v; returns the value of lane `from(lane)`.
template <class T, class From>
T exchange(T v, From from) {
  warp_state& w = *current;
  std::uint64_t(&slot)[32] = w.slot[round++ % 2];
  slot[lane()] = to_slot(v);
  w.barrier();
  return from_slot<T>(slot[from(lane()) % 32]);
}

// Runs f(lane) on 32 threads, lanes 0..31 of one warp (threadIdx.x = lane + 32 * warp), and waits
// for all of them.
template <class F>
void run_warp(F&& f, unsigned warp = 0) {
  warp_state w;
  std::vector<std::thread> lanes;
  lanes.reserve(32);
  for (unsigned l = 0; l < 32; ++l)
    lanes.emplace_back([&, l] {
      threadIdx.x = l + 32 * warp;
      current = &w;
      round = 0;
      f(l);
      current = nullptr;
    });
  for (auto& t : lanes) t.join();
}

}  // namespace zipccl::testing::warp_emulation

inline unsigned __ballot_sync(unsigned, bool p) {
  namespace we = zipccl::testing::warp_emulation;
  std::uint64_t(&slot)[32] = we::current->slot[we::round++ % 2];
  slot[we::lane()] = p ? 1u : 0u;
  we::current->barrier();
  unsigned mask = 0;
  for (unsigned l = 0; l < 32; ++l) mask |= (slot[l] != 0 ? 1u : 0u) << l;
  return mask;
}
inline bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0u; }
inline bool __all_sync(unsigned m, bool p) { return __ballot_sync(m, p) == 0xFFFFFFFFu; }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) {
  ++zipccl::testing::warp_emulation::round;  // (a round of its own, as every intrinsic)
  zipccl::testing::warp_emulation::current->barrier();
}
template <class T>
T __shfl_sync(unsigned, T v, int src, int = 32) {
  return zipccl::testing::warp_emulation::exchange(v, [&](unsigned) { return static_cast<unsigned>(src); });
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned d, int = 32) {
  const unsigned me = zipccl::testing::warp_emulation::lane();
  const T got = zipccl::testing::warp_emulation::exchange(v, [&](unsigned l) { return l >= d ? l - d : l; });
  return me >= d ? got : v;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int d, int = 32) {
  return zipccl::testing::warp_emulation::exchange(v, [&](unsigned l) { return l ^ static_cast<unsigned>(d); });
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs(static_cast<int>(v)); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
