// zipccl: the device transport concept, what the device collectives need from a communicator.
//
// A device transport moves device byte ranges in stream order, as NCCL's point-to-point calls do.
// Every member is a host call that enqueues work on the given stream and allocates nothing. It may
// wait on the host for its peers' matching calls (transport::cuda_local matches messages on the
// host; NCCL's group end may wait to connect), never for device work, so the collectives built on
// it can be captured in a CUDA graph when the transport's work can be. A device transport is any
// type with the members listed at is_device_transport below; three optional sets follow it.
//
// Calls return invalid_argument for a bad peer or a null buffer with a non-zero size, cuda_error
// when enqueueing failed (cuda::last_error() tells why), peer_failed once the communicator has
// ended. zipccl provides transport::cuda_local (N ranks of one process on one GPU or several: the
// test bed and simulator, cuda_local.cuh) and transport::nccl (a user's ncclComm_t, nccl.hpp);
// examples/custom_device_transport.cu adapts a user's own communicator in a few dozen lines.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../error.hpp"

namespace zipccl::transport {

// A device transport is any type with these members:
//
//   int rank() const;  int size() const;
//   status send(int peer, const void* buf, std::uint64_t bytes, cudaStream_t stream);
//   status recv(int peer, void* buf, std::uint64_t bytes, cudaStream_t stream);
//       buf is device memory that stays valid, and (send) unchanged, until the operation has
//       completed in stream order. Between two ranks, messages are matched in the order they
//       were enqueued; a receive of another size than the message is an error (below).
//   status group_start();  status group_end();
//       The sends and receives enqueued between them form one group: they may progress in any
//       order, so a rank can send to one peer and receive from another in one step without
//       deadlock (as ncclGroupStart / ncclGroupEnd). Outside a group, a send may not complete
//       until its receiver has enqueued the matching receive, and a message to oneself is
//       invalid_argument. The device collectives never nest groups.
//   status async_error();
//       success, or the error that has ended the communicator asynchronously (a peer that failed
//       or aborted, a size that did not match). It never waits for device work or for a peer (a
//       caller polls it); it may wait for a call on the same communicator in progress on another
//       thread, as NCCL allows one thread at a time on a communicator (transport::nccl releases
//       its lock whenever one of its calls waits).
//   void abort(status why);
//       ends the communicator: operations still pending and later ones complete without moving
//       new data, and async_error() reports an error, on every rank the transport can reach
//       (transport::cuda_local: all of them; transport::nccl: ncclCommAbort, this rank only, the
//       others need their own watchdog, as with NCCL itself). Only the caller calls it: the
//       device collectives never do (cuda/collective/common.cuh, "Errors").
namespace detail {
template <class T, class = void>
struct is_device_transport : std::false_type {};
template <class T>
struct is_device_transport<
    T, std::void_t<decltype(std::declval<const T&>().rank()), decltype(std::declval<const T&>().size()),
                   decltype(std::declval<T&>().send(0, static_cast<const void*>(nullptr), std::uint64_t{},
                                                    cudaStream_t{})),
                   decltype(std::declval<T&>().recv(0, static_cast<void*>(nullptr), std::uint64_t{}, cudaStream_t{})),
                   decltype(std::declval<T&>().group_start()), decltype(std::declval<T&>().group_end()),
                   decltype(std::declval<T&>().async_error()), decltype(std::declval<T&>().abort(status::success))>>
    : std::bool_constant<
          std::is_same_v<decltype(std::declval<T&>().send(0, static_cast<const void*>(nullptr), std::uint64_t{},
                                                          cudaStream_t{})),
                         status> &&
          std::is_same_v<decltype(std::declval<T&>().recv(0, static_cast<void*>(nullptr), std::uint64_t{},
                                                          cudaStream_t{})),
                         status> &&
          std::is_same_v<decltype(std::declval<T&>().group_start()), status> &&
          std::is_same_v<decltype(std::declval<T&>().group_end()), status> &&
          std::is_same_v<decltype(std::declval<T&>().async_error()), status>> {};
}  // namespace detail

// Optional: int* device_error_word(). A device-visible int that a kernel may set (when it is 0)
// to a status code to end the communicator from the device, with the effect of abort(). The
// device collectives set it when the ranks' calls differ (counts, types, options), which they
// learn on the device. Neither transport of zipccl has one: cuda_local finds messages of different
// sizes on the host; NCCL offers no such word (its checked mode agrees on the call first).
namespace detail {
template <class T, class = void>
struct has_device_error_word : std::false_type {};
template <class T>
struct has_device_error_word<T, std::void_t<decltype(std::declval<T&>().device_error_word())>>
    : std::is_same<decltype(std::declval<T&>().device_error_word()), int*> {};
}  // namespace detail

template <class T>
inline constexpr bool has_device_error_word_v = detail::has_device_error_word<T>::value;

// Optional: status agree(std::uint64_t signature, int peer, cudaStream_t stream). Called by every
// device collective before it enqueues anything, with the call's signature (peer -1: every rank
// calls it with the same one; peer >= 0: send / recv, the two ends pass complements). A host call
// that may wait; size_mismatch where the ranks' signatures differ (transport::nccl's checked mode).
namespace detail {
template <class T, class = void>
struct has_agree : std::false_type {};
template <class T>
struct has_agree<T, std::void_t<decltype(std::declval<T&>().agree(std::uint64_t{}, 0, cudaStream_t{}))>>
    : std::is_same<decltype(std::declval<T&>().agree(std::uint64_t{}, 0, cudaStream_t{})), status> {};
}  // namespace detail

template <class T>
inline constexpr bool has_agree_v = detail::has_agree<T>::value;

// Optional, for pipelined calls (cuda/pipeline.cuh: the transport's operations on a second stream):
//   cudaStream_t transfer_stream() const;  the stream this rank's transfers must run on
//       (cuda::make_pipeline uses it), or nullptr when the transport cannot take pipelined calls:
//       the collectives then refuse pipelined lanes (invalid_argument). Without the member, a
//       pipeline makes a stream of its own.
//   bool accepts_stream(cudaStream_t) const;  whether a stream may carry this rank's work; the
//       pipelined collectives check the caller's stream and the transfer stream with it
//       (transport::cuda_local: any stream of the rank's GPU).
//   int device() const;  the rank's GPU: cuda::make_pipeline makes its stream and events there.
//
// (A member of that name with another signature, or not const, is an error, not silently
// ignored: check_optional_members below.)
namespace detail {
template <class T, class = void>
struct names_transfer_stream : std::false_type {};
template <class T>
struct names_transfer_stream<T, std::void_t<decltype(&T::transfer_stream)>> : std::true_type {};
template <class T, class = void>
struct names_accepts_stream : std::false_type {};
template <class T>
struct names_accepts_stream<T, std::void_t<decltype(&T::accepts_stream)>> : std::true_type {};
template <class T, class = void>
struct has_transfer_stream : std::false_type {};
template <class T>
struct has_transfer_stream<T, std::void_t<decltype(std::declval<const T&>().transfer_stream())>>
    : std::is_same<decltype(std::declval<const T&>().transfer_stream()), cudaStream_t> {};
template <class T, class = void>
struct names_agree : std::false_type {};
template <class T>
struct names_agree<T, std::void_t<decltype(&T::agree)>> : std::true_type {};
template <class T, class = void>
struct names_device : std::false_type {};
template <class T>
struct names_device<T, std::void_t<decltype(&T::device)>> : std::true_type {};
template <class T, class = void>
struct names_device_error_word : std::false_type {};
template <class T>
struct names_device_error_word<T, std::void_t<decltype(&T::device_error_word)>> : std::true_type {};
template <class T, class = void>
struct has_device : std::false_type {};
template <class T>
struct has_device<T, std::void_t<decltype(std::declval<const T&>().device())>>
    : std::is_same<decltype(std::declval<const T&>().device()), int> {};
template <class T, class = void>
struct has_accepts_stream : std::false_type {};
template <class T>
struct has_accepts_stream<T, std::void_t<decltype(std::declval<const T&>().accepts_stream(cudaStream_t{}))>>
    : std::is_same<decltype(std::declval<const T&>().accepts_stream(cudaStream_t{})), bool> {};
}  // namespace detail

template <class T>
inline constexpr bool has_transfer_stream_v = detail::has_transfer_stream<T>::value;
template <class T>
inline constexpr bool has_accepts_stream_v = detail::has_accepts_stream<T>::value;
template <class T>
inline constexpr bool has_device_v = detail::has_device<T>::value;

// A transport that names one of the optional members must give it the concept's signature, so
// that a member with another one is an error rather than silently unused.
template <class T>
constexpr void check_optional_members() {
  static_assert(!detail::names_agree<T>::value || has_agree_v<T>,
                "device transport: agree must be `status agree(std::uint64_t signature, int peer, cudaStream_t)`");
  static_assert(!detail::names_device<T>::value || has_device_v<T>, "device transport: device must be `int device() const`");
  static_assert(!detail::names_device_error_word<T>::value || has_device_error_word_v<T>,
                "device transport: device_error_word must be `int* device_error_word()`");
  static_assert(!detail::names_transfer_stream<T>::value || has_transfer_stream_v<T>,
                "device transport: transfer_stream must be `cudaStream_t transfer_stream() const`");
  static_assert(!detail::names_accepts_stream<T>::value || has_accepts_stream_v<T>,
                "device transport: accepts_stream must be `bool accepts_stream(cudaStream_t) const`");
}

// Whether T models the device transport concept above.
template <class T>
inline constexpr bool is_device_transport_v = detail::is_device_transport<T>::value;

// Holds a group open for its lifetime: group_start() now, group_end() when it goes (or at end(),
// which returns group_end()'s status). An exception that unwinds through it still closes the group.
template <class Transport>
class group_guard {
 public:
  explicit group_guard(Transport& t) : t_(&t), open_(t.group_start() == status::success) {}
  group_guard(const group_guard&) = delete;
  group_guard& operator=(const group_guard&) = delete;
  ~group_guard() {
    if (open_) (void)t_->group_end();
  }
  bool opened() const { return open_; }
  status end() {
    if (!open_) return status::invalid_argument;
    open_ = false;
    return t_->group_end();
  }

 private:
  Transport* t_;
  bool open_;
};

}  // namespace zipccl::transport
