// zipccl: command-line tool for the lossless codec.
//
//   zipccl compress   --dtype bf16|fp16|fp32 [--codebook analytic|histogram|fixed|entropy] [--checksum]
//                     [--chunk N] [--threads N] [--no-zero-groups] [--repeat N] [--json] IN OUT
//   zipccl decompress [--threads N] [--repeat N] [--max-output BYTES] [--json] IN OUT
//   zipccl inspect    --dtype bf16|fp16|fp32 [--json] IN
//   zipccl plan       --op all_gather|reduce_scatter|all_reduce|all_to_all|send --ranks N --bytes S --link-gbps B
//                     [--latency-us A] [--dtype ...] [--compress-gbps C] [--decompress-gbps D] [--ratio R]
//                     [--overlap O] [--device-speeds FILE [--ranks-per-gpu K]] [--sample FILE] [--json]
//   zipccl subspace-fit --dim D --rank R [--tokens FILE --vocab V] [--vq G,R,K] [--steps N] [--dtype ...]
//                     [--seed S] [--json] IN          (built when a BLAS is found)
//
// IN is a raw little-endian file of elements or a .npy file (its dtype then comes from the header;
// numpy's '<f2' is fp16, '<f4' fp32, and bf16 is written by ml_dtypes as 'bfloat16' or as '<V2').
// With --codebook fixed the table is calibrated on the whole input (the 7 most frequent exponents),
// or given as a window with --window LO. --repeat N runs the codec call N times and reports the
// fastest as `seconds` (the output buffer is allocated once, outside the timed calls; file I/O is
// never timed).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <zipccl/collective/common.hpp>
#include <zipccl/zipccl.hpp>
#if ZIPCCL_TOOL_SUBSPACE
#include <cmath>
#include <cstdlib>

#include <zipccl/subspace/fit.hpp>
#include <zipccl/subspace/pca.hpp>
#include <zipccl/subspace/rvq.hpp>
#endif

#include "file_io.hpp"
#include "npy.hpp"

namespace {

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr const char* usage_text =
    "usage: zipccl compress --dtype bf16|fp16|fp32 [--codebook analytic|histogram|fixed|entropy] [--window LO]\n"
    "                       [--checksum] [--chunk N] [--threads N] [--no-zero-groups] [--repeat N] [--json] IN OUT\n"
    "       zipccl decompress [--threads N] [--repeat N] [--max-output BYTES] [--json] IN OUT\n"
    "       zipccl inspect --dtype bf16|fp16|fp32 [--json] IN\n"
    "       zipccl plan --op all_gather|reduce_scatter|all_reduce|all_to_all|send --ranks N --bytes S --link-gbps B\n"
    "                   [--latency-us A] [--dtype bf16|fp16|fp32] [--compress-gbps C] [--decompress-gbps D]\n"
    "                   [--ratio R] [--overlap O] [--device-speeds FILE [--ranks-per-gpu K]] [--sample FILE]\n"
    "                   [--json]\n"
    "       zipccl subspace-fit --dim D --rank R [--tokens FILE --vocab V] [--vq G,R,K] [--steps N]\n"
    "                   [--dtype bf16|fp16|fp32] [--seed S] [--json] IN\n";

struct args {
  std::string command;
  std::map<std::string, std::string> opts;
  std::vector<std::string> files;
  bool flag(const std::string& k) const { return opts.count(k) != 0; }
  std::optional<std::string> get(const std::string& k) const {
    auto it = opts.find(k);
    if (it == opts.end()) return std::nullopt;
    return it->second;
  }
};

args parse(int argc, char** argv) {
  if (argc < 2) throw usage_error("missing command");
  args a;
  a.command = argv[1];
  const std::map<std::string, bool> takes_value = {{"--dtype", true},   {"--codebook", true}, {"--window", true},
                                                   {"--chunk", true},   {"--threads", true},  {"--checksum", false},
                                                   {"--no-zero-groups", false}, {"--repeat", true}, {"--sample", true},
                                                   {"--json", false},   {"--op", true},       {"--ranks", true},
                                                   {"--bytes", true},   {"--link-gbps", true}, {"--latency-us", true},
                                                   {"--compress-gbps", true}, {"--decompress-gbps", true},
                                                   {"--ratio", true},        {"--overlap", true},
                                                   {"--device-speeds", true}, {"--ranks-per-gpu", true},
                                                   {"--dim", true},          {"--rank", true},
                                                   {"--tokens", true},       {"--vocab", true},
                                                   {"--steps", true},        {"--seed", true},
                                                   {"--vq", true},            {"--max-output", true}};
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0) {
      auto it = takes_value.find(s);
      if (it == takes_value.end()) throw usage_error("unknown option " + s);
      if (it->second) {
        if (i + 1 >= argc) throw usage_error(s + " needs a value");
        a.opts[s] = argv[++i];
      } else {
        a.opts[s] = "";
      }
    } else {
      a.files.push_back(s);
    }
  }
  return a;
}

std::uint64_t parse_uint(const std::string& s, const char* what) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    throw usage_error(std::string(what) + " must be a non-negative integer, got '" + s + "'");
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    throw usage_error(std::string(what) + " is out of range: '" + s + "'");
  }
}

using zipccl_tool::write_file;

// The tool holds its inputs in memory: none larger than half this machine's memory.
std::vector<std::uint8_t> read_file(const std::string& path) {
  return zipccl_tool::read_file(path, zipccl_tool::memory_limit(),
                                "half this machine's memory or of ulimit -v (the tool holds its input and output in memory)");
}

zipccl::dtype dtype_from_name(const std::string& s) {
  if (s == "bf16") return zipccl::dtype::bf16;
  if (s == "fp16") return zipccl::dtype::fp16;
  if (s == "fp32") return zipccl::dtype::fp32;
  throw usage_error("--dtype must be bf16, fp16 or fp32, got '" + s + "'");
}

