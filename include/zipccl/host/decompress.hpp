// zipccl: host decompression and header inspection.
//
// The input is untrusted: every header field, directory entry and chunk is validated before it is
// used, and a bad stream yields an error status, never an out-of-bounds access.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../codec/chunk_codec.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/stream.hpp"
#include "detail/chunk_dispatch.hpp"
#include "detail/parallel.hpp"

namespace zipccl::host {

// What a stream holds, read from its header without decoding.
struct stream_info {
  dtype type = dtype::bf16;
  codebook_kind codebook = codebook_kind::analytic_gaussian;
  bool checksum = false;
  std::uint32_t chunk_elems = 0;
  std::uint32_t chunks = 0;
  std::uint64_t count = 0;             // elements
  std::uint64_t compressed_bytes = 0;  // the whole stream
  std::uint64_t decompressed_bytes() const { return count * dtype_size(type); }
};

struct decompress_options {
  unsigned threads = 1;  // > 1: chunks are decoded in parallel
};

// Validates the header (and the directory's hash) of the stream at `in`.
inline status read_header(const void* in, std::uint64_t in_bytes, stream_info* info) {
  if (info == nullptr) return status::invalid_argument;
  format::stream_header h;
  const status s = format::read_header(static_cast<const std::uint8_t*>(in), in_bytes, &h);
  if (s != status::success) return s;
  info->type = h.type;
  info->codebook = h.codebook;
  info->checksum = (h.flags & format::flag_checksum) != 0;
  info->chunk_elems = h.chunk_elems;
  info->chunks = h.chunks;
  info->count = h.count;
  info->compressed_bytes = h.total_bytes;
  return status::success;
}

namespace detail {
template <class E>
status decompress_chunks(const std::uint8_t* in, const format::stream_header& h, std::uint8_t* out,
                         unsigned threads) {
  using L = format::chunk_layout<E>;
  // The directory must be a strictly increasing run of offsets inside the stream.
  std::uint64_t prev = 0;
  for (std::uint64_t c = 0; c < h.chunks; ++c) {
    const std::uint64_t off = format::directory_entry(in, c);
    if (!format::directory_entry_ok(h, c, off, prev)) return status::corrupt;
    prev = off;
  }
  std::vector<status> part_status(std::max(1u, threads), status::success);
  fork_join(threads, h.chunks, [&](unsigned p, std::uint64_t b, std::uint64_t e) {
    // two chunks at a time (decode_chunk_pair: one loop over both where that is faster)
    for (std::uint64_t c = b; c < e; c += 2) {
      const unsigned k = e - c >= 2 ? 2u : 1u;
      const std::uint8_t* chunk[2] = {};
      std::uint64_t span[2] = {}, m[2] = {};
      std::uint8_t* dst[2] = {};
      format::chunk_seal seal[2];
      status s[2] = {status::success, status::success};
      for (unsigned i = 0; i < k; ++i) {
        const std::uint64_t off = format::directory_entry(in, c + i);
        chunk[i] = in + off;
        span[i] = format::chunk_end(in, h, c + i) - off;
        m[i] = format::chunk_elements(h.count, h.chunk_elems, c + i);
        dst[i] = out + (c + i) * h.chunk_elems * L::elem_size;
        seal[i] = format::reader_seal(h, c + i);
        if (!format::chunk_mode_allowed(h, in[off])) s[i] = status::corrupt;
      }
      if (k == 2 && s[0] == status::success && s[1] == status::success)
        detail::decode_chunk_pair<E>(chunk, span, m, seal, dst, s);
      else
        for (unsigned i = 0; i < k; ++i)
          if (s[i] == status::success) s[i] = detail::decode_chunk<E>(chunk[i], span[i], m[i], seal[i], dst[i]);
      for (unsigned i = 0; i < k; ++i)
        if (s[i] != status::success) {
          part_status[p] = s[i];
          return;
        }
    }
  });
  for (status s : part_status)
    if (s != status::success) return s;
  // version 4: every chunk passed its own checks; they must be the chunks the header was sealed with
  return format::check_digest(in, h);
}
}  // namespace detail

// Decodes the stream at `in` (in_bytes available) into out (out_capacity bytes). The element count
// goes to *count_out when it is not null. Bytes past the stream's end are ignored.
inline status decompress(const void* in, std::uint64_t in_bytes, void* out, std::uint64_t out_capacity,
                         std::uint64_t* count_out = nullptr, const decompress_options& opt = {}) {
  format::stream_header h;
  const auto* src = static_cast<const std::uint8_t*>(in);
  status s = format::read_header(src, in_bytes, &h);
  if (s != status::success) return s;
  const std::uint64_t need = h.count * dtype_size(h.type);
  if (need > out_capacity) return status::buffer_too_small;
  if (out == nullptr && need != 0) return status::invalid_argument;
  auto* dst = static_cast<std::uint8_t*>(out);
  const unsigned threads = opt.threads == 0 ? 1u : opt.threads;
  visit_dtype(h.type, [&](auto e) {
    s = detail::decompress_chunks<decltype(e)>(src, h, dst, threads);
  });
  if (s == status::success && count_out != nullptr) *count_out = h.count;
  return s;
}

// As decompress(), but the stream must hold elements of type E.
template <class E>
status decompress_as(const void* in, std::uint64_t in_bytes, void* out, std::uint64_t out_capacity,
                     std::uint64_t* count_out = nullptr, const decompress_options& opt = {}) {
  stream_info info;
  const status s = read_header(in, in_bytes, &info);
  if (s != status::success) return s;
  if (info.type != E::id) return status::type_mismatch;
  return decompress(in, in_bytes, out, out_capacity, count_out, opt);
}

// Throwing convenience: decodes into a new vector of raw bytes.
inline std::vector<std::uint8_t> decompress(const void* in, std::uint64_t in_bytes,
                                            const decompress_options& opt = {}) {
  stream_info info;
  throw_if_error(read_header(in, in_bytes, &info), "zipccl::host::decompress");
  std::vector<std::uint8_t> out(info.decompressed_bytes());
  throw_if_error(decompress(in, in_bytes, out.data(), out.size(), nullptr, opt), "zipccl::host::decompress");
  return out;
}

}  // namespace zipccl::host
