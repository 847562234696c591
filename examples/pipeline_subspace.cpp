// A two-stage model trained end to end on the CPU, with its stage boundary compressed by the
// subspace codec: next-byte prediction on the licence texts Debian ships in /usr/share/common-licenses.
//
//   stage 1: 8 context bytes -> embeddings (8 x 16) -> h1 = relu(W1 e + b1) -> h = h1 + relu(W2 h1 + b2)
//   boundary: h (d = 128 per token) travels forward, dL/dh back
//   stage 2: g = relu(W3 h + b3) -> logits = W4 g + b4 -> cross-entropy with the next byte
//
// Boundary variants: uncompressed; a fixed random projection (A fixed); MAPL (A learned on the
// Stiefel manifold from the task's gradient, with a per-token anchor E P on the current byte); and
// MAPL + residual VQ of z (straight-through gradient), each at r = d/4, d/8, d/16. z travels as
// bf16 (the link's format); bytes count what the link would send per step: forward z and token
// ids, backward dL/dz, and the projector's and anchor's updates (A is d x r floats per step; the
// receiver's share of dL/dA comes back, d x r floats) or, with VQ, indices and codebook slices.
//
//   build/bin/zipccl_pipeline_subspace [--steps N] [--batch N] [--stiefel-lr L] [--corpus DIR]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <zipccl/collective/detail/arith.hpp>
#include <zipccl/subspace/anchor.hpp>
#include <zipccl/subspace/projector.hpp>
#include <zipccl/subspace/rvq.hpp>
#include <zipccl/subspace/stiefel.hpp>

using namespace zipccl::subspace;
using zipccl::status;

