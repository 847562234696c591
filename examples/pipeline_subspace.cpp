// A two-stage model trained end to end on the CPU, with its stage boundary compressed by the
// subspace codec: next-byte prediction on the licence texts Debian ships in /usr/share/common-licenses.
//
//   stage 1 (rank 0): 8 context bytes -> embeddings (8 x 16) -> h1 = relu(W1 e + b1)
//                     -> h = h1 + relu(W2 h1 + b2)
//   boundary:         h (d = 128 per token, --dim) forward, dL/dh back, through subspace::sender /
//                     receiver over a transport::local world of two ranks (threads)
//   stage 2 (rank 1): g = relu(W3 h + b3) -> logits = W4 g + b4 -> cross-entropy with the next byte
//
// Boundary variants: uncompressed (h and dL/dh as bf16); a fixed random projection (A fixed, no
// anchor); MAPL (A learned on the Stiefel manifold from the task's gradient, the receiver's share
// of dL/dA sent back each step and the new A forward, a per-token anchor E P on the current byte);
// MAPL + residual VQ of z (groups of 4 numbers, 4 rounds of 256 codewords, 64 codewords synced a
// step, straight-through gradient; --vq), each at r = d/4, d/8, d/16 (--ratios). "boundary bytes"
// is what the transport counted in both directions over the training steps (the validation pass
// is not counted). With --seeds N every row is trained N times (model initialisation, data order
// and codec seed) and each seed's loss is compared with the same seed's uncompressed run.
//
//   build/bin/zipccl_pipeline_subspace [--steps N] [--batch N] [--stiefel-lr L] [--corpus DIR] [--dim D]
//       [--rows fixed,mapl,vq] [--ratios 4,8,16] [--vq SUB,ROUNDS,CODEWORDS,SLICE] [--seeds N]
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

#include <zipccl/convert.hpp>
#include <zipccl/subspace/anchor.hpp>
#include <zipccl/subspace/projector.hpp>
#include <zipccl/subspace/rvq.hpp>
#include <zipccl/subspace/link.hpp>
#include <zipccl/subspace/stiefel.hpp>
#include <zipccl/transport/local.hpp>

using namespace zipccl::subspace;
using zipccl::status;

