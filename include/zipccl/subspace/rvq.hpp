// zipccl: residual vector quantisation of the subspace codes z (optional stage of the subspace
// codec), with codebooks that the receiver keeps in sync without a full codebook ever travelling.
//
// Shape: z (n x r) is split into G groups of r/G numbers; each group is quantised in R residual
// rounds against codebooks of K codewords: round 1 picks the codeword nearest to the group, round
// 2 the one nearest to what is left, and so on. A token's code is G x R indices (uint8 when
// K <= 256, else uint16) instead of r numbers.
//
// Sync: the sender keeps two copies, `master` (learned online: k-means++ on the first batch, then
// running means of the residuals assigned to each codeword) and `mirror` (exactly the receiver's
// copy). It always encodes against the mirror. After each micro-batch it ships a small slice: the
// codewords whose master and mirror differ most, with their values; it writes them into its mirror
// and the receiver writes them into its copy (apply_sync), so the two stay bit-identical.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../error.hpp"
#include "anchor.hpp"
#include "rvq_shape.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

// One set of codebooks, groups x rounds x codewords words of sub() numbers.
template <class T>
class rvq_book {
 public:
  rvq_book() = default;
  rvq_book(const rvq_shape& s, std::uint64_t seed) : shape_(s), w_(s.words() * s.sub()) {
    std::uint64_t st = seed;  // a small seeded start, the same on both sides
    for (T& v : w_) v = static_cast<T>(1e-3 * detail::normal(&st));
  }
  const rvq_shape& shape() const { return shape_; }
  const std::vector<T>& values() const { return w_; }
  T* word(std::size_t g, std::size_t round, std::size_t k) {
    return w_.data() + ((g * shape_.rounds + round) * shape_.codewords + k) * shape_.sub();
  }
  const T* word(std::size_t g, std::size_t round, std::size_t k) const {
    return w_.data() + ((g * shape_.rounds + round) * shape_.codewords + k) * shape_.sub();
  }

  // Indices (n x groups x rounds) of z (n x dim); `residuals` (optional, n x dim x rounds) gets what
  // each round was given, for learning.
  status encode(const matrix<T>& z, std::vector<std::uint16_t>* idx, std::vector<T>* residuals = nullptr) const {
    if (idx == nullptr || z.cols != shape_.dim || !shape_.valid()) return status::invalid_argument;
    const std::size_t G = shape_.groups, R = shape_.rounds, K = shape_.codewords, S = shape_.sub();
    idx->assign(z.rows * G * R, 0);
    if (residuals) residuals->assign(z.rows * shape_.dim * R, T(0));
    // Each round's codebook transposed (sub x codewords), so that the distances to all codewords
    // are computed together and vectorise over the codewords; each distance is rvq_distance's
    // sum, term by term in the same order.
    std::vector<T> wt(w_.size());
    for (std::size_t b = 0; b < G * R; ++b)
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t j = 0; j < S; ++j) wt[(b * S + j) * K + k] = w_[(b * K + k) * S + j];
    std::vector<T> res(S);
    std::vector<double> dist(K);
    for (std::size_t t = 0; t < z.rows; ++t)
      for (std::size_t g = 0; g < G; ++g) {
        for (std::size_t j = 0; j < S; ++j) res[j] = z(t, g * S + j);
        for (std::size_t q = 0; q < R; ++q) {
          if (residuals)
            std::memcpy(residuals->data() + (t * R + q) * shape_.dim + g * S, res.data(), S * sizeof(T));
          const T* book = wt.data() + (g * R + q) * S * K;
          std::fill(dist.begin(), dist.end(), 0.0);
          for (std::size_t j = 0; j < S; ++j) {
            const double rj = static_cast<double>(res[j]);
            const T* col = book + j * K;
            double* dk = dist.data();
            for (std::size_t k = 0; k < K; ++k) {
              const double e = rj - static_cast<double>(col[k]);
              dk[k] += e * e;
            }
          }
          std::size_t best = 0;
          double best_d = std::numeric_limits<double>::infinity();
          for (std::size_t k = 0; k < K; ++k)
            if (dist[k] < best_d) {
              best_d = dist[k];
              best = k;
            }
          (*idx)[(t * G + g) * R + q] = static_cast<std::uint16_t>(best);
          const T* w = word(g, q, best);
          for (std::size_t j = 0; j < S; ++j) res[j] -= w[j];
        }
      }
    return status::success;
  }

  // z_hat (n x dim) from n tokens' indices; invalid_argument for an index >= codewords.
  status decode(const std::uint16_t* idx, std::size_t n, matrix<T>* z) const {
    if (z == nullptr || (idx == nullptr && n != 0) || !shape_.valid()) return status::invalid_argument;
    const std::size_t G = shape_.groups, R = shape_.rounds, S = shape_.sub();
    *z = matrix<T>(n, shape_.dim);
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t q = 0; q < R; ++q) {
          const std::uint16_t k = idx[(t * G + g) * R + q];
          if (k >= shape_.codewords) return status::invalid_argument;
          const T* w = word(g, q, k);
          for (std::size_t j = 0; j < S; ++j) (*z)(t, g * S + j) += w[j];
        }
    return status::success;
  }

 private:
  rvq_shape shape_;
  std::vector<T> w_;
};

