// zipccl: the subspace codec at a pipeline stage boundary, over a host transport.
//
//   subspace::link_config cfg{d, r, vocab, seed};     // the same on both stages
//   sender   (stage i)    : subspace::sender<>   s(cfg);  s.send(x, tok, peer, t);   s.recv_grad(&dz, peer, t);
//   receiver (stage i + 1): subspace::receiver<> q(cfg);  q.recv(&x_hat, &tok, peer, t);  q.send_grad(dz, peer, t);
//
// Forward, per micro-batch of n tokens: z = (x - anchor[tok]) A travels as bf16 (n x r), through
// the lossless exponent codec when `lossless` is set (stacked lossy + lossless), or, with residual
// VQ, as indices into codebooks the receiver keeps in sync from the slice each message carries
// (rvq.hpp); with the token ids when there is an anchor. Backward: dL/dz (n x r) travels the other way the same way. The
// sender's projector A and the anchor rows it changed travel with the next forward message after
// set_projector() / set_anchor_rows() (d x r and r numbers per row, counted in the traffic), so
// the receiver's copies follow the sender's optimizer. P (the anchor basis) is never sent: both
// sides derive it from the seed, and a message carries a fingerprint of (seed, d, r, vocab), so a
// peer set up differently is caught (status::config_mismatch), as are other dimensions
// (size_mismatch), token ids out of range and damaged messages (corrupt).
//
// Every message is a 72-byte header (with a check hash of itself and of the body) and a body whose
// size the header gives. Errors abort the transport (the peer's pending operations then fail
// instead of waiting).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../codec/codec.hpp"
#include "../collective/detail/arith.hpp"
#include "../error.hpp"
#include "../format/bytes.hpp"
#include "../format/hash.hpp"
#include "../host/compress.hpp"
#include "../host/decompress.hpp"
#include "../transport/transport.hpp"
#include "anchor.hpp"
#include "projector.hpp"
#include "rvq.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

struct link_config {
  std::size_t dim = 0, rank = 0, vocab = 0;  // vocab 0: no anchor, no token ids
  std::uint64_t seed = 0;
  bool lossless = true;  // z through the lossless exponent codec (bf16, analytic codebook)
  // Residual VQ of z (vq_groups 0: off): z travels as groups x rounds indices per token (one byte
  // each with up to 256 codewords, else two), and each message carries a codebook slice.
  std::size_t vq_groups = 0, vq_rounds = 1, vq_codewords = 256, vq_slice = 16;
  bool vq() const { return vq_groups != 0; }
  rvq_shape vq_shape() const { return rvq_shape{rank, vq_groups, vq_rounds, vq_codewords}; }
  std::uint64_t fingerprint() const {
    std::uint64_t s = format::hash_term(0, seed) + format::hash_term(1, dim) + format::hash_term(2, rank) +
                      format::hash_term(3, vocab) + format::hash_term(4, vq_groups) + format::hash_term(5, vq_rounds) +
                      format::hash_term(6, vq_codewords);
    return format::hash_finish(s, 7);
  }
  bool valid() const {
    return dim > 0 && rank > 0 && rank <= dim && vocab <= (1u << 24) && (!vq() || vq_shape().valid());
  }
};