namespace {

constexpr std::size_t ctx = 8, emb = 16, d = 128, vocab = 256;
std::size_t batch = 512;  // tokens per micro-batch
double stiefel_lr = 1e-2;  // the Stiefel step size of A (docs/BENCHMARKS.md has a sweep)

using mat = matrix<float>;
void gemm(bool ta, bool tb, const mat& a, const mat& b, mat* c, float beta = 0) {  // c = op(a) op(b) + beta c
  const std::size_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols, n = tb ? b.rows : b.cols;
  if (beta == 0) *c = mat(m, n);
  detail::gemm<float>(ta, tb, m, n, k, 1.0f, a.data(), a.cols, b.data(), b.cols, beta, c->data(), n);
}

// Adam on one parameter tensor.
struct param {
  mat w, g, m, v;
  param(std::size_t r, std::size_t c, float scale, std::mt19937_64& rng) : w(r, c), g(r, c), m(r, c), v(r, c) {
    std::normal_distribution<float> nd(0.0f, scale);
    for (float& x : w.v) x = nd(rng);
  }
  void step(float lr, int t) {
    const float c1 = 1 - std::pow(0.9f, static_cast<float>(t)), c2 = 1 - std::pow(0.999f, static_cast<float>(t));
    for (std::size_t i = 0; i < w.v.size(); ++i) {
      m.v[i] = 0.9f * m.v[i] + 0.1f * g.v[i];
      v.v[i] = 0.999f * v.v[i] + 0.001f * g.v[i] * g.v[i];
      w.v[i] -= lr * (m.v[i] / c1) / (std::sqrt(v.v[i] / c2) + 1e-8f);
      g.v[i] = 0;
    }
  }
};

enum class boundary { none, fixed, mapl, mapl_vq };
const char* name_of(boundary b) {
  return b == boundary::none ? "uncompressed" : b == boundary::fixed ? "fixed projection" : b == boundary::mapl ? "MAPL" : "MAPL + VQ";
}

struct result {
  double val_loss, seconds;
  std::uint64_t bytes;
};

float bf16_round(float x) { return zipccl::collective::detail::widen<zipccl::bf16>(zipccl::collective::detail::narrow<zipccl::bf16>(x)); }

result train(const std::vector<std::uint8_t>& text, std::size_t split, boundary how, std::size_t r, int steps) {
  std::mt19937_64 rng(42);  // the same start for every variant
  param e(vocab, emb, 0.1f, rng), w1(ctx * emb, d, 1.0f / std::sqrt(float(ctx * emb)), rng), b1(1, d, 0, rng),
      w2(d, d, 1.0f / std::sqrt(float(d)), rng), b2(1, d, 0, rng), w3(d, d, 1.0f / std::sqrt(float(d)), rng),
      b3(1, d, 0, rng), w4(d, vocab, 1.0f / std::sqrt(float(d)), rng), b4(1, vocab, 0, rng);
  const bool compressed = how != boundary::none;
  matrix<float> a = random_orthonormal<float>(d, compressed ? r : 1, 7);
  anchor_table<float> anc(vocab, d, compressed ? r : 1, 8);
  param anc_p(vocab, compressed ? r : 1, 0, rng);  // Adam state for E
  stiefel_options so;
  so.lr = stiefel_lr;
  stiefel_optimizer<float> opt(d, compressed ? r : 1, so);
  rvq_options vo;
  vo.slice = 8;
  rvq_learner<float> vq(rvq_shape{compressed ? r : 4, 4, 2, 64}, vo);
  rvq_book<float> receiver_book(rvq_shape{compressed ? r : 4, 4, 2, 64}, vo.seed);
  const bool learn_a = how == boundary::mapl || how == boundary::mapl_vq;
  std::uint64_t bytes = 0;

  // forward of a batch of positions; returns the mean loss, fills the gradients when train
  auto run = [&](const std::vector<std::size_t>& pos, bool train_step, int t) {
    const std::size_t n = pos.size();
    mat x(n, ctx * emb);
    std::vector<std::int32_t> tok(n);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < ctx; ++c)
        std::memcpy(&x(i, c * emb), &e.w(text[pos[i] - ctx + c], 0), emb * sizeof(float));
      tok[i] = text[pos[i] - 1];  // the current byte: the anchor's token
    }
    mat z1, h1, z2, h2, h;
    gemm(false, false, x, w1.w, &z1);
    h1 = z1;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) h1(i, j) = std::max(0.0f, z1(i, j) + b1.w.v[j]);
    gemm(false, false, h1, w2.w, &z2);
    h = h1;
    h2 = z2;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) {
        h2(i, j) = std::max(0.0f, z2(i, j) + b2.w.v[j]);
        h(i, j) += h2(i, j);
      }
    // the boundary
    mat z, zq, xh = h;
    std::vector<std::uint16_t> idx;
    if (compressed) {
      encode(h, tok.data(), a, &anc, &z);
      for (float& v : z.v) v = bf16_round(v);
      zq = z;
      if (how == boundary::mapl_vq) {
        vq.encode(z, &idx);
        receiver_book.decode(idx.data(), n, &zq);
      }
      decode(zq, tok.data(), a, &anc, &xh);
      if (train_step) bytes += how == boundary::mapl_vq ? n * 4 * 2 : n * r * 2;  // 8 uint8 indices, or bf16 z
      if (train_step) bytes += n * 4;                                                  // token ids
    } else if (train_step) {
      bytes += n * d * 2;  // h as bf16
    }
    mat z3, g3, logits;
    gemm(false, false, xh, w3.w, &z3);
    g3 = z3;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) g3(i, j) = std::max(0.0f, z3(i, j) + b3.w.v[j]);
    gemm(false, false, g3, w4.w, &logits);
    double loss = 0;
    mat dlog(n, vocab);
    for (std::size_t i = 0; i < n; ++i) {
      float mx = -1e30f;
      for (std::size_t j = 0; j < vocab; ++j) mx = std::max(mx, logits(i, j) += b4.w.v[j]);
      double s = 0;
      for (std::size_t j = 0; j < vocab; ++j) s += std::exp(static_cast<double>(logits(i, j) - mx));
      const std::uint8_t y = text[pos[i]];
      loss += std::log(s) - (logits(i, y) - mx);
      for (std::size_t j = 0; j < vocab; ++j)
        dlog(i, j) = static_cast<float>(std::exp(static_cast<double>(logits(i, j) - mx)) / s / n) - (j == y ? 1.0f / n : 0.0f);
    }
    if (!train_step) return loss / n;
    // stage 2 backward
    gemm(true, false, g3, dlog, &w4.g, 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < vocab; ++j) b4.g.v[j] += dlog(i, j);
    mat dg3;
    gemm(false, true, dlog, w4.w, &dg3);
    for (std::size_t i = 0; i < dg3.v.size(); ++i)
      if (g3.v[i] <= 0) dg3.v[i] = 0;
    gemm(true, false, xh, dg3, &w3.g, 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) b3.g.v[j] += dg3(i, j);
    mat dxh, dh;
    gemm(false, true, dg3, w3.w, &dxh);
    // back across the boundary
    if (compressed) {
      mat dz, da(d, r), de(vocab, r);
      decode_backward(zq, tok.data(), a, &anc, dxh, &dz, &da, &de);
      for (float& v : dz.v) v = bf16_round(v);  // dL/dz travels as bf16
      bytes += n * r * 2;
      encode_backward(h, tok.data(), a, &anc, dz, &dh, &da, &de);  // straight through the VQ
      if (learn_a) {
        bytes += 2 * d * r * 4;  // the receiver's dL/dA back, the new A forward
        opt.step(&a, da);
        std::vector<std::int32_t> rows(tok);
        std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
        bytes += 2 * rows.size() * (4 + r * 4);  // the anchor rows' gradients back, new rows forward
        anc_p.w = anc.table();
        anc_p.g = de;
        anc_p.step(2e-3f, t);
        anc.table() = anc_p.w;
      }
      if (how == boundary::mapl_vq) {
        vq.learn(z);
        const auto s = vq.next_sync();
        apply_sync(s, &receiver_book);
        bytes += s.bytes();
      }
    } else {
      dh = dxh;
      bytes += n * d * 2;
    }
    // stage 1 backward
    mat dz2 = dh;
    for (std::size_t i = 0; i < dz2.v.size(); ++i)
      if (h2.v[i] <= 0) dz2.v[i] = 0;
    gemm(true, false, h1, dz2, &w2.g, 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) b2.g.v[j] += dz2(i, j);
    mat dh1;
    gemm(false, true, dz2, w2.w, &dh1);
    for (std::size_t i = 0; i < dh1.v.size(); ++i) dh1.v[i] = h1.v[i] > 0 ? dh1.v[i] + dh.v[i] : 0;
    gemm(true, false, x, dh1, &w1.g, 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) b1.g.v[j] += dh1(i, j);
    mat dx;
    gemm(false, true, dh1, w1.w, &dx);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < ctx; ++c)
        for (std::size_t k = 0; k < emb; ++k) e.g(text[pos[i] - ctx + c], k) += dx(i, c * emb + k);
    for (param* p : {&e, &w1, &b1, &w2, &b2, &w3, &b3, &w4, &b4}) p->step(2e-3f, t);
    return loss / n;
  };

  const auto t0 = std::chrono::steady_clock::now();
  std::uniform_int_distribution<std::size_t> pick(ctx, split - 1);
  std::vector<std::size_t> pos(batch);
  for (int t = 1; t <= steps; ++t) {
    for (auto& p : pos) p = pick(rng);
    run(pos, true, t);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // validation: every position of the held-out tail, in batches
  double total = 0;
  std::size_t count = 0;
  for (std::size_t p = split + ctx; p < text.size(); p += batch) {
    std::vector<std::size_t> vb;
    for (std::size_t q = p; q < text.size() && q < p + batch; ++q) vb.push_back(q);
    total += run(vb, false, 0) * vb.size();
    count += vb.size();
  }
  return {total / count, secs, bytes};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 1500;
  std::string corpus = "/usr/share/common-licenses";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--corpus") == 0) corpus = argv[i + 1];
    else if (std::strcmp(argv[i], "--batch") == 0) batch = static_cast<std::size_t>(std::atol(argv[i + 1]));
    else if (std::strcmp(argv[i], "--stiefel-lr") == 0) stiefel_lr = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: zipccl_pipeline_subspace [--steps N] [--batch N] [--stiefel-lr L] [--corpus DIR]\n");
      return 2;
    }
  }
  if (steps < 1 || batch < 1 || batch > 65536 || !(stiefel_lr > 0 && stiefel_lr < 1)) {
    std::fprintf(stderr, "zipccl_pipeline_subspace: --steps, --batch and --stiefel-lr must be positive (lr < 1)\n");
    return 2;
  }