namespace {

constexpr std::size_t ctx = 8, emb = 16, vocab = 256;
std::size_t d = 128;       // the boundary's width (--dim)
std::size_t batch = 512;  // tokens per micro-batch
double stiefel_lr = 1e-2;  // the Stiefel step size of A (docs/benchmarks.md has a sweep)
// residual VQ of z: groups of `vq_sub` numbers, `vq_rounds` rounds of `vq_codewords` words, and
// `vq_slice` codewords synced per micro-batch
std::size_t vq_sub = 4, vq_rounds = 4, vq_codewords = 256, vq_slice = 64;

using mat = matrix<float>;
void gemm(bool ta, bool tb, const mat& a, const mat& b, mat* c, float beta = 0) {  // c = op(a) op(b) + beta c
  zipccl::throw_if_error(multiply(a, ta, b, tb, c, beta), "gemm");
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


// The positions of one training step's micro-batch: both stages draw them from the same seed, as
// pipeline stages share a data loader's order.
struct batches {
  std::mt19937_64 rng;
  std::uniform_int_distribution<std::size_t> pick;
  batches(std::size_t split, unsigned seed) : rng(seed), pick(ctx, split - 1) {}
  std::vector<std::size_t> next() {
    std::vector<std::size_t> pos(batch);
    for (auto& p : pos) p = pick(rng);
    return pos;
  }
};
std::vector<std::vector<std::size_t>> validation_batches(std::size_t split, std::size_t size) {
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t p = split + ctx; p < size; p += batch) {
    out.emplace_back();
    for (std::size_t q = p; q < size && q < p + batch; ++q) out.back().push_back(q);
  }
  return out;
}
std::vector<std::int32_t> unique_ids(std::vector<std::int32_t> t) {
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

// h (or dL/dh) as bf16 over the transport: the uncompressed boundary.
template <class T>
status send_bf16(T& t, int peer, const mat& m) {
  std::vector<std::uint16_t> b(m.v.size());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = zipccl::to_bits<zipccl::bf16>(m.v[i]);
  return t.send(peer, b.data(), b.size() * 2);
}
template <class T>
status recv_bf16(T& t, int peer, mat* m) {
  std::vector<std::uint16_t> b(m->v.size());
  const status s = t.recv(peer, b.data(), b.size() * 2);
  for (std::size_t i = 0; i < b.size(); ++i) m->v[i] = zipccl::to_float<zipccl::bf16>(b[i]);
  return s;
}

// Stage 1 on rank 0, stage 2 on rank 1 of a transport::local world; the boundary goes through
// subspace::sender / receiver (or plain bf16), and the transport counts the bytes.
// `seed` sets the model's initialisation, the data order and the subspace codec's seed.
result train(const std::vector<std::uint8_t>& text, std::size_t split, boundary how, std::size_t r, int steps,
             unsigned seed) {
  const bool compressed = how != boundary::none, learn_a = how == boundary::mapl || how == boundary::mapl_vq;
  link_config cfg{d, compressed ? r : 1, learn_a ? vocab : 0, 7 + seed, false};
  if (how == boundary::mapl_vq) {
    cfg.vq_groups = std::max<std::size_t>(1, r / vq_sub);
    cfg.vq_rounds = vq_rounds;
    cfg.vq_codewords = vq_codewords;
    cfg.vq_slice = vq_slice;
  }
  zipccl::transport::local_world world(2);
  const auto valid = validation_batches(split, text.size());
  double val_total = 0;
  std::size_t val_count = 0;
  std::uint64_t train_bytes = 0;
  status failed = status::success;
  const auto t0 = std::chrono::steady_clock::now();
  world.run([&](zipccl::transport::local_transport& t) {
    std::mt19937_64 init(42 + 1000 * seed + static_cast<unsigned>(t.rank()));
    batches data(split, 42 + seed);
    status st = status::success;
    if (t.rank() == 0) {  // stage 1
      param e(vocab, emb, 0.1f, init), w1(ctx * emb, d, 1.0f / std::sqrt(float(ctx * emb)), init), b1(1, d, 0, init),
          w2(d, d, 1.0f / std::sqrt(float(d)), init), b2(1, d, 0, init);
      sender link(cfg);
      matrix<float> a = link.projector();
      stiefel_options so;
      so.lr = stiefel_lr;
      stiefel_optimizer<float> opt(d, cfg.rank, so);
      param anc_p(learn_a ? vocab : 1, cfg.rank, 0, init);
      auto forward = [&](const std::vector<std::size_t>& pos, mat* x, mat* h1, mat* h2, mat* h,
                         std::vector<std::int32_t>* tok) {
        const std::size_t n = pos.size();
        *x = mat(n, ctx * emb);
        tok->resize(n);
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t c = 0; c < ctx; ++c)
            std::memcpy(&(*x)(i, c * emb), &e.w(text[pos[i] - ctx + c], 0), emb * sizeof(float));
          (*tok)[i] = text[pos[i] - 1];  // the current byte: the anchor's token
        }
        mat z1, z2;
        gemm(false, false, *x, w1.w, &z1);
        *h1 = z1;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < d; ++j) (*h1)(i, j) = std::max(0.0f, z1(i, j) + b1.w.v[j]);
        gemm(false, false, *h1, w2.w, &z2);
        *h = *h1;
        *h2 = z2;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < d; ++j) {
            (*h2)(i, j) = std::max(0.0f, z2(i, j) + b2.w.v[j]);
            (*h)(i, j) += (*h2)(i, j);
          }
        if (!compressed) return send_bf16(t, 1, *h);
        return link.send(*h, tok->data(), 1, t);
      };
      for (int step = 1; step <= steps && st == status::success; ++step) {
        const auto pos = data.next();
        mat x, h1, h2, h, dh;
        std::vector<std::int32_t> tok;
        st = forward(pos, &x, &h1, &h2, &h, &tok);
        if (st != status::success) break;
        if (!compressed) {
          dh = mat(pos.size(), d);
          st = recv_bf16(t, 1, &dh);
        } else {
          mat dz;
          st = link.recv_grad(&dz, 1, t);
          mat da(d, cfg.rank), de(learn_a ? vocab : 1, cfg.rank);
          if (st == status::success)
            st = encode_backward(h, learn_a ? tok.data() : nullptr, a, link.anchor(), dz, &dh, &da,
                                 learn_a ? &de : nullptr);
          if (st == status::success && learn_a) {
            // the receiver's shares of dL/dA and dL/dE (rows of this batch's tokens) come back
            mat da_recv(d, cfg.rank);
            const auto rows = unique_ids(tok);
            std::vector<float> de_rows(rows.size() * cfg.rank);
            st = t.recv(1, da_recv.data(), da_recv.v.size() * 4);
            if (st == status::success) st = t.recv(1, de_rows.data(), de_rows.size() * 4);
            for (std::size_t i = 0; i < da.v.size(); ++i) da.v[i] += da_recv.v[i];
            for (std::size_t k = 0; k < rows.size(); ++k)
              for (std::size_t j = 0; j < cfg.rank; ++j) de(static_cast<std::size_t>(rows[k]), j) += de_rows[k * cfg.rank + j];
            if (st == status::success) st = opt.step(&a, da);
            if (st == status::success) st = link.set_projector(a);
            anc_p.w = link.anchor()->table();
            anc_p.g = de;
            anc_p.step(2e-3f, step);
            link.anchor()->table() = anc_p.w;
            if (st == status::success) st = link.set_anchor_rows(rows);
          }
        }
        if (st != status::success) break;
        // stage 1 backward
        mat dz2 = dh;
        for (std::size_t i = 0; i < dz2.v.size(); ++i)
          if (h2.v[i] <= 0) dz2.v[i] = 0;
        gemm(true, false, h1, dz2, &w2.g, 1);
        for (std::size_t i = 0; i < pos.size(); ++i)
          for (std::size_t j = 0; j < d; ++j) b2.g.v[j] += dz2(i, j);
        mat dh1, dx;
        gemm(false, true, dz2, w2.w, &dh1);
        for (std::size_t i = 0; i < dh1.v.size(); ++i) dh1.v[i] = h1.v[i] > 0 ? dh1.v[i] + dh.v[i] : 0;
        gemm(true, false, x, dh1, &w1.g, 1);
        for (std::size_t i = 0; i < pos.size(); ++i)
          for (std::size_t j = 0; j < d; ++j) b1.g.v[j] += dh1(i, j);
        gemm(false, true, dh1, w1.w, &dx);
        for (std::size_t i = 0; i < pos.size(); ++i)
          for (std::size_t c = 0; c < ctx; ++c)
            for (std::size_t k = 0; k < emb; ++k) e.g(text[pos[i] - ctx + c], k) += dx(i, c * emb + k);
        for (param* p : {&e, &w1, &b1, &w2, &b2}) p->step(2e-3f, step);
      }
      train_bytes = world.total_bytes();  // every training message is in: the last step's came back
      link.set_learning(false);
      for (const auto& pos : valid) {
        if (st != status::success) break;
        mat x, h1, h2, h;
        std::vector<std::int32_t> tok;
        st = forward(pos, &x, &h1, &h2, &h, &tok);
      }
    } else {  // stage 2
      param w3(d, d, 1.0f / std::sqrt(float(d)), init), b3(1, d, 0, init), w4(d, vocab, 1.0f / std::sqrt(float(d)), init),
          b4(1, vocab, 0, init);
      receiver link(cfg);
      // receives a micro-batch, runs stage 2; trains when `grad` (and sends the gradients back)
      auto step2 = [&](const std::vector<std::size_t>& pos, bool grad, int step, double* loss) {
        const std::size_t n = pos.size();
        mat xh(n, d), zq;
        std::vector<std::int32_t> tok;
        status e2 = compressed ? link.recv(&xh, &tok, 0, t, &zq) : recv_bf16(t, 0, &xh);
        if (e2 != status::success) return e2;
        mat z3, g3, logits;
        gemm(false, false, xh, w3.w, &z3);
        g3 = z3;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < d; ++j) g3(i, j) = std::max(0.0f, z3(i, j) + b3.w.v[j]);
        gemm(false, false, g3, w4.w, &logits);
        mat dlog(n, vocab);
        *loss = 0;
        for (std::size_t i = 0; i < n; ++i) {
          float mx = -1e30f;
          for (std::size_t j = 0; j < vocab; ++j) mx = std::max(mx, logits(i, j) += b4.w.v[j]);
          double sum = 0;
          for (std::size_t j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(logits(i, j) - mx));
          const std::uint8_t y = text[pos[i]];
          *loss += std::log(sum) - (logits(i, y) - mx);
          for (std::size_t j = 0; j < vocab; ++j)
            dlog(i, j) = static_cast<float>(std::exp(static_cast<double>(logits(i, j) - mx)) / sum / n) -
                         (j == y ? 1.0f / n : 0.0f);
        }
        if (!grad) return status::success;
        gemm(true, false, g3, dlog, &w4.g, 1);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < vocab; ++j) b4.g.v[j] += dlog(i, j);
        mat dg3, dxh;
        gemm(false, true, dlog, w4.w, &dg3);
        for (std::size_t i = 0; i < dg3.v.size(); ++i)
          if (g3.v[i] <= 0) dg3.v[i] = 0;
        gemm(true, false, xh, dg3, &w3.g, 1);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < d; ++j) b3.g.v[j] += dg3(i, j);
        gemm(false, true, dg3, w3.w, &dxh);
        for (param* p : {&w3, &b3, &w4, &b4}) p->step(2e-3f, step);
        if (!compressed) return send_bf16(t, 0, dxh);
        // back across the boundary: dL/dz (straight through the VQ), and for MAPL this side's
        // shares of dL/dA and of the anchor rows' gradients
        mat dz, da(d, cfg.rank), de(learn_a ? vocab : 1, cfg.rank);
        e2 = decode_backward(zq, learn_a ? tok.data() : nullptr, link.projector(), link.anchor(), dxh, &dz,
                             learn_a ? &da : nullptr, learn_a ? &de : nullptr);
        if (e2 == status::success) e2 = link.send_grad(dz, 0, t);
        if (e2 == status::success && learn_a) {
          const auto rows = unique_ids(tok);
          std::vector<float> de_rows(rows.size() * cfg.rank);
          for (std::size_t k = 0; k < rows.size(); ++k)
            for (std::size_t j = 0; j < cfg.rank; ++j) de_rows[k * cfg.rank + j] = de(static_cast<std::size_t>(rows[k]), j);
          e2 = t.send(0, da.data(), da.v.size() * 4);
          if (e2 == status::success) e2 = t.send(0, de_rows.data(), de_rows.size() * 4);
        }
        return e2;
      };
      double loss = 0;
      for (int step = 1; step <= steps && st == status::success; ++step) st = step2(data.next(), true, step, &loss);
      for (const auto& pos : valid) {
        if (st != status::success) break;
        st = step2(pos, false, 0, &loss);
        val_total += loss;
        val_count += pos.size();
      }
    }
    if (st != status::success) failed = st;
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failed != status::success) {
    std::fprintf(stderr, "zipccl_pipeline_subspace: %s failed: %s\n", name_of(how), zipccl::to_string(failed));
    std::exit(1);
  }
  return {val_total / static_cast<double>(val_count), secs, train_bytes};
}

