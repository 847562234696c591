// The subspace codec at a stage boundary over transport::local: what the receiver decodes is
// exactly the sender's projection (after the bf16 rounding of z), the projector and anchor rows
// follow the sender's updates, gradients travel back, and a peer set up differently, out-of-range
// token ids or a damaged message are errors on both sides, not hangs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include <zipccl/subspace/link.hpp>
#include <zipccl/transport/local.hpp>

#include "../support/subspace_data.hpp"

using namespace zipccl;
using namespace zipccl::subspace;
using transport::local_transport;
using transport::local_world;

namespace {
constexpr auto timeout = std::chrono::seconds(20);

matrix<float> activations(std::size_t n, std::size_t d, std::uint64_t seed) {
  return testing::gaussian_matrix<float>(n, d, seed);
}
std::vector<std::int32_t> ids(std::size_t n, int vocab, std::uint64_t seed) { return testing::token_ids(n, vocab, seed); }
}  // namespace

TEST_CASE("the subspace link carries activations forward and gradients back", "[subspace][host]") {
  for (bool lossless : {false, true})
    for (std::size_t vocab : {std::size_t{0}, std::size_t{50}}) {
      INFO("lossless " << lossless << ", vocab " << vocab);
      const link_config cfg{64, 8, vocab, 1234, lossless};
      local_world world(2, {}, timeout);
      std::vector<status> st(2, status::success);
      matrix<float> sent_z, got_z, x_hat, dz_back;
      const matrix<float> x = activations(40, 64, 1);
      const auto tok = ids(40, 50, 2);
      std::vector<std::int32_t> got_tok;
      matrix<float> a_updated;
      world.run([&](local_transport& t) {
        if (t.rank() == 0) {
          sender s(cfg);
          status e = s.send(x, tok.data(), 1, t, &sent_z);
          // an optimizer step later: the next message carries the new A and the changed anchor rows
          matrix<float> a = s.projector();
          stiefel_optimizer<float> opt(64, 8);
          if (e == status::success) e = opt.step(&a, activations(64, 8, 3));
          if (e == status::success) e = s.set_projector(a);
          if (vocab && e == status::success) {
            for (std::size_t k = 0; k < 8; ++k) s.anchor()->table()(7, k) = 0.25f * static_cast<float>(k);
            e = s.set_anchor_rows({7});
          }
          a_updated = a;
          if (e == status::success) e = s.send(x, tok.data(), 1, t);
          if (e == status::success) e = s.recv_grad(&dz_back, 1, t);
          st[0] = e;
        } else {
          receiver q(cfg);
          status e = q.recv(&x_hat, &got_tok, 0, t, &got_z);
          matrix<float> second;
          if (e == status::success) e = q.recv(&second, nullptr, 0, t);
          if (e == status::success) {
            CHECK(q.projector().v == a_updated.v);
            if (vocab) CHECK(q.anchor()->table()(7, 3) == 0.75f);
          }
          if (e == status::success) e = q.send_grad(got_z, 0, t);  // any n x r will do
          st[1] = e;
        }
      });
      REQUIRE(st[0] == status::success);
      REQUIRE(st[1] == status::success);
      if (vocab) CHECK(got_tok == tok);
      // z arrived as bf16: within bf16 rounding of what was sent, and bit-exactly its bf16 value
      REQUIRE(got_z.v.size() == sent_z.v.size());
      for (std::size_t i = 0; i < got_z.v.size(); ++i) {
        CHECK(got_z.v[i] == collective::detail::widen<bf16>(collective::detail::narrow<bf16>(sent_z.v[i])));
        CHECK(std::abs(got_z.v[i] - sent_z.v[i]) <= std::abs(sent_z.v[i]) / 128 + 1e-30f);
      }
      CHECK(dz_back.v == got_z.v);  // bf16 values survive a second trip unchanged
      CHECK(x_hat.rows == 40);
      CHECK(x_hat.cols == 64);
    }
}