#if defined(OPENBLAS_VERSION)
  openblas_set_num_threads(1);
#endif
  std::vector<std::uint8_t> text;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(corpus, ec))
    if (f.is_regular_file()) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    text.insert(text.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.size() < 10000) {
    std::fprintf(stderr, "zipccl_pipeline_subspace: %s: need at least 10 kB of text, found %zu bytes\n",
                 corpus.c_str(), text.size());
    return 1;
  }
  const std::size_t split = text.size() * 9 / 10;
  std::printf("next-byte prediction on %s (%zu bytes: %zu train, %zu validation), %d steps of %zu\n\n",
              corpus.c_str(), text.size(), split, text.size() - split, steps, batch);
  std::printf("| boundary | compression | validation loss | vs uncompressed | boundary bytes | wall s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  const result base = train(text, split, boundary::none, 0, steps);
  std::printf("| %s | 1x | %.4f | 1.000 | %.1f MB | %.1f |\n", name_of(boundary::none), base.val_loss, base.bytes / 1e6,
              base.seconds);
  std::fflush(stdout);
  for (boundary how : {boundary::fixed, boundary::mapl, boundary::mapl_vq})
    for (std::size_t ratio : {4, 8, 16}) {
      const result r = train(text, split, how, d / ratio, steps);
      std::printf("| %s | %zux | %.4f | %.3f | %.1f MB | %.1f |\n", name_of(how), ratio, r.val_loss,
                  r.val_loss / base.val_loss, r.bytes / 1e6, r.seconds);
      std::fflush(stdout);
    }
  return 0;
}