namespace detail {

inline constexpr std::uint32_t link_magic = 0x3142535Au;  // "ZSB1"
inline constexpr std::uint64_t header_bytes = 72;
enum link_flags : std::uint16_t {
  has_tokens = 1, has_projector = 2, has_anchor_rows = 4, lossless_z = 8, gradient = 16, vq_codes = 32
};
using z_codec = codec<bf16, codebook::analytic_gaussian>;

struct link_header {
  std::uint16_t flags = 0;
  std::uint64_t n = 0, fingerprint = 0, z_bytes = 0, body_bytes = 0, body_hash = 0;
  std::uint32_t dim = 0, rank = 0, vocab = 0, anchor_rows = 0;
};

inline void write_header(std::uint8_t* p, const link_header& h) {
  std::memset(p, 0, header_bytes);
  format::store_le<std::uint32_t>(p, link_magic);
  format::store_le<std::uint16_t>(p + 4, 1);  // version
  format::store_le<std::uint16_t>(p + 6, h.flags);
  format::store_le<std::uint64_t>(p + 8, h.n);
  format::store_le<std::uint32_t>(p + 16, h.dim);
  format::store_le<std::uint32_t>(p + 20, h.rank);
  format::store_le<std::uint32_t>(p + 24, h.vocab);
  format::store_le<std::uint32_t>(p + 28, h.anchor_rows);
  format::store_le<std::uint64_t>(p + 32, h.fingerprint);
  format::store_le<std::uint64_t>(p + 40, h.z_bytes);
  format::store_le<std::uint64_t>(p + 48, h.body_bytes);
  format::store_le<std::uint64_t>(p + 56, h.body_hash);
  format::store_le<std::uint64_t>(p + 64, format::hash_finish(format::hash_sum(p, 0, 8), 8));
}

// The check hash (format/hash.hpp) of n bytes, the last word padded with zeros.
inline std::uint64_t hash_bytes(const std::uint8_t* p, std::uint64_t n) {
  const std::uint64_t words = n / 8;
  std::uint64_t s = format::hash_sum(p, 0, words);
  if (n % 8) {
    std::uint8_t last[8] = {};
    std::memcpy(last, p + words * 8, n % 8);
    s += format::hash_term(words, format::load_le<std::uint64_t>(last));
  }
  return format::hash_finish(s, words + (n % 8 ? 1 : 0));
}

inline status read_header(const std::uint8_t* p, link_header* h) {
  if (format::load_le<std::uint32_t>(p) != link_magic) return status::bad_magic;
  if (format::load_le<std::uint16_t>(p + 4) != 1) return status::unsupported_version;
  if (format::load_le<std::uint64_t>(p + 64) != format::hash_finish(format::hash_sum(p, 0, 8), 8))
    return status::checksum_mismatch;
  h->flags = format::load_le<std::uint16_t>(p + 6);
  h->n = format::load_le<std::uint64_t>(p + 8);
  h->dim = format::load_le<std::uint32_t>(p + 16);
  h->rank = format::load_le<std::uint32_t>(p + 20);
  h->vocab = format::load_le<std::uint32_t>(p + 24);
  h->anchor_rows = format::load_le<std::uint32_t>(p + 28);
  h->fingerprint = format::load_le<std::uint64_t>(p + 32);
  h->z_bytes = format::load_le<std::uint64_t>(p + 40);
  h->body_bytes = format::load_le<std::uint64_t>(p + 48);
  h->body_hash = format::load_le<std::uint64_t>(p + 56);
  return status::success;
}

// z (n x r, float) as bf16 elements, raw or through the lossless codec; appended to out.
inline status pack_codes(const matrix<float>& z, bool lossless, std::vector<std::uint8_t>* out, std::uint64_t* bytes) {
  std::vector<std::uint16_t> b(z.v.size());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = collective::detail::narrow<bf16>(z.v[i]);
  const std::size_t at = out->size();
  if (!lossless) {
    out->resize(at + b.size() * 2);
    for (std::size_t i = 0; i < b.size(); ++i) format::store_le<std::uint16_t>(out->data() + at + 2 * i, b[i]);
    *bytes = b.size() * 2;
    return status::success;
  }
  out->resize(at + host::max_compressed_size<z_codec>(b.size()));
  const status s = host::compress<z_codec>(b.data(), b.size(), out->data() + at, out->size() - at, bytes);
  out->resize(at + *bytes);
  return s;
}

inline status unpack_codes(const std::uint8_t* p, std::uint64_t bytes, bool lossless, std::size_t n, std::size_t r,
                           matrix<float>* z) {
  std::vector<std::uint16_t> b(n * r);
  if (!lossless) {
    if (bytes != b.size() * 2) return status::corrupt;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = format::load_le<std::uint16_t>(p + 2 * i);
  } else {
    std::uint64_t count = 0;
    const status s = host::decompress_as<bf16>(p, bytes, b.data(), b.size() * 2, &count);
    if (s != status::success) return s;
    if (count != b.size()) return status::corrupt;
  }
  *z = matrix<float>(n, r);
  for (std::size_t i = 0; i < b.size(); ++i) z->v[i] = collective::detail::widen<bf16>(b[i]);
  return status::success;
}

inline link_header make_header(const link_config& cfg, std::uint64_t n, std::uint16_t flags) {
  link_header h;
  h.flags = flags;
  h.n = n;
  h.dim = static_cast<std::uint32_t>(cfg.dim);
  h.rank = static_cast<std::uint32_t>(cfg.rank);
  h.vocab = static_cast<std::uint32_t>(cfg.vocab);
  h.fingerprint = cfg.fingerprint();
  return h;
}

// VQ indices: one byte each with up to 256 codewords, else two (little-endian).
inline void pack_indices(const std::vector<std::uint16_t>& idx, std::size_t codewords, std::vector<std::uint8_t>* out) {
  const std::size_t w = codewords <= 256 ? 1 : 2, at = out->size();
  out->resize(at + idx.size() * w);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (w == 1) (*out)[at + i] = static_cast<std::uint8_t>(idx[i]);
    else format::store_le<std::uint16_t>(out->data() + at + 2 * i, idx[i]);
  }
}
// A sync: count (u32), then each codeword's number (u32) and values (floats).
inline void pack_sync(const rvq_sync<float>& s, std::vector<std::uint8_t>* out) {
  std::size_t at = out->size();
  out->resize(at + 4 + s.which.size() * 4 + s.values.size() * 4);
  format::store_le<std::uint32_t>(out->data() + at, static_cast<std::uint32_t>(s.which.size()));
  at += 4;
  for (std::uint32_t w : s.which) {
    format::store_le<std::uint32_t>(out->data() + at, w);
    at += 4;
  }
  if (!s.values.empty()) std::memcpy(out->data() + at, s.values.data(), s.values.size() * 4);
}
inline status unpack_sync(const std::uint8_t* p, std::uint64_t bytes, std::size_t sub, rvq_sync<float>* s) {
  if (bytes < 4) return status::corrupt;
  const std::uint64_t count = format::load_le<std::uint32_t>(p);
  if (bytes != 4 + count * (4 + 4ull * sub)) return status::corrupt;
  s->which.resize(count);
  for (std::uint64_t i = 0; i < count; ++i) s->which[i] = format::load_le<std::uint32_t>(p + 4 + 4 * i);
  s->values.resize(count * sub);
  if (!s->values.empty()) std::memcpy(s->values.data(), p + 4 + 4 * count, s->values.size() * 4);
  return status::success;
}