// The codewords a sync writes: flat word numbers (g, round, k in that order) and their values.
template <class T>
struct rvq_sync {
  std::vector<std::uint32_t> which;
  std::vector<T> values;  // which.size() x sub()
  std::uint64_t bytes() const { return which.size() * 4 + values.size() * sizeof(T); }
};

// The receiver's side: writes a sync into its copy. Checks everything first; on an error the copy
// is unchanged.
template <class T>
status apply_sync(const rvq_sync<T>& s, rvq_book<T>* book) {
  if (book == nullptr || s.values.size() != s.which.size() * book->shape().sub()) return status::invalid_argument;
  for (std::uint32_t w : s.which)
    if (w >= book->shape().words()) return status::invalid_argument;
  const std::size_t S = book->shape().sub(), K = book->shape().codewords, R = book->shape().rounds;
  for (std::size_t i = 0; i < s.which.size(); ++i) {
    const std::size_t w = s.which[i];
    std::memcpy(book->word(w / (R * K), (w / K) % R, w % K), s.values.data() + i * S, S * sizeof(T));
  }
  return status::success;
}

struct rvq_options {
  double decay = 0.9;        // running-mean weight of a codeword's old value
  std::size_t slice = 16;    // codewords per sync
  std::uint64_t seed = 1;    // the shared start (both sides) and k-means++ draws (sender)
};

// The sender's side: learns the master codebooks and decides what each sync carries.
template <class T>
class rvq_learner {
 public:
  rvq_learner(const rvq_shape& s, const rvq_options& o) : opt_(o), master_(s, o.seed), mirror_(s, o.seed) {}

  const rvq_book<T>& mirror() const { return mirror_; }  // what the receiver holds
  const rvq_book<T>& master() const { return master_; }

  // Encodes z against the mirror (what the receiver can decode).
  status encode(const matrix<T>& z, std::vector<std::uint16_t>* idx) const { return mirror_.encode(z, idx); }

