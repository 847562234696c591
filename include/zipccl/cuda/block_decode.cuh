// zipccl: cuda::block_decode, a block-level collective that validates and decodes one chunk of a
// stream inside the caller's own kernel, in the manner of cub::BlockReduce:
//
//   using decoder = zipccl::cuda::block_decode<zipccl::bf16, 256>;
//   __shared__ typename decoder::TempStorage temp;
//   const zipccl::status s = decoder(temp).decode_runs(chunk, span, m, seal,
//       [&](std::uint64_t first, unsigned valid, const std::uint16_t (&v)[8]) {
//         // elements first .. first + valid - 1 of the chunk, in registers: fuse them into a
//         // reduction, an optimizer step or a GEMM prologue without a round trip through memory
//       });
//
// Every thread of the block must call it, with the same arguments; every thread gets the same
// status back. The chunk's bytes are untrusted: the header rules, the check value and the zero
// padding are checked first (the same rules, in the same order, as the host's decode_chunk, so a
// bad chunk gives the same status on either executor), then every code, escape and padding bit
// while decoding. Accesses stay inside [chunk, chunk + span).
//
// decode_runs() hands each thread runs of up to 8 consecutive elements (raw bit patterns). Runs go
// to threads in a fixed order: run k of the chunk (elements 8k .. 8k + 7) to thread k % Threads,
// so two chunks of the same size decoded one after the other give every thread the same element
// indices. When the status is not success, some runs may already have been handed out: treat
// them as garbage. One block, any Threads that is a multiple of 32 (64..1024).
#pragma once

#include <cub/util_type.cuh>

#include <cstdint>
#include <type_traits>

#include "../codec/chunk_codec.hpp"
#include "../element.hpp"
#include "../error.hpp"
#include "../format/chunk.hpp"
#include "detail/block_io.cuh"
#include "detail/warp_rans.cuh"

namespace zipccl::cuda {

// Whether block_decode<E, Threads, true> keeps its rANS storage (the slot table, a pass's output
// staging and its inputs) within 40 KiB, leaving a caller room in the 48 KiB of static shared
// memory: bf16 and fp16 up to 512 threads, fp32 up to 256.
template <class E, int Threads>
inline constexpr bool block_decode_takes_rans =
    16384 + 8ull * Threads * (sizeof(typename E::bits_type) + 1 + 2 + (sizeof(typename E::bits_type) == 4 ? 2 : 0)) <=
    40960;

// Where a chunk is: chunk c of a stream starts at format::directory_entry(stream, c) and ends at
// format::chunk_end(stream, header, c); it holds format::chunk_elements(header.count,
// header.chunk_elems, c) elements; `seal` is format::reader_seal(header, c) (the header's
// flag_checksum, and in a version 4 stream the chunk's place code). Validate the stream
// header and directory first (cuda::decompress does it in its own kernel; a caller that decodes
// chunks by hand uses format::read_header on the host or in a kernel), and once every chunk has
// passed, the chunks' digest (format::check_digest), which cuda::decompress and the host check
// last.
//
// rANS chunks (codebook::entropy) need Entropy = true: the chunk's 32 coding lanes are the 32
// lanes of the block's first warp, which walks the groups in order (a slot-table lookup in shared
// memory per step, the words of the lanes that renormalise taken in lane order with one ballot)
// and stages each pass's Threads x 8 elements in shared memory, from where every thread takes its
// runs. That adds 16 KiB of shared memory for the slot table and 8 x Threads elements for the
// staging to the TempStorage (block_decode_takes_rans says whether a configuration stays within
// the 48 KiB of static shared memory). With Entropy = false (the default) a rANS chunk gives
// status::unsupported_mode after the host's checks of its header, mask, check value, padding,
// table and states (one warp checks the table: detail::warp_table_ok). cuda::decompress decodes
// rANS with this class wherever block_decode_takes_rans holds, or, with tuning<..., RansWarps > 0>,
// one chunk per warp in a kernel of its own (detail/warp_rans.cuh) after this class built without
// rANS has checked the chunk.
template <class E, int Threads, bool Entropy = false>
class block_decode {
  static_assert(is_element_v<E>, "block_decode: E must be zipccl::bf16, fp16 or fp32");
  static_assert(Threads % 32 == 0 && Threads >= 64 && Threads <= 1024,
                "block_decode: Threads must be a multiple of 32 between 64 and 1024");
  static_assert(!Entropy || block_decode_takes_rans<E, Threads>,
                "block_decode: with Entropy = true, bf16 and fp16 take at most 512 threads and fp32 256 (a pass's "
                "staging of 8 x Threads elements and their inputs and the 16 KiB slot table must fit in shared "
                "memory)");
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  using block_scan = typename detail::block_ops<Threads>::scan;
  using block_reduce = typename detail::block_ops<Threads>::reduce;