template <class Transport>
status fail(Transport& t, status s) {
  t.abort(s);
  return s;
}

template <class Transport>
status send_message(Transport& t, int peer, link_header h, const std::vector<std::uint8_t>& body) {
  std::uint8_t head[header_bytes];
  h.body_bytes = body.size();
  h.body_hash = hash_bytes(body.data(), body.size());
  write_header(head, h);
  status s = t.send(peer, head, header_bytes);
  if (s == status::success) s = t.send(peer, body.data(), body.size());
  return s == status::success ? s : fail(t, s);
}

// Receives a header and its body; checks the configuration and the shape.
template <class Transport>
status recv_message(Transport& t, int peer, const link_config& cfg, bool want_gradient, link_header* h,
                    std::vector<std::uint8_t>* body) {
  std::uint8_t head[header_bytes];
  status s = t.recv(peer, head, header_bytes);
  if (s == status::success) s = read_header(head, h);
  if (s == status::success && ((h->flags & gradient) != 0) != want_gradient) s = status::corrupt;
  if (s == status::success && h->fingerprint != cfg.fingerprint()) {
    s = h->dim != cfg.dim || h->rank != cfg.rank || h->vocab != cfg.vocab ? status::size_mismatch
                                                                            : status::config_mismatch;
  }
  // the body can be no larger than its parts allow
  const std::uint64_t most = static_cast<std::uint64_t>(cfg.dim) * cfg.rank * 4 +
                             static_cast<std::uint64_t>(h->anchor_rows) * (4 + 4ull * cfg.rank) + h->n * 4 +
                             host::max_compressed_size<z_codec>(h->n * cfg.rank) + h->n * cfg.rank * 2 +
                             (cfg.vq() ? 4 + cfg.vq_slice * (4 + 4ull * cfg.rank) : 0);
  if (s == status::success && (h->n > (1ull << 32) || h->anchor_rows > cfg.vocab || h->body_bytes > most ||
                               h->z_bytes > h->body_bytes))
    s = status::corrupt;
  if (s == status::success) {
    body->resize(h->body_bytes);
    s = t.recv(peer, body->data(), body->size());
  }
  if (s == status::success && hash_bytes(body->data(), body->size()) != h->body_hash) s = status::checksum_mismatch;
  return s == status::success ? s : fail(t, s);
}

}  // namespace detail

