// zipccl: the segment plan and the pipeline that drives the compressed collectives.
//
// A message is cut into segments (collective_options::pipeline.segment_elems, a multiple of the
// chunk size); every segment travels as the two sections of detail/wire.hpp. A collective is a
// sequence of items i = 0 .. items-1: in step i a rank sends one segment to dst(i) and receives one
// from src(i). The collective says what the items are through a hooks object:
//
//   bool ready(i)                       outgoing item i can be produced now
//   status produce(i, section* out)     encode it (or point at a received segment to forward)
//   section incoming(i)                 where the fixed section of incoming item i goes
//   status arrived(i, std::uint64_t* tail_bytes, std::uint8_t** tail)
//                                       its fixed section is in: where, and how long, its tail is
//   status consume(i)                   decode (and reduce) incoming item i
//   int dst(i), src(i)                  the peers of step i; no_peer (schedule.hpp) when the
//                                       step only receives (dst) or only sends (src): produce()
//                                       or incoming(), arrived() and consume() are then not
//                                       called for it
//
// consume(i) runs after arrived(i) and before arrived(i + 1); produce(i) runs before consume(i).
// The receive of item i + 1 is posted before consume(i), so the two must land in different places.
//
// With a transport that offers requests, outgoing items are posted up to `depth` steps ahead of
// the receives, and item i - 1 is consumed while item i is in flight, so coding overlaps the
// transfers; outgoing item i reuses the buffer of item i - reuse (0: buffers are never reused), so
// that item's sends complete first. Without requests the same steps run in lock step with
// sendrecv. Any error aborts the transport (every rank's pending operations then fail) and is
// returned.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "../../error.hpp"
#include "../../format/bytes.hpp"
#include "../../transport/transport.hpp"
#include "../common.hpp"
#include "../schedule.hpp"
#include "wire.hpp"

namespace zipccl::collective::detail {

// One segment's two sections. A section without a tail (tail == nullptr: a plain segment) is
// one message; the receiving side's arrived() then gives a null tail too.
struct section {
  const std::uint8_t* fixed = nullptr;
  std::uint64_t fixed_bytes = 0;
  const std::uint8_t* tail = nullptr;
  std::uint64_t tail_bytes = 0;
};
struct landing {
  std::uint8_t* fixed = nullptr;
  std::uint64_t fixed_bytes = 0;
};

// What the hooks of the scheduled collectives share: the peers of item i from the schedule, and
// readiness: an item that forwards what an earlier item brought (or reduced) may go once `done`
// (the items arrived, or consumed, so far) has passed it.
struct schedule_steps {
  const schedule& sched;
  std::uint64_t done = 0;
  int dst(std::uint64_t i) const { return sched.at(i).dst; }
  int src(std::uint64_t i) const { return sched.at(i).src; }
  bool ready(std::uint64_t i) const {
    const step st = sched.at(i);
    return st.forwards == no_item || done > st.forwards;
  }
};

// How a message of `count` elements is cut into segments, and how a segment lies in its slot of
// the workspace and on the wire:
//   slot:   preamble (16 bytes) | fixed section | room for encode's spill | tail section
//   wire:   message 1 = preamble + fixed section, message 2 = tail section
// The preamble holds the message's element count and the element type with the segment's index,
// so a peer that was given another count or codec is caught on the first segment it sends.
template <class Codec>
struct segment_plan : segmentation {
  static constexpr std::uint64_t preamble = 16;
  std::uint64_t chunk = 0, slot = 0;

  segment_plan(std::uint64_t n, std::uint64_t chunk_elems, std::uint64_t segment_elems)
      : segmentation(n, chunk_elems, segment_elems), chunk(chunk_elems) {
    slot = format::align_up(preamble + wire<Codec>::max_bytes(seg, chunk) + wire<Codec>::spill_bytes(chunk), 16);
  }
  std::uint64_t head_bytes(std::uint64_t s) const { return preamble + wire<Codec>::fixed_bytes(elems(s), chunk); }
  std::uint64_t tail_offset(std::uint64_t s) const { return head_bytes(s) + wire<Codec>::spill_bytes(chunk); }
  std::uint64_t tag(std::uint64_t s) const { return (static_cast<std::uint64_t>(Codec::type) << 56) | s; }
  // Where segment s's chunks belong (their checks are bound to it).
  wire_place place(std::uint64_t s) const { return {count, tag(s)}; }

