// libFuzzer target: the decoder on untrusted bytes, the collectives' wire sections on untrusted
// bytes (collective/detail/wire.hpp), the zipccl tool's .npy reader, and compress/decompress
// round trips. Its
// checks call std::abort(), which libFuzzer reports as a crash with the input that caused it: a
// header that validates differently in read_header and decompress, a too-small output that is not
// reported as such, a round trip that does not return the input. AddressSanitizer and UBSan catch
// every out-of-bounds access and undefined operation.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <zipccl/collective/detail/wire.hpp>
#include <zipccl/zipccl.hpp>

#include "fuzz/fuzz_common.hpp"
#include "npy.hpp"
#include "support/stream_tools.hpp"

using namespace zipccl;

namespace {

constexpr std::uint64_t max_output = 16u << 20;

void decode(const std::uint8_t* data, std::size_t size) {
  host::stream_info info;
  if (host::read_header(data, size, &info) != status::success) {
    // a header that does not validate must make decompress fail the same way
    std::uint8_t sink[16];
    if (host::decompress(data, size, sink, sizeof sink) == status::success) std::abort();
    return;
  }
  // an accepted header's count always fits its stream's size, so nobody sizes a buffer from a lie
  if (info.compressed_bytes < format::min_compressed_size(info.type, info.count, info.chunk_elems)) std::abort();
  const std::uint64_t need = info.decompressed_bytes();
  if (need > max_output) {
    std::vector<std::uint8_t> small(64);
    if (host::decompress(data, size, small.data(), small.size()) != status::buffer_too_small) std::abort();
    return;
  }
  // exactly `need` bytes on the heap, so that AddressSanitizer sees any overrun
  std::vector<std::uint8_t> out(need);
  host::decompress(data, size, out.data(), out.size());
  host::decompress_options opt;
  opt.threads = 2;
  host::decompress(data, size, out.data(), out.size(), nullptr, opt);
}

template <class Codec>
void round_trip(const std::uint8_t* data, std::size_t size, std::uint8_t flags) {
  using E = typename Codec::element_type;
  const std::uint64_t n = size / sizeof(typename E::bits_type);
  host::compress_options opt;
  opt.checksum = flags & 1;
  opt.chunk_elems = (flags & 2) ? 256 : 4096;
  opt.threads = (flags & 4) ? 2 : 1;
  typename Codec::codebook_type policy{};
  if constexpr (std::is_same_v<typename Codec::codebook_type, codebook::fixed>)
    policy = codebook::fixed::window<E>(flags >> 3);
  std::vector<std::uint8_t> stream(host::max_compressed_size<Codec>(n, opt.chunk_elems));
  for (bool zero_groups : {true, false}) {  // with and without zero masks
    opt.zero_groups = zero_groups;
    std::uint64_t bytes = 0;
    if (host::compress<Codec>(data, n, stream.data(), stream.size(), &bytes, opt, policy) != status::success)
      std::abort();
    std::vector<std::uint8_t> back(n * sizeof(typename E::bits_type));
    if (host::decompress(stream.data(), bytes, back.data(), back.size()) != status::success) std::abort();
    if (!back.empty() && std::memcmp(back.data(), data, back.size()) != 0) std::abort();
  }
}

// A segment of `count` elements as a receiver gets it: the fixed section, then the tail. Parsing
// must never read past what arrived (AddressSanitizer: the copies are exactly sized), a tail size it
// accepts must be within the bound, and decoding must be deterministic.
template <class E>
void wire_segment(std::uint64_t count, const std::uint8_t* data, std::size_t size) {
  using W = collective::detail::wire<codec<E, codebook::analytic_gaussian>>;
  const std::uint64_t chunk = 256, fixed = W::fixed_bytes(count, chunk);
  if (size < fixed) return;
  std::uint64_t tail = 0;
  if (W::tail_bytes(data, count, chunk, &tail) != status::success) return;
  if (fixed + tail > W::max_bytes(count, chunk)) std::abort();  // an accepted tail is within the bound
  if (size - fixed < tail) return;
  std::vector<std::uint8_t> fixed_copy(data, data + fixed), tail_copy(data + fixed, data + fixed + tail),
      scratch(W::scratch_bytes(chunk));
  std::vector<std::uint8_t> out(count * sizeof(typename E::bits_type)), again(out.size());
  const collective::detail::wire_place place{};  // (fuzz_seeds.cpp encodes its wire seeds at this place)
  const status s = W::decode_into(fixed_copy.data(), tail_copy.data(), tail, count, chunk, true, place, out.data(),
                                  scratch.data());
  if (s != W::decode_into(fixed_copy.data(), tail_copy.data(), tail, count, chunk, true, place, again.data(),
                          scratch.data()))
    std::abort();
  if (s == status::success && out != again) std::abort();
}

// The tool's .npy reader: any input either parses into a header whose data lies inside the file,
// or throws std::runtime_error with a message; any other exception (std::stoull's
// out_of_range, a length_error) escapes to libFuzzer as a crash.
void npy_header(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> f(data, data + size);
  if (!zipccl_tool::is_npy(f)) return;
  try {
    const auto a = zipccl_tool::parse_npy(f);
    if (a.data_offset > f.size()) std::abort();
    for (unsigned item : {2u, 4u}) {
      try {
        zipccl_tool::check_npy_size(f, a, item);
        if (a.count * item != f.size() - a.data_offset) std::abort();
      } catch (const std::runtime_error&) {
      }
    }
  } catch (const std::runtime_error&) {
  }
}

template <class E>
void round_trip_policy(std::uint8_t cb, const std::uint8_t* data, std::size_t size, std::uint8_t flags) {
  switch (cb % 4) {
    case 0: return round_trip<codec<E, codebook::analytic_gaussian>>(data, size, flags);
    case 1: return round_trip<codec<E, codebook::histogram>>(data, size, flags);
    case 2: return round_trip<codec<E, codebook::fixed>>(data, size, flags);
    default: return round_trip<codec<E, codebook::entropy>>(data, size, flags);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto mode = static_cast<fuzzing::mode>(data[0] % fuzzing::mode_count);
  ++data;
  --size;
  switch (mode) {
    case fuzzing::decode_raw:
      decode(data, size);
      break;
    case fuzzing::decode_repaired: {
      std::vector<std::uint8_t> s(data, data + size);
      testing::repair_hashes(s);
      decode(s.data(), s.size());
      break;
    }
    case fuzzing::wire: {
      if (size < 3) return 0;
      const std::uint64_t count = data[1] | (static_cast<std::uint64_t>(data[2]) << 8);
      switch (data[0] % 3) {
        case 0: wire_segment<bf16>(count, data + 3, size - 3); break;
        case 1: wire_segment<fp16>(count, data + 3, size - 3); break;
        default: wire_segment<fp32>(count, data + 3, size - 3); break;
      }
      break;
    }
    case fuzzing::npy:
      npy_header(data, size);
      break;
    default: {
      if (size < 3) return 0;
      const std::uint8_t type = data[0], cb = data[1], flags = data[2];
      data += 3;
      size -= 3;
      switch (type % 3) {
        case 0: round_trip_policy<bf16>(cb, data, size, flags); break;
        case 1: round_trip_policy<fp16>(cb, data, size, flags); break;
        default: round_trip_policy<fp32>(cb, data, size, flags); break;
      }
    }
  }
  return 0;
}