std::optional<zipccl::dtype> dtype_from_npy(const std::string& descr) {
  if (descr == "<f2" || descr == "f2" || descr == "float16") return zipccl::dtype::fp16;
  if (descr == "<f4" || descr == "f4" || descr == "float32") return zipccl::dtype::fp32;
  if (descr == "bfloat16" || descr == "<V2" || descr == "|V2") return zipccl::dtype::bf16;
  return std::nullopt;
}

// The input's elements: raw, or the data part of a .npy file.
struct tensor {
  zipccl::dtype type;
  std::vector<std::uint8_t> file;
  std::uint64_t offset = 0, count = 0;
  const std::uint8_t* data() const { return file.data() + offset; }
  std::uint64_t bytes() const { return count * zipccl::dtype_size(type); }
};

tensor load_tensor(const std::string& path, const std::optional<std::string>& dtype_opt) {
  tensor t;
  t.file = read_file(path);
  std::optional<zipccl::dtype> given;
  if (dtype_opt) given = dtype_from_name(*dtype_opt);
  if (zipccl_tool::is_npy(t.file)) {
    // the header's descr decides; a --dtype that disagrees is an error
    zipccl_tool::npy_array a;
    try {
      a = zipccl_tool::parse_npy(t.file);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
    const std::string& descr = a.descr;
    const auto from = dtype_from_npy(descr);
    if (!from) throw std::runtime_error(path + ": unsupported .npy dtype '" + descr + "'");
    if (given && *given != *from)
      throw std::runtime_error(path + ": --dtype " + zipccl::dtype_name(*given) + " but the .npy holds " +
                               zipccl::dtype_name(*from));
    t.type = *from;
    try {
      zipccl_tool::check_npy_size(t.file, a, zipccl::dtype_size(t.type));
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
    t.offset = a.data_offset;
    t.count = a.count;
    return t;
  }
  if (!given) throw usage_error("--dtype is required for raw input");
  t.type = *given;
  const unsigned size = zipccl::dtype_size(t.type);
  if (t.file.size() % size != 0)
    throw std::runtime_error(path + ": size " + std::to_string(t.file.size()) + " is not a multiple of the " +
                             zipccl::dtype_name(t.type) + " element size " + std::to_string(size));
  t.count = t.file.size() / size;
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs call() (which returns a status into *s) up to n times, stopping at the first failure;
// returns the fastest call's seconds.
template <class Call>
double fastest(unsigned n, zipccl::status* s, Call&& call) {
  double best = 0;
  *s = zipccl::status::success;
  for (unsigned r = 0; r < n && *s == zipccl::status::success; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    *s = call();
    const double dt = seconds_since(t0);
    best = r == 0 ? dt : std::min(best, dt);
  }
  return best;
}

// Calls f(codec, policy object) for the tensor's element type and the policy named `policy`
// (analytic, histogram, fixed, entropy; codebook::fixed at --window's exponents, or calibrated
// on the tensor), with codec a value of the zipccl::codec type.
template <class F>
void visit_codec(const tensor& t, const std::string& policy, const std::optional<std::string>& window, F&& f) {
  zipccl::visit_dtype(t.type, [&](auto e) {
    using E = decltype(e);
    namespace cb = zipccl::codebook;
    if (policy == "analytic") {
      f(zipccl::codec<E, cb::analytic_gaussian>{}, cb::analytic_gaussian{});
    } else if (policy == "histogram") {
      f(zipccl::codec<E, cb::histogram>{}, cb::histogram{});
    } else if (policy == "fixed") {
      cb::fixed table;
      if (window) {
        // the window lo .. lo + 6 must lie inside the type's exponent field
        const std::uint64_t hi = E::exponent_count - zipccl::format::table_size;
        const std::uint64_t lo = parse_uint(*window, "--window");
        if (lo > hi)
          throw usage_error("--window for " + std::string(zipccl::dtype_name(E::id)) + " must be between 0 and " +
                            std::to_string(hi) + " (the lowest of 7 exponent fields), got '" + *window + "'");
        table = cb::fixed::window<E>(static_cast<std::int64_t>(lo));
      } else {
        std::vector<typename E::bits_type> aligned(t.count);
        if (t.count) std::memcpy(aligned.data(), t.data(), t.bytes());
        table = cb::fixed::calibrate<E>(aligned.data(), t.count);
      }
      f(zipccl::codec<E, cb::fixed>{}, table);
    } else if (policy == "entropy") {
      f(zipccl::codec<E, cb::entropy>{}, cb::entropy{});
    } else {
      throw usage_error("--codebook must be analytic, histogram, fixed or entropy, got '" + policy + "'");
    }
  });
}

// Compresses a tensor with one policy `repeat` times; returns the stream, and the fastest call's
// time in *secs when it is not null.
std::vector<std::uint8_t> compress_tensor(const tensor& t, const std::string& policy,
                                          const zipccl::host::compress_options& opt,
                                          const std::optional<std::string>& window, unsigned repeat = 1,
                                          double* secs = nullptr) {
  std::vector<std::uint8_t> out;
  visit_codec(t, policy, window, [&](auto codec, const auto& cb) {
    using C = decltype(codec);
    std::vector<std::uint8_t> buf(zipccl::host::max_compressed_size<C>(t.count, opt.chunk_elems));
    std::uint64_t bytes = 0;
    zipccl::status s = zipccl::status::success;
    // the codec call, timed: the fastest of `repeat`
    const double best = fastest(repeat, &s, [&] {
      return zipccl::host::compress<C>(t.data(), t.count, buf.data(), buf.size(), &bytes, opt, cb);
    });
    if (secs) *secs = best;
    if (s != zipccl::status::success) throw std::runtime_error(std::string("compress failed: ") + zipccl::to_string(s));
    buf.resize(bytes);
    out = std::move(buf);
  });
  return out;
}

// The spill budget (collective_options::device_wire.spill_permille) the device collectives need
// for the tensor with one policy (spill_permille_for with default options).
std::uint32_t device_budget(const tensor& t, const std::string& policy) {
  std::uint32_t p = 0;
  visit_codec(t, policy, std::nullopt, [&](auto codec, const auto& cb) {
    p = zipccl::spill_permille_for<decltype(codec)>(t.data(), t.count, {}, cb);
  });
  return p;
}

zipccl::host::compress_options compress_options_from(const args& a) {
  zipccl::host::compress_options opt;
  opt.checksum = a.flag("--checksum");
  opt.zero_groups = !a.flag("--no-zero-groups");
  if (auto c = a.get("--chunk")) {
    const std::uint64_t v = parse_uint(*c, "--chunk");
    if (!zipccl::format::valid_chunk_elems(v))
      throw usage_error("--chunk must be a multiple of 256 between 256 and 16777216");
    opt.chunk_elems = static_cast<std::uint32_t>(v);
  }
  if (auto t = a.get("--threads")) {
    const std::uint64_t v = parse_uint(*t, "--threads");
    if (v < 1 || v > 1024) throw usage_error("--threads must be between 1 and 1024");
    opt.threads = static_cast<unsigned>(v);
  }
  return opt;
}

unsigned repeat_from(const args& a) {
  const auto r = a.get("--repeat");
  if (!r) return 1;
  const std::uint64_t v = parse_uint(*r, "--repeat");
  if (v < 1 || v > 1000) throw usage_error("--repeat must be between 1 and 1000");
  return static_cast<unsigned>(v);
}

// Refuses options that `command` does not take (instead of ignoring them).
void refuse(const args& a, const char* command, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (a.opts.count(o)) throw usage_error(std::string(command) + " does not take " + o);
}

int cmd_compress(const args& a) {
  if (a.files.size() != 2) throw usage_error("compress needs IN and OUT");
  refuse(a, "compress", {"--sample", "--max-output"});
  const auto opt = compress_options_from(a);
  const std::string policy = a.get("--codebook").value_or("analytic");
  if (a.get("--window") && policy != "fixed") throw usage_error("--window goes with --codebook fixed");
  zipccl_tool::refuse_same_file(a.files[0], a.files[1]);
  const unsigned repeat = repeat_from(a);
  const tensor t = load_tensor(a.files[0], a.get("--dtype"));
  double secs = 0;
  const auto out = compress_tensor(t, policy, opt, a.get("--window"), repeat, &secs);
  write_file(a.files[1], out.data(), out.size());
  std::FILE* report = zipccl_tool::is_stdout(a.files[1]) ? stderr : stdout;  // keep the data clean
  const double ratio = out.empty() ? 0 : static_cast<double>(t.bytes()) / static_cast<double>(out.size());
  if (a.flag("--json")) {
    std::fprintf(report, "{\"command\":\"compress\",\"dtype\":\"%s\",\"codebook\":\"%s\",\"elements\":%llu,"
                "\"input_bytes\":%llu,\"output_bytes\":%llu,\"ratio\":%.6f,\"checksum\":%s,\"seconds\":%.6f}\n",
                zipccl::dtype_name(t.type), policy.c_str(), static_cast<unsigned long long>(t.count),
                static_cast<unsigned long long>(t.bytes()), static_cast<unsigned long long>(out.size()), ratio,
                opt.checksum ? "true" : "false", secs);
  } else {
    std::fprintf(report, "%s: %llu %s elements, %llu -> %llu bytes, ratio %.4f (%s codebook%s)\n", a.files[1].c_str(),
                static_cast<unsigned long long>(t.count), zipccl::dtype_name(t.type),
                static_cast<unsigned long long>(t.bytes()), static_cast<unsigned long long>(out.size()), ratio,
                policy.c_str(), opt.checksum ? ", checksums" : "");
  }
  return 0;
}

int cmd_decompress(const args& a) {
  if (a.files.size() != 2) throw usage_error("decompress needs IN and OUT");
  if (a.get("--dtype") || a.get("--codebook") || a.flag("--checksum") || a.get("--chunk") || a.get("--window") ||
      a.flag("--no-zero-groups"))
    throw usage_error("decompress takes only --threads, --repeat, --max-output and --json (the stream describes itself)");
  zipccl::host::decompress_options opt;
  opt.threads = compress_options_from(a).threads;
  const unsigned repeat = repeat_from(a);
  refuse(a, "decompress", {"--sample"});
  zipccl_tool::refuse_same_file(a.files[0], a.files[1]);
  // The output is sized from the header: a stream (damaged or hostile) may claim up to about 2,000
  // times its own size, so an output of more than --max-output (by default half this machine's
  // memory) is refused before the output is allocated, and its buffer is not zero-filled (a chunk
  // that fails to decode stops the work before its pages are touched). The input is read up to the
  // largest stream such an output can have (stored chunks of 256 bf16 elements: 4.7% more, under
  // 1/16) and no further, trailing bytes included.
  const auto max_output = a.get("--max-output");
  const std::uint64_t limit = max_output ? parse_uint(*max_output, "--max-output") : zipccl_tool::memory_limit();
  const std::uint64_t slack = limit / 16 + (1u << 20);
  const std::uint64_t in_limit = limit > UINT64_MAX - slack ? UINT64_MAX : limit + slack;
  const std::string limit_name = max_output ? "--max-output " + std::to_string(limit)
                                            : "half this machine's memory or of ulimit -v (" + std::to_string(limit) +
                                                  " bytes; --max-output sets the limit)";
  const auto in = zipccl_tool::read_file(a.files[0], in_limit,
                                         "more than any stream of an output within " + limit_name);
  zipccl::host::stream_info info;
  zipccl::status s = zipccl::host::read_header(in.data(), in.size(), &info);
  if (s != zipccl::status::success)
    throw std::runtime_error(a.files[0] + ": " + zipccl::to_string(s));
  const std::uint64_t out_bytes = info.decompressed_bytes();
  if (out_bytes > limit)
    throw std::runtime_error(a.files[0] + ": the stream decodes to " + std::to_string(out_bytes) + " bytes, more than " +
                             limit_name);
  const std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[out_bytes == 0 ? 1 : out_bytes]);
  const double secs = fastest(repeat, &s, [&] {
    return zipccl::host::decompress(in.data(), in.size(), out.get(), out_bytes, nullptr, opt);
  });
  if (s != zipccl::status::success) throw std::runtime_error(a.files[0] + ": " + zipccl::to_string(s));
  write_file(a.files[1], out.get(), out_bytes);
  std::FILE* report = zipccl_tool::is_stdout(a.files[1]) ? stderr : stdout;  // keep the data clean
  if (a.flag("--json")) {
    std::fprintf(report, "{\"command\":\"decompress\",\"dtype\":\"%s\",\"codebook\":\"%s\",\"elements\":%llu,"
                "\"input_bytes\":%llu,\"output_bytes\":%llu,\"checksum\":%s,\"seconds\":%.6f}\n",
                zipccl::dtype_name(info.type), zipccl::codebook_name(info.codebook),
                static_cast<unsigned long long>(info.count), static_cast<unsigned long long>(in.size()),
                static_cast<unsigned long long>(out_bytes), info.checksum ? "true" : "false", secs);
  } else {
    std::fprintf(report, "%s: %llu %s elements, %llu -> %llu bytes\n", a.files[1].c_str(),
                static_cast<unsigned long long>(info.count), zipccl::dtype_name(info.type),
                static_cast<unsigned long long>(in.size()), static_cast<unsigned long long>(out_bytes));
  }
  return 0;
}

int cmd_inspect(const args& a) {
  if (a.files.size() != 1) throw usage_error("inspect needs IN");
  refuse(a, "inspect", {"--repeat", "--sample", "--max-output"});
  const tensor t = load_tensor(a.files[0], a.get("--dtype"));
  zipccl::host::exponent_stats st;
  zipccl::visit_dtype(t.type, [&](auto e) { st = zipccl::host::analyze<decltype(e)>(t.data(), t.count); });
  struct policy_result {
    std::string name;
    double ratio;
    bool verified;
  };
  std::vector<policy_result> results;
  for (const char* p : {"analytic", "histogram", "fixed", "entropy"}) {
    const auto stream = compress_tensor(t, p, {}, std::nullopt);
    std::vector<std::uint8_t> back(t.bytes());
    const bool ok = zipccl::host::decompress(stream.data(), stream.size(), back.data(), back.size()) ==
                        zipccl::status::success &&
                    (t.count == 0 || std::memcmp(back.data(), t.data(), t.bytes()) == 0);
    results.push_back({p, stream.empty() ? 0 : static_cast<double>(t.bytes()) / stream.size(), ok});
  }
  bool all_ok = true;
  for (const auto& r : results) all_ok = all_ok && r.verified;
  if (a.flag("--json")) {
    std::ostringstream o;
    o << "{\"command\":\"inspect\",\"dtype\":\"" << zipccl::dtype_name(t.type) << "\",\"elements\":" << t.count
      << ",\"exponent_histogram\":{";
    bool first = true;
    for (std::size_t e = 0; e < st.histogram.size(); ++e) {
      if (!st.histogram[e]) continue;
      o << (first ? "" : ",") << "\"" << e << "\":" << st.histogram[e];
      first = false;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "},\"exponent_entropy_bits\":%.6f,\"entropy_bound_ratio\":%.6f,"
                  "\"ideal_3bit_ratio\":%.6f,\"zero_group_elements\":%llu,\"ratios\":{", st.entropy_bits,
                  st.entropy_bound_ratio, st.ideal_3bit_ratio, static_cast<unsigned long long>(st.zero_group_elems));
    o << buf;
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s\"%s\":%.6f", i ? "," : "", results[i].name.c_str(), results[i].ratio);
      o << buf;
    }
    o << "},\"round_trip_verified\":" << (all_ok ? "true" : "false") << "}";
    std::printf("%s\n", o.str().c_str());
  } else {
    std::printf("%s: %llu %s elements\n", a.files[0].c_str(), static_cast<unsigned long long>(t.count),
                zipccl::dtype_name(t.type));
    std::printf("exponent histogram (field value: count, share):\n");
    for (std::size_t e = 0; e < st.histogram.size(); ++e)
      if (st.histogram[e])
        std::printf("  %3zu: %12llu  %6.3f%%\n", e, static_cast<unsigned long long>(st.histogram[e]),
                    100.0 * st.histogram[e] / static_cast<double>(t.count));
    std::printf("exponent entropy: %.4f bits; bound for exponent-only coding: %.4fx\n", st.entropy_bits,
                st.entropy_bound_ratio);
    std::printf("ideal 3-bit 7-entry code: %.4fx\n", st.ideal_3bit_ratio);
    std::printf("in all-zero 64-element groups: %llu elements (%.2f%%), 1 bit per group where the mask pays\n",
                static_cast<unsigned long long>(st.zero_group_elems),
                t.count ? 100.0 * static_cast<double>(st.zero_group_elems) / static_cast<double>(t.count) : 0.0);
    for (const auto& r : results)
      std::printf("  %-9s ratio %.4fx  (%.1f%% of the entropy bound)  round trip %s\n", r.name.c_str(), r.ratio,
                  st.entropy_bound_ratio > 0 ? 100.0 * r.ratio / st.entropy_bound_ratio : 0.0,
                  r.verified ? "verified" : "FAILED");
  }
  return all_ok ? 0 : 1;
}