// Stage i's side of a boundary.
class sender {
 public:
  explicit sender(const link_config& cfg)
      : cfg_(cfg), a_(random_orthonormal<float>(cfg.dim, cfg.rank, cfg.seed)),
        anchor_(cfg.vocab ? cfg.vocab : 1, cfg.dim, cfg.rank, cfg.seed),
        vq_(cfg.vq() ? cfg.vq_shape() : rvq_shape{1, 1, 1, 2}, vq_options(cfg)) {}

  const link_config& config() const { return cfg_; }
  const matrix<float>& projector() const { return a_; }
  anchor_table<float>* anchor() { return cfg_.vocab ? &anchor_ : nullptr; }

  // The optimizer changed A: the next forward message carries it.
  status set_projector(const matrix<float>& a) {
    if (a.rows != cfg_.dim || a.cols != cfg_.rank) return status::invalid_argument;
    a_ = a;
    projector_dirty_ = true;
    return status::success;
  }
  // These rows of the anchor table changed: the next forward message carries them.
  status set_anchor_rows(const std::vector<std::int32_t>& rows) {
    for (std::int32_t r : rows)
      if (r < 0 || static_cast<std::size_t>(r) >= cfg_.vocab) return status::invalid_argument;
    dirty_rows_.insert(dirty_rows_.end(), rows.begin(), rows.end());
    return status::success;
  }

  // Encodes x (n x d) with the token ids and sends it; z (optional) gets the codes as sent.
  template <class Transport>
  status send(const matrix<float>& x, const std::int32_t* tok, int peer, Transport& t, matrix<float>* z_out = nullptr) {
    static_assert(transport::is_host_transport_v<Transport>, "send: Transport must model the host transport concept");
    if (!cfg_.valid() || x.cols != cfg_.dim || (cfg_.vocab && tok == nullptr && x.rows != 0) || peer < 0 ||
        peer >= t.size())
      return detail::fail(t, status::invalid_argument);
    matrix<float> z;
    status s = encode(x, cfg_.vocab ? tok : nullptr, a_, cfg_.vocab ? &anchor_ : nullptr, &z);
    if (s != status::success) return detail::fail(t, s);
    detail::link_header h = detail::make_header(cfg_, x.rows, 0);
    std::vector<std::uint8_t> body;
    if (projector_dirty_) {
      h.flags |= detail::has_projector;
      append_floats(a_.v, &body);
      projector_dirty_ = false;
    }
    if (cfg_.vocab && !dirty_rows_.empty()) {
      std::sort(dirty_rows_.begin(), dirty_rows_.end());
      dirty_rows_.erase(std::unique(dirty_rows_.begin(), dirty_rows_.end()), dirty_rows_.end());
      h.flags |= detail::has_anchor_rows;
      h.anchor_rows = static_cast<std::uint32_t>(dirty_rows_.size());
      for (std::int32_t r : dirty_rows_) {
        append_u32(static_cast<std::uint32_t>(r), &body);
        std::vector<float> row(anchor_.table().v.begin() + static_cast<std::ptrdiff_t>(r * cfg_.rank),
                               anchor_.table().v.begin() + static_cast<std::ptrdiff_t>((r + 1) * cfg_.rank));
        append_floats(row, &body);
      }
      dirty_rows_.clear();
    }
    if (cfg_.vocab) {
      h.flags |= detail::has_tokens;
      for (std::size_t i = 0; i < x.rows; ++i) append_u32(static_cast<std::uint32_t>(tok[i]), &body);
    }
    if (cfg_.vq()) {
      // indices against the mirror (the receiver's codebooks), then learn and ship a slice
      h.flags |= detail::vq_codes;
      std::vector<std::uint16_t> idx;
      s = vq_.encode(z, &idx);
      if (s == status::success && z_out != nullptr) s = vq_.mirror().decode(idx.data(), z.rows, z_out);
      if (s == status::success && learning_) s = vq_.learn(z);
      if (s != status::success) return detail::fail(t, s);
      const std::size_t at = body.size();
      detail::pack_indices(idx, cfg_.vq_codewords, &body);
      h.z_bytes = body.size() - at;
      detail::pack_sync(vq_.next_sync(), &body);
      return detail::send_message(t, peer, h, body);
    }
    if (cfg_.lossless) h.flags |= detail::lossless_z;
    s = detail::pack_codes(z, cfg_.lossless, &body, &h.z_bytes);
    if (s != status::success) return detail::fail(t, s);
    if (z_out != nullptr) *z_out = std::move(z);
    return detail::send_message(t, peer, h, body);
  }