  // Encodes segment s of the message at `message` into the slot at p.
  section encode(const typename Codec::codebook_type& cb, const void* message, std::uint64_t s, bool checksum,
                 std::uint8_t* p) const {
    format::store_le<std::uint64_t>(p, count);
    format::store_le<std::uint64_t>(p + 8, tag(s));
    const auto* in = static_cast<const std::uint8_t*>(message) + first(s) * Codec::element_size;
    const std::uint64_t tail =
        wire<Codec>::encode(cb, in, elems(s), chunk, checksum, place(s), p + preamble, p + tail_offset(s));
    return {p, head_bytes(s), p + tail_offset(s), tail};
  }
  // A slot whose segment is already in place (to forward it).
  section stored(std::uint8_t* p, std::uint64_t s, std::uint64_t tail_bytes) const {
    return {p, head_bytes(s), p + tail_offset(s), tail_bytes};
  }
  landing head(std::uint8_t* p, std::uint64_t s) const { return {p, head_bytes(s)}; }
  // The first message of segment s is in at p: checks it, gives the tail's size and place.
  status arrived(std::uint8_t* p, std::uint64_t s, std::uint64_t* tail_bytes, std::uint8_t** tail) const {
    if (format::load_le<std::uint64_t>(p) != count || format::load_le<std::uint64_t>(p + 8) != tag(s))
      return status::size_mismatch;
    const status st = wire<Codec>::tail_bytes(p + preamble, elems(s), chunk, tail_bytes);
    if (st != status::success) return st;
    if (*tail_bytes > slot - tail_offset(s)) return status::corrupt;
    *tail = p + tail_offset(s);
    return status::success;
  }
  template <class Sink>
  status decode(const std::uint8_t* p, std::uint64_t s, std::uint64_t tail_bytes, bool checksum, std::uint8_t* scratch,
                Sink&& sink) const {
    return wire<Codec>::decode(p + preamble, p + tail_offset(s), tail_bytes, elems(s), chunk, checksum, place(s),
                               scratch, sink);
  }
  status decode_into(const std::uint8_t* p, std::uint64_t s, std::uint64_t tail_bytes, bool checksum, void* message,
                     std::uint8_t* scratch) const {
    auto* out = static_cast<std::uint8_t*>(message) + first(s) * Codec::element_size;
    return wire<Codec>::decode_into(p + preamble, p + tail_offset(s), tail_bytes, elems(s), chunk, checksum, place(s),
                                    out, scratch);
  }
};

// The outgoing segments a rank has posted and not yet waited for, oldest first; each is a head
// and (optionally) a tail request. Should an exception unwind the collective's stack (a user's
// transport or hook may throw), the destructor aborts the transport and waits for every request
// still posted before the buffers they point into are freed; errors and further exceptions are
// ignored there, since the first exception is already on its way.
template <class Transport>
class send_window {
 public:
  using request = typename Transport::request;
  explicit send_window(Transport& t) : t_(t) {}
  send_window(const send_window&) = delete;
  send_window& operator=(const send_window&) = delete;
  ~send_window() {
    if (q_.empty()) return;
    abort_quietly(t_);
    while (!q_.empty()) {
      try {
        (void)t_.wait(q_.front().head);
      } catch (...) {
      }
      try {
        (void)t_.wait(q_.front().body);
      } catch (...) {
      }
      q_.pop_front();
    }
  }
  // Posts a segment's head, then its tail (when it has one), in that order.
  void post(std::uint64_t item, int dst, const section& out) {
    q_.emplace_back();
    q_.back().item = item;
    q_.back().head = t_.isend(dst, out.fixed, out.fixed_bytes);
    if (out.tail != nullptr) q_.back().body = t_.isend(dst, out.tail, out.tail_bytes);
  }
  // Waits for the oldest segment's requests; the first error of the two.
  // (The entry leaves the window first, so that a wait() that throws is never repeated.)
  status retire() {
    entry e = std::move(q_.front());
    q_.pop_front();
    status a = status::success;
    try {
      a = t_.wait(e.head);
    } catch (...) {
      try {
        (void)t_.wait(e.body);
      } catch (...) {
      }
      throw;
    }
    const status b = t_.wait(e.body);
    return a != status::success ? a : b;
  }
  // Aborts the transport with `why`, then waits for every posted segment (they end at once).
  status stop(status why) {
    t_.abort(why);
    while (!q_.empty()) (void)retire();
    return why;
  }
  bool empty() const { return q_.empty(); }
  std::size_t size() const { return q_.size(); }
  std::uint64_t oldest() const { return q_.front().item; }

