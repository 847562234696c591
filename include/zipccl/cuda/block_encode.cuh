// zipccl: cuda::block_encode, a block-level collective that codes one chunk held in registers
// into the wire format, for use inside the caller's own kernel (in the manner of cub::BlockReduce):
//
//   using encoder = zipccl::cuda::block_encode<zipccl::bf16, zipccl::codebook::histogram, 256, 32>;
//   __shared__ typename encoder::TempStorage temp;
//   typename encoder::runs_type v;                  // 32 elements per thread, in registers
//   encoder::load(src, m, v);                       // or produce them: an optimizer step's output
//   encoder enc(temp);                              // (policy data: encoder enc(temp, policy);
//                                                   //  no zero masks: encoder enc(temp, policy, false))
//   const std::uint64_t size = enc.plan(v, m);      // the chunk's exact size, same in every thread
//   ... decide where the chunk goes (cuda::compress uses a decoupled look-back) ...
//   enc.write(v, m, dst, seal);                     // the chunk's bytes at dst
//
// A chunk holds m <= Threads * ItemsPerThread elements (raw bit patterns), arranged in runs of 8:
// run r of thread t holds elements r * Threads * 8 + 8t .. +7 of the chunk (elements at or past
// m are ignored). The bytes written are those the host's encode_chunk writes for the same
// elements and table, so any executor decodes them; a chunk is a valid chunk of a stream when it
// is placed at a 16-byte-aligned offset and m follows the stream's chunk size
// (format::chunk_elements). Every thread of the block calls every member with the same m, and
// write() with the elements plan() saw: the chunk's size and layout are plan()'s.
// With zero masks (the default, as host::compress_options::zero_groups), a chunk whose all-zero
// 64-element groups pay for a mask is written in a zero_* mode (stream version 2); the
// collectives' wires, whose sizes follow from the counts, encode without for the 3-bit policies
// and with masks for codebook::entropy (collective::detail::wire<Codec>::rans). The rANS encoder
// (codebook::entropy, at the class below) has been compiled for sm_80 and sm_90 but has not yet
// run on a GPU.
#pragma once

#include <cub/util_type.cuh>

#include <cstdint>

#include "../codebook/analytic_gaussian.hpp"
#include "../codebook/entropy.hpp"
#include "../codebook/histogram.hpp"
#include "../codebook/table.hpp"
#include "../codec/chunk_codec.hpp"
#include "../format/chunk.hpp"
#include "detail/block_io.cuh"
#include "detail/warp_rans.cuh"

namespace zipccl::cuda {

// codebook::entropy (rANS, codec/rans.hpp): the block counts the symbols (shared-memory atomics,
// one per distinct symbol in a warp), thread 0 normalises the frequencies, and the block's first
// warp walks the chunk's groups backwards, a lane per state, pass by pass from a staging copy in
// shared memory: a ballot finds the lanes that give up a word, a popcount of the lanes above
// places each word, and every lane then codes its symbol with the reciprocal of its frequency.
// plan() walks once to count the stream's words, write() walks again and writes the words where
// they belong. A body with zero symbols (codec/rans.hpp) places each group's rests by a ballot of
// the lanes that are not zeros.
template <class E, class Policy, int Threads, int ItemsPerThread>
class block_encode {
  static_assert(is_element_v<E>, "block_encode: E must be zipccl::bf16, fp16 or fp32");
  static_assert(codebook::is_policy_v<Policy>, "block_encode: Policy must be a zipccl codebook policy");
  static_assert(Threads % 32 == 0 && Threads >= 64 && Threads <= 1024,
                "block_encode: Threads must be a multiple of 32 between 64 and 1024");
  static_assert(ItemsPerThread % 8 == 0 && ItemsPerThread >= 8 && ItemsPerThread <= 64,
                "block_encode: ItemsPerThread must be a multiple of 8 between 8 and 64");
  static constexpr int R = ItemsPerThread / 8;
  static constexpr bool uses_histogram = Policy::stat == codebook::statistic::histogram;
  static constexpr bool uses_rans = codebook::is_entropy_v<Policy>;
  using L = format::chunk_layout<E>;
  using G = codec_detail::group_coder<E>;
  using block_scan = typename detail::block_ops<Threads>::scan;
  using block_reduce = typename detail::block_ops<Threads>::reduce;
  static constexpr int mask_words = (Threads * ItemsPerThread / format::zero_group_elems + 31) / 32;

