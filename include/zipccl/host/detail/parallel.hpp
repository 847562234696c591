// zipccl: a small fork-join helper for the host executor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace zipccl::host::detail {

// Splits [0, items) into `parts` contiguous ranges and runs f(part, begin, end) for each, on
// parts - 1 new threads plus the calling one.
template <class F>
void fork_join(unsigned parts, std::uint64_t items, F&& f) {
  parts = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(parts, items)));
  auto range = [&](unsigned p, std::uint64_t* b, std::uint64_t* e) {
    *b = items * p / parts;
    *e = items * (p + 1) / parts;
  };
  std::vector<std::thread> pool;
  pool.reserve(parts - 1);
  for (unsigned p = 1; p < parts; ++p) {
    pool.emplace_back([&, p] {
      std::uint64_t b, e;
      range(p, &b, &e);
      f(p, b, e);
    });
  }
  std::uint64_t b, e;
  range(0, &b, &e);
  f(0u, b, e);
  for (auto& t : pool) t.join();
}

}  // namespace zipccl::host::detail