double parse_positive(const std::string& s, const char* what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !(v > 0) || v > 1e30) throw usage_error(std::string(what) + " must be a positive number, got '" + s + "'");
  return v;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// A device speeds file, as bench_cuda_collectives --speeds-out writes it: `key value` lines
// (device, dtype, compress_gbps, decompress_gbps, and optionally wire_ratio); '#' starts a comment.
struct device_speeds {
  std::string device;
  zipccl::dtype type = zipccl::dtype::bf16;
  double compress_bytes_per_second = 0, decompress_bytes_per_second = 0, ratio = 0;
};
device_speeds read_device_speeds(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("cannot read " + path);
  device_speeds ds;
  bool have_type = false;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    const std::string where = path + ":" + std::to_string(n);
    if (key == "device") {
      ds.device = value;
    } else if (key == "dtype") {
      ds.type = dtype_from_name(value);
      have_type = true;
    } else if (key == "compress_gbps") {
      ds.compress_bytes_per_second = parse_positive(value, (where + ": compress_gbps").c_str()) * 1e9;
    } else if (key == "decompress_gbps") {
      ds.decompress_bytes_per_second = parse_positive(value, (where + ": decompress_gbps").c_str()) * 1e9;
    } else if (key == "wire_ratio") {
      ds.ratio = parse_positive(value, (where + ": wire_ratio").c_str());
    } else {
      throw usage_error(where + ": unknown key '" + key + "'");
    }
  }
  if (!have_type || ds.compress_bytes_per_second <= 0 || ds.decompress_bytes_per_second <= 0 || ds.device.empty())
    throw usage_error(path + " needs device, dtype, compress_gbps and decompress_gbps lines");
  return ds;
}

