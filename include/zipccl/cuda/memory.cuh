// zipccl: device memory for the owning convenience layer (cuda::codec_context).
//
//   async_allocator     cudaMallocAsync / cudaFreeAsync on the call's stream (graph capturable).
//                       Any type with the same two members can stand in for it: a caching pool,
//                       a framework's allocator.
//   device_buffer<T>    an owning, move-only array of T in device memory, allocated and freed in
//                       stream order on its stream (rmm's device_uvector in spirit, without
//                       initialisation): reserve() grows it, never shrinks it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "../error.hpp"
#include "runtime.cuh"

namespace zipccl::cuda {

struct async_allocator {
  void* allocate(std::size_t bytes, cudaStream_t stream) const {
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, bytes, stream);
    if (e != cudaSuccess) {
      (void)detail::fail(e, "cuda::async_allocator: cudaMallocAsync");
      return nullptr;
    }
    return p;
  }
  void deallocate(void* p, std::size_t, cudaStream_t stream) const { (void)cudaFreeAsync(p, stream); }
};

template <class T, class Allocator = async_allocator>
class device_buffer {
 public:
  explicit device_buffer(cudaStream_t stream, Allocator alloc = Allocator{}) : stream_(stream), alloc_(std::move(alloc)) {}
  device_buffer(std::size_t count, cudaStream_t stream, Allocator alloc = Allocator{})
      : device_buffer(stream, std::move(alloc)) {
    throw_if_error(reserve(count), "zipccl::cuda::device_buffer");
  }
  ~device_buffer() { release(); }
  device_buffer(device_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), capacity_(std::exchange(o.capacity_, 0)), stream_(o.stream_),
        alloc_(std::move(o.alloc_)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
      stream_ = o.stream_;
      alloc_ = std::move(o.alloc_);
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  // Room for at least `count` elements; the old contents are not kept when it grows (the old
  // block is freed in stream order, so work already enqueued on the stream may still use it).
  // cuda_error when the allocator fails (cuda::last_error() has the cause).
  // Growing while the stream is being captured is invalid_argument: the old block was not
  // allocated in the graph, and a block allocated in it would never be freed by it.
  status reserve(std::size_t count) {
    if (count <= capacity_) return status::success;
    if (count > static_cast<std::size_t>(-1) / sizeof(T)) return status::invalid_argument;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const status q = detail::check(cudaStreamIsCapturing(stream_, &capture), "cuda::device_buffer: cudaStreamIsCapturing");
    if (q != status::success) return q;
    if (capture != cudaStreamCaptureStatusNone) return status::invalid_argument;
    release();
    void* p = alloc_.allocate(count * sizeof(T), stream_);
    if (p == nullptr) return status::cuda_error;
    data_ = static_cast<T*>(p);
    capacity_ = count;
    return status::success;
  }

  // The stream that later frees and allocations are ordered on (the caller makes it wait for
  // the other streams that use the block first).
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  T* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t bytes() const { return capacity_ * sizeof(T); }
  cudaStream_t stream() const { return stream_; }

 private:
  void release() {
    if (data_ != nullptr) alloc_.deallocate(data_, capacity_ * sizeof(T), stream_);
    data_ = nullptr;
    capacity_ = 0;
  }

  T* data_ = nullptr;
  std::size_t capacity_ = 0;
  cudaStream_t stream_;
  Allocator alloc_;
};

}  // namespace zipccl::cuda