  // The sender's codebooks (with VQ): mirror() is what the receiver holds.
  const rvq_learner<float>& quantiser() const { return vq_; }
  // With VQ, whether send() learns from what it sends (off for evaluation batches).
  void set_learning(bool on) { learning_ = on; }

  // Receives dL/dz (n x r) for the last micro-batch from the next stage.
  template <class Transport>
  status recv_grad(matrix<float>* dz, int peer, Transport& t) {
    if (dz == nullptr || peer < 0 || peer >= t.size()) return detail::fail(t, status::invalid_argument);
    detail::link_header h;
    std::vector<std::uint8_t> body;
    status s = detail::recv_message(t, peer, cfg_, true, &h, &body);
    if (s != status::success) return s;
    if (h.z_bytes != body.size()) return detail::fail(t, status::corrupt);
    s = detail::unpack_codes(body.data(), h.z_bytes, (h.flags & detail::lossless_z) != 0, h.n, cfg_.rank, dz);
    return s == status::success ? s : detail::fail(t, s);
  }

 private:
  static void append_u32(std::uint32_t v, std::vector<std::uint8_t>* b) {
    const std::size_t at = b->size();
    b->resize(at + 4);
    format::store_le<std::uint32_t>(b->data() + at, v);
  }
  static void append_floats(const std::vector<float>& v, std::vector<std::uint8_t>* b) {
    for (float f : v) {
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      append_u32(u, b);
    }
  }

  static rvq_options vq_options(const link_config& c) {
    rvq_options o;
    o.slice = c.vq_slice;
    o.seed = c.seed ^ 0x7651ull;
    return o;
  }

  link_config cfg_;
  matrix<float> a_;
  anchor_table<float> anchor_;
  rvq_learner<float> vq_;
  bool learning_ = true;
  bool projector_dirty_ = true;  // the first message carries A
  std::vector<std::int32_t> dirty_rows_;
};

// Stage i + 1's side of a boundary.
class receiver {
 public:
  explicit receiver(const link_config& cfg)
      : cfg_(cfg), a_(random_orthonormal<float>(cfg.dim, cfg.rank, cfg.seed)),
        anchor_(cfg.vocab ? cfg.vocab : 1, cfg.dim, cfg.rank, cfg.seed),
        book_(cfg.vq() ? cfg.vq_shape() : rvq_shape{1, 1, 1, 2}, cfg.seed ^ 0x7651ull) {}

  const rvq_book<float>& codebooks() const { return book_; }

  const matrix<float>& projector() const { return a_; }
  const anchor_table<float>* anchor() const { return cfg_.vocab ? &anchor_ : nullptr; }

