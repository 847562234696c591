// zipccl: the kernels of the device collectives: the fixed-size wire (collective/detail/
// fixed_wire.hpp) written and read on the GPU, the fused decode-reduce-encode of a reduce_scatter
// hop, and the small kernels of the agreements.
//
// A block of `count` elements on the fixed wire is its segments back to back (every segment but
// the last is full, so segment s starts at s times a full segment's size). Coding goes through a
// staging area of one stored-size slot per chunk: encode_kernel codes chunk c into slot c
// (cuda::block_encode), pack_kernel moves each chunk's fixed part to its fixed place and its tail
// to the segment's spill area (a block reads the headers of the earlier chunks of its segment for
// the tail's offset: no look-back); unpack_kernel checks a received segment and joins each chunk
// back into its slot, and decode_kernel decodes the slots (cuda::block_decode), into the output
// or, fused, into a reduction and the next hop's encoding.
//
// Errors go to a 64-bit key with atomicMin: stage << 40 | position << 8 | status, so that the
// error a rank reports is the first in the host reference's order (stage: which step of the
// call; position: the check within the block, check_position below).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../collective/detail/arith.hpp"
#include "../../collective/detail/fixed_wire.hpp"
#include "../../format/chunk.hpp"
#include "../block_decode.cuh"
#include "../block_encode.cuh"

namespace zipccl::cuda::detail {

inline constexpr unsigned long long no_error = ~0ull;

ZIPCCL_HOST_DEVICE unsigned long long error_key(std::uint64_t stage, std::uint64_t position, status s) {
  return (stage << 40) | ((position & 0xFFFFFFFFull) << 8) | static_cast<unsigned long long>(s);
}
ZIPCCL_HOST_DEVICE status key_status(unsigned long long key) {
  return key == no_error ? status::success : static_cast<status>(key & 0xFFu);
}
ZIPCCL_HOST_DEVICE std::uint64_t key_stage(unsigned long long key) { return key == no_error ? ~0ull : key >> 40; }
__device__ __forceinline__ void record(unsigned long long* key, std::uint64_t stage, std::uint64_t position,
                                       status s) {
  atomicMin(key, error_key(stage, position, s));
}

// The order of a segment's checks, as fixed_wire::open and decode run them on the host: the
// preamble (0), chunk j's header (1 + j), the tails' total (1 + per_seg), the spill's zeros
// (2 + per_seg), chunk j's body (3 + per_seg + j).
ZIPCCL_HOST_DEVICE std::uint64_t check_position(std::uint64_t segment, std::uint64_t per_seg, std::uint64_t check) {
  return segment * (2 * per_seg + 3) + check;
}

// How a block of `count` elements lies on the fixed wire; the same on host and device.
template <class Codec>
struct wire_geometry {
  using F = collective::detail::fixed_wire<Codec>;
  using W = collective::detail::wire<Codec>;
  std::uint64_t count = 0, chunk = 0, seg = 0, segments = 0, per_seg = 0;  // per_seg: chunks per segment
  std::uint32_t permille = 0;

