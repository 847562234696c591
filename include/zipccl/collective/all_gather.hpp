// zipccl: all_gather on a host transport.
//
//   all_gather<Codec, Strategy>(sendbuff, recvbuff, count, transport, workspace, workspace_bytes)
//
// Every rank contributes `count` elements; recvbuff receives size() * count elements, rank r's at
// offset r * count. The compressed path compresses the local shard once, exchanges the streams'
// sizes once (a ring of 8-byte messages), forwards the compressed streams around the ring and
// decompresses them at the end; results are bit-identical to the plain ring's. The workspace is the
// caller's: all_gather_workspace<Codec, Strategy>(count, ranks) bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../format/bytes.hpp"
#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "common.hpp"

namespace zipccl {

template <class Codec, class Strategy = strategy::always>
std::uint64_t all_gather_workspace(std::uint64_t count, int ranks, const collective_options& opt = {}) {
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return all_gather_workspace<Codec, strategy::always>(count, ranks, opt);
  } else if constexpr (std::is_same_v<Strategy, strategy::never>) {
    return 0;
  } else {
    const std::uint64_t bound = format::align_up(host::max_compressed_size<Codec>(count, opt.codec.chunk_elems), 16);
    return format::align_up(8ull * static_cast<std::uint64_t>(ranks), 16) + bound * static_cast<std::uint64_t>(ranks);
  }
}

template <class Codec, class Strategy = strategy::always, class Transport>
status all_gather(const void* sendbuff, void* recvbuff, std::uint64_t count, Transport& t, void* workspace,
                  std::uint64_t workspace_bytes, const collective_options& opt = {},
                  const typename Codec::codebook_type& cb = {}) {
  static_assert(transport::is_host_transport_v<Transport>, "all_gather: Transport must model the host transport concept");
  using namespace collective::detail;
  if constexpr (std::is_same_v<Strategy, strategy::adaptive>) {
    return opt.model.all_gather(count * Codec::element_size, t.size()).compress
               ? all_gather<Codec, strategy::always>(sendbuff, recvbuff, count, t, workspace, workspace_bytes, opt, cb)
               : all_gather<Codec, strategy::never>(sendbuff, recvbuff, count, t, workspace, workspace_bytes, opt, cb);
  }
  const int n = t.size(), r = t.rank();
  const std::uint64_t shard = count * Codec::element_size;
  auto* recv = static_cast<std::uint8_t*>(recvbuff);
  if ((count != 0 && (sendbuff == nullptr || recvbuff == nullptr)) ||
      workspace_bytes < all_gather_workspace<Codec, Strategy>(count, n, opt) ||
      (workspace == nullptr && workspace_bytes != 0))
    return fail(t, status::invalid_argument);
  if (count) std::memmove(recv + static_cast<std::uint64_t>(r) * shard, sendbuff, shard);
  if (n == 1) return status::success;

  if constexpr (std::is_same_v<Strategy, strategy::never>) {
    for (int k = 0; k + 1 < n; ++k) {
      const status s = t.sendrecv(ring_next(r, n), recv + ring_block(r, k, n) * shard, shard, ring_prev(r, n),
                                  recv + ring_block(r, k + 1, n) * shard, shard);
      if (s != status::success) return fail(t, s);
    }
    return status::success;
  } else {
    const std::uint64_t bound = format::align_up(host::max_compressed_size<Codec>(count, opt.codec.chunk_elems), 16);
    auto* sizes = static_cast<std::uint64_t*>(workspace);
    std::uint8_t* blobs = static_cast<std::uint8_t*>(workspace) + format::align_up(8ull * n, 16);
    auto blob = [&](int b) { return blobs + static_cast<std::uint64_t>(b) * bound; };
    status s = host::compress<Codec>(sendbuff, count, blob(r), bound, &sizes[r], opt.codec, cb);
    if (s != status::success) return fail(t, s);
    // the one size exchange of the call
    for (int k = 0; k + 1 < n; ++k) {
      s = t.sendrecv(ring_next(r, n), &sizes[ring_block(r, k, n)], 8, ring_prev(r, n), &sizes[ring_block(r, k + 1, n)], 8);
      if (s != status::success) return fail(t, s);
    }
    for (int b = 0; b < n; ++b)
      if (sizes[b] > bound) return fail(t, status::size_mismatch);  // a peer with another count
    for (int k = 0; k + 1 < n; ++k) {
      const int out = ring_block(r, k, n), in = ring_block(r, k + 1, n);
      s = t.sendrecv(ring_next(r, n), blob(out), sizes[out], ring_prev(r, n), blob(in), sizes[in]);
      if (s != status::success) return fail(t, s);
    }
    status mine = status::success;
    for (int b = 0; b < n && mine == status::success; ++b) {
      if (b == r) continue;
      host::stream_info info;
      mine = host::read_header(blob(b), sizes[b], &info);
      if (mine == status::success && (info.type != Codec::type || info.count != count)) mine = status::size_mismatch;
      if (mine == status::success)
        mine = host::decompress(blob(b), sizes[b], recv + static_cast<std::uint64_t>(b) * shard, shard, nullptr,
                                host::decompress_options{opt.codec.threads});
    }
    return agree(t, mine);
  }
}

}  // namespace zipccl
