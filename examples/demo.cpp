// zipccl demo: the lossless codec end to end, on generated near-Gaussian tensors and on the real
// training tensors in ../shared/data when present. For each element type and codebook policy it
// compresses, decompresses, verifies bit equality, and prints the ratio, the share of the
// exponent-entropy bound it reaches, and single-thread throughput.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <zipccl/zipccl.hpp>

#include "support/test_data.hpp"

using namespace zipccl;

namespace {

struct totals {
  std::uint64_t raw = 0, compressed = 0;
  double entropy_bits = 0, compress_s = 0, decompress_s = 0;
  bool exact = true;
};

template <class Codec>
void run_one(const void* data, std::uint64_t n, totals* t) {
  using E = typename Codec::element_type;
  using bits = typename Codec::bits_type;
  std::vector<bits> aligned(n);
  std::memcpy(aligned.data(), data, n * sizeof(bits));
  const auto policy = testing::policy_for<Codec>(aligned.data(), n);
  std::vector<std::uint8_t> stream(host::max_compressed_size<Codec>(n));
  std::vector<bits> back(n);
  std::uint64_t bytes = 0;
  const int reps = n * sizeof(bits) < (8u << 20) ? 20 : 3;
  auto t0 = std::chrono::steady_clock::now();
  status c = status::success;
  for (int r = 0; r < reps && c == status::success; ++r)
    c = host::compress<Codec>(data, n, stream.data(), stream.size(), &bytes, {}, policy);
  auto t1 = std::chrono::steady_clock::now();
  status s = c;
  for (int r = 0; r < reps && s == status::success; ++r)
    s = host::decompress(stream.data(), bytes, back.data(), n * sizeof(bits));
  auto t2 = std::chrono::steady_clock::now();
  t->exact = t->exact && s == status::success && std::memcmp(back.data(), data, n * sizeof(bits)) == 0;
  t->raw += n * sizeof(bits);
  t->compressed += bytes;
  t->compress_s += std::chrono::duration<double>(t1 - t0).count() / reps;
  t->decompress_s += std::chrono::duration<double>(t2 - t1).count() / reps;
  const auto st = host::analyze<E>(data, n);
  t->entropy_bits += (E::rest_bits + st.entropy_bits) * static_cast<double>(n);
}

void print(const char* dtype, const char* data, const char* policy, const totals& t) {
  const double ratio = static_cast<double>(t.raw) / static_cast<double>(t.compressed);
  const double bound = 8.0 * static_cast<double>(t.raw) / t.entropy_bits;
  std::printf("%-5s %-22s %-9s %8.2f MB  ratio %.4f  %5.1f%% of bound %.4f  compress %6.2f GB/s  "
              "decompress %6.2f GB/s  %s\n",
              dtype, data, policy, t.raw / 1e6, ratio, 100.0 * ratio / bound, bound, t.raw / t.compress_s / 1e9,
              t.raw / t.decompress_s / 1e9, t.exact ? "bit-exact" : "MISMATCH");
}

template <class E>
bool run_type() {
  bool ok = true;
  auto each_policy = [&](const char* label, const std::vector<std::vector<typename E::bits_type>>& tensors) {
    auto go = [&](auto codec_tag, const char* name) {
      using C = decltype(codec_tag);
      totals t;
      for (const auto& v : tensors) run_one<C>(v.data(), v.size(), &t);
      print(E::name, label, name, t);
      ok = ok && t.exact;
    };
    go(codec<E, codebook::analytic_gaussian>{}, "analytic");
    go(codec<E, codebook::histogram>{}, "histogram");
    go(codec<E, codebook::fixed>{}, "fixed");
  };
  each_policy("gaussian (s=0.02)", {testing::make_tensor<E>(8u << 20, 0.02, testing::distribution::gaussian, 1)});
  each_policy("student-t (s=1e-3)", {testing::make_tensor<E>(4u << 20, 1e-3, testing::distribution::student_t, 2)});
  for (const char* kind : {"weight", "gradient", "adam_m", "activation"}) {
    std::vector<std::vector<typename E::bits_type>> tensors;
    for (const auto& t : testing::shared_manifest(E::name))
      if (t.kind == kind) tensors.push_back(testing::load_shared<E>(t));
    if (tensors.empty()) continue;
    const std::string label = std::string("shared ") + kind + " x" + std::to_string(tensors.size());
    each_policy(label.c_str(), tensors);
  }
  return ok;
}

}  // namespace

int main() {
  std::printf("zipccl %d.%d.%d demo: lossless exponent coding, single-threaded host executor%s\n",
              version.major, version.minor, version.patch,
              ZIPCCL_HAS_AVX512 ? " (AVX-512 paths)" : ZIPCCL_HAS_AVX2 ? " (AVX2 paths)" : " (portable path)");
  if (testing::shared_manifest("bf16").empty())
    std::printf("(no shared tensors at %s; generated data only)\n", testing::shared_data_dir().c_str());
  const bool ok = run_type<bf16>() & run_type<fp16>() & run_type<fp32>();
  std::printf("%s\n", ok ? "all round trips bit-exact" : "ROUND TRIP FAILURE");
  return ok ? 0 : 1;
}