  // Learns from a micro-batch of codes: k-means++ the first time, running means after.
  status learn(const matrix<T>& z) {
    const rvq_shape& s = master_.shape();
    if (z.cols != s.dim || !s.valid()) return status::invalid_argument;
    if (z.rows == 0) return status::success;
    std::vector<std::uint16_t> idx;
    std::vector<T> res;
    if (!seeded_) {
      seed_rounds(z);
      seeded_ = true;
    }
    status st = master_.encode(z, &idx, &res);
    if (st != status::success) return st;
    const std::size_t G = s.groups, R = s.rounds, K = s.codewords, S = s.sub();
    std::vector<double> sum(s.words() * S, 0.0);
    std::vector<std::size_t> count(s.words(), 0);
    for (std::size_t t = 0; t < z.rows; ++t)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t q = 0; q < R; ++q) {
          const std::size_t w = (g * R + q) * K + idx[(t * G + g) * R + q];
          ++count[w];
          for (std::size_t j = 0; j < S; ++j) sum[w * S + j] += res[(t * R + q) * s.dim + g * S + j];
        }
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t q = 0; q < R; ++q)
        for (std::size_t k = 0; k < K; ++k) {
          const std::size_t w = (g * R + q) * K + k;
          if (count[w] == 0) continue;
          T* c = master_.word(g, q, k);
          for (std::size_t j = 0; j < S; ++j)
            c[j] = static_cast<T>(opt_.decay * c[j] + (1 - opt_.decay) * sum[w * S + j] / count[w]);
        }
    return status::success;
  }

  // The next sync: up to `slice` codewords, those whose master and mirror differ most; they are
  // written into the mirror here, and the receiver applies the same message.
  rvq_sync<T> next_sync() {
    const rvq_shape& s = master_.shape();
    const std::size_t S = s.sub(), n = s.words();
    std::vector<std::pair<double, std::uint32_t>> drift(n);
    for (std::size_t w = 0; w < n; ++w) {
      double d = 0;
      for (std::size_t j = 0; j < S; ++j) {
        const double e = static_cast<double>(master_.values()[w * S + j]) - mirror_.values()[w * S + j];
        d += e * e;
      }
      drift[w] = {d, static_cast<std::uint32_t>(w)};
    }
    const std::size_t m = std::min(opt_.slice, n);
    std::partial_sort(drift.begin(), drift.begin() + static_cast<std::ptrdiff_t>(m), drift.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    rvq_sync<T> out;
    for (std::size_t i = 0; i < m && drift[i].first > 0; ++i) {
      out.which.push_back(drift[i].second);
      const T* v = master_.values().data() + static_cast<std::size_t>(drift[i].second) * S;
      out.values.insert(out.values.end(), v, v + S);
    }
    // the slice was cut from this learner's own codebooks, so its shape always fits the mirror
    throw_if_error(apply_sync(out, &mirror_), "zipccl::subspace::rvq_learner::next_sync");
    return out;
  }

 private:
  // k-means++ seeding of every group's round-1 codebook on z, then of each later round on what the
  // rounds before leave.
  void seed_rounds(const matrix<T>& z) {
    const rvq_shape& s = master_.shape();
    const std::size_t G = s.groups, R = s.rounds, K = s.codewords, S = s.sub(), n = z.rows;
    std::uint64_t rng = opt_.seed ^ 0x5EEDull;
    std::vector<T> res(n * s.dim);
    for (std::size_t i = 0; i < n * s.dim; ++i) res[i] = z.v[i];
    for (std::size_t q = 0; q < R; ++q)
      for (std::size_t g = 0; g < G; ++g) {
        auto point = [&](std::size_t t) { return res.data() + t * s.dim + g * S; };
        std::vector<double> best(n, std::numeric_limits<double>::infinity());
        for (std::size_t k = 0; k < K; ++k) {
          std::size_t pick = 0;
          if (k == 0) {
            pick = static_cast<std::size_t>(detail::splitmix64(&rng) % n);
          } else {
            double total = 0;
            for (double b : best) total += b;
            double u = total * (static_cast<double>(detail::splitmix64(&rng) >> 11) / 9007199254740992.0);
            for (pick = 0; pick + 1 < n && u >= best[pick]; ++pick) u -= best[pick];
          }
          T* c = master_.word(g, q, k);
          std::memcpy(c, point(pick), S * sizeof(T));
          for (std::size_t t = 0; t < n; ++t) best[t] = std::min(best[t], detail::rvq_distance(point(t), c, S));
        }
        // what this round leaves, for the next
        for (std::size_t t = 0; t < n; ++t) {
          std::size_t arg = 0;
          double bd = std::numeric_limits<double>::infinity();
          for (std::size_t k = 0; k < K; ++k) {
            const double dist = detail::rvq_distance(point(t), master_.word(g, q, k), S);
            if (dist < bd) {
              bd = dist;
              arg = k;
            }
          }
          const T* c = master_.word(g, q, arg);
          for (std::size_t j = 0; j < S; ++j) point(t)[j] -= c[j];
        }
      }
  }

  rvq_options opt_;
  rvq_book<T> master_, mirror_;
  bool seeded_ = false;
};

}  // namespace zipccl::subspace