  wire_geometry() = default;
  wire_geometry(std::uint64_t n, std::uint64_t chunk_elems, std::uint64_t segment_elems, std::uint32_t p)
      : count(n), chunk(chunk_elems), permille(p) {
    seg = segment_elems == 0 ? n : (segment_elems + chunk - 1) / chunk * chunk;
    if (seg > n) seg = n;
    segments = seg ? (n + seg - 1) / seg : 0;
    per_seg = seg ? (seg + chunk - 1) / chunk : 0;
  }
  ZIPCCL_HOST_DEVICE std::uint64_t chunks() const { return count ? (count + chunk - 1) / chunk : 0; }
  ZIPCCL_HOST_DEVICE std::uint64_t chunk_elems(std::uint64_t c) const {
    return count - c * chunk < chunk ? count - c * chunk : chunk;
  }
  ZIPCCL_HOST_DEVICE std::uint64_t seg_elems(std::uint64_t s) const { return count - s * seg < seg ? count - s * seg : seg; }
  ZIPCCL_HOST_DEVICE std::uint64_t seg_bytes(std::uint64_t s) const {
    return F::segment_bytes(seg_elems(s), chunk, permille);
  }
  ZIPCCL_HOST_DEVICE std::uint64_t seg_offset(std::uint64_t s) const { return s * F::segment_bytes(seg, chunk, permille); }
  ZIPCCL_HOST_DEVICE std::uint64_t total_bytes() const {
    return segments ? seg_offset(segments - 1) + seg_bytes(segments - 1) : 0;
  }
  ZIPCCL_HOST_DEVICE std::uint64_t stride() const { return format::chunk_layout<typename Codec::element_type>::stored_bytes(chunk); }
  ZIPCCL_HOST_DEVICE std::uint64_t staging_bytes() const { return chunks() * stride(); }
  // Segments [s0, s1): their chunks [chunk_begin(s0), chunk_end(s1)).
  ZIPCCL_HOST_DEVICE std::uint64_t chunk_begin(std::uint64_t s0) const { return s0 * per_seg; }
  ZIPCCL_HOST_DEVICE std::uint64_t chunk_end(std::uint64_t s1) const {
    return s1 * per_seg < chunks() ? s1 * per_seg : chunks();
  }
  // The seal of chunk c: chunk c % per_seg of segment c / per_seg (fixed_wire::place).
  ZIPCCL_HOST_DEVICE format::chunk_seal seal(bool checksum, std::uint64_t c) const {
    return F::place(count, c / per_seg).seal(checksum, c % per_seg);
  }
};

// The span of a chunk from its fixed part (the stream's rules), or 0 when it breaks them: the
// header (3-bit policies: stored and coded chunks only), or the header and the zero mask's room
// (codebook::entropy: any mode), as wire::chunk_span reads it on the host.
template <class Codec>
__device__ __forceinline__ std::uint64_t chunk_span_of(const std::uint8_t* chunk, std::uint64_t m) {
  using E = typename Codec::element_type;
  using W = collective::detail::wire<Codec>;
  if constexpr (W::rans) return codec_detail::chunk_span_from_head<E>(chunk, W::chunk_fixed(m), m);
  else return codec_detail::dense_chunk_span<E>(format::read_chunk_header(chunk), m);
}

__device__ __forceinline__ void copy_bytes(std::uint8_t* dst, const std::uint8_t* src, std::uint64_t n) {
  if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15u) == 0) {
    const std::uint64_t v = n / 16;
    for (std::uint64_t i = threadIdx.x; i < v; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    for (std::uint64_t i = v * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  } else {
    for (std::uint64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

// Chunk c of `src` (count elements) coded into staging slot c.
template <class Codec, class Tuning>
__global__ void __launch_bounds__(Tuning::threads)
    encode_kernel(const std::uint8_t* src, wire_geometry<Codec> g, std::uint64_t c0, std::uint8_t* staging,
                  bool checksum, typename Codec::codebook_type policy) {
  using E = typename Codec::element_type;
  using enc = block_encode<E, typename Codec::codebook_type, Tuning::threads, Tuning::items_per_thread>;
  __shared__ typename enc::TempStorage temp;
  const std::uint64_t c = c0 + blockIdx.x, m = g.chunk_elems(c);
  typename enc::runs_type v;
  enc::load(src + c * g.chunk * Codec::element_size, m, v);
  enc e(temp, policy, collective::detail::wire<Codec>::rans);  // zero masks with rANS only
  (void)e.plan(v, m);
  e.write(v, m, staging + c * g.stride(), g.seal(checksum, c));
}

// The sums over a segment's chunks before chunk j and in all, of f(chunk i) (one block).
template <class F>
__device__ void segment_sums(std::uint64_t first, std::uint64_t last, std::uint64_t c, F&& f,
                             unsigned long long* before, unsigned long long* total) {
  __shared__ unsigned long long sb, st;
  if (threadIdx.x == 0) sb = st = 0;
  __syncthreads();
  for (std::uint64_t i = first + threadIdx.x; i < last; i += blockDim.x) {
    const unsigned long long v = f(i);
    atomicAdd(&st, v);
    if (i < c) atomicAdd(&sb, v);
  }
  __syncthreads();
  *before = sb;
  *total = st;
  __syncthreads();
}

// Moves staging slot c to its place on the wire (one block per chunk).
template <class Codec>
__global__ void pack_kernel(const std::uint8_t* staging, wire_geometry<Codec> g, std::uint64_t c0, std::uint8_t* wire,
                            unsigned long long* key, std::uint64_t stage) {
  using E = typename Codec::element_type;
  using W = collective::detail::wire<Codec>;
  using F = collective::detail::fixed_wire<Codec>;
  const std::uint64_t c = c0 + blockIdx.x, s = c / g.per_seg, j = c % g.per_seg;
  const std::uint64_t first = s * g.per_seg, last = first + g.per_seg < g.chunks() ? first + g.per_seg : g.chunks();
  // (the encoder's own chunks: a span of 0 cannot happen; were it to, the segment overflows
  // rather than a tail wrapping around)
  auto tail_of = [&](std::uint64_t i) -> unsigned long long {
    const std::uint64_t m = g.chunk_elems(i);
    const std::uint64_t span = chunk_span_of<Codec>(staging + i * g.stride(), m);
    return span >= W::chunk_fixed(m) ? span - W::chunk_fixed(m) : ~0ull >> 8;
  };
  unsigned long long before = 0, total = 0;
  segment_sums(first, last, c, tail_of, &before, &total);
  const std::uint64_t m_seg = g.seg_elems(s), room = F::spill_bytes(m_seg, g.permille);
  std::uint8_t* seg = wire + g.seg_offset(s);
  const bool overflow = total > room;
  if (j == 0 && threadIdx.x == 0) {
    format::store_le<std::uint64_t>(seg, g.count);
    format::store_le<std::uint64_t>(seg + 8, F::tag(s, overflow));
    if (overflow) record(key, stage, check_position(s, g.per_seg, 0), status::wire_overflow);
  }
  if (overflow) return;
  const std::uint64_t m = g.chunk_elems(c), f = W::chunk_fixed(m);
  const std::uint8_t* slot = staging + c * g.stride();
  const std::uint64_t span = chunk_span_of<Codec>(slot, m);
  std::uint8_t* spill = seg + F::preamble + W::fixed_bytes(m_seg, g.chunk);
  copy_bytes(seg + F::preamble + j * W::chunk_fixed(g.chunk), slot, f);
  copy_bytes(spill + before, slot + f, span - f);
  if (c + 1 == last)
    for (std::uint64_t i = total + threadIdx.x; i < room; i += blockDim.x) spill[i] = 0;
}

// Checks received segments and joins each chunk into its staging slot; spans[c] = the chunk's
// span, or 0 when its segment failed a check (the error is recorded). Host order of the checks:
// preamble, overflow bit, chunk headers, the tails' total, the spill's zeros.
template <class Codec>
__global__ void unpack_kernel(const std::uint8_t* wire, wire_geometry<Codec> g, std::uint64_t c0, std::uint8_t* staging,
                              std::uint64_t* spans, unsigned long long* key, std::uint64_t stage) {
  using E = typename Codec::element_type;
  using W = collective::detail::wire<Codec>;
  using F = collective::detail::fixed_wire<Codec>;
  const std::uint64_t c = c0 + blockIdx.x, s = c / g.per_seg, j = c % g.per_seg;
  const std::uint64_t first = s * g.per_seg, last = first + g.per_seg < g.chunks() ? first + g.per_seg : g.chunks();
  const std::uint8_t* seg = wire + g.seg_offset(s);
  const std::uint64_t m_seg = g.seg_elems(s), room = F::spill_bytes(m_seg, g.permille);
  const std::uint8_t* fixed = seg + F::preamble;
  const std::uint8_t* spill = fixed + W::fixed_bytes(m_seg, g.chunk);
  const std::uint64_t pos = check_position(s, g.per_seg, 0);
  __shared__ int bad;
  if (threadIdx.x == 0) {
    bad = 0;
    const std::uint64_t word = format::load_le<std::uint64_t>(seg + 8);
    if (format::load_le<std::uint64_t>(seg) != g.count || (word & ~F::overflow_bit) != F::tag(s, false)) {
      bad = 1;
      if (j == 0) record(key, stage, pos, status::size_mismatch);
    } else if (word & F::overflow_bit) {
      bad = 1;
      if (j == 0) record(key, stage, pos, status::wire_overflow);
    }
  }
  __syncthreads();
  if (bad) {
    if (threadIdx.x == 0) spans[c] = 0;
    return;
  }
  // every header of the segment, for the tail offsets and the checks
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ~0ull;
  __syncthreads();
  auto tail_of = [&](std::uint64_t i) -> unsigned long long {
    const std::uint64_t m = g.chunk_elems(i);
    const std::uint8_t* h = fixed + (i - first) * W::chunk_fixed(g.chunk);
    const std::uint64_t span = chunk_span_of<Codec>(h, m);
    if (span == 0) {
      atomicMin(&first_bad, static_cast<unsigned long long>(i - first));
      return 0;
    }
    return span - W::chunk_fixed(m);
  };
  unsigned long long before = 0, total = 0;
  segment_sums(first, last, c, tail_of, &before, &total);
  status verdict = status::success;
  std::uint64_t where = 0;
  if (first_bad != ~0ull) {
    verdict = status::corrupt;
    where = 1 + first_bad;
  } else if (total > room) {
    verdict = status::corrupt;
    where = 1 + g.per_seg;
  } else {
    __shared__ int nonzero;
    if (threadIdx.x == 0) nonzero = 0;
    __syncthreads();
    for (std::uint64_t i = total + threadIdx.x; i < room; i += blockDim.x)
      if (spill[i] != 0) nonzero = 1;
    __syncthreads();
    if (nonzero) {
      verdict = status::corrupt;
      where = 2 + g.per_seg;
    }
  }
  if (verdict != status::success) {
    if (threadIdx.x == 0) {
      if (j == 0) record(key, stage, pos + where, verdict);
      spans[c] = 0;
    }
    return;
  }
  const std::uint64_t m = g.chunk_elems(c), f = W::chunk_fixed(m);
  const std::uint8_t* h = fixed + j * W::chunk_fixed(g.chunk);
  const std::uint64_t span = chunk_span_of<Codec>(h, m);
  std::uint8_t* slot = staging + c * g.stride();
  copy_bytes(slot, h, f);
  copy_bytes(slot + f, spill + before, span - f);
  if (threadIdx.x == 0) spans[c] = span;
}

// What decode_kernel does with a decoded chunk.
enum class decode_mode {
  store,       // out = decoded
  add_store,   // out = decoded + local (the last reduce_scatter hop)
  add_encode,  // the next hop's staging slot = encode(decoded + local)
};

// Decodes staging slot c (one block per chunk), as mode says. Where spans[c] is 0 the chunk's
// segment failed its checks: nothing is decoded, and add_encode still codes a chunk (of the local
// values) so that the next hop sends a well-formed segment and the ranks stay in step.
template <class Codec, class Tuning, decode_mode Mode>
__global__ void __launch_bounds__(Tuning::threads)
    decode_kernel(const std::uint8_t* staging, const std::uint64_t* spans, wire_geometry<Codec> g, std::uint64_t c0,
                  bool checksum,
                  std::uint8_t* out, const std::uint8_t* local, std::uint8_t* next_staging,
                  typename Codec::codebook_type policy, unsigned long long* key, std::uint64_t stage) {
  using E = typename Codec::element_type;
  using bits = typename E::bits_type;
  constexpr bool rans = collective::detail::wire<Codec>::rans;
  static_assert(!rans || block_decode_takes_rans<E, Tuning::threads>,
                "zipccl device collectives: codebook::entropy takes a tuning of at most 512 threads (fp32: 256)");
  using dec = block_decode<E, Tuning::threads, rans>;
  using enc = block_encode<E, typename Codec::codebook_type, Tuning::threads, Tuning::items_per_thread>;
  constexpr int T = Tuning::threads;
  __shared__ union {
    typename dec::TempStorage d;
    typename enc::TempStorage e;
  } temp;
  const std::uint64_t c = c0 + blockIdx.x, m = g.chunk_elems(c), span = spans[c];
  const std::uint64_t s = c / g.per_seg, j = c % g.per_seg;
  const std::uint64_t at = c * g.chunk * Codec::element_size;
  if constexpr (Mode == decode_mode::store) {
    if (span == 0) return;
    const status st = dec(temp.d).decode(staging + c * g.stride(), span, m, g.seal(checksum, c), out + at);
    if (st != status::success && threadIdx.x == 0) record(key, stage, check_position(s, g.per_seg, 3 + g.per_seg + j), st);
  } else {
    typename enc::runs_type v, mine;
    enc::load(local + at, m, mine);
#pragma unroll
    for (int r = 0; r < Tuning::items_per_thread / 8; ++r)
#pragma unroll
      for (int i = 0; i < 8; ++i) v[r][i] = mine[r][i];
    if (span != 0) {
      const status st = dec(temp.d).decode_runs(staging + c * g.stride(), span, m, g.seal(checksum, c),
                                                [&](std::uint64_t first, unsigned valid, const bits(&d)[8]) {
                                                  const int r = static_cast<int>(first / (8ull * T));
#pragma unroll
                                                  for (unsigned i = 0; i < 8; ++i)
                                                    if (i < valid) v[r][i] = collective::detail::add<E>(d[i], mine[r][i]);
                                                });
      if (st != status::success && threadIdx.x == 0) record(key, stage, check_position(s, g.per_seg, 3 + g.per_seg + j), st);
    }
    __syncthreads();  // the decoder's shared memory becomes the encoder's
    if constexpr (Mode == decode_mode::add_store) {
      const std::uint64_t n8 = (m + 7) / 8;
      for (int r = 0; r < Tuning::items_per_thread / 8; ++r) {
        const std::uint64_t run = static_cast<std::uint64_t>(r) * T + threadIdx.x;
        if (run < n8) {
          const std::uint64_t first = run * 8;
          store_run<E>(out + at + first * Codec::element_size, m - first >= 8 ? 8u : static_cast<unsigned>(m - first), v[r]);
        }
      }
    } else {
      enc e(temp.e, policy, rans);  // zero masks with rANS only
      (void)e.plan(v, m);
      e.write(v, m, next_staging + c * g.stride(), g.seal(checksum, c));
    }
  }
}

// dst = src + local, element by element (the plain reduce_scatter's hop).
template <class E>
__global__ void add_kernel(std::uint8_t* dst, const std::uint8_t* src, const std::uint8_t* local, std::uint64_t n) {
  using bits = typename E::bits_type;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const bits a = format::load_le<bits>(src + i * sizeof(bits)), b = format::load_le<bits>(local + i * sizeof(bits));
    format::store_le<bits>(dst + i * sizeof(bits), collective::detail::add<E>(a, b));
  }
}

// dst = dst / ranks (op::avg, once at the end).
template <class E>
__global__ void divide_kernel(std::uint8_t* dst, std::uint64_t n, int ranks) {
  using bits = typename E::bits_type;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    format::store_le<bits>(dst + i * sizeof(bits), collective::detail::divide_by<E>(format::load_le<bits>(dst + i * sizeof(bits)), ranks));
}

// Sets a transport's device error word (transport/device.hpp, optional) unless it is set already.
__device__ __forceinline__ void end_world(int* error_word, status why) {
  if (error_word == nullptr) return;
  volatile int* w = error_word;
  if (*w == 0) *w = static_cast<int>(why);
  __threadfence_system();
}

// The agreements (collective/common.hpp's, on the device): each rank holds {worst status,
// smallest signature, largest signature}; a round folds in what a peer sent and readies the
// next round's incoming words.
struct agreement_words {
  unsigned long long mine[3];
  unsigned long long in[3];
};

template <class = void>
__global__ void agree_init_kernel(agreement_words* w, unsigned long long* key, unsigned long long signature,
                                  bool opening) {
  if (threadIdx.x != 0) return;
  if (opening) *key = no_error;
  w->mine[0] = static_cast<unsigned long long>(key_status(*key));
  w->mine[1] = w->mine[2] = signature;
  for (int i = 0; i < 3; ++i) w->in[i] = w->mine[i];
}

template <class = void>
__global__ void agree_round_kernel(agreement_words* w) {
  if (threadIdx.x != 0) return;
  w->mine[0] = w->in[0] > w->mine[0] ? w->in[0] : w->mine[0];
  w->mine[1] = w->in[1] < w->mine[1] ? w->in[1] : w->mine[1];
  w->mine[2] = w->in[2] > w->mine[2] ? w->in[2] : w->mine[2];
  for (int i = 0; i < 3; ++i) w->in[i] = w->mine[i];
}

// After the opening agreement: signatures that differ are size_mismatch on every rank; the
// transport's error word (when it has one) then ends its world, so no rank waits for a message
// another rank will not send.
template <class = void>
__global__ void agree_open_kernel(agreement_words* w, unsigned long long* key, int* error_word) {
  if (threadIdx.x != 0) return;
  if (w->mine[1] != w->mine[2]) {
    record(key, 0, 0, status::size_mismatch);
    end_world(error_word, status::size_mismatch);
  }
}

// send / recv: each end holds {0, s, s} with s = the call's signature on the sending end and its
// complement on the receiving end, and has received the peer's words: a matched pair sees the
// complement of its own s (two senders, two receivers or another call do not).
template <class = void>
__global__ void p2p_check_kernel(agreement_words* w, unsigned long long* key, int* error_word) {
  if (threadIdx.x != 0) return;
  if (w->in[1] != ~w->mine[1]) {
    record(key, 0, 0, status::size_mismatch);
    end_world(error_word, status::size_mismatch);
  }
}

// The call's outcome: size_mismatch when the transport's world was ended by calls that differ
// (whatever this rank decoded afterwards is moot); its own first error; peer_failed when another
// rank failed or the world ended otherwise; else success.
// `failed`: not success when the host could not enqueue the whole call (its outcome then).
template <class = void>
__global__ void agree_close_kernel(const agreement_words* w, const unsigned long long* key, const int* error_word,
                                   status* out, status failed) {
  if (threadIdx.x != 0) return;
  if (failed != status::success) {
    *out = failed;
    return;
  }
  const int ended = error_word ? *static_cast<const volatile int*>(error_word) : 0;
  status s = key_status(*key);
  if (ended == static_cast<int>(status::size_mismatch)) s = status::size_mismatch;
  else if (ended != 0 && key_stage(*key) != 0) s = status::peer_failed;  // data after the end is garbage
  else if (s == status::success && (w->mine[0] != 0 || ended != 0)) s = status::peer_failed;
  *out = s;
}

}  // namespace zipccl::cuda::detail
