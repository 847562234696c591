// zipccl: reduce_scatter and all_reduce on a host transport (ring algorithms).
//
//   reduce_scatter<Codec, Strategy>(sendbuff, recvbuff, recvcount, op, transport, workspace, bytes)
//
// sendbuff holds size() blocks of recvcount elements; rank r receives the reduction (sum or
// average) of every rank's block r. Each ring hop reduces a received partial result with the local
// block as narrow(widen(received) + widen(local)) in float, whichever path carried it; the
// compressed path is lossless, so it gives bit-identical results to the plain one. Averages divide
// by size() once, at the end.
//
// The compressed path decompresses, reduces and recompresses at every hop. Each hop sends the
// stream's size (8 bytes) before the stream; sending the fixed-size part of every chunk first and
// the escapes after it, so that no size message is needed, is still to do.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "all_gather.hpp"
#include "common.hpp"
#include "detail/arith.hpp"

namespace zipccl {

template <class Codec, class Strategy = strategy::always>
std::uint64_t reduce_scatter_workspace(std::uint64_t recvcount, const collective_options& opt = {}) {
  const std::uint64_t raw = format::align_up(recvcount * Codec::element_size, 16);
  if constexpr (std::is_same_v<Strategy, strategy::never>) return raw;
  else if constexpr (std::is_same_v<Strategy, strategy::adaptive>) return reduce_scatter_workspace<Codec, strategy::always>(recvcount, opt);
  else return raw + 2 * format::align_up(host::max_compressed_size<Codec>(recvcount, opt.codec.chunk_elems), 16);
}

namespace collective::detail {
// dst[i] = narrow(widen(a[i]) + widen(b[i])) for n elements at any alignment.
template <class E>
void accumulate(std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b, std::uint64_t n) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i) {
    const float x = widen<E>(format::load_le<bits>(a + i * sizeof(bits)));
    const float y = widen<E>(format::load_le<bits>(b + i * sizeof(bits)));
    format::store_le<bits>(dst + i * sizeof(bits), narrow<E>(x + y));
  }
}
template <class E>
void divide(std::uint8_t* dst, std::uint64_t n, int ranks) {
  using bits = typename E::bits_type;
  for (std::uint64_t i = 0; i < n; ++i)
    format::store_le<bits>(dst + i * sizeof(bits),
                           narrow<E>(widen<E>(format::load_le<bits>(dst + i * sizeof(bits))) / static_cast<float>(ranks)));
}
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always, class Transport>
status reduce_scatter(const void* sendbuff, void* recvbuff, std::uint64_t recvcount, op reduction, Transport& t,
                      void* workspace, std::uint64_t workspace_bytes, const collective_options& opt = {},
                      const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "reduce_scatter: Transport must model the host transport concept");
  using namespace collective::detail;
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return opt.model.reduce_scatter(recvcount * Codec::element_size, t.size()).compress
               ? reduce_scatter<Codec, strategy::always>(sendbuff, recvbuff, recvcount, reduction, t, workspace,
                                                         workspace_bytes, opt, cb)
               : reduce_scatter<Codec, strategy::never>(sendbuff, recvbuff, recvcount, reduction, t, workspace,
                                                        workspace_bytes, opt, cb);
  }
  using E = typename Codec::element_type;
  const int n = t.size(), r = t.rank();
  const std::uint64_t block = recvcount * Codec::element_size;
  const auto* send = static_cast<const std::uint8_t*>(sendbuff);
  auto* acc = static_cast<std::uint8_t*>(recvbuff);
  const std::uint64_t need = reduce_scatter_workspace<Codec, Strategy>(recvcount, opt);
  if ((recvcount != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || workspace_bytes < need ||
      (workspace == nullptr && need != 0))
    return fail(t, status::invalid_argument);
  if (n == 1) {
    if (block) std::memmove(acc, send, block);
    return status::success;
  }
  auto* incoming = static_cast<std::uint8_t*>(workspace);
  const std::uint64_t raw = format::align_up(block, 16);
  const std::uint64_t bound = format::align_up(host::max_compressed_size<Codec>(recvcount, opt.codec.chunk_elems), 16);
  std::uint8_t* out_blob = incoming + raw;
  std::uint8_t* in_blob = out_blob + bound;
  status mine = status::success;
  // hop k sends block (r - k - 1) and receives block (r - k - 2), both partial sums after hop 0
  for (int k = 0; k + 1 < n; ++k) {
    const std::uint8_t* outgoing = k == 0 ? send + ring_block(r, 1, n) * block : acc;
    const int in_block = ring_block(r, k + 2, n);
    status s;
    if constexpr (std::is_same_v<Strategy, strategy::never>) {
      s = t.sendrecv(ring_next(r, n), outgoing, block, ring_prev(r, n), incoming, block);
      if (s != status::success) return fail(t, s);
    } else {
      std::uint64_t out_bytes = 0, in_bytes = 0;
      s = host::compress<Codec>(outgoing, recvcount, out_blob, bound, &out_bytes, opt.codec, cb);
      if (s != status::success) return fail(t, s);
      s = t.sendrecv(ring_next(r, n), &out_bytes, 8, ring_prev(r, n), &in_bytes, 8);
      if (s != status::success) return fail(t, s);
      if (in_bytes > bound) return fail(t, status::size_mismatch);
      s = t.sendrecv(ring_next(r, n), out_blob, out_bytes, ring_prev(r, n), in_blob, in_bytes);
      if (s != status::success) return fail(t, s);
      host::stream_info info;
      s = host::read_header(in_blob, in_bytes, &info);
      if (s == status::success && (info.type != Codec::type || info.count != recvcount)) s = status::size_mismatch;
      if (s == status::success)
        s = host::decompress(in_blob, in_bytes, incoming, block, nullptr, host::decompress_options{opt.codec.threads});
      if (s != status::success) {
        // keep the ring in step (a corrupt stream must not hang the others), report at the end
        mine = s;
        if (block) std::memset(incoming, 0, block);
      }
    }
    accumulate<E>(acc, incoming, send + static_cast<std::uint64_t>(in_block) * block, recvcount);
  }
  if (reduction == op::avg) divide<E>(acc, recvcount, n);
  if constexpr (std::is_same_v<Strategy, strategy::never>) return status::success;
  else return agree(t, mine);
}

