// zipccl: the schedules of the collectives: which segment of which block goes to which peer in
// which step, and what arrives. One schedule, two executors: the host collectives run it on a
// host transport (detail/pipeline.hpp), the device collectives enqueue the same steps on CUDA
// streams. It is plain host code, computed from the counts alone, and tested on the host.
//
// A collective of `n` ranks on rank `r` is a sequence of items i = 0 .. items() - 1. In item i the
// rank sends one segment to `dst` and receives one from `src` (either may be absent: no_peer):
//
//   ring all_gather      item k * S + s (ring step k < n - 1, segment s < S): sends segment s of
//                        block (r - k) to r + 1, receives segment s of block (r - k - 1) from r - 1.
//                        Step 0 sends the rank's own input; step k > 0 forwards what item
//                        (k - 1) * S + s received (`forwards`).
//   ring reduce_scatter  item k * S + s (hop k < n - 1): sends segment s of the partial result of
//                        block (r - k - 1) to r + 1 (hop 0: the rank's own input block r - 1),
//                        receives segment s of the partial result of block (r - k - 2) from r - 1
//                        and adds it to its own input block (r - k - 2). After the last hop the
//                        rank holds the reduction of block r. Hop k > 0 sends what item
//                        (k - 1) * S + s reduced.
//   pairwise all_to_all  item j - 1 (step j < n): sends the block for r + j, receives the block of
//                        r - j; no item depends on another.
//   send / recv          item s: segment s to (from) the peer.
//
// Blocks are numbered by rank; a block of `count` elements is cut into S segments of
// `segment_elems` elements (rounded up to whole chunks), the last one shorter.
#pragma once

#include <cstdint>

namespace zipccl::collective {

// How a block of `count` elements is cut into segments: segment_elems rounded up to a whole
// number of chunks, at most the count (0: one segment per block).
struct segmentation {
  std::uint64_t count = 0, seg = 0, segments = 0;

  segmentation() = default;
  segmentation(std::uint64_t n, std::uint64_t chunk_elems, std::uint64_t segment_elems) : count(n) {
    seg = segment_elems == 0 || chunk_elems == 0 ? n : (segment_elems + chunk_elems - 1) / chunk_elems * chunk_elems;
    if (seg > n) seg = n;
    segments = seg ? (n + seg - 1) / seg : 0;
  }
  std::uint64_t first(std::uint64_t s) const { return s * seg; }
  std::uint64_t elems(std::uint64_t s) const { return count - s * seg < seg ? count - s * seg : seg; }
};

enum class pattern { ring_all_gather, ring_reduce_scatter, pairwise_all_to_all, send, recv };

inline constexpr int no_peer = -1;
inline constexpr std::uint64_t no_item = ~std::uint64_t{0};

// One item of a schedule.
struct step {
  int dst = no_peer, src = no_peer;  // the peers; no_peer: nothing goes out / comes in
  int send_block = 0, recv_block = 0;  // the blocks (by rank) whose segments travel
  std::uint64_t segment = 0;           // which segment of them
  std::uint64_t first = 0, elems = 0;  // its elements within the block (all_to_all: 0, the block's
                                       // counts are the caller's)
  int hop = 0;                         // ring step, or all_to_all step - 1
  bool from_input = true;              // the segment goes out from the caller's input, not from
                                       // what an earlier item received (or reduced)
  std::uint64_t forwards = no_item;    // that earlier item: its receive (and reduction) must be
                                       // complete before this item is sent
};

class schedule {
 public:
  static schedule ring_all_gather(int rank, int ranks, const segmentation& block) {
    return schedule(pattern::ring_all_gather, rank, ranks, no_peer, block);
  }
  static schedule ring_reduce_scatter(int rank, int ranks, const segmentation& block) {
    return schedule(pattern::ring_reduce_scatter, rank, ranks, no_peer, block);
  }
  static schedule pairwise_all_to_all(int rank, int ranks) {
    return schedule(pattern::pairwise_all_to_all, rank, ranks, no_peer, segmentation{});
  }
  static schedule send(int rank, int ranks, int peer, const segmentation& message) {
    return schedule(pattern::send, rank, ranks, peer, message);
  }
  static schedule recv(int rank, int ranks, int peer, const segmentation& message) {
    return schedule(pattern::recv, rank, ranks, peer, message);
  }

  pattern kind() const { return kind_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  const segmentation& blocks() const { return block_; }
  std::uint64_t segments() const { return block_.segments; }

  std::uint64_t items() const {
    switch (kind_) {
      case pattern::ring_all_gather:
      case pattern::ring_reduce_scatter: return ranks_ > 1 ? static_cast<std::uint64_t>(ranks_ - 1) * block_.segments : 0;
      case pattern::pairwise_all_to_all: return ranks_ > 1 ? static_cast<std::uint64_t>(ranks_ - 1) : 0;
      case pattern::send:
      case pattern::recv: return block_.segments;
    }
    return 0;
  }

  // Item i (< items()).
  step at(std::uint64_t i) const {
    step st;
    const int r = rank_;
    switch (kind_) {
      case pattern::ring_all_gather:
      case pattern::ring_reduce_scatter: {
        const std::uint64_t S = block_.segments;
        const int k = static_cast<int>(i / S);
        const int lead = kind_ == pattern::ring_all_gather ? 0 : 1;  // reduce_scatter sends block r - k - 1
        st.dst = wrap(r + 1);
        st.src = wrap(r - 1);
        st.segment = i % S;
        st.first = block_.first(st.segment);
        st.elems = block_.elems(st.segment);
        st.hop = k;
        st.send_block = wrap(r - k - lead);
        st.recv_block = wrap(r - k - lead - 1);
        st.from_input = k == 0;
        st.forwards = k == 0 ? no_item : i - S;
        break;
      }
      case pattern::pairwise_all_to_all: {
        const int j = static_cast<int>(i % static_cast<std::uint64_t>(ranks_)) + 1;
        st.dst = st.send_block = wrap(r + j);
        st.src = st.recv_block = wrap(r - j);
        st.hop = j - 1;
        break;
      }
      case pattern::send:
      case pattern::recv:
        (kind_ == pattern::send ? st.dst : st.src) = peer_;  // the message is block 0
        st.segment = i;
        st.first = block_.first(i);
        st.elems = block_.elems(i);
        break;
    }
    return st;
  }

 private:
  schedule(pattern k, int rank, int ranks, int peer, const segmentation& block)
      : kind_(k), rank_(rank), ranks_(ranks < 1 ? 1 : ranks), peer_(peer), block_(block) {}
  int wrap(int x) const { return ((x % ranks_) + ranks_) % ranks_; }

  pattern kind_;
  int rank_, ranks_, peer_;
  segmentation block_;
};

}  // namespace zipccl::collective