TEST_CASE("the subspace link reports a differently set up peer, bad ids and damage", "[subspace][host]") {
  const link_config base{32, 4, 20, 7, true};
  auto run = [&](link_config send_cfg, link_config recv_cfg, std::vector<std::int32_t> tok, bool flip) {
    local_world world(2, {}, timeout);
    std::vector<status> st(2, status::success);
    world.run([&](local_transport& t) {
      if (t.rank() == 0) {
        sender s(send_cfg);
        const matrix<float> x = activations(tok.size(), send_cfg.dim, 5);
        if (!flip) {
          st[0] = s.send(x, tok.data(), 1, t);
        } else {  // a transport that damages the body on its way
          struct damaging {
            local_transport& in;
            int rank() const { return in.rank(); }
            int size() const { return in.size(); }
            status send(int d, const void* b, std::uint64_t n) {
              if (n == 72) return in.send(d, b, n);
              std::vector<std::uint8_t> c(static_cast<const std::uint8_t*>(b), static_cast<const std::uint8_t*>(b) + n);
              c[n - 3] ^= 0x5A;
              return in.send(d, c.data(), n);
            }
            status recv(int s, void* b, std::uint64_t n) { return in.recv(s, b, n); }
            status sendrecv(int d, const void* sb, std::uint64_t sn, int s, void* rb, std::uint64_t rn) {
              return in.sendrecv(d, sb, sn, s, rb, rn);
            }
            void abort(status w) { in.abort(w); }
          } dt{t};
          st[0] = s.send(x, tok.data(), 1, dt);
        }
      } else {
        receiver q(recv_cfg);
        matrix<float> x_hat;
        st[1] = q.recv(&x_hat, nullptr, 0, t);
      }
    });
    return st;
  };
  const std::vector<std::int32_t> good = ids(16, 20, 9);
  CHECK(run(base, base, good, false)[1] == status::success);
  link_config other_seed = base;
  other_seed.seed = 8;
  CHECK(run(base, other_seed, good, false)[1] == status::config_mismatch);
  link_config with_vq = base, other_vq = base;
  with_vq.vq_groups = other_vq.vq_groups = 2;
  other_vq.vq_codewords = 128;
  CHECK(run(with_vq, with_vq, good, false)[1] == status::success);
  CHECK(run(with_vq, other_vq, good, false)[1] == status::config_mismatch);
  CHECK(run(with_vq, with_vq, good, true)[1] == status::checksum_mismatch);  // a damaged slice or indices
  link_config other_rank = base;
  other_rank.rank = 5;
  CHECK(run(base, other_rank, good, false)[1] == status::size_mismatch);
  std::vector<std::int32_t> bad = good;
  bad[3] = 20;  // out of range at the sender: caught before anything is sent
  const auto st = run(base, base, bad, false);
  CHECK(st[0] == status::invalid_argument);
  CHECK(st[1] != status::success);  // the abort reaches the receiver
  link_config raw = base;
  raw.lossless = false;
  CHECK(run(raw, raw, good, true)[1] == status::checksum_mismatch);   // a damaged bf16 payload
  CHECK(run(base, base, good, true)[1] == status::checksum_mismatch);  // a damaged lossless stream
}

TEST_CASE("the subspace link with residual VQ keeps both codebooks identical", "[subspace][rvq][host]") {
  link_config cfg{64, 8, 30, 99, true};
  cfg.vq_groups = 2;
  cfg.vq_rounds = 2;
  cfg.vq_codewords = 32;
  cfg.vq_slice = 6;
  local_world world(2, {}, timeout);
  std::vector<status> st(2, status::success);
  const int steps = 400;
  std::vector<matrix<float>> sent(steps), got(steps);
  std::vector<std::vector<float>> mirror_after(steps), book_after(steps);
  world.run([&](local_transport& t) {
    if (t.rank() == 0) {
      sender s(cfg);
      for (int i = 0; i < steps && st[0] == status::success; ++i) {
        const matrix<float> x = activations(48, 64, 100 + static_cast<std::uint64_t>(i % 7));  // recurring data
        const auto tok = ids(48, 30, 200 + static_cast<std::uint64_t>(i));
        st[0] = s.send(x, tok.data(), 1, t, &sent[static_cast<std::size_t>(i)]);
        mirror_after[static_cast<std::size_t>(i)] = s.quantiser().mirror().values();
      }
    } else {
      receiver q(cfg);
      for (int i = 0; i < steps && st[1] == status::success; ++i) {
        matrix<float> x_hat;
        st[1] = q.recv(&x_hat, nullptr, 0, t, &got[static_cast<std::size_t>(i)]);
        book_after[static_cast<std::size_t>(i)] = q.codebooks().values();
      }
    }
  });
  REQUIRE(st[0] == status::success);
  REQUIRE(st[1] == status::success);
  for (int i = 0; i < steps; ++i) {
    REQUIRE(got[static_cast<std::size_t>(i)].v == sent[static_cast<std::size_t>(i)].v);  // the same dequantised z
    REQUIRE(book_after[static_cast<std::size_t>(i)] == mirror_after[static_cast<std::size_t>(i)]);
  }
  // what one token's z costs on the wire: 2 x 2 one-byte indices instead of 8 bf16 numbers
  CHECK(cfg.vq_groups * cfg.vq_rounds * 1 < cfg.rank * 2);
  // a receiver set up with other VQ codebooks is caught
  link_config other = cfg;
  other.vq_codewords = 64;
  CHECK(other.fingerprint() != cfg.fingerprint());
}
