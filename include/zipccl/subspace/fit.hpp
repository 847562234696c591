// zipccl: fitting the subspace codec to a user's activations with a reconstruction objective,
// online, minibatch by minibatch, as the codec learns during training (what `zipccl subspace-fit`
// runs):
//
//   loss = ||X - X_hat||^2 / ||X||^2 over a minibatch of rows, X_hat = decode(encode(X))
//
// A takes Stiefel steps (stiefel.hpp) with a cosine-decayed step size; the anchor table E, when
// there is one, takes Adam steps. retained_energy() is the figure of merit, 1 - ||X - X_hat||^2 /
// ||X||^2 over all rows.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../error.hpp"
#include "anchor.hpp"
#include "projector.hpp"
#include "rvq.hpp"
#include "stiefel.hpp"

namespace zipccl::subspace {

struct fit_options {
  int steps = 2000;
  std::size_t batch = 256;            // rows per step
  double lr = 0.05, lr_final = 5e-4;  // Stiefel step size, cosine-decayed from lr to lr_final
  double momentum = 0.9;
  double anchor_lr = 0.02;  // Adam on E
  std::uint64_t seed = 1;   // minibatch order
};

// 1 - ||X - X_hat||^2 / ||X||^2 over all rows of x.
template <class T>
status retained_energy(const matrix<T>& x, const std::int32_t* tok, const matrix<T>& a, detail::anchor_ptr<T> anc,
                       double* energy) {
  if (energy == nullptr) return status::invalid_argument;
  matrix<T> z, xh;
  status s = encode(x, tok, a, anc, &z);
  if (s == status::success) s = decode(z, tok, a, anc, &xh);
  if (s != status::success) return s;
  double err = 0, all = 0;
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    const double e = static_cast<double>(x.v[i]) - xh.v[i];
    err += e * e;
    all += static_cast<double>(x.v[i]) * x.v[i];
  }
  *energy = all > 0 ? 1.0 - err / all : 1.0;
  return status::success;
}

// Trains A (d x r, on the manifold) and, if anc is not null, its table E on the rows of x.
template <class T>
status fit_projector(const matrix<T>& x, const std::int32_t* tok, matrix<T>* a, typename detail::id<anchor_table<T>>::type* anc,
                     const fit_options& o = {}) {
  if (a == nullptr || x.cols != a->rows || x.rows == 0 || o.batch == 0 || o.steps < 0 ||
      (anc != nullptr && tok == nullptr))
    return status::invalid_argument;
  const std::size_t d = x.cols, r = a->cols, b = o.batch < x.rows ? o.batch : x.rows;
  stiefel_options so;
  so.lr = o.lr;
  so.momentum = o.momentum;
  stiefel_optimizer<T> opt(d, r, so);
  matrix<T> adam_m, adam_v;
  if (anc != nullptr) adam_m = adam_v = matrix<T>(anc->vocab(), anc->table().cols);
  std::uint64_t rng = o.seed;
  matrix<T> xb(b, d), z, xh, dxh, dz, dx;
  std::vector<std::int32_t> tb(b);
  for (int step = 0; step < o.steps; ++step) {
    for (std::size_t i = 0; i < b; ++i) {  // a minibatch of rows, drawn with replacement
      const std::size_t row = static_cast<std::size_t>(detail::splitmix64(&rng) % x.rows);
      for (std::size_t j = 0; j < d; ++j) xb(i, j) = x(row, j);
      tb[i] = tok != nullptr ? tok[row] : 0;
    }
    const std::int32_t* t = tok != nullptr ? tb.data() : nullptr;
    status s = encode(xb, t, *a, anc, &z);
    if (s == status::success) s = decode(z, t, *a, anc, &xh);
    if (s != status::success) return s;
    double all = 0;
    for (T v : xb.v) all += static_cast<double>(v) * v;
    const T scale = static_cast<T>(all > 0 ? 2.0 / all : 0.0);
    dxh = xh;
    for (std::size_t i = 0; i < dxh.v.size(); ++i) dxh.v[i] = scale * (xh.v[i] - xb.v[i]);
    matrix<T> da(d, r);
    matrix<T> de = anc != nullptr ? matrix<T>(anc->vocab(), anc->table().cols) : matrix<T>();
    s = decode_backward(z, t, *a, anc, dxh, &dz, &da, anc != nullptr ? &de : nullptr);
    if (s == status::success) s = encode_backward(xb, t, *a, anc, dz, &dx, &da, anc != nullptr ? &de : nullptr);
    if (s != status::success) return s;
    const double progress = o.steps > 1 ? static_cast<double>(step) / (o.steps - 1) : 1.0;
    opt.set_lr(o.lr_final + 0.5 * (o.lr - o.lr_final) * (1 + std::cos(3.141592653589793 * progress)));
    s = opt.step(a, da);
    if (s != status::success) return s;
    if (anc != nullptr) {  // Adam on E
      const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
      const double c1 = 1 - std::pow(b1, step + 1), c2 = 1 - std::pow(b2, step + 1);
      matrix<T>& e = anc->table();
      for (std::size_t i = 0; i < e.v.size(); ++i) {
        adam_m.v[i] = static_cast<T>(b1 * adam_m.v[i] + (1 - b1) * de.v[i]);
        adam_v.v[i] = static_cast<T>(b2 * adam_v.v[i] + (1 - b2) * de.v[i] * de.v[i]);
        e.v[i] -= static_cast<T>(o.anchor_lr * (adam_m.v[i] / c1) / (std::sqrt(adam_v.v[i] / c2) + eps));
      }
    }
  }
  return status::success;
}

// Trains residual VQ on the codes z (rows), online: each step learns from a minibatch and ships
// one sync to the mirror, as a sender does once per micro-batch. *synced_bytes (optional) gets
// what the syncs carried.
template <class T>
status fit_rvq(const matrix<T>& z, rvq_learner<T>* vq, int steps, std::size_t batch, std::uint64_t seed,
               std::uint64_t* synced_bytes = nullptr) {
  if (vq == nullptr || z.rows == 0 || batch == 0 || steps < 0 || z.cols != vq->master().shape().dim)
    return status::invalid_argument;
  const std::size_t b = batch < z.rows ? batch : z.rows;
  std::uint64_t rng = seed, bytes = 0;
  matrix<T> zb(b, z.cols);
  for (int step = 0; step < steps; ++step) {
    for (std::size_t i = 0; i < b; ++i) {
      const std::size_t row = static_cast<std::size_t>(detail::splitmix64(&rng) % z.rows);
      for (std::size_t j = 0; j < z.cols; ++j) zb(i, j) = z(row, j);
    }
    const status s = vq->learn(zb);
    if (s != status::success) return s;
    bytes += vq->next_sync().bytes();
  }
  if (synced_bytes != nullptr) *synced_bytes = bytes;
  return status::success;
}

}  // namespace zipccl::subspace