  // rANS, fp16: whether a chunk's body can be large enough for sampled counts
  // (codec_detail::rans::samples_counts)
  static constexpr bool may_sample =
      codec_detail::rans::samples_counts<E>(static_cast<std::uint64_t>(Threads) * ItemsPerThread);

  // rANS: the symbol counts and the table, and one pass of elements for the walking warp
  struct rans_storage {
    std::uint32_t count[codec_detail::rans::symbols];
    std::uint32_t sampled[may_sample ? codec_detail::rans::symbols : 1];  // the sampled groups' counts
    std::uint32_t freq[codec_detail::rans::symbols];
    std::uint32_t cum[codec_detail::rans::symbols];
    std::uint64_t inv[codec_detail::rans::symbols];  // codec_detail::rans::divisor's reciprocals
    typename E::bits_type stage[8 * Threads];
    unsigned long long zeros[2];  // the body's +0.0 and -0.0 elements
    codec_detail::rans::zero_symbols zero;
    std::uint64_t nsym;
    std::uint64_t left;  // a walk's result, from warp 0 to the block
    int failed;
  };
  struct no_rans_storage {};

  struct storage {
    typename detail::block_ops<Threads>::storage cub;
    std::conditional_t<uses_rans, rans_storage, no_rans_storage> rans;
    std::uint32_t hist[uses_histogram ? E::exponent_count : 1];
    bool taken[uses_histogram ? E::exponent_count : 1];
    std::uint8_t lut[256];
    std::uint8_t table[format::table_size];
    std::uint32_t run_escapes[R];  // per pass: escapes | body groups started << 16
    std::uint32_t zero_mask[mask_words];
    std::uint64_t zero_elems;
  };

 public:
  using bits_type = typename E::bits_type;
  using runs_type = bits_type[R][8];
  static constexpr std::uint64_t max_elems = static_cast<std::uint64_t>(Threads) * ItemsPerThread;

  // Shared memory for one chunk at a time (plan, then write).
  struct TempStorage : cub::Uninitialized<storage> {};

  __device__ __forceinline__ explicit block_encode(TempStorage& temp, const Policy& policy = Policy{},
                                                   bool zero_masks = true)
      : s_(temp.Alias()), policy_(policy), zero_masks_(zero_masks) {}