  // Receives a micro-batch: x_hat (n x d), its token ids, and (optional) the codes z.
  template <class Transport>
  status recv(matrix<float>* x_hat, std::vector<std::int32_t>* tok, int peer, Transport& t,
              matrix<float>* z_out = nullptr) {
    static_assert(transport::is_host_transport_v<Transport>, "recv: Transport must model the host transport concept");
    if (x_hat == nullptr || !cfg_.valid() || peer < 0 || peer >= t.size())
      return detail::fail(t, status::invalid_argument);
    detail::link_header h;
    std::vector<std::uint8_t> body;
    status s = detail::recv_message(t, peer, cfg_, false, &h, &body);
    if (s != status::success) return s;
    const std::uint8_t* p = body.data();
    const std::uint8_t* end = body.data() + body.size();
    auto take = [&](std::uint64_t bytes) -> const std::uint8_t* {
      if (static_cast<std::uint64_t>(end - p) < bytes) return nullptr;
      const std::uint8_t* q = p;
      p += bytes;
      return q;
    };
    if (h.flags & detail::has_projector) {
      const std::uint8_t* q = take(4ull * cfg_.dim * cfg_.rank);
      if (q == nullptr) return detail::fail(t, status::corrupt);
      matrix<float> a(cfg_.dim, cfg_.rank);
      std::memcpy(a.data(), q, a.v.size() * 4);
      for (float v : a.v)
        if (!std::isfinite(v)) return detail::fail(t, status::corrupt);
      a_ = std::move(a);
    }
    if (h.flags & detail::has_anchor_rows) {
      for (std::uint32_t i = 0; i < h.anchor_rows; ++i) {
        const std::uint8_t* q = take(4 + 4ull * cfg_.rank);
        if (q == nullptr) return detail::fail(t, status::corrupt);
        const std::uint32_t row = format::load_le<std::uint32_t>(q);
        if (row >= cfg_.vocab) return detail::fail(t, status::corrupt);
        std::memcpy(anchor_.table().data() + static_cast<std::size_t>(row) * cfg_.rank, q + 4, 4 * cfg_.rank);
      }
    }
    std::vector<std::int32_t> ids;
    if (cfg_.vocab) {
      const std::uint8_t* q = (h.flags & detail::has_tokens) ? take(4 * h.n) : nullptr;
      if (q == nullptr) return detail::fail(t, status::corrupt);
      ids.resize(h.n);
      for (std::size_t i = 0; i < h.n; ++i) {
        ids[i] = static_cast<std::int32_t>(format::load_le<std::uint32_t>(q + 4 * i));
        if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= cfg_.vocab) return detail::fail(t, status::corrupt);
      }
    }
    matrix<float> z;
    if (cfg_.vq()) {
      // decode with the codebooks as they were when the sender encoded, then apply its slice
      const std::size_t w = cfg_.vq_codewords <= 256 ? 1 : 2, per = cfg_.vq_groups * cfg_.vq_rounds;
      if (!(h.flags & detail::vq_codes) || h.z_bytes != h.n * per * w || static_cast<std::uint64_t>(end - p) < h.z_bytes)
        return detail::fail(t, status::corrupt);
      std::vector<std::uint16_t> idx(h.n * per);
      for (std::size_t i = 0; i < idx.size(); ++i)
        idx[i] = w == 1 ? p[i] : format::load_le<std::uint16_t>(p + 2 * i);
      rvq_sync<float> sync;
      s = book_.decode(idx.data(), h.n, &z);
      if (s == status::success)
        s = detail::unpack_sync(p + h.z_bytes, static_cast<std::uint64_t>(end - p) - h.z_bytes, cfg_.vq_shape().sub(),
                                &sync);
      if (s == status::success && sync.which.size() > cfg_.vq_slice) s = status::corrupt;
      if (s == status::success) s = apply_sync(sync, &book_);
      if (s != status::success) return detail::fail(t, s == status::invalid_argument ? status::corrupt : s);
    } else {
      if (static_cast<std::uint64_t>(end - p) != h.z_bytes || (h.flags & detail::vq_codes))
        return detail::fail(t, status::corrupt);
      s = detail::unpack_codes(p, h.z_bytes, (h.flags & detail::lossless_z) != 0, h.n, cfg_.rank, &z);
    }
    if (s == status::success) s = decode(z, cfg_.vocab ? ids.data() : nullptr, a_, cfg_.vocab ? &anchor_ : nullptr, x_hat);
    if (s != status::success) return detail::fail(t, s);
    if (tok != nullptr) *tok = std::move(ids);
    if (z_out != nullptr) *z_out = std::move(z);
    return status::success;
  }

  // Sends dL/dz (n x r) back to the previous stage.
  template <class Transport>
  status send_grad(const matrix<float>& dz, int peer, Transport& t) {
    if (dz.cols != cfg_.rank || peer < 0 || peer >= t.size()) return detail::fail(t, status::invalid_argument);
    detail::link_header h = detail::make_header(
        cfg_, dz.rows, static_cast<std::uint16_t>(detail::gradient | (cfg_.lossless ? detail::lossless_z : 0)));
    std::vector<std::uint8_t> body;
    const status s = detail::pack_codes(dz, cfg_.lossless, &body, &h.z_bytes);
    if (s != status::success) return detail::fail(t, s);
    return detail::send_message(t, peer, h, body);
  }

 private:
  link_config cfg_;
  matrix<float> a_;
  anchor_table<float> anchor_;
  rvq_book<float> book_;
};

}  // namespace zipccl::subspace
