// Minimal reader for NumPy .npy files (format versions 1 to 3), as used by the zipccl tool.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace zipccl_tool {

struct npy_array {
  std::string descr;          // for example "<f2", "<f4", "bfloat16"
  std::uint64_t count = 0;    // elements
  std::uint64_t data_offset = 0;
};

inline bool is_npy(const std::vector<std::uint8_t>& f) {
  return f.size() >= 6 && f[0] == 0x93 && std::memcmp(f.data() + 1, "NUMPY", 5) == 0;
}

// Throws std::runtime_error with a one-line message on anything it does not understand.
inline npy_array parse_npy(const std::vector<std::uint8_t>& f) {
  if (f.size() < 10) throw std::runtime_error("truncated .npy header");
  const unsigned major = f[6];
  std::uint64_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = f[8] | (f[9] << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) throw std::runtime_error("truncated .npy header");
    header_len = f[8] | (f[9] << 8) | (std::uint64_t(f[10]) << 16) | (std::uint64_t(f[11]) << 24);
    start = 12;
  } else {
    throw std::runtime_error("unsupported .npy version " + std::to_string(major));
  }
  if (start + header_len > f.size()) throw std::runtime_error("truncated .npy header");
  const std::string h(reinterpret_cast<const char*>(f.data() + start), header_len);
  auto value_of = [&](const std::string& key, bool* quoted = nullptr) -> std::string {
    const auto k = h.find("'" + key + "'");
    if (k == std::string::npos) throw std::runtime_error(".npy header has no '" + key + "'");
    auto p = h.find(':', k);
    if (p == std::string::npos) throw std::runtime_error("malformed .npy header");
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    if (p >= h.size()) throw std::runtime_error("malformed .npy header");
    if (quoted != nullptr) *quoted = h[p] == '\'';
    if (h[p] == '\'') {
      const auto e = h.find('\'', p + 1);
      if (e == std::string::npos) throw std::runtime_error("malformed .npy header");
      return h.substr(p + 1, e - p - 1);
    }
    if (h[p] == '(') {
      const auto e = h.find(')', p);
      if (e == std::string::npos) throw std::runtime_error("malformed .npy header");
      return h.substr(p + 1, e - p - 1);
    }
    const auto e = h.find_first_of(",}", p);
    std::string v = h.substr(p, e == std::string::npos ? std::string::npos : e - p);
    while (!v.empty() && v.back() == ' ') v.pop_back();
    return v;
  };
  npy_array a;
  // descr is a quoted string; a structured or unquoted dtype is not something this tool reads
  bool quoted = false;
  a.descr = value_of("descr", &quoted);
  if (!quoted) throw std::runtime_error(".npy 'descr' must be a quoted dtype string such as '<f4'");
  const std::string order = value_of("fortran_order");
  if (order != "False" && order != "True")
    throw std::runtime_error(".npy 'fortran_order' must be True or False, got '" + order + "'");
  const std::string shape = value_of("shape");
  std::uint64_t count = 1, dims_over_one = 0;
  std::string num;
  for (char c : shape + ",") {
    if (c >= '0' && c <= '9') {
      num += c;
      if (num.size() > 19) throw std::runtime_error(".npy shape has a dimension too large: " + num + "...");
    } else if (c == ',' && !num.empty()) {
      const std::uint64_t d = std::stoull(num);  // at most 19 digits: fits
      if (d != 0 && count > UINT64_MAX / d) throw std::runtime_error(".npy shape overflows");
      count *= d;
      dims_over_one += d > 1 ? 1 : 0;
      num.clear();
    } else if (c != ' ' && c != ',' && c != 'L') {
      throw std::runtime_error("malformed .npy shape (" + shape + ")");
    }
  }
  // In Fortran order the elements of a matrix lie column by column; the tool's raw output would
  // then silently be in another order than numpy's C order. A vector is the same either way.
  if (order == "True" && dims_over_one > 1)
    throw std::runtime_error("Fortran-order .npy arrays are not supported; save a C-order copy "
                             "(numpy.ascontiguousarray)");
  a.count = count;
  a.data_offset = start + header_len;
  return a;
}

// Checks that the data after the header holds exactly count elements of item_size bytes.
inline void check_npy_size(const std::vector<std::uint8_t>& f, const npy_array& a, unsigned item_size) {
  const std::uint64_t have = f.size() - a.data_offset;
  if (a.count > have / item_size || have != a.count * item_size)
    throw std::runtime_error(".npy data size does not match its shape");
}

}  // namespace zipccl_tool