// Activation compression of a boundary row: bf16 h against what z costs per token.
double compression(boundary how, std::size_t r) {
  if (how == boundary::none) return 1;
  if (how != boundary::mapl_vq) return static_cast<double>(d) / r;
  const std::size_t groups = std::max<std::size_t>(1, r / vq_sub), index_bytes = vq_codewords <= 256 ? 1 : 2;
  return 2.0 * d / static_cast<double>(groups * vq_rounds * index_bytes);
}

bool parse_list(const char* s, std::vector<std::size_t>* out) {
  out->clear();
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (end == p || v == 0) return false;
    out->push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != 0) return false;
  }
  return !out->empty();
}

int usage() {
  std::fprintf(stderr,
               "usage: zipccl_pipeline_subspace [--steps N] [--batch N] [--stiefel-lr L] [--corpus DIR]\n"
               "         [--rows fixed,mapl,vq] [--ratios 4,8,16] [--vq SUB,ROUNDS,CODEWORDS,SLICE] [--seeds N] [--dim D]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 1500, seeds = 1;
  std::string corpus = "/usr/share/common-licenses";
  std::vector<boundary> rows{boundary::fixed, boundary::mapl, boundary::mapl_vq};
  std::vector<std::size_t> ratios{4, 8, 16};
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    const char* v = argv[i + 1];
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(v);
    else if (std::strcmp(argv[i], "--corpus") == 0) corpus = v;
    else if (std::strcmp(argv[i], "--batch") == 0) batch = static_cast<std::size_t>(std::atol(v));
    else if (std::strcmp(argv[i], "--stiefel-lr") == 0) stiefel_lr = std::atof(v);
    else if (std::strcmp(argv[i], "--seeds") == 0) seeds = std::atoi(v);
    else if (std::strcmp(argv[i], "--dim") == 0) d = static_cast<std::size_t>(std::atol(v));
    else if (std::strcmp(argv[i], "--ratios") == 0) {
      if (!parse_list(v, &ratios)) return usage();
    } else if (std::strcmp(argv[i], "--vq") == 0) {
      std::vector<std::size_t> q;
      if (!parse_list(v, &q) || q.size() != 4 || q[2] < 2 || q[2] > 65536) return usage();
      vq_sub = q[0], vq_rounds = q[1], vq_codewords = q[2], vq_slice = q[3];
    } else if (std::strcmp(argv[i], "--rows") == 0) {
      rows.clear();
      for (std::string list = v; !list.empty();) {
        const std::size_t c = list.find(',');
        const std::string w = list.substr(0, c);
        list = c == std::string::npos ? "" : list.substr(c + 1);
        if (w == "fixed") rows.push_back(boundary::fixed);
        else if (w == "mapl") rows.push_back(boundary::mapl);
        else if (w == "vq") rows.push_back(boundary::mapl_vq);
        else return usage();
      }
    } else {
      return usage();
    }
  }
  if (steps < 1 || batch < 1 || batch > 65536 || !(stiefel_lr > 0 && stiefel_lr < 1) || seeds < 1 || seeds > 100) {
    std::fprintf(stderr, "zipccl_pipeline_subspace: --steps, --batch, --seeds and --stiefel-lr must be positive "
                         "(lr < 1, seeds <= 100)\n");
    return 2;
  }
  if (d < 16 || d > 4096) {
    std::fprintf(stderr, "zipccl_pipeline_subspace: --dim must be in [16, 4096]\n");
    return 2;
  }
  for (std::size_t q : ratios)
    if (q > d || d % q != 0) {
      std::fprintf(stderr, "zipccl_pipeline_subspace: --ratios: each must divide d = %zu\n", d);
      return 2;
    }
  for (std::size_t q : ratios)
    if (d / q % vq_sub != 0 && std::find(rows.begin(), rows.end(), boundary::mapl_vq) != rows.end()) {
      std::fprintf(stderr, "zipccl_pipeline_subspace: --vq: the group width %zu must divide r = %zu\n", vq_sub, d / q);
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
  std::printf("next-byte prediction on %s (%zu bytes: %zu train, %zu validation), %d steps of %zu, %d seed%s\n\n",
              corpus.c_str(), text.size(), split, text.size() - split, steps, batch, seeds, seeds > 1 ? "s" : "");
  if (seeds > 1)
    std::printf("(mean over seeds; \"vs uncompressed\" is the mean of each seed's ratio to its own uncompressed run, "
                "with the lowest and highest in brackets)\n\n");
  std::printf("| boundary | r | activation compression | validation loss | vs uncompressed | boundary bytes | wall s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<result> base;
  auto row = [&](boundary how, std::size_t r) {
    double loss = 0, ratio = 0, lo = 1e30, hi = 0, secs = 0;
    std::uint64_t bytes = 0;
    for (int k = 0; k < seeds; ++k) {
      const result x = train(text, split, how, r, steps, static_cast<unsigned>(k));
      if (how == boundary::none) base.push_back(x);
      const double q = x.val_loss / base[static_cast<std::size_t>(k)].val_loss;
      loss += x.val_loss / seeds, ratio += q / seeds, secs += x.seconds / seeds, bytes = x.bytes;
      lo = std::min(lo, q), hi = std::max(hi, q);
    }
    std::printf("| %s | %s | %.1fx | %.4f | %.3f", name_of(how), how == boundary::none ? "-" : std::to_string(r).c_str(),
                compression(how, r), loss, ratio);
    if (seeds > 1) std::printf(" [%.3f, %.3f]", lo, hi);
    std::printf(" | %.1f MB | %.1f |\n", bytes / 1e6, secs);
    std::fflush(stdout);
  };
  row(boundary::none, d);
  for (boundary how : rows)
    for (std::size_t q : ratios) row(how, d / q);
  return 0;
}