  static constexpr bool has_words = sizeof(typename E::bits_type) == 4;  // fp32's 16-bit rest words
  struct rans_storage {
    std::uint32_t slot[codec_detail::rans::prob_total];  // codec_detail::rans::decode_table's words
    typename E::bits_type staged[8 * Threads];           // one pass of the warp's elements
    // the pass's inputs, copied by the whole block so that the warp's steps wait on shared memory
    // only: rest bytes and (fp32) words from the body element j0 on, stream words from next0 on
    std::uint8_t rest[8 * Threads];
    std::uint16_t words[has_words ? 8 * Threads : 1];
    std::uint16_t stream[8 * Threads];
    std::uint64_t j0, next0;
  };
  struct no_rans_storage {};

  struct storage {
    typename detail::block_ops<Threads>::storage cub;
    std::uint8_t header[format::chunk_header_bytes];
    int verdict;
    std::uint64_t zero_elems;  // elements in the zero groups of a zero_* chunk
    std::conditional_t<Entropy, rans_storage, no_rans_storage> rans;
  };

 public:
  using bits_type = typename E::bits_type;

  // Shared memory for one call at a time; reusable after the call returns.
  struct TempStorage : cub::Uninitialized<storage> {};

  __device__ __forceinline__ explicit block_decode(TempStorage& temp) : s_(temp.Alias()) {}

  // Checks a chunk of m elements spanning `span` bytes without decoding it: the header rules (its
  // zero mask's included), the check value (`seal`: format::reader_seal) and the zero
  // padding.
  __device__ status check(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal) {
    format::chunk_header h;
    codec_detail::body_shape body;
    return check_chunk(chunk, span, m, seal, &h, &body);
  }

  // Checks and decodes; op(first, valid, v) receives each run (see the top of this file). The
  // elements of a zero_* chunk's zero groups come as runs of zeros.
  template <class Op>
  __device__ status decode_runs(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                                Op&& op) {
    format::chunk_header h;
    codec_detail::body_shape body;
    const status s = check_chunk(chunk, span, m, seal, &h, &body);
    if (s != status::success) return s;
    if (format::mode_is_rans(h.mode)) {
      if constexpr (Entropy) return decode_rans(chunk, m, h, body, op);
      else return check_rans(chunk, h, body);
    }
    if (!format::mode_is_coded(h.mode)) {
      body_cursor at(body, m);
      for (std::uint64_t base = 0; base < m; base += 8ull * Threads) {
        const std::uint64_t first = base + 8ull * threadIdx.x;
        const std::uint64_t pos = at.place(base, first);
        if (first < m) {
          const unsigned valid = m - first >= 8 ? 8u : static_cast<unsigned>(m - first);
          bits_type v[8] = {};
          if (pos != body_cursor::zeros) detail::load_run<E>(chunk + body.base + pos * L::elem_size, valid, v);
          op(first, valid, v);
        }
      }
      return status::success;
    }
    return decode_coded(chunk, m, h, body, op);
  }

  // Checks and decodes into out (m elements, any alignment).
  __device__ status decode(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                           std::uint8_t* out) {
    return decode_runs(chunk, span, m, seal, [out](std::uint64_t first, unsigned valid, const bits_type(&v)[8]) {
      detail::store_run<E>(out + first * L::elem_size, valid, v);
    });
  }

 private:
  // An 8-byte little-endian word, with one wide load when the address allows.
  __device__ __forceinline__ static std::uint64_t word_at(const std::uint8_t* p) {
    if (detail::aligned_to(p, 8)) return *reinterpret_cast<const unsigned long long*>(p);
    return format::load_le<std::uint64_t>(p);
  }