// The cost model's prediction for one call (collective/common.hpp), as `zipccl plan` prints it.
// One collective's predicted times (cost_model), summed over its phases.
struct plan_totals {
  double plain = 0, packed = 0, chosen = 0;
  const char* path = "plain";
};

// `plan --sample FILE`: every host policy's ratio and one-thread speeds measured on the sample as
// the host collectives' wire codes it (best of 3 calls, round trip checked): the 3-bit policies in
// dense chunks, codebook::entropy with zero masks where they pay. Each goes through the cost model
// of the link; the policy that pays is the one with the lowest adaptive time. Each also gets the
// spill budget the device collectives' fixed-size wire needs for the sample (device_budget).
template <class Evaluate>
int plan_policies(const args& a, const std::string& op, std::uint64_t ranks, std::uint64_t bytes,
                  const zipccl::cost_model& base, const std::string& path, const Evaluate& evaluate) {
  const tensor t = load_tensor(path, a.get("--dtype"));
  if (t.count == 0) throw std::runtime_error(path + ": the sample holds no elements");
  struct row {
    std::string name;
    double ratio, compress, decompress;
    std::uint32_t spill_permille;  // the device collectives' budget for the sample
    plan_totals r;
  };
  std::vector<row> rows;
  for (const char* p : {"analytic", "histogram", "fixed", "entropy"}) {
    const bool rans = std::string(p) == "entropy";
    zipccl::host::compress_options opt;
    opt.threads = 1;
    opt.zero_groups = rans;  // as the wire codes it
    double cs = 0;
    const auto stream = compress_tensor(t, p, opt, std::nullopt, 3, &cs);
    std::vector<std::uint8_t> back(t.bytes());
    zipccl::status s;
    const double ds = fastest(3, &s, [&] {
      return zipccl::host::decompress(stream.data(), stream.size(), back.data(), back.size());
    });
    if (s != zipccl::status::success || std::memcmp(back.data(), t.data(), t.bytes()) != 0)
      throw std::runtime_error(std::string("plan: the ") + p + " round trip on the sample failed");
    zipccl::cost_model m = base;
    m.ratio = static_cast<double>(t.bytes()) / static_cast<double>(stream.size());
    // a call too short for the clock is given the clock's resolution
    m.compress_bytes_per_second = static_cast<double>(t.bytes()) / std::max(cs, 1e-9);
    m.decompress_bytes_per_second = static_cast<double>(t.bytes()) / std::max(ds, 1e-9);
    rows.push_back(
        {p, m.ratio, m.compress_bytes_per_second, m.decompress_bytes_per_second, device_budget(t, p), evaluate(m)});
  }
  const double plain = rows.front().r.plain;
  const row* best = nullptr;
  for (const auto& r : rows)
    if (r.r.chosen < plain && (best == nullptr || r.r.chosen < best->r.chosen)) best = &r;
  const std::string pays = best ? best->name : "plain";
  if (a.flag("--json")) {
    std::ostringstream o;
    o << "{\"command\":\"plan\",\"op\":\"" << op << "\",\"ranks\":" << ranks << ",\"bytes\":" << bytes
      << ",\"dtype\":\"" << zipccl::dtype_name(t.type) << "\",\"sample\":\"" << json_escape(path)
      << "\",\"sample_elements\":" << t.count << ",\"plain_seconds\":" << plain << ",\"policies\":[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      o << (i ? "," : "") << "{\"codebook\":\"" << r.name << "\",\"ratio\":" << r.ratio
        << ",\"compress_bytes_per_second\":" << r.compress << ",\"decompress_bytes_per_second\":" << r.decompress
        << ",\"compressed_seconds\":" << r.r.packed << ",\"adaptive_seconds\":" << r.r.chosen
        << ",\"adaptive_path\":\"" << r.r.path << "\",\"device_spill_permille\":" << r.spill_permille << "}";
    }
    o << "],\"pays\":\"" << pays << "\"}";
    std::printf("%s\n", o.str().c_str());
  } else {
    std::printf("%s of %llu bytes on %llu ranks, %.4g Gb/s links, %.3g us latency; %s, each policy measured on %s "
                "(%llu elements, host codec, one thread)\n",
                op.c_str(), static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(ranks),
                base.link_bytes_per_second * 8 / 1e9, base.latency_seconds * 1e6, zipccl::dtype_name(t.type),
                path.c_str(), static_cast<unsigned long long>(t.count));
    std::printf("  plain                                                  %12.6f ms\n", plain * 1e3);
    for (const auto& r : rows)
      std::printf("  %-9s ratio %6.3f  codec %6.2f / %6.2f GB/s  compressed %12.6f ms  adaptive %12.6f ms (%s)"
                  "  device spill budget %u\n",
                  r.name.c_str(), r.ratio, r.compress / 1e9, r.decompress / 1e9, r.r.packed * 1e3, r.r.chosen * 1e3,
                  r.r.path, r.spill_permille);
    if (best)
      std::printf("  pays: %s (%.3gx faster than plain)\n", pays.c_str(), plain / best->r.chosen);
    else
      std::printf("  pays: plain (no policy beats the uncompressed collective on this link)\n");
  }
  return 0;
}

