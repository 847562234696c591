// zipccl: the small kernels of the device subspace codec (the matrix products go to cuBLAS):
// anchor-row gathers and gradient scatters with token-id checks, element-wise steps of the
// Stiefel optimizer, a sum of squares, and the residual-VQ search and decode. Grid-stride loops;
// 64-bit indices.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <cub/block/block_reduce.cuh>

#include "../../../error.hpp"
#include "../../rvq_shape.hpp"

namespace zipccl::subspace::cuda::detail {

constexpr unsigned threads = 256;

inline unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b == 0 ? 1 : (b > 4096 ? 4096 : b));
}

__device__ inline std::size_t first_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t grid_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

// The first error of a call wins; the call cleared *st to success before its first kernel.
__device__ inline void report(status* st, status e) {
  atomicCAS(reinterpret_cast<int*>(st), static_cast<int>(status::success), static_cast<int>(e));
}

// out (n x r) = table[tok[t]]; a token id outside [0, vocab) gives a zero row and invalid_argument.
template <class T>
__global__ void gather_rows(const std::int32_t* tok, std::size_t n, const T* table, std::size_t vocab, std::size_t r,
                            T* out, status* st) {
  for (std::size_t i = first_index(); i < n * r; i += grid_stride()) {
    const std::size_t t = i / r, k = i % r;
    const std::int32_t id = tok[t];
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) {
      out[i] = T(0);
      if (k == 0) report(st, status::invalid_argument);
    } else {
      out[i] = table[static_cast<std::size_t>(id) * r + k];
    }
  }
}

// de[tok[t]] += scale * g[t] (g: n x r); rows of invalid ids are skipped and reported.
template <class T>
__global__ void scatter_add_rows(const std::int32_t* tok, std::size_t n, const T* g, T scale, T* de,
                                 std::size_t vocab, std::size_t r, status* st) {
  for (std::size_t i = first_index(); i < n * r; i += grid_stride()) {
    const std::size_t t = i / r, k = i % r;
    const std::int32_t id = tok[t];
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) {
      if (k == 0) report(st, status::invalid_argument);
    } else {
      atomicAdd(de + static_cast<std::size_t>(id) * r + k, scale * g[i]);
    }
  }
}

// S <- (S + S^T) / 2 for an r x r matrix (each pair once; the diagonal is unchanged).
template <class T>
__global__ void symmetrize(T* s, std::size_t r) {
  for (std::size_t i = first_index(); i < r * r; i += grid_stride()) {
    const std::size_t row = i / r, col = i % r;
    if (row < col) {
      const T m = (s[row * r + col] + s[col * r + row]) / 2;
      s[row * r + col] = m;
      s[col * r + row] = m;
    }
  }
}

// out = alpha x + beta y
template <class T>
__global__ void axpby(std::size_t n, T alpha, const T* x, T beta, const T* y, T* out) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) out[i] = alpha * x[i] + beta * y[i];
}

// *flags |= bit when any element is NaN or infinite.
template <class T>
__global__ void flag_non_finite(std::size_t n, const T* x, int* flags, int bit) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    if (!isfinite(x[i])) atomicOr(flags, bit);
}

// *acc += sum of x[i]^2 (in double; *acc cleared before).
template <class T>
__global__ void sum_squares(std::size_t n, const T* x, double* acc) {
  using reduce = cub::BlockReduce<double, threads>;
  __shared__ typename reduce::TempStorage temp;
  double s = 0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) s += static_cast<double>(x[i]) * x[i];
  const double total = reduce(temp).Sum(s);
  if (threadIdx.x == 0) atomicAdd(acc, total);
}

// x /= sqrt(*norm2); a zero or non-finite norm sets `bit` in *flags and leaves x as it is.
template <class T>
__global__ void scale_to_unit(std::size_t n, T* x, const double* norm2, int* flags, int bit) {
  const double s = *norm2;
  if (!(s > 0) || !isfinite(s)) {
    if (first_index() == 0) atomicOr(flags, bit);
    return;
  }
  const T inv = static_cast<T>(1.0 / sqrt(s));
  for (std::size_t i = first_index(); i < n; i += grid_stride()) x[i] *= inv;
}

// dst = src unless one of `mask`'s bits is set in *flags.
template <class T>
__global__ void copy_unless(std::size_t n, const T* src, T* dst, const int* flags, int mask) {
  if (*flags & mask) return;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) dst[i] = src[i];
}

// *st = e when one of `mask`'s bits is set in *flags.
template <class = void>
__global__ void status_if(const int* flags, int mask, status* st, status e) {
  if (first_index() == 0 && (*flags & mask)) report(st, e);
}

// Residual VQ search, one warp per (token, group): the residual of the group lives in `res`
// (n x dim, the caller's temp); each round the lanes split the codewords, the warp takes the
// nearest (the lowest index among equals, as the host does) and subtracts it.
template <class T>
__global__ void rvq_search(const T* words, rvq_shape s, const T* z, std::size_t n, T* res, std::uint16_t* idx) {
  const std::size_t S = s.sub(), G = s.groups, R = s.rounds, K = s.codewords;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = grid_stride() / 32;
  for (std::size_t w = first_index() / 32; w < n * G; w += warps) {
    const std::size_t t = w / G, g = w % G;
    T* r = res + t * s.dim + g * S;
    for (std::size_t j = lane; j < S; j += 32) r[j] = z[t * s.dim + g * S + j];
    __syncwarp();
    for (std::size_t q = 0; q < R; ++q) {
      const T* book = words + (g * R + q) * K * S;
      double best = INFINITY;
      std::uint32_t arg = 0xFFFFFFFFu;
      for (std::size_t k = lane; k < K; k += 32) {
        const double dist = subspace::detail::rvq_distance(r, book + k * S, S);
        if (dist < best) {
          best = dist;
          arg = static_cast<std::uint32_t>(k);
        }
      }
      for (int off = 16; off > 0; off /= 2) {
        const double ob = __shfl_down_sync(0xFFFFFFFFu, best, off);
        const std::uint32_t oa = __shfl_down_sync(0xFFFFFFFFu, arg, off);
        if (ob < best || (ob == best && oa < arg)) {
          best = ob;
          arg = oa;
        }
      }
      arg = __shfl_sync(0xFFFFFFFFu, arg, 0);
      if (arg == 0xFFFFFFFFu) arg = 0;  // every distance NaN: the host keeps word 0 too
      if (lane == 0) idx[(t * G + g) * R + q] = static_cast<std::uint16_t>(arg);
      const T* c = book + static_cast<std::size_t>(arg) * S;
      __syncwarp();
      for (std::size_t j = lane; j < S; j += 32) r[j] -= c[j];
      __syncwarp();
    }
  }
}

// z_hat (n x dim) from the indices, the rounds added in order; an index >= K gives invalid_argument.
template <class T>
__global__ void rvq_sum(const T* words, rvq_shape s, const std::uint16_t* idx, std::size_t n, T* z, status* st) {
  const std::size_t S = s.sub(), G = s.groups, R = s.rounds, K = s.codewords;
  for (std::size_t i = first_index(); i < n * s.dim; i += grid_stride()) {
    const std::size_t t = i / s.dim, col = i % s.dim, g = col / S, j = col % S;
    T v = T(0);
    for (std::size_t q = 0; q < R; ++q) {
      const std::uint16_t k = idx[(t * G + g) * R + q];
      if (k >= K) {
        report(st, status::invalid_argument);
        continue;
      }
      v += words[((g * R + q) * K + k) * S + j];
    }
    z[i] = v;
  }
}

}  // namespace zipccl::subspace::cuda::detail