  // Loads the first m elements at src (any alignment) in the run arrangement; 16-byte vectors
  // where the address allows.
  __device__ static void load(const std::uint8_t* src, std::uint64_t m, runs_type& v) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = run_first(r);
      detail::load_run<E>(src + first * L::elem_size, valid_in(first, m), v[r]);
    }
  }

  // Chooses the table (the policy's statistic of the values), codes the elements and counts the
  // escapes. Returns the chunk's size in bytes: coded, or stored when coding would not pay.
  __device__ std::uint64_t plan(const runs_type& v, std::uint64_t m) {
    if constexpr (uses_rans) {
      return plan_rans(v, m);
    } else {
      find_zero_groups(v, m);
      choose_table(v, m);
      count_escapes(v, m);
      const std::int64_t budget = L::escape_budget(body_elems_, base_);
      coded_ = budget >= 0 && escapes_ <= static_cast<std::uint64_t>(budget);
      size_ = coded_ ? L::coded_bytes(body_elems_, escapes_, base_) : L::stored_bytes(body_elems_, base_);
      return size_;
    }
  }

  // Writes the planned chunk (plan()'s size) at dst, header, padding and check value included.
  // `seal`: what the check covers (format::writer_seal for chunk c of a stream: with the checksum
  // flag the whole chunk and its place).
  __device__ void write(const runs_type& v, std::uint64_t m, std::uint8_t* dst, format::chunk_seal seal) {
    const unsigned t = threadIdx.x;
    if (masked_) write_mask(m, dst);
    std::uint64_t content_end = base_ + body_elems_ * L::elem_size, prefix = base_;
    if constexpr (uses_rans) {
      if (coded_) {
        const std::uint64_t nsym = s_.rans.nsym;
        if (t == 0) codec_detail::rans::write_table(s_.rans.freq, nsym, dst + RL::table_offset(base_));
        walk_rans(v, m, dst);
        content_end = RL::content_end(rests_(), base_, nsym, escapes_);
        prefix = RL::words_offset(base_, nsym);
      } else {
        write_stored(v, m, dst);
      }
    } else {
      if (coded_) write_coded(v, m, dst);
      else write_stored(v, m, dst);
      if (coded_) content_end = L::escapes_offset(body_elems_, base_) + escapes_;
    }
    for (std::uint64_t q = content_end + t; q < size_; q += Threads) dst[q] = 0;
    if (t == 0) {
      format::chunk_header h;
      const format::chunk_mode kind =
          !coded_ ? format::chunk_mode::stored : uses_rans ? format::chunk_mode::rans : format::chunk_mode::coded;
      h.mode = codec_detail::mode_for(kind, masked_);
      if constexpr (uses_rans) {
        if (coded_) {
          h.mode = codec_detail::rans_mode(masked_, s_.rans.zero.on);
          h.table[0] = static_cast<std::uint8_t>(s_.rans.nsym - 1);
          codec_detail::rans::store_header_zero_symbols(s_.rans.zero, h.table);
        }
      } else if (coded_) {
        for (unsigned i = 0; i < format::table_size; ++i) h.table[i] = s_.table[i];
      }
      h.escapes = coded_ ? static_cast<std::uint32_t>(escapes_) : 0u;
      format::write_chunk_header(dst, h);
    }
    __syncthreads();
    if (seal.whole) {
      // wide loads when dst is 8-byte aligned (chunks sit at multiples of 16 in a stream)
      const bool wide = detail::aligned_to(dst, 8);
      const std::uint64_t words = format::check_words(size_, true);
      std::uint64_t sum = 0;
      for (std::uint64_t w = t; w < words; w += Threads)
        sum += format::check_term(w, wide ? reinterpret_cast<const unsigned long long*>(dst)[w]
                                          : format::load_le<std::uint64_t>(dst + 8 * w));
      const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(sum);
      if (t == 0) format::store_chunk_check(dst, format::check_value(total, words, seal.place));
    } else if (t == 0) {
      format::store_chunk_check(dst, format::chunk_check(dst, size_, format::chunk_seal(false, seal.place), prefix));
    }
    __syncthreads();  // the shared storage may be reused for the next chunk
  }

  // After plan(): whether the chunk is coded (rANS: coded with rANS), its escape count (rANS: its
  // stream words), whether it carries a zero mask, and how many elements its body holds.
  __device__ bool coded() const { return coded_; }
  __device__ std::uint64_t escapes() const { return escapes_; }
  __device__ bool zero_masked() const { return masked_; }
  __device__ std::uint64_t body_elems() const { return body_elems_; }

 private:
  __device__ __forceinline__ static std::uint64_t run_first(int r) {
    return static_cast<std::uint64_t>(r) * Threads * 8 + 8ull * threadIdx.x;
  }
  __device__ __forceinline__ static unsigned valid_in(std::uint64_t first, std::uint64_t m) {
    return first >= m ? 0u : (m - first >= 8 ? 8u : static_cast<unsigned>(m - first));
  }

  // Whether run r lies in a zero group that the body leaves out.
  __device__ __forceinline__ bool skipped(int r) const { return masked_ && zero_run_[r]; }

  // Marks the all-zero 64-element groups (8 runs of 8 consecutive threads, one warp), sums their
  // elements and decides, by the format's rule, whether the chunk takes a zero mask.
  __device__ void find_zero_groups(const runs_type& v, std::uint64_t m) {
    const unsigned t = threadIdx.x, lane = t & 31u;
    masked_ = false;
    base_ = format::chunk_header_bytes;
    body_elems_ = m;
#pragma unroll
    for (int r = 0; r < R; ++r) zero_run_[r] = false;
    if (!zero_masks_) return;
    for (int w = static_cast<int>(t); w < mask_words; w += Threads) s_.zero_mask[w] = 0;
    __syncthreads();
    std::uint64_t zero = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = run_first(r);
      const unsigned valid = valid_in(first, m);
      bool run_zero = true;  // runs past the end count as zero: the last group may be short
#pragma unroll
      for (unsigned i = 0; i < 8; ++i)
        if (i < valid && v[r][i] != 0) run_zero = false;
      const unsigned votes = __ballot_sync(0xFFFFFFFFu, run_zero);
      zero_run_[r] = ((votes >> (lane & ~7u)) & 0xFFu) == 0xFFu;
      if (zero_run_[r]) zero += valid;
      const std::uint64_t g = first / format::zero_group_elems;
      if (zero_run_[r] && first < m && first % format::zero_group_elems == 0)
        atomicOr(&s_.zero_mask[g / 32], 1u << (g % 32));
    }
    const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(zero);
    if (t == 0) s_.zero_elems = total;
    __syncthreads();
    const std::uint64_t z = s_.zero_elems;
    __syncthreads();  // the reduction's storage is reused by choose_table
    if (L::zero_mask_pays(m, z)) {
      masked_ = true;
      base_ = format::body_offset(m, true);
      body_elems_ = m - z;
    }
  }

  __device__ void store_table(const codebook::table& t) {
    for (unsigned i = 0; i < format::table_size; ++i) s_.table[i] = t.exponent[i];
  }

  // The policy's statistic, reduced from the registers; the table into shared memory, then the
  // exponent -> code map.
  __device__ void choose_table(const runs_type& v, std::uint64_t m) {
    const unsigned t = threadIdx.x;
    if constexpr (Policy::stat == codebook::statistic::exponent_mean) {
      std::uint64_t packed = 0;  // sum << 25 | count (a chunk holds at most 2^24 elements)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const unsigned valid = skipped(r) ? 0u : valid_in(run_first(r), m);
#pragma unroll
        for (unsigned i = 0; i < 8; ++i) {
          const std::uint32_t e = E::exponent(v[r][i]);
          if (i < valid && Policy::template counts<E>(e)) packed += (std::uint64_t(e) << 25) | 1u;
        }
      }
      const std::uint64_t total = block_reduce(s_.cub.reduce_storage).Sum(packed);
      if (t == 0) store_table(Policy::template select<E>(total >> 25, total & ((1u << 25) - 1), body_elems_));
    } else if constexpr (uses_histogram) {
      for (unsigned e = t; e < E::exponent_count; e += Threads) s_.hist[e] = 0;
      __syncthreads();
      count_body(v, m, s_.hist, [](bits_type x) { return E::exponent(x); });
      __syncthreads();
      if (t < 32) top7();
      __syncthreads();
      if (t == 0) store_table(codebook::histogram::table_from_taken<E>(s_.taken));
    } else {
      if (t == 0) store_table(policy_.entries);
    }
    for (unsigned e = t; e < 256; e += Threads) s_.lut[e] = 0;
    __syncthreads();
    // tables hold distinct exponents (fixed tables are checked on the host), so no two writes meet
    if (t < format::table_size) s_.lut[s_.table[t]] = static_cast<std::uint8_t>(t + 1);
    __syncthreads();
  }

  // Adds the body's elements (zero groups and elements past m left out; Sampled: and the groups
  // that rans::sampled_group leaves out) to counts[key(element)], with one shared-memory atomic
  // per distinct key in a warp, not one per element: the few hot bins of real data would
  // otherwise serialise.
  template <bool Sampled = false, class Key>
  __device__ void count_body(const runs_type& v, std::uint64_t m, std::uint32_t* counts, Key key) {
    const unsigned lane = threadIdx.x & 31u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool out = skipped(r) || (Sampled && !codec_detail::rans::sampled_group(run_first(r) / format::group_elems));
      const unsigned valid = out ? 0u : valid_in(run_first(r), m);
#pragma unroll
      for (unsigned i = 0; i < 8; ++i) {
        const std::uint32_t k = i < valid ? static_cast<std::uint32_t>(key(v[r][i])) : 0xFFFFFFFFu;
        const unsigned peers = __match_any_sync(0xFFFFFFFFu, k);
        if (k != 0xFFFFFFFFu && lane == static_cast<unsigned>(__ffs(peers)) - 1u)
          atomicAdd(&counts[k], static_cast<std::uint32_t>(__popc(peers)));
      }
    }
  }

  // Marks in taken the exponents with the seven largest histogram::rank_key values (one warp).
  __device__ void top7() {
    constexpr unsigned per_lane = (E::exponent_count + 31) / 32;
    const unsigned lane = threadIdx.x & 31u;
    for (unsigned e = lane; e < E::exponent_count; e += 32) s_.taken[e] = false;
    __syncwarp();
    for (unsigned k = 0; k < format::table_size; ++k) {
      std::uint64_t best = 0;
#pragma unroll
      for (unsigned i = 0; i < per_lane; ++i) {
        const unsigned e = lane + 32 * i;
        if (e < E::exponent_count && !s_.taken[e]) {
          const std::uint64_t key = codebook::histogram::rank_key(s_.hist[e], e);
          best = key > best ? key : best;
        }
      }
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) {
        const std::uint64_t o = __shfl_xor_sync(0xFFFFFFFFu, best, d);
        best = o > best ? o : best;
      }
      if (lane == 0) s_.taken[codebook::histogram::key_exponent(best)] = true;
      __syncwarp();
    }
  }

  // Each run's escapes are scanned across the block in element order; with a zero mask the same
  // scan counts the body's groups, which places each run in the body.
  __device__ void count_escapes(const runs_type& v, std::uint64_t m) {
    escapes_ = 0;
    std::uint32_t groups_before = 0;  // body groups in earlier passes
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = run_first(r);
      const unsigned valid = skipped(r) ? 0u : valid_in(first, m);
      std::uint32_t mask = 0;
      if constexpr (!uses_rans) {  // (rANS: the scan only places the runs in the body)
#pragma unroll
        for (unsigned i = 0; i < 8; ++i)
          if (i < valid && s_.lut[E::exponent(v[r][i])] == 0) mask |= 1u << i;
      }
      const bool starts = masked_ && !zero_run_[r] && first < m && first % format::zero_group_elems == 0;
      const std::uint32_t item = static_cast<std::uint32_t>(__popc(mask)) | (starts ? 1u << 16 : 0u);
      std::uint32_t before = 0, total = 0;
      block_scan(s_.cub.scan_storage).ExclusiveSum(item, before, total);
      esc_before_[r] = before & 0xFFFFu;
      // the run's group: its first run counted itself out, the group's later runs counted it in
      const std::uint32_t group = groups_before + (before >> 16) - (first % format::zero_group_elems != 0 ? 1u : 0u);
      body_first_[r] = masked_ ? group * format::zero_group_elems + first % format::zero_group_elems : first;
      groups_before += total >> 16;
      if (threadIdx.x == 0) s_.run_escapes[r] = total & 0xFFFFu;
      __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < R; ++r) escapes_ += s_.run_escapes[r];
  }

  using RL = codec_detail::rans::layout<E>;
  using RS = codec_detail::rans::split<E>;

  // rANS, plan: the zero groups and the runs' places in the body, the symbol counts (a sampling
  // fp16 body's by rans::counts_from_sample) and the table (codec_detail::plan_rans_chunk's), then
  // a walk that counts the stream's words. The chunk is stored when even an empty stream would not
  // beat a stored body or the stream runs into the rest sections (codec_detail::encode_rans_chunk's
  // rules).
  __device__ std::uint64_t plan_rans(const runs_type& v, std::uint64_t m) {
    namespace rans = codec_detail::rans;
    const unsigned t = threadIdx.x;
    find_zero_groups(v, m);
    count_escapes(v, m);  // (body_first_ for a stored fallback; no escapes)
    [[maybe_unused]] const bool samples = may_sample && rans::samples_counts<E>(body_elems_);
    for (unsigned s = t; s < rans::symbols; s += Threads) s_.rans.count[s] = 0;
    if constexpr (may_sample)
      for (unsigned s = t; s < rans::symbols; s += Threads) s_.rans.sampled[s] = 0;
    if (t < 2) s_.rans.zeros[t] = 0;
    __syncthreads();
    count_body(v, m, s_.rans.count, [](bits_type x) { return RS::symbol(x); });
    if constexpr (may_sample)
      if (samples) count_body<true>(v, m, s_.rans.sampled, [](bits_type x) { return RS::symbol(x); });
    count_zeros(v, m);
    __syncthreads();
    if (t == 0) {
      std::uint64_t nsym = 0;
      s_.rans.zero = rans::zero_symbols{};
      if (body_elems_ != 0) {
        // (the full counts give what counts_from_sample takes: 0x00's and 0x80's, and presence)
        if constexpr (may_sample)
          if (samples) rans::counts_from_sample(s_.rans.sampled, s_.rans.count, body_elems_);
        s_.rans.zero = rans::choose_zero_symbols<E>(s_.rans.count, body_elems_, s_.rans.zeros[0], s_.rans.zeros[1],
                                                    rans::min_zero_rests<E>(m, base_));
        rans::normalize(s_.rans.count, body_elems_, s_.rans.freq);
        for (unsigned k = 0, c = 0; k < rans::symbols; c += s_.rans.freq[k], ++k) {
          s_.rans.cum[k] = c;
          nsym += s_.rans.freq[k] != 0;
        }
      } else {  // (an empty body: no table, but the reciprocals below read every frequency)
        for (unsigned k = 0; k < rans::symbols; ++k) s_.rans.freq[k] = 0;
      }
      s_.rans.nsym = nsym;
    }
    __syncthreads();
    for (unsigned k = t; k < rans::symbols; k += Threads) s_.rans.inv[k] = rans::divisor::of(s_.rans.freq[k]).inv;
    __syncthreads();
    const std::uint64_t nsym = s_.rans.nsym, rests = rests_();
    const std::uint64_t stored = L::stored_bytes(body_elems_, base_);
    coded_ = nsym != 0 && RL::stream_offset(rests, base_, nsym) + format::alignment <= stored;
    escapes_ = 0;
    if (coded_) {
      const std::uint64_t room = stored - format::alignment - RL::stream_offset(rests, base_, nsym);
      const std::uint64_t words = walk_rans(v, m, nullptr, room);
      coded_ = words != ~0ull;
      escapes_ = coded_ ? words : 0;
    }
    size_ = coded_ ? RL::chunk_bytes(rests, base_, nsym, escapes_) : stored;
    return size_;
  }

  // rANS: the body's rests (its elements, less its zeros when it has zero symbols).
  __device__ std::uint64_t rests_() const { return codec_detail::rans::rests_of(body_elems_, s_.rans.zero); }

  // rANS: adds the body's +0.0 and -0.0 elements to s_.rans.zeros (a warp sum, then one atomic
  // per warp).
  __device__ void count_zeros(const runs_type& v, std::uint64_t m) {
    unsigned pos = 0, neg = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const unsigned valid = skipped(r) ? 0u : valid_in(run_first(r), m);
#pragma unroll
      for (unsigned i = 0; i < 8; ++i) {
        pos += i < valid && v[r][i] == 0 ? 1u : 0u;
        neg += i < valid && v[r][i] == RS::negative_zero ? 1u : 0u;
      }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      pos += __shfl_xor_sync(0xFFFFFFFFu, pos, d);
      neg += __shfl_xor_sync(0xFFFFFFFFu, neg, d);
    }
    if ((threadIdx.x & 31u) == 0) {
      if (pos != 0) atomicAdd(&s_.rans.zeros[0], static_cast<unsigned long long>(pos));
      if (neg != 0) atomicAdd(&s_.rans.zeros[1], static_cast<unsigned long long>(neg));
    }
  }

  // The rANS walk over the chunk, backwards, pass by pass through the staging buffer (warp 0
  // codes; the whole block stages and waits). With dst null it counts the words that the stream
  // takes within `room` bytes and returns them (~0 when they do not fit: the reference falls
  // back to stored at the first push that would not fit); otherwise it writes the rest sections,
  // the stream words (escapes_ of them, at their final places) and the final states at dst.
  // Every thread gets the same result.
  __device__ std::uint64_t walk_rans(const runs_type& v, std::uint64_t m, std::uint8_t* dst,
                                     std::uint64_t room = 0) {
    namespace rans = codec_detail::rans;
    const unsigned t = threadIdx.x, lane = t & 31u;
    const bool coder = t < 32;
    const std::uint64_t nsym = s_.rans.nsym, rests = rests_();
    const rans::zero_symbols zero = s_.rans.zero;
    std::uint8_t* words = dst ? dst + RL::words_offset(base_, nsym) : nullptr;
    std::uint8_t* bytes = dst ? dst + RL::bytes_offset(rests, base_, nsym) : nullptr;
    std::uint8_t* stream = dst ? dst + RL::stream_offset(rests, base_, nsym) : nullptr;
    // top: bytes of stream below the last word pushed (counting: of the room; writing: of the
    // stream's final size, so that each word lands where the decoder reads it)
    std::uint64_t top = dst ? 2 * escapes_ : room;
    std::uint64_t at = rests;  // one past the rest of the group being coded
    std::uint32_t x = rans::state_low;
    int overflow = 0;
#pragma unroll
    for (int r = R - 1; r >= 0; --r) {
      const std::uint64_t pass = static_cast<std::uint64_t>(r) * Threads * 8;
      if (pass >= m) continue;  // (the same in every thread)
      __syncthreads();  // the previous pass's staging has been read
#pragma unroll
      for (unsigned i = 0; i < 8; ++i) s_.rans.stage[8 * t + i] = v[r][i];
      __syncthreads();
      if (coder && !overflow) {
        const std::uint64_t end = pass + 8ull * Threads < m ? pass + 8ull * Threads : m;
        const bool fits = detail::rans_encode_groups<E>(
            [&](std::uint64_t i) { return s_.rans.stage[i - pass]; }, pass / format::group_elems,
            (end + format::group_elems - 1) / format::group_elems, m,
            masked_ ? reinterpret_cast<const std::uint8_t*>(s_.zero_mask) : nullptr, zero, s_.rans.freq, s_.rans.cum,
            s_.rans.inv, x, at, top, bytes, words, stream);
        overflow = fits ? 0 : 1;
      }
    }
    if (coder && dst && !overflow) format::store_le<std::uint32_t>(dst + RL::states_offset(base_, nsym) + 4 * lane, x);
    // the result, from warp 0 to the block
    if (t == 0) {
      s_.rans.failed = overflow;
      s_.rans.left = top;
    }
    __syncthreads();
    const bool failed = s_.rans.failed != 0;
    const std::uint64_t left = s_.rans.left;
    __syncthreads();  // read before the next use of the storage
    if (failed) return ~0ull;
    return dst ? escapes_ : (room - left) / 2;
  }

  // The mask's bytes at dst + 16 (padding included), from the words find_zero_groups marked.
  __device__ void write_mask(std::uint64_t m, std::uint8_t* dst) {
    const std::uint64_t live = (format::zero_groups(m) + 7) / 8;
    for (std::uint64_t q = threadIdx.x; q < format::zero_mask_bytes(m); q += Threads)
      dst[format::chunk_header_bytes + q] =
          q < live ? static_cast<std::uint8_t>(s_.zero_mask[q / 4] >> (8 * (q % 4))) : std::uint8_t(0);
  }

  __device__ void write_coded(const runs_type& v, std::uint64_t m, std::uint8_t* dst) {
    const std::uint64_t n = body_elems_;
    std::uint8_t* planes = dst + L::planes_offset(base_);
    std::uint8_t* words = dst + L::words_offset(n, base_);
    std::uint8_t* bytes = dst + L::bytes_offset(n, base_);
    std::uint8_t* esc_out = dst + L::escapes_offset(n, base_);
    const std::uint64_t groups_end = L::groups(n) * format::group_elems;
    std::uint64_t esc_base = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = run_first(r);
      const std::uint64_t at = body_first_[r];  // the run's place in the body (meaningless when skipped)
      // group at / 32, byte (at % 32) / 8 of each of its plane words
      const std::uint64_t plane_byte = (at / format::group_elems) * L::planes * 4 + (at % 32) / 8;
      if (skipped(r)) {
        // a zero group: nothing of it is in the body
      } else if (first < m) {
        std::uint8_t* gp = planes + plane_byte;
        const unsigned valid = valid_in(first, m);
        std::uint32_t pl[L::planes] = {};
        std::uint64_t rest_bytes = 0, rest_words_lo = 0, rest_words_hi = 0;
        std::uint32_t k = esc_before_[r];
#pragma unroll
        for (unsigned i = 0; i < 8; ++i) {
          if (i < valid) {
            const auto l = G::encode_lane(v[r][i], s_.lut, i, pl);
            rest_bytes |= std::uint64_t(l.byte) << (8 * i);
            if constexpr (L::word_bytes != 0) {
              if (i < 4) rest_words_lo |= std::uint64_t(l.word) << (16 * i);
              else rest_words_hi |= std::uint64_t(l.word) << (16 * (i - 4));
            }
            if (l.code == 0) esc_out[esc_base + k++] = static_cast<std::uint8_t>(l.exponent);
          }
        }
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) gp[4 * q] = static_cast<std::uint8_t>(pl[q]);
        detail::store_bytes(bytes + at, rest_bytes, valid);
        if constexpr (L::word_bytes != 0) {
          detail::store_bytes(words + 2 * at, rest_words_lo, valid >= 4 ? 8u : 2 * valid);
          if (valid > 4) detail::store_bytes(words + 2 * at + 8, rest_words_hi, 2 * (valid - 4));
        }
      } else if (at < groups_end) {
        // lanes past the end of the last group: their plane bytes are zero
#pragma unroll
        for (unsigned q = 0; q < L::planes; ++q) planes[plane_byte + 4 * q] = 0;
      }
      esc_base += s_.run_escapes[r];
    }
  }

  __device__ void write_stored(const runs_type& v, std::uint64_t m, std::uint8_t* dst) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::uint64_t first = run_first(r);
      if (first < m && !skipped(r))
        detail::store_run<E>(dst + base_ + body_first_[r] * L::elem_size, valid_in(first, m), v[r]);
    }
  }

  storage& s_;
  Policy policy_;
  bool zero_masks_ = true;
  std::uint32_t esc_before_[R];  // escapes before this thread's run r, within the run's pass
  std::uint32_t body_first_[R];  // where run r's first element goes in the body
  bool zero_run_[R];             // run r lies in an all-zero group (or past the chunk's end)
  std::uint64_t escapes_ = 0, size_ = 0;
  std::uint64_t base_ = format::chunk_header_bytes, body_elems_ = 0;  // the body's offset and elements
  bool coded_ = false, masked_ = false;
};

}  // namespace zipccl::cuda