int cmd_plan(const args& a) {
  if (!a.files.empty()) throw usage_error("plan takes no files");
  refuse(a, "plan", {"--repeat", "--max-output"});
  const std::string op = a.get("--op").value_or("");
  if (op != "all_gather" && op != "reduce_scatter" && op != "all_reduce" && op != "all_to_all" && op != "send")
    throw usage_error("--op must be all_gather, reduce_scatter, all_reduce, all_to_all or send");
  if (!a.get("--ranks") || !a.get("--bytes") || !a.get("--link-gbps"))
    throw usage_error("plan needs --ranks, --bytes and --link-gbps");
  const std::uint64_t ranks = parse_uint(*a.get("--ranks"), "--ranks");
  if (ranks < 1 || ranks > 1u << 20) throw usage_error("--ranks must be between 1 and 1048576");
  const std::uint64_t bytes = parse_uint(*a.get("--bytes"), "--bytes");
  const zipccl::dtype type = dtype_from_name(a.get("--dtype").value_or("bf16"));
  zipccl::cost_model m;
  m.link_bytes_per_second = parse_positive(*a.get("--link-gbps"), "--link-gbps") * 1e9 / 8;  // Gb/s to bytes/s
  if (auto v = a.get("--latency-us")) m.latency_seconds = parse_positive(*v, "--latency-us") * 1e-6;
  // defaults: the host codec on one core, as docs/benchmarks.md records it
  m.compress_bytes_per_second = type == zipccl::dtype::fp32 ? 8e9 : 6e9;
  m.decompress_bytes_per_second = type == zipccl::dtype::fp16 ? 8e9 : 12e9;
  m.ratio = type == zipccl::dtype::bf16 ? 1.42 : type == zipccl::dtype::fp16 ? 1.12 : 1.17;
  // the device executor: the device codec's speeds as bench_cuda_collectives measured them (whole
  // GPU; shared by --ranks-per-gpu ranks), overlap 1 (pipelined: codec and transfers on two streams)
  std::string codec_source = "host codec, development VM";
  if (auto f = a.get("--device-speeds")) {
    const device_speeds ds = read_device_speeds(*f);
    if (ds.type != type)
      throw usage_error(*f + " holds " + zipccl::dtype_name(ds.type) + " speeds; pass --dtype " +
                        zipccl::dtype_name(ds.type) + " or a file for " + zipccl::dtype_name(type));
    const double k = static_cast<double>(parse_uint(a.get("--ranks-per-gpu").value_or("1"), "--ranks-per-gpu"));
    if (!(k >= 1 && k <= 1024)) throw usage_error("--ranks-per-gpu must be between 1 and 1024");
    m.compress_bytes_per_second = ds.compress_bytes_per_second / k;
    m.decompress_bytes_per_second = ds.decompress_bytes_per_second / k;
    if (ds.ratio > 0) m.ratio = ds.ratio;
    m.overlap = 1.0;
    codec_source = "device codec measured on " + ds.device;
  } else if (a.get("--ranks-per-gpu")) {
    throw usage_error("--ranks-per-gpu goes with --device-speeds");
  }
  const auto sample = a.get("--sample");
  if (sample && (a.get("--device-speeds") || a.get("--compress-gbps") || a.get("--decompress-gbps") || a.get("--ratio")))
    throw usage_error("--sample measures every policy's ratio and speeds on the sample; it does not go with "
                      "--device-speeds, --compress-gbps, --decompress-gbps or --ratio");
  if (auto v = a.get("--compress-gbps")) m.compress_bytes_per_second = parse_positive(*v, "--compress-gbps") * 1e9;
  if (auto v = a.get("--decompress-gbps")) m.decompress_bytes_per_second = parse_positive(*v, "--decompress-gbps") * 1e9;
  if (auto v = a.get("--ratio")) m.ratio = parse_positive(*v, "--ratio");
  if (auto v = a.get("--overlap")) {
    std::size_t used = 0;
    try {
      m.overlap = std::stod(*v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v->size() || !(m.overlap >= 0 && m.overlap <= 1))
      throw usage_error("--overlap must be a number from 0 to 1, got '" + *v + "'");
  }
  const int n = static_cast<int>(ranks);
  const auto evaluate = [&](const zipccl::cost_model& model) {
    plan_totals r;
    auto add = [&](const zipccl::cost_model::plan& p) {
      r.plain += p.plain_seconds;
      r.packed += p.compressed_seconds;
      r.chosen += p.compress ? p.compressed_seconds : p.plain_seconds;
    };
    if (op == "all_gather") add(model.all_gather(bytes, n));
    else if (op == "send") add(model.send_recv(bytes));
    else if (op == "all_to_all") add(model.all_to_all(bytes / ranks, n));
    else if (op == "reduce_scatter") add(model.reduce_scatter(bytes / ranks, n));
    else {
      add(model.reduce_scatter(bytes / ranks, n));
      add(model.all_gather(bytes / ranks, n));
    }
    r.path = r.chosen < r.plain ? (r.chosen < r.packed ? "mixed" : "compressed") : "plain";
    return r;
  };
  if (sample) return plan_policies(a, op, ranks, bytes, m, *sample, evaluate);
  const plan_totals r = evaluate(m);
  const double plain = r.plain, packed = r.packed, chosen = r.chosen;
  const char* path = r.path;
  if (a.flag("--json")) {
    std::printf("{\"command\":\"plan\",\"op\":\"%s\",\"ranks\":%llu,\"bytes\":%llu,\"plain_seconds\":%.9g,"
                "\"compressed_seconds\":%.9g,\"adaptive_seconds\":%.9g,\"adaptive_path\":\"%s\","
                "\"compress_bytes_per_second\":%.9g,\"decompress_bytes_per_second\":%.9g,\"ratio\":%.9g,"
                "\"overlap\":%.9g,\"codec\":\"%s\"}\n",
                op.c_str(), static_cast<unsigned long long>(ranks), static_cast<unsigned long long>(bytes), plain, packed,
                chosen, path, m.compress_bytes_per_second, m.decompress_bytes_per_second, m.ratio, m.overlap,
                json_escape(codec_source).c_str());
  } else {
    std::printf("%s of %llu bytes on %llu ranks, %.4g Gb/s links, %.3g us latency (%s, ratio %.3g, codec %.3g / %.3g GB/s:"
                " %s; overlap %.2g)\n",
                op.c_str(), static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(ranks),
                m.link_bytes_per_second * 8 / 1e9, m.latency_seconds * 1e6, zipccl::dtype_name(type), m.ratio,
                m.compress_bytes_per_second / 1e9, m.decompress_bytes_per_second / 1e9, codec_source.c_str(), m.overlap);
    std::printf("  plain      %12.6f ms\n  compressed %12.6f ms\n  adaptive   %12.6f ms (%s)\n", plain * 1e3,
                packed * 1e3, chosen * 1e3, path);
  }
  return 0;
}

#if ZIPCCL_TOOL_SUBSPACE
// Fits the subspace codec to activations (rows of --dim elements) and prints the energy each
// variant retains, 1 - ||X - X_hat||^2 / ||X||^2, next to the PCA optimum (subspace/fit.hpp).
int cmd_subspace_fit(const args& a) {
  namespace ss = zipccl::subspace;
  if (a.files.size() != 1) throw usage_error("subspace-fit takes one input file");
  if (!a.get("--dim") || !a.get("--rank")) throw usage_error("subspace-fit needs --dim and --rank");
  const std::uint64_t d = parse_uint(*a.get("--dim"), "--dim"), r = parse_uint(*a.get("--rank"), "--rank");
  if (d == 0 || r == 0 || r > d || d > 65536) throw usage_error("need 0 < --rank <= --dim <= 65536");
  if (a.get("--tokens").has_value() != a.get("--vocab").has_value())
    throw usage_error("--tokens and --vocab go together");
  ss::rvq_shape vq_shape;
  if (auto v = a.get("--vq")) {
    if (!a.get("--tokens")) throw usage_error("--vq quantises the learned + anchor codes: it needs --tokens and --vocab");
    std::uint64_t g = 0, rr = 0, k = 0;
    char tail = 0;
    if (std::sscanf(v->c_str(), "%llu,%llu,%llu%c", reinterpret_cast<unsigned long long*>(&g),
                    reinterpret_cast<unsigned long long*>(&rr), reinterpret_cast<unsigned long long*>(&k), &tail) != 3)
      throw usage_error("--vq takes G,R,K (groups, rounds, codewords), got '" + *v + "'");
    vq_shape = {r, g, rr, k};
    if (!vq_shape.valid() || rr > 16 || g > r)
      throw usage_error("--vq " + *v + ": groups must divide --rank, rounds 1..16, codewords 2..65536");
  }
  const tensor t = load_tensor(a.files[0], a.get("--dtype").value_or("fp32"));
  if (t.count == 0 || t.count % d != 0)
    throw std::runtime_error(a.files[0] + ": " + std::to_string(t.count) + " elements are not rows of " +
                             std::to_string(d));
  const std::uint64_t n = t.count / d;
  ss::matrix<float> x(n, d);
  for (std::uint64_t i = 0; i < t.count; ++i) {
    const std::uint8_t* p = t.data() + i * zipccl::dtype_size(t.type);
    using zipccl::to_float;
    x.v[i] = t.type == zipccl::dtype::fp32   ? to_float<zipccl::fp32>(zipccl::format::load_le<std::uint32_t>(p))
             : t.type == zipccl::dtype::bf16 ? to_float<zipccl::bf16>(zipccl::format::load_le<std::uint16_t>(p))
                                             : to_float<zipccl::fp16>(zipccl::format::load_le<std::uint16_t>(p));
    if (!std::isfinite(x.v[i])) throw std::runtime_error(a.files[0] + ": element " + std::to_string(i) + " is not finite");
  }
  std::vector<std::int32_t> tok;
  std::uint64_t vocab = 0;
  if (auto tf = a.get("--tokens")) {
    vocab = parse_uint(*a.get("--vocab"), "--vocab");
    if (vocab == 0 || vocab > (1u << 24)) throw usage_error("--vocab must be between 1 and 16777216");
    const auto raw = read_file(*tf);
    if (raw.size() != n * 4)
      throw std::runtime_error(*tf + ": " + std::to_string(raw.size()) + " bytes, but " + std::to_string(n) +
                               " int32 token ids (4 bytes each) are needed, one per row");
    tok.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      tok[i] = static_cast<std::int32_t>(zipccl::format::load_le<std::uint32_t>(raw.data() + 4 * i));
      if (tok[i] < 0 || static_cast<std::uint64_t>(tok[i]) >= vocab)
        throw std::runtime_error(*tf + ": token id " + std::to_string(tok[i]) + " at row " + std::to_string(i) +
                                 " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
  ss::fit_options o;
  if (auto v = a.get("--steps")) o.steps = static_cast<int>(parse_uint(*v, "--steps"));
  if (o.steps > 10000000) throw usage_error("--steps must be at most 10000000");
  const std::uint64_t seed = a.get("--seed") ? parse_uint(*a.get("--seed"), "--seed") : 1;
  o.seed = seed;
#if defined(OPENBLAS_VERSION)
  // the products here are small: OpenBLAS's threads cost more than they give, unless asked for
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
#endif
  const auto t0 = std::chrono::steady_clock::now();
  auto check = [](zipccl::status s) {
    if (s != zipccl::status::success) throw std::runtime_error(std::string("subspace-fit: ") + zipccl::to_string(s));
  };
  double pca = 0, fixed = 0, learned = 0, anchored = -1, quantised = -1;
  std::uint64_t vq_bytes = 0;
  ss::matrix<float> ap, af = ss::random_orthonormal<float>(d, r, seed), al = af;
  check(ss::pca_basis(x, r, &ap));
  check(ss::retained_energy(x, nullptr, ap, nullptr, &pca));
  check(ss::retained_energy(x, nullptr, af, nullptr, &fixed));
  check(ss::fit_projector(x, nullptr, &al, nullptr, o));
  check(ss::retained_energy(x, nullptr, al, nullptr, &learned));
  if (!tok.empty()) {
    ss::matrix<float> aa = af;
    ss::anchor_table<float> anc(vocab, d, r, seed + 1);
    check(ss::fit_projector(x, tok.data(), &aa, &anc, o));
    check(ss::retained_energy(x, tok.data(), aa, &anc, &anchored));
    if (vq_shape.valid()) {  // quantise the learned + anchor codes, then measure through the mirror
      ss::matrix<float> z, zq, xq;
      check(ss::encode(x, tok.data(), aa, &anc, &z));
      ss::rvq_options vo;
      vo.seed = seed + 2;
      vo.slice = std::max<std::size_t>(1, vq_shape.words() / 64);
      ss::rvq_learner<float> vq(vq_shape, vo);
      check(ss::fit_rvq(z, &vq, o.steps, o.batch, seed + 3, &vq_bytes));
      std::vector<std::uint16_t> idx;
      check(vq.encode(z, &idx));
      check(vq.mirror().decode(idx.data(), n, &zq));
      check(ss::decode(zq, tok.data(), aa, &anc, &xq));
      double err = 0, all = 0;
      for (std::size_t i = 0; i < x.v.size(); ++i) {
        err += (static_cast<double>(x.v[i]) - xq.v[i]) * (static_cast<double>(x.v[i]) - xq.v[i]);
        all += static_cast<double>(x.v[i]) * x.v[i];
      }
      quantised = all > 0 ? 1 - err / all : 1;
    }
  }
  const double secs = seconds_since(t0);
  if (a.flag("--json")) {
    std::printf("{\"command\":\"subspace-fit\",\"rows\":%llu,\"dim\":%llu,\"rank\":%llu,\"steps\":%d,\"energy\":{"
                "\"fixed\":%.6f,\"learned\":%.6f,",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(d),
                static_cast<unsigned long long>(r), o.steps, fixed, learned);
    if (anchored >= 0) std::printf("\"learned_anchor\":%.6f,", anchored);
    if (quantised >= 0) std::printf("\"learned_anchor_vq\":%.6f,", quantised);
    std::printf("\"pca\":%.6f},\"learned_of_pca\":%.6f,\"vq_sync_bytes\":%llu,\"seconds\":%.3f}\n", pca,
                pca > 0 ? learned / pca : 0.0, static_cast<unsigned long long>(vq_bytes), secs);
  } else {
    std::printf("%llu rows of %llu, rank %llu (%.1fx), %d steps, %.2f s\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(d), static_cast<unsigned long long>(r),
                static_cast<double>(d) / static_cast<double>(r), o.steps, secs);
    std::printf("retained energy 1 - |X - X_hat|^2 / |X|^2:\n");
    std::printf("  fixed random projection  %.4f\n", fixed);
    std::printf("  learned projector        %.4f  (%.2f%% of PCA)\n", learned, pca > 0 ? 100 * learned / pca : 0.0);
    if (anchored >= 0) std::printf("  learned + anchor         %.4f\n", anchored);
    if (quantised >= 0)
      std::printf("  learned + anchor + VQ    %.4f  (%zu x %zu x %zu codewords, %llu bytes of syncs)\n", quantised,
                  vq_shape.groups, vq_shape.rounds, vq_shape.codewords, static_cast<unsigned long long>(vq_bytes));
    std::printf("  PCA optimum (no anchor)  %.4f\n", pca);
  }
  return 0;
}
#endif

int run_command(const args& a) {
  if (a.command == "compress") return cmd_compress(a);
  if (a.command == "decompress") return cmd_decompress(a);
  if (a.command == "inspect") return cmd_inspect(a);
  if (a.command == "plan") return cmd_plan(a);
#if ZIPCCL_TOOL_SUBSPACE
  if (a.command == "subspace-fit") return cmd_subspace_fit(a);
#else
  if (a.command == "subspace-fit") throw std::runtime_error("subspace-fit: this zipccl was built without a BLAS");
#endif
  if (a.command == "--help" || a.command == "-h" || a.command == "help") {
    std::fputs(usage_text, stdout);
    return 0;
  }
  throw usage_error("unknown command '" + a.command + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const args a = parse(argc, argv);
    const int rc = run_command(a);
    zipccl_tool::close_stdout();  // a summary that could not be written is an error too
    return rc;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "zipccl: error: %s (see 'zipccl --help')\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "zipccl: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zipccl: error: %s\n", e.what());
    return 1;
  }
}