// all_reduce = reduce_scatter + all_gather over size() blocks of ceil(count / size()) elements
// (the tail padded with zeros in the workspace). recvbuff receives count elements.
template <class Codec, class Strategy = strategy::always>
std::uint64_t all_reduce_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  const std::uint64_t per = (count + ranks - 1) / static_cast<std::uint64_t>(ranks);
  const std::uint64_t padded = format::align_up(per * static_cast<std::uint64_t>(ranks) * Codec::element_size, 16);
  const std::uint64_t rs = reduce_scatter_workspace<Codec, Strategy>(per, opt);
  const std::uint64_t ag = all_gather_workspace<Codec, Strategy>(per, ranks, opt);
  return 2 * padded + format::align_up(per * Codec::element_size, 16) + (rs > ag ? rs : ag);
}

template <class Codec, class Strategy = strategy::always, class Transport>
status all_reduce(const void* sendbuff, void* recvbuff, std::uint64_t count, op reduction, Transport& t,
                  void* workspace, std::uint64_t workspace_bytes, const collective_options& opt = {},
                  const typename Codec::codebook_type& cb = {}) {
  const int n = t.size();
  const std::uint64_t elem = Codec::element_size;
  const std::uint64_t per = (count + n - 1) / static_cast<std::uint64_t>(n);
  const std::uint64_t padded = format::align_up(per * static_cast<std::uint64_t>(n) * elem, 16);
  const std::uint64_t need = all_reduce_workspace<Codec, Strategy>(count, n, opt);
  if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) || workspace_bytes < need ||
      (workspace == nullptr && need != 0))
    return collective::detail::fail(t, status::invalid_argument);
  auto* ws = static_cast<std::uint8_t*>(workspace);
  std::uint8_t* in = ws;                 // the input, padded to n * per elements
  std::uint8_t* gathered = ws + padded;  // the all_gather's output
  std::uint8_t* mine = gathered + padded;
  std::uint8_t* rest = mine + format::align_up(per * elem, 16);
  const std::uint64_t rest_bytes = workspace_bytes - (rest - ws);
  if (padded) std::memset(in, 0, padded);
  if (count) std::memcpy(in, sendbuff, count * elem);
  status s = reduce_scatter<Codec, Strategy>(in, mine, per, reduction, t, rest, rest_bytes, opt, cb);
  if (s != status::success) return s;
  s = all_gather<Codec, Strategy>(mine, gathered, per, t, rest, rest_bytes, opt, cb);
  if (s != status::success) return s;
  if (count) std::memcpy(recvbuff, gathered, count * elem);
  return status::success;
}

}  // namespace zipccl
