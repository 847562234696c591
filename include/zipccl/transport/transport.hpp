// zipccl: the host transport concept.
//
// The collectives need very little from a communicator, so a user can adapt their own in a few
// dozen lines. A host transport is any type with these members (host memory, blocking calls):
//
//   int rank() const;                       this rank, 0 .. size() - 1
//   int size() const;                       ranks in the communicator
//   status send(int dst, const void* buf, std::uint64_t bytes);
//   status recv(int src, void* buf, std::uint64_t bytes);
//   status sendrecv(int dst, const void* sbuf, std::uint64_t sbytes,
//                   int src, void* rbuf, std::uint64_t rbytes);   // both at once, never deadlocks
//   void abort(status why);                 tell every rank to give up: their pending and later
//                                           operations return status::peer_failed
//
// Messages between two ranks arrive in the order they were sent. A receive whose size differs from
// the message's returns status::size_mismatch (nothing is copied past the receiver's buffer). A
// transport never hangs forever on a failed peer: operations fail with peer_failed or timed_out.
//
// Two optional member sets are described below: request-based operations (has_requests_v) and a
// native plain all_gather (has_native_all_gather_v).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../error.hpp"

namespace zipccl::transport {

namespace detail {
template <class T, class = void>
struct is_host_transport : std::false_type {};
template <class T>
struct is_host_transport<
    T, std::void_t<decltype(std::declval<const T&>().rank()), decltype(std::declval<const T&>().size()),
                   decltype(std::declval<T&>().send(0, static_cast<const void*>(nullptr), std::uint64_t{})),
                   decltype(std::declval<T&>().recv(0, static_cast<void*>(nullptr), std::uint64_t{})),
                   decltype(std::declval<T&>().sendrecv(0, static_cast<const void*>(nullptr), std::uint64_t{}, 0,
                                                        static_cast<void*>(nullptr), std::uint64_t{})),
                   decltype(std::declval<T&>().abort(status::success))>>
    : std::bool_constant<std::is_same_v<decltype(std::declval<T&>().send(0, nullptr, 0)), status> &&
                         std::is_same_v<decltype(std::declval<T&>().recv(0, nullptr, 0)), status>> {};
}  // namespace detail

template <class T>
inline constexpr bool is_host_transport_v = detail::is_host_transport<T>::value;

namespace detail {
template <class T, class = void>
struct has_requests : std::false_type {};
template <class T>
struct has_requests<
    T, std::void_t<typename T::request,
                   decltype(std::declval<T&>().isend(0, static_cast<const void*>(nullptr), std::uint64_t{})),
                   decltype(std::declval<T&>().irecv(0, static_cast<void*>(nullptr), std::uint64_t{})),
                   decltype(std::declval<T&>().wait(std::declval<typename T::request&>()))>>
    : std::bool_constant<
          std::is_same_v<decltype(std::declval<T&>().isend(0, nullptr, 0)), typename T::request> &&
          std::is_same_v<decltype(std::declval<T&>().irecv(0, nullptr, 0)), typename T::request> &&
          std::is_same_v<decltype(std::declval<T&>().wait(std::declval<typename T::request&>())), status>> {};
}  // namespace detail

// Whether a host transport offers the optional request-based operations.
//
// Optional, for pipelining: request-based operations. With them the collectives keep transfers in
// flight while they code the next segment; without them they run the same steps in lock step with
// sendrecv (correct, but coding and transfers do not overlap).
//
//   request isend(int dst, const void* buf, std::uint64_t bytes);   buf stays valid until wait()
//   request irecv(int src, void* buf, std::uint64_t bytes);         buf stays valid until wait()
//   status wait(request& r);                                         exactly once per request
//
// `request` is a default-constructible, movable member type; wait() on a default-constructed one
// returns success. Receives from one source complete in the order they were posted, and the
// collectives wait on them in that order too. The collectives wait for every request they post,
// except while an exception unwinds their stack (a transport call or a hook threw): they then
// call abort() and wait for their outstanding sends before their buffers go, and an exception
// from wait() there is swallowed. A transport whose requests can be destroyed before wait()
// should make that safe, as transport::local and transport::mpi do: the operation is withdrawn
// (or keeps a buffer of its own) and the peers are aborted, so no one touches freed memory and
// no one waits for a message that will not come.
template <class T>
inline constexpr bool has_requests_v = detail::has_requests<T>::value;

namespace detail {
template <class T, class = void>
struct has_native_all_gather : std::false_type {};
template <class T>
struct has_native_all_gather<T, std::void_t<decltype(std::declval<T&>().all_gather_bytes(
                                    static_cast<const void*>(nullptr), static_cast<void*>(nullptr), std::uint64_t{}))>>
    : std::is_same<decltype(std::declval<T&>().all_gather_bytes(static_cast<const void*>(nullptr),
                                                                  static_cast<void*>(nullptr), std::uint64_t{})),
                   status> {};
}  // namespace detail

// Whether a host transport offers a native plain all_gather.
//
// Optional, for the plain path: a native uncompressed all_gather of `bytes` per rank, which
// all_gather<Codec, strategy::never> then uses instead of its ring (it moves bytes only, so results
// stay bit-identical). It must return an error on every rank when the ranks' sizes differ.
//
//   status all_gather_bytes(const void* send, void* recv, std::uint64_t bytes);
//
// (There is no native reduce_scatter hook: a native reduction sums in its own order and
// precision, and the plain path must give the compressed path's bits.)
template <class T>
inline constexpr bool has_native_all_gather_v = detail::has_native_all_gather<T>::value;

}  // namespace zipccl::transport
