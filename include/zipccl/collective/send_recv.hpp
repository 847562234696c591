// zipccl: compressed point-to-point transfers, for pipeline-parallel stage boundaries.
//
//   send<Codec, Strategy>(sendbuff, count, peer, transport, workspace, workspace_bytes)
//   recv<Codec, Strategy>(recvbuff, count, peer, transport, workspace, workspace_bytes)
//
// Both sides name the same Codec, Strategy and count. The compressed path sends the stream's size
// (8 bytes) and then the stream; the receiver validates and decodes it. A receiver that finds a bad
// stream, a wrong count or a transport error returns it and calls the transport's abort(), so the
// sender's later operations fail rather than wait. strategy::adaptive decides with the cost model
// of one hop, which both sides compute alike.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "common.hpp"

namespace zipccl {

template <class Codec, class Strategy = strategy::always>
std::uint64_t send_recv_workspace(std::uint64_t count, const collective_options& opt = {}) {
  if constexpr (std::is_same_v<Strategy, strategy::never>) return 0;
  else return host::max_compressed_size<Codec>(count, opt.codec.chunk_elems);
}

namespace collective::detail {
template <class Codec, class Strategy>
bool compress_hop(std::uint64_t count, const collective_options& opt) {
  if constexpr (std::is_same_v<Strategy, strategy::never>) return false;
  else if constexpr (std::is_same_v<Strategy, strategy::always>) return true;
  else return opt.model.all_gather(count * Codec::element_size, 2).compress;  // one hop
}
}  // namespace collective::detail

template <class Codec, class Strategy = strategy::always, class Transport>
status send(const void* sendbuff, std::uint64_t count, int peer, Transport& t, void* workspace,
            std::uint64_t workspace_bytes, const collective_options& opt = {},
            const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "send: Transport must model the host transport concept");
  using collective::detail::fail;
  if ((sendbuff == nullptr && count != 0) || peer < 0 || peer >= t.size() ||
      workspace_bytes < send_recv_workspace<Codec, Strategy>(count, opt))
    return fail(t, status::invalid_argument);
  if (!collective::detail::compress_hop<Codec, Strategy>(count, opt)) {
    const status s = t.send(peer, sendbuff, count * Codec::element_size);
    return s == status::success ? s : fail(t, s);
  }
  std::uint64_t bytes = 0;
  status s = host::compress<Codec>(sendbuff, count, workspace, workspace_bytes, &bytes, opt.codec, cb);
  if (s == status::success) s = t.send(peer, &bytes, 8);
  if (s == status::success) s = t.send(peer, workspace, bytes);
  return s == status::success ? s : fail(t, s);
}

template <class Codec, class Strategy = strategy::always, class Transport>
status recv(void* recvbuff, std::uint64_t count, int peer, Transport& t, void* workspace, std::uint64_t workspace_bytes,
            const collective_options& opt = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "recv: Transport must model the host transport concept");
  using collective::detail::fail;
  if ((recvbuff == nullptr && count != 0) || peer < 0 || peer >= t.size() ||
      workspace_bytes < send_recv_workspace<Codec, Strategy>(count, opt))
    return fail(t, status::invalid_argument);
  const std::uint64_t raw = count * Codec::element_size;
  if (!collective::detail::compress_hop<Codec, Strategy>(count, opt)) {
    const status s = t.recv(peer, recvbuff, raw);
    return s == status::success ? s : fail(t, s);
  }
  std::uint64_t bytes = 0;
  status s = t.recv(peer, &bytes, 8);
  if (s == status::success && bytes > workspace_bytes) s = status::size_mismatch;
  if (s == status::success) s = t.recv(peer, workspace, bytes);
  host::stream_info info;
  if (s == status::success) s = host::read_header(workspace, bytes, &info);
  if (s == status::success && (info.type != Codec::type || info.count != count)) s = status::size_mismatch;
  if (s == status::success) s = host::decompress(workspace, bytes, recvbuff, raw);
  return s == status::success ? s : fail(t, s);
}

}  // namespace zipccl