 private:
  struct entry {
    std::uint64_t item = 0;
    request head, body;
  };
  Transport& t_;
  std::deque<entry> q_;
};

template <class Transport, class Hooks>
status run_pipeline(Transport& t, std::uint64_t items, unsigned depth, std::uint64_t reuse, Hooks& h) {
  if constexpr (transport::has_requests_v<Transport>) {
    using request = typename Transport::request;
    send_window<Transport> sends(t);
    std::uint64_t posted = 0;
    status err = status::success;
    auto stop = [&](status s) { return sends.stop(s); };
    auto post_ready = [&](std::uint64_t limit) {
      while (posted < items && posted < limit && h.ready(posted)) {
        if (h.dst(posted) != no_peer) {
          while (reuse != 0 && !sends.empty() && sends.oldest() + reuse <= posted)  // buffer reused
            if ((err = sends.retire()) != status::success) return err;
          section out;
          if ((err = h.produce(posted, &out)) != status::success) return err;
          sends.post(posted, h.dst(posted), out);
        }
        ++posted;
      }
      return status::success;
    };
    bool pending = false;  // item i - 1 received something that consume() has not taken yet
    for (std::uint64_t i = 0; i < items; ++i) {
      if ((err = post_ready(i + depth)) != status::success) return stop(err);
      const bool in = h.src(i) != no_peer;
      request rf;
      if (in) {
        const landing at = h.incoming(i);
        rf = t.irecv(h.src(i), at.fixed, at.fixed_bytes);
      }
      if (pending && (err = h.consume(i - 1)) != status::success) {
        t.abort(err);
        (void)t.wait(rf);
        return stop(err);
      }
      if ((err = post_ready(i + depth)) != status::success) {
        t.abort(err);
        (void)t.wait(rf);
        return stop(err);
      }
      pending = in;
      if (in) {
        if ((err = t.wait(rf)) != status::success) return stop(err);
        std::uint64_t tail_bytes = 0;
        std::uint8_t* tail = nullptr;
        if ((err = h.arrived(i, &tail_bytes, &tail)) != status::success) return stop(err);
        if (tail != nullptr) {
          request rt = t.irecv(h.src(i), tail, tail_bytes);
          if ((err = t.wait(rt)) != status::success) return stop(err);
        }
      }
      while (sends.size() > depth)
        if ((err = sends.retire()) != status::success) return stop(err);
    }
    if (pending && (err = h.consume(items - 1)) != status::success) return stop(err);
    while (!sends.empty())
      if ((err = sends.retire()) != status::success) return stop(err);
    return status::success;
  } else {
    (void)depth;
    (void)reuse;
    status err = status::success;
    auto stop = [&](status s) {
      t.abort(s);
      return s;
    };
    // one step: both directions at once (sendrecv never deadlocks), or the one there is
    auto exchange = [&](int dst, const std::uint8_t* out, std::uint64_t out_bytes, int src, std::uint8_t* in,
                        std::uint64_t in_bytes) {
      if (dst != no_peer && src != no_peer) return t.sendrecv(dst, out, out_bytes, src, in, in_bytes);
      if (dst != no_peer) return t.send(dst, out, out_bytes);
      return t.recv(src, in, in_bytes);
    };
    bool pending = false;
    for (std::uint64_t i = 0; i < items; ++i) {
      // the collectives' items depend only on earlier ones, so item i is ready here
      if (pending && (err = h.consume(i - 1)) != status::success) return stop(err);
      const int dst = h.dst(i), src = h.src(i);
      section out;
      if (dst != no_peer && (err = h.produce(i, &out)) != status::success) return stop(err);
      landing in;
      if (src != no_peer) in = h.incoming(i);
      if ((err = exchange(dst, out.fixed, out.fixed_bytes, src, in.fixed, in.fixed_bytes)) != status::success)
        return stop(err);
      std::uint64_t tail_bytes = 0;
      std::uint8_t* tail = nullptr;
      if (src != no_peer && (err = h.arrived(i, &tail_bytes, &tail)) != status::success) return stop(err);
      // a tail goes both ways or neither on a two-sided step: the peers' hooks agree
      const bool tail_out = dst != no_peer && out.tail != nullptr, tail_in = src != no_peer && tail != nullptr;
      if ((tail_out || tail_in) &&
          (err = exchange(tail_out ? dst : no_peer, out.tail, out.tail_bytes, tail_in ? src : no_peer, tail,
                          tail_bytes)) != status::success)
        return stop(err);
      pending = src != no_peer;
    }
    if (pending && (err = h.consume(items - 1)) != status::success) return stop(err);
    return status::success;
  }
}

}  // namespace zipccl::collective::detail