  // Where the runs of a pass go in a chunk's body: a run's first element in the body, or `zeros`
  // for a run in a zero group (or past the chunk's end). Every thread walks the passes in the same
  // order, counting the mask's zero groups pass by pass, so no thread scans the whole mask.
  struct body_cursor {
    static constexpr std::uint64_t zeros = ~0ull;
    const std::uint8_t* mask;
    std::uint64_t groups, zero_before = 0;  // the chunk's groups; zero groups before the pass

    __device__ body_cursor(const codec_detail::body_shape& body, std::uint64_t m)
        : mask(body.zero_mask), groups(format::zero_groups(m)) {}

    // Call once per pass, in order, from every thread: `base` is the pass's first element.
    __device__ std::uint64_t place(std::uint64_t base, std::uint64_t first) {
      if (mask == nullptr) return first;
      const std::uint64_t g0 = base / format::zero_group_elems, g = first / format::zero_group_elems;
      const std::uint64_t g1 = g0 + Threads / 8 < groups ? g0 + Threads / 8 : groups;
      std::uint64_t pos = zeros;
      if (g < groups && !format::zero_bit(mask, g))
        pos = (g - zero_before - format::zero_groups_in(mask, g0, g)) * format::zero_group_elems +
              first % format::zero_group_elems;
      zero_before += format::zero_groups_in(mask, g0, g1);
      return pos;
    }
  };

  // The mask of a zero_* chunk read by the whole block: its rules and the elements it marks
  // (format::read_zero_mask, in parallel). Block-uniform result.
  __device__ format::zero_mask_summary read_mask(const std::uint8_t* chunk, std::uint64_t m) {
    const std::uint8_t* mask = chunk + format::chunk_header_bytes;
    std::uint64_t zero = 0;
    int bad = 0;
    for (std::uint64_t i = threadIdx.x; i < format::zero_mask_bytes(m); i += Threads) {
      bad |= format::zero_mask_byte_ok(m, i, mask[i]) ? 0 : 1;
      zero += format::zero_mask_byte_elems(m, i, mask[i]);
    }
    const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(zero);
    if (threadIdx.x == 0) s_.zero_elems = total;
    bad = __syncthreads_or(bad);  // also publishes zero_elems
    format::zero_mask_summary z;
    z.ok = bad == 0;
    z.zero_elems = s_.zero_elems;
    __syncthreads();  // the reduction's storage and zero_elems are reused
    return z;
  }

  // Sets *h and *body and returns a block-uniform status: codec_detail::check_chunk's rules and
  // order.
  __device__ status check_chunk(const std::uint8_t* chunk, std::uint64_t span, std::uint64_t m, format::chunk_seal seal,
                                format::chunk_header* h, codec_detail::body_shape* body) {
    const unsigned t = threadIdx.x;
    if (t == 0)  // a chunk shorter than a header leaves zeros, never the previous chunk's bytes
      for (unsigned i = 0; i < format::chunk_header_bytes; ++i)
        s_.header[i] = span >= format::chunk_header_bytes ? chunk[i] : std::uint8_t(0);
    __syncthreads();
    const bool masked = span >= format::body_offset(m, true) &&
                        format::mode_has_zero_mask(static_cast<format::chunk_mode>(s_.header[0] & 3u));
    format::zero_mask_summary z;
    if (masked) z = read_mask(chunk, m);
    if (t == 0) {
      status s = status::corrupt;
      if (span >= format::chunk_header_bytes)
        s = codec_detail::check_chunk_header<E>(format::read_chunk_header(s_.header), span, m, z);
      s_.verdict = static_cast<int>(s);
    }
    __syncthreads();
    status s = static_cast<status>(s_.verdict);
    if (s != status::success) {
      __syncthreads();  // every thread has read the verdict before a next call rewrites it
      return s;
    }
    *h = format::read_chunk_header(s_.header);
    *body = codec_detail::chunk_body<E>(*h, m, z, chunk);

    std::uint64_t sum = 0;
    const std::uint64_t words = format::check_words(span, seal.whole, codec_detail::check_prefix<E>(*h, *body));
    for (std::uint64_t w = t; w < words; w += Threads) sum += format::check_term(w, word_at(chunk + 8 * w));
    const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(sum);
    int bad = 0;
    for (std::uint64_t q = codec_detail::chunk_content_end<E>(*h, *body) + t; q < span; q += Threads)
      if (chunk[q] != 0) bad = 1;
    bad = __syncthreads_or(bad);  // also the barrier before the verdict is rewritten
    if (t == 0) {
      s = format::check_value(total, words, seal.place) != h->check ? status::checksum_mismatch
                                                         : (bad ? status::corrupt : status::success);
      s_.verdict = static_cast<int>(s);
    }
    __syncthreads();
    s = static_cast<status>(s_.verdict);
    __syncthreads();  // the verdict may be rewritten by the next call
    return s;
  }

