// zipccl example: a kernel of the user's own that decodes chunk c of two compressed tensors with
// cuda::block_decode and writes their element-wise sum in fp32: the decoded values go from
// registers to one shared-memory tile and into the sum, never through global memory.
//
// Used by examples/cuda_fused_sum.cu and checked against the host in tests/cuda/test_block_codec.cu.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include <zipccl/cuda/block_decode.cuh>
#include <zipccl/format/stream.hpp>
#include <zipccl/host/decompress.hpp>

namespace example {

template <class E>
__device__ __forceinline__ float to_float(typename E::bits_type b) {
  if constexpr (std::is_same_v<E, zipccl::bf16>) return __uint_as_float(static_cast<unsigned>(b) << 16);
  else if constexpr (std::is_same_v<E, zipccl::fp16>) return __half2float(__ushort_as_half(b));
  else return __uint_as_float(b);
}

struct fused_sum_args {
  const std::uint8_t* a;  // two device streams: same element type, count and chunk size,
  const std::uint8_t* b;  // headers (and directory hashes) checked on the host
  zipccl::format::stream_header ha, hb;
  float* out;                    // count floats
  zipccl::status* chunk_status;  // one per chunk: that chunk's outcome
};

// Where chunk c of a stream is, after checking the two directory entries that bound it.
__device__ __forceinline__ zipccl::status locate(const std::uint8_t* s, const zipccl::format::stream_header& h,
                                                 std::uint64_t c, std::uint64_t* off, std::uint64_t* span) {
  namespace f = zipccl::format;
  const std::uint64_t e = f::directory_entry(s, c);
  const bool ok = f::directory_entry_ok(h, c, e, c ? f::directory_entry(s, c - 1) : 0) &&
                  (c + 1 == h.chunks || f::directory_entry_ok(h, c + 1, f::directory_entry(s, c + 1), e));
  if (!ok) return zipccl::status::corrupt;
  if (!f::chunk_mode_allowed(h, s[e])) return zipccl::status::corrupt;  // zero masks need version 2
  *off = e;
  *span = f::chunk_end(s, h, c) - e;
  return zipccl::status::success;
}

// One block per chunk; MaxChunk >= the streams' chunk size (fused_sum() checks).
template <class E, int Threads, int MaxChunk>
__global__ void __launch_bounds__(Threads) fused_sum_kernel(fused_sum_args args) {
  using decoder = zipccl::cuda::block_decode<E, Threads>;
  using bits = typename E::bits_type;
  __shared__ typename decoder::TempStorage temp;
  __shared__ float tile[MaxChunk];
  const std::uint64_t c = blockIdx.x;
  const zipccl::format::stream_header& h = args.ha;
  const std::uint64_t m = zipccl::format::chunk_elements(h.count, h.chunk_elems, c);
  float* out = args.out + c * h.chunk_elems;
  std::uint64_t off = 0, span = 0;
  zipccl::status s = locate(args.a, args.ha, c, &off, &span);
  // Runs go to threads in a fixed order, so each thread reads back only the tile entries it wrote:
  // no barrier is needed between the two passes.
  if (s == zipccl::status::success)
    s = decoder(temp).decode_runs(args.a + off, span, m, zipccl::format::reader_seal(args.ha, c),
                                  [&](std::uint64_t first, unsigned valid, const bits(&v)[8]) {
                                    for (unsigned i = 0; i < valid; ++i) tile[first + i] = to_float<E>(v[i]);
                                  });
  if (s == zipccl::status::success) s = locate(args.b, args.hb, c, &off, &span);
  if (s == zipccl::status::success)
    s = decoder(temp).decode_runs(args.b + off, span, m, zipccl::format::reader_seal(args.hb, c),
                                  [&](std::uint64_t first, unsigned valid, const bits(&v)[8]) {
                                    for (unsigned i = 0; i < valid; ++i) out[first + i] = tile[first + i] + to_float<E>(v[i]);
                                  });
  if (threadIdx.x == 0) args.chunk_status[c] = s;
}

// a + b in fp32 for two compressed tensors: host copies (to check headers) and device copies of
// both streams. Returns an argument or launch error; each chunk's outcome goes to
// chunk_status_dev (chunks entries). Once every chunk has passed, a caller checks each stream's
// chunk digest on its host copy (format::check_digest: in a checksum stream, that the chunks are
// the ones its header was sealed with), as host::decompress does last.
template <class E, int Threads = 256, int MaxChunk = 4096>
zipccl::status fused_sum(const std::uint8_t* a_host, const std::uint8_t* a_dev, std::uint64_t a_bytes,
                         const std::uint8_t* b_host, const std::uint8_t* b_dev, std::uint64_t b_bytes, float* out_dev,
                         std::uint64_t out_capacity, zipccl::status* chunk_status_dev, cudaStream_t stream) {
  fused_sum_args args{a_dev, b_dev, {}, {}, out_dev, chunk_status_dev};
  zipccl::status s = zipccl::format::read_header(a_host, a_bytes, &args.ha);
  if (s == zipccl::status::success) s = zipccl::format::read_header(b_host, b_bytes, &args.hb);
  if (s != zipccl::status::success) return s;
  if (args.ha.type != E::id || args.hb.type != E::id) return zipccl::status::type_mismatch;
  if (args.ha.count != args.hb.count || args.ha.chunk_elems != args.hb.chunk_elems) return zipccl::status::size_mismatch;
  if (args.ha.chunk_elems > static_cast<std::uint32_t>(MaxChunk)) return zipccl::status::invalid_argument;
  if (args.ha.count * sizeof(float) > out_capacity) return zipccl::status::buffer_too_small;
  if (args.ha.chunks == 0) return zipccl::status::success;
  fused_sum_kernel<E, Threads, MaxChunk><<<args.ha.chunks, Threads, 0, stream>>>(args);
  return cudaPeekAtLastError() == cudaSuccess ? zipccl::status::success : zipccl::status::cuda_error;
}

}  // namespace example
