// zipccl: host compression (the reference executor and a fast CPU path).
//
//   using c = zipccl::codec<zipccl::bf16, zipccl::codebook::histogram>;
//   std::vector<std::byte> out(zipccl::host::max_compressed_size<c>(n));
//   std::uint64_t bytes = 0;
//   zipccl::status s = zipccl::host::compress<c>(in, n, out.data(), out.size(), &bytes);
//
// Buffers are the caller's, any alignment; nothing is allocated except, with options.threads > 1,
// the worker threads themselves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../codec/chunk_codec.hpp"
#include "../codec/codec.hpp"
#include "../error.hpp"
#include "../format/stream.hpp"
#include "detail/chunk_dispatch.hpp"
#include "detail/parallel.hpp"

namespace zipccl::host {

struct compress_options {
  std::uint32_t chunk_elems = format::default_chunk_elems;  // multiple of 256, 256 .. 2^24
  bool checksum = false;  // hash every chunk's whole body (docs/format.md)
  unsigned threads = 1;   // > 1: chunks are coded in parallel (needs out_capacity >= the bound)
  bool zero_groups = true;  // leave all-zero 64-element groups out of a chunk where that pays
};

// The exact upper bound on compress()'s output for n elements.
template <class Codec>
constexpr std::uint64_t max_compressed_size(std::uint64_t n,
                                            std::uint32_t chunk_elems = format::default_chunk_elems) {
  return format::max_compressed_size(n, Codec::element_size, chunk_elems);
}

// Compresses n elements at `in` into out (out_capacity bytes); the stream's size goes to
// *out_bytes. The codebook argument carries a stateful policy's data (codebook::fixed's table).
template <class Codec>
status compress(const void* in, std::uint64_t n, void* out, std::uint64_t out_capacity,
                std::uint64_t* out_bytes, const compress_options& opt = {},
                const typename Codec::codebook_type& cb = {}) {
  using E = typename Codec::element_type;
  using L = typename Codec::layout;
  if (out_bytes == nullptr || out == nullptr || (in == nullptr && n != 0)) return status::invalid_argument;
  if (!format::valid_chunk_elems(opt.chunk_elems)) return status::invalid_argument;
  if constexpr (Codec::codebook_type::stat == codebook::statistic::none)
    if (!codebook::valid_table<E>(cb.entries)) return status::invalid_argument;
  const std::uint64_t chunks = format::chunk_count(n, opt.chunk_elems);
  if (chunks > UINT32_MAX) return status::invalid_argument;
  const std::uint64_t data = format::data_offset(chunks);
  if (out_capacity < data) return status::buffer_too_small;
  const auto* src = static_cast<const std::uint8_t*>(in);
  auto* dst = static_cast<std::uint8_t*>(out);
  const std::uint64_t bound = format::max_compressed_size(n, L::elem_size, opt.chunk_elems);
  const std::uint64_t full_stored = L::stored_bytes(opt.chunk_elems);

  // Each part codes its chunks one after another from the worst-case offset of its first chunk;
  // the parts are then moved down in order, which never overlaps wrongly (destination <= source).
  const unsigned parts = out_capacity >= bound ? (opt.threads == 0 ? 1u : opt.threads) : 1u;
  std::vector<std::uint64_t> part_end(parts, 0), part_begin(parts, 0);
  std::vector<status> part_status(parts, status::success);
  detail::fork_join(parts, chunks, [&](unsigned p, std::uint64_t b, std::uint64_t e) {
    std::uint64_t pos = data + b * full_stored;
    part_begin[p] = pos;
    for (std::uint64_t c = b; c < e; ++c) {
      const std::uint64_t m = format::chunk_elements(n, opt.chunk_elems, c);
      if (out_capacity - pos < L::stored_bytes(m)) {
        part_status[p] = status::buffer_too_small;
        break;
      }
      // The directory entry holds the chunk's offset within its part for now.
      format::store_le<std::uint64_t>(dst + format::header_bytes + 8 * c, pos - part_begin[p]);
      // (the part's next chunk read ahead while this one is coded)
      const auto ahead = detail::read_ahead::in_part(src, c, e, n, opt.chunk_elems, L::elem_size);
      pos += detail::encode_chunk<E>(cb, src + c * opt.chunk_elems * L::elem_size, m,
                                     format::writer_seal(E::id, n, opt.checksum, c), opt.zero_groups, dst + pos, ahead);
    }
    part_end[p] = pos;
  });
  for (status s : part_status)
    if (s != status::success) return s;
  std::uint64_t pos = data;
  const unsigned used_parts = static_cast<unsigned>(std::min<std::uint64_t>(parts, std::max<std::uint64_t>(chunks, 1)));
  for (unsigned p = 0; p < used_parts; ++p) {
    const std::uint64_t b = chunks * p / used_parts, e = chunks * (p + 1) / used_parts;
    if (part_begin[p] != pos && part_end[p] > part_begin[p])
      std::memmove(dst + pos, dst + part_begin[p], part_end[p] - part_begin[p]);
    for (std::uint64_t c = b; c < e; ++c) {
      std::uint8_t* entry = dst + format::header_bytes + 8 * c;
      format::store_le<std::uint64_t>(entry, pos + format::load_le<std::uint64_t>(entry));
    }
    pos += part_end[p] - part_begin[p];
  }
  std::uint8_t top_mode = 0;  // the highest chunk mode: the version the stream needs
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint8_t mode = dst[format::directory_entry(dst, c)];
    top_mode = mode > top_mode ? mode : top_mode;
  }
  format::stream_header h;
  h.version = format::writer_version(Codec::codebook_type::kind, top_mode, opt.checksum);
  h.type = E::id;
  h.codebook = Codec::codebook_type::kind;
  h.flags = opt.checksum ? format::flag_checksum : 0u;
  h.chunk_elems = opt.chunk_elems;
  h.count = n;
  h.total_bytes = pos;
  h.chunks = static_cast<std::uint32_t>(chunks);
  if (format::version_binds_chunks(h.version)) h.digest = format::chunk_digest(dst, chunks);
  format::write_header(dst, h);
  *out_bytes = pos;
  return status::success;
}

// Throwing convenience: returns the stream in a new vector.
template <class Codec>
std::vector<std::uint8_t> compress(const void* in, std::uint64_t n, const compress_options& opt = {},
                                   const typename Codec::codebook_type& cb = {}) {
  std::vector<std::uint8_t> out(max_compressed_size<Codec>(n, opt.chunk_elems));
  std::uint64_t bytes = 0;
  throw_if_error(compress<Codec>(in, n, out.data(), out.size(), &bytes, opt, cb), "zipccl::host::compress");
  out.resize(bytes);
  return out;
}

}  // namespace zipccl::host