  // A rANS chunk that passed check_chunk: its table and states meet the rules the host checks
  // before decoding (corrupt otherwise), and then, in a decoder built without rANS (Entropy =
  // false), unsupported_mode. Block-uniform.
  __device__ status check_rans(const std::uint8_t* chunk, const format::chunk_header& h,
                               const codec_detail::body_shape& body) {
    if (threadIdx.x < 32) {  // warp 0 checks the table
      const bool ok = detail::warp_table_ok(chunk + codec_detail::rans::layout<E>::table_offset(body.base),
                                            h.table[0] + 1u, codec_detail::header_zero_symbols(h));
      if (threadIdx.x == 0) s_.verdict = static_cast<int>(ok ? status::unsupported_mode : status::corrupt);
    }
    __syncthreads();
    const status s = static_cast<status>(s_.verdict);
    __syncthreads();  // the verdict may be rewritten by the next call
    return s;
  }

  // The rANS body (codec/rans.hpp; the reference is codec_detail::decode_rans_body, whose statuses
  // these are): the table's rules, the slot table built by the whole block, then warp 0 decodes
  // pass by pass into the staging buffer and every thread hands out its runs. A stream that runs
  // out, words left over, or a lane that does not end at 2^16 is corrupt; the warp decodes on to
  // the end of the chunk either way, so every thread sees the same passes.
  template <class Op>
  __device__ status decode_rans(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                                const codec_detail::body_shape& body, Op& op) {
    namespace rans = codec_detail::rans;
    using S = rans::split<E>;
    using RL = rans::layout<E>;
    const unsigned t = threadIdx.x;
    const codec_detail::rans::zero_symbols zero = codec_detail::header_zero_symbols(h);
    // b: the rests (the body's elements, less its zeros with zero symbols)
    const std::uint64_t nsym = h.table[0] + 1u, n_words = h.escapes, b = rans::rests_of(body.elems, zero);
    const std::uint8_t* table = chunk + RL::table_offset(body.base);
    if (t < 32) {  // warp 0 checks the table
      const bool ok = detail::warp_table_ok(table, nsym, zero);
      if (t == 0) s_.verdict = ok ? 1 : 0;
    }
    __syncthreads();
    const bool table_good = s_.verdict != 0;
    __syncthreads();  // the verdict may be rewritten by the next call
    if (!table_good) return status::corrupt;
    // the slot table: symbol k (k-th present, ascending) fills [cum_k, cum_k + f_k); each thread
    // walks the bitmap and the frequencies itself (at most 256 + nsym reads) and writes its share
    {
      std::uint32_t cum = 0, k = 0;
      for (unsigned sym = 0; sym < rans::symbols; ++sym) {
        if (!((table[sym / 8] >> (sym % 8)) & 1u)) continue;
        const std::uint32_t f = format::load_le<std::uint16_t>(table + rans::bitmap_bytes + 2 * k++);
        for (std::uint32_t j = t; j < f; j += Threads) s_.rans.slot[cum + j] = ((f - 1u) << 20) | (j << 8) | sym;
        cum += f;
      }
    }
    if (t == 0) {
      s_.rans.j0 = 0;
      s_.rans.next0 = 0;
    }
    __syncthreads();
    const std::uint8_t* words = chunk + RL::words_offset(body.base, nsym);
    const std::uint8_t* bytes = chunk + RL::bytes_offset(b, body.base, nsym);
    const std::uint8_t* stream = chunk + RL::stream_offset(b, body.base, nsym);
    const unsigned lane = t % 32;
    const bool coder = t < 32;  // warp 0 decodes
    std::uint32_t x = coder ? format::load_le<std::uint32_t>(chunk + RL::states_offset(body.base, nsym) + 4 * lane) : 0u;
    std::uint64_t next = 0, j = 0;  // the next stream word; the next rest (warp 0)
    bool bad = false;
    constexpr std::uint64_t P = 8ull * Threads;  // elements per pass: at most P body elements and P words
    for (std::uint64_t base = 0; base < m; base += P) {
      // the block copies the pass's inputs: P rest bytes (and words) from j0, P stream words from
      // next0, as far as the body and the stream go
      {
        const std::uint64_t j0 = s_.rans.j0, next0 = s_.rans.next0;
        const std::uint64_t nb = b - j0 < P ? b - j0 : P, nw = n_words - next0 < P ? n_words - next0 : P;
        for (std::uint64_t i = t; i < nb; i += Threads) {
          s_.rans.rest[i] = bytes[j0 + i];
          if constexpr (has_words) s_.rans.words[i] = format::load_le<std::uint16_t>(words + 2 * (j0 + i));
        }
        for (std::uint64_t i = t; i < nw; i += Threads)
          s_.rans.stream[i] = format::load_le<std::uint16_t>(stream + 2 * (next0 + i));
      }
      __syncthreads();
      if (coder) {
        const std::uint64_t j0 = s_.rans.j0, next0 = s_.rans.next0;  // where the block copied from
        const std::uint64_t end = base + P < m ? base + P : m;
        for (std::uint64_t g = base / format::group_elems; g * format::group_elems < end; ++g) {
          const std::uint64_t first = g * format::group_elems;
          const unsigned lanes = format::group_lanes(m, g);
          const bool live = lane < lanes;
          bits_type v = 0;
          if (!codec_detail::in_zero_group(body, g)) {
            // the words this group could take, one per lane (next - next0 + lane < P: a pass's
            // groups before this one took at most P - 32 words)
            const std::uint32_t ahead = next + lane < n_words ? s_.rans.stream[next - next0 + lane] : 0u;
            v = detail::rans_group<E>(
                x, live, zero, ahead, n_words, b, next, j, bad,
                [&](std::uint32_t& y) {
                  const std::uint32_t e = s_.rans.slot[y & (rans::prob_total - 1u)];
                  y = rans::decode_table::freq(e) * (y >> rans::prob_bits) + rans::decode_table::offset(e);
                  return rans::decode_table::symbol(e);
                },
                [&](std::uint32_t sym, std::uint64_t k) {  // k - j0 < P: the pass's rests so far
                  std::uint32_t word = 0;
                  if constexpr (has_words) word = s_.rans.words[k - j0];
                  return S::join(sym, s_.rans.rest[k - j0], word);
                });
          }
          if (live) s_.rans.staged[first + lane - base] = v;
        }
        // (every lane has read j0 and next0 before lane 0 moves them: a pass of zero groups
        // only has no ballot to order the read before the write)
        __syncwarp();
        if (lane == 0) {  // where the next pass's inputs start
          s_.rans.j0 = j < b ? j : b;  // (past b only in a corrupt chunk)
          s_.rans.next0 = next < n_words ? next : n_words;
        }
      }
      __syncthreads();
      const std::uint64_t first = base + 8ull * t;
      if (first < m) {
        const unsigned valid = m - first >= 8 ? 8u : static_cast<unsigned>(m - first);
        bits_type v[8] = {};
#pragma unroll
        for (unsigned i = 0; i < 8; ++i)  // (fixed indices: v stays in registers)
          if (i < valid) v[i] = s_.rans.staged[8 * t + i];
        op(first, valid, v);
      }
      // (the next pass writes the inputs before its barrier and the staging after it, when every
      // thread has taken its runs)
    }
    // words or rests left over, or a lane off 2^16
    if (coder && (next != n_words || j != b || x != rans::state_low)) bad = true;
    return __syncthreads_or(bad) ? status::corrupt : status::success;
  }

