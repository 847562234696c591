// Writes a seed corpus of valid streams (every type, policy and checksum setting) for the fuzzer.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <zipccl/collective/detail/wire.hpp>
#include <zipccl/zipccl.hpp>

#include "fuzz/fuzz_common.hpp"
#include "support/stream_tools.hpp"
#include "support/test_data.hpp"

using namespace zipccl;

namespace {
int written = 0;

void write(const std::filesystem::path& dir, std::uint8_t mode, const std::vector<std::uint8_t>& body) {
  std::ofstream out(dir / ("seed-" + std::to_string(written++)), std::ios::binary);
  out.put(static_cast<char>(mode));
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

template <class Codec>
void seeds(const std::filesystem::path& dir) {
  using E = typename Codec::element_type;
  for (bool checksum : {false, true})
    for (std::uint64_t n : {0ull, 1ull, 40ull, 700ull}) {
      auto v = testing::make_tensor<E>(n, 0.1, testing::distribution::laplace, n);
      if (n == 700) {
        const auto noise = testing::random_bits<E>(256, 1);
        std::copy(noise.begin(), noise.end(), v.begin() + 256);  // a stored chunk
      }
      host::compress_options opt;
      opt.chunk_elems = 256;
      opt.checksum = checksum;
      const auto s = host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), n));
      write(dir, fuzzing::decode_raw, s);
      write(dir, fuzzing::decode_repaired, s);
    }
  // 4096-element chunks, with and without the checksum flag, as raw and repaired seeds
  const auto big_chunks = [&](const std::vector<typename Codec::bits_type>& v) {
    for (bool checksum : {false, true}) {
      host::compress_options opt;
      opt.chunk_elems = 4096;
      opt.checksum = checksum;
      const auto s = host::compress<Codec>(v.data(), v.size(), opt, testing::policy_for<Codec>(v.data(), v.size()));
      write(dir, fuzzing::decode_raw, s);
      write(dir, fuzzing::decode_repaired, s);
    }
  };
  // zero groups (zero_coded, zero_stored, zero_rans chunks) and chunks large enough for rANS
  auto groups = testing::make_tensor<E>(9000, 0.1, testing::distribution::gaussian, 9);
  for (std::uint64_t i = 0; i < groups.size(); ++i)
    if ((i / 64) % 3 == 1 || i >= 8192 + 700) groups[i] = 0;
  big_chunks(groups);
  // scattered +0.0 and -0.0 (rANS: zero symbols, modes 12 and 14, version 3)
  auto scattered = testing::make_element_sparse<E>(9000, 0.4, 0.5, 0.1, 10);
  for (std::uint64_t i = 4096; i < 4096 + 640; ++i) scattered[i] = 0;  // zero groups in chunk 1
  big_chunks(scattered);
  std::vector<std::uint8_t> rt = {static_cast<std::uint8_t>(Codec::type) , 0, 0};
  const auto v = testing::make_tensor<E>(300, 1.0);
  rt.insert(rt.end(), reinterpret_cast<const std::uint8_t*>(v.data()),
            reinterpret_cast<const std::uint8_t*>(v.data() + v.size()));
  write(dir, fuzzing::decode_repaired, testing::wrapping_directory_stream());  // a fuzzer finding
  write(dir, fuzzing::round_trip, rt);
  // a valid wire segment (fixed section, then tail) of 700 elements, one chunk of noise (stored)
  using W = collective::detail::wire<codec<E, codebook::analytic_gaussian>>;
  auto w = testing::make_tensor<E>(700, 0.1, testing::distribution::gaussian, 3);
  const auto noise = testing::random_bits<E>(256, 2);
  std::copy(noise.begin(), noise.end(), w.begin() + 256);
  std::vector<std::uint8_t> fixed(W::fixed_bytes(700, 256) + W::spill_bytes(256)), tail(W::max_bytes(700, 256));
  const std::uint64_t tb =
      W::encode({}, w.data(), 700, 256, true, collective::detail::wire_place{}, fixed.data(), tail.data());
  std::vector<std::uint8_t> seg = {static_cast<std::uint8_t>(static_cast<unsigned>(Codec::type) - 1), 700 & 0xFF,
                                   700 >> 8};  // 0 bf16, 1 fp16, 2 fp32
  seg.insert(seg.end(), fixed.begin(), fixed.begin() + static_cast<std::ptrdiff_t>(W::fixed_bytes(700, 256)));
  seg.insert(seg.end(), tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(tb));
  write(dir, fuzzing::wire, seg);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  seeds<codec<bf16, codebook::analytic_gaussian>>(dir);
  seeds<codec<bf16, codebook::histogram>>(dir);
  seeds<codec<fp16, codebook::histogram>>(dir);
  seeds<codec<fp32, codebook::analytic_gaussian>>(dir);
  seeds<codec<bf16, codebook::entropy>>(dir);
  seeds<codec<fp16, codebook::entropy>>(dir);
  seeds<codec<fp32, codebook::entropy>>(dir);
  // .npy headers as numpy writes them (a vector, a Fortran-order matrix) for the tool's reader
  for (const char* h : {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
                        "{'descr': '<f2', 'fortran_order': True, 'shape': (2, 3), }",
                        "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (3L, 2L), }"}) {
    std::string header = h;
    header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
    std::vector<std::uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(header.size() & 0xFF),
                                   static_cast<std::uint8_t>(header.size() >> 8)};
    f.insert(f.end(), header.begin(), header.end());
    f.resize(f.size() + 24, 0);
    write(dir, fuzzing::npy, f);
  }
  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return 0;
}