  // The coded body: per pass, thread t takes run base/8 + t of the chunk; escapes are consumed in
  // element order through a block-wide scan of each pass's escape counts. In a zero_* chunk a
  // run's bytes come from its place in the body (body_cursor), and runs of zero groups are zeros.
  template <class Op>
  __device__ status decode_coded(const std::uint8_t* chunk, std::uint64_t m, const format::chunk_header& h,
                                 const codec_detail::body_shape& body, Op& op) {
    const unsigned t = threadIdx.x;
    const std::uint64_t n = body.elems;
    const std::uint8_t* planes = chunk + L::planes_offset(body.base);
    const std::uint8_t* wsec = chunk + L::words_offset(n, body.base);
    const std::uint8_t* bsec = chunk + L::bytes_offset(n, body.base);
    const std::uint8_t* esc = chunk + L::escapes_offset(n, body.base);
    const std::uint64_t table = G::pack_table(h.table);
    const std::uint64_t groups_end = L::groups(n) * format::group_elems;     // in the body
    const std::uint64_t chunk_end = L::groups(m) * format::group_elems;      // in the chunk
    body_cursor cursor(body, m);
    std::uint64_t esc_base = 0;
    int bad = 0;
    for (std::uint64_t base = 0; base < chunk_end; base += 8ull * Threads) {
      const std::uint64_t first = base + 8ull * t;
      const std::uint64_t at = cursor.place(base, first);  // the run's place in the body
      const bool zeros = at == body_cursor::zeros;
      const unsigned valid = first >= m ? 0u : (m - first >= 8 ? 8u : static_cast<unsigned>(m - first));
      const unsigned coded = zeros ? 0u : valid;
      std::uint32_t pl[L::planes] = {};
      if (!zeros && at < groups_end) {
        // group at / 32, byte (at % 32) / 8 of each of its plane words
        const std::uint8_t* gp = planes + (at / format::group_elems) * L::planes * 4 + (at % 32) / 8;
        const std::uint32_t dead = ~((1u << valid) - 1u) & 0xFFu;
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) {
          pl[q] = gp[4 * q];
          if (pl[q] & dead) bad = 1;  // bits for lanes past the end
        }
      }
      const std::uint32_t live = (1u << coded) - 1u;
      const std::uint32_t emask = ~(pl[0] | pl[1] | pl[2]) & live;
      std::uint32_t before = 0, pass_escapes = 0;  // every thread receives the pass's total
      block_scan(s_.cub.scan_storage).ExclusiveSum(static_cast<std::uint32_t>(__popc(emask)), before, pass_escapes);
      if (valid) {
        bits_type v[8] = {};
        if (!zeros) {
          const std::uint64_t rest_bytes = detail::load_bytes(bsec + at, valid);
          std::uint64_t wlo = 0, whi = 0;
          if constexpr (L::word_bytes != 0) {
            wlo = detail::load_bytes(wsec + 2 * at, valid >= 4 ? 8u : 2 * valid);
            if (valid > 4) whi = detail::load_bytes(wsec + 2 * at + 8, 2 * (valid - 4));
          }
          std::uint64_t k = esc_base + before;
#pragma unroll
          for (unsigned i = 0; i < 8; ++i) {
            const std::uint32_t code = G::lane_code(pl, i);
            std::uint32_t e = G::table_exponent(table, code);
            if (i < valid && code == 0) {
              if (k >= h.escapes) {
                bad = 1;
              } else {
                e = esc[k++];
                if (e >= E::exponent_count) bad = 1;
              }
            }
            const std::uint32_t word =
                L::word_bytes ? static_cast<std::uint32_t>(((i < 4 ? wlo : whi) >> (16 * (i & 3))) & 0xFFFFu) : 0u;
            v[i] = G::join_lane(pl, i, e, static_cast<std::uint32_t>((rest_bytes >> (8 * i)) & 0xFFu), word);
          }
        }
        op(first, valid, v);
      }
      __syncthreads();  // the scan's temp storage is reused by the next pass
      esc_base += pass_escapes;
    }
    if (esc_base != h.escapes) bad = 1;  // esc_base is the same in every thread
    return __syncthreads_or(bad) ? status::corrupt : status::success;
  }

  storage& s_;
};

}  // namespace zipccl::cuda
