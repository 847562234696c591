// zipccl: a small fork-join helper for the host executor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace zipccl::host::detail {

// Starts a thread running g (the default way fork_join gets its threads).
struct spawn_thread {
  template <class G>
  std::thread operator()(G&& g) const {
    return std::thread(std::forward<G>(g));
  }
};

// Splits [0, items) into `parts` contiguous ranges and runs f(part, begin, end) for each, on up to
// parts - 1 new threads plus the calling one. Where a thread cannot be started (a process or
// memory limit: std::system_error or std::bad_alloc from `spawn`), the calling thread runs the
// parts left over itself, one after another: the work is done either way, only slower. An
// exception from f is rethrown on the calling thread once every thread has been joined.
template <class F, class Spawn = spawn_thread>
void fork_join(unsigned parts, std::uint64_t items, F&& f, Spawn&& spawn = {}) {
  parts = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(parts, items)));
  auto run = [&](unsigned p) {
    f(p, items * p / parts, items * (p + 1) / parts);
  };
  std::vector<std::exception_ptr> errors;
  std::vector<std::thread> pool;
  try {
    errors.resize(parts);
    pool.reserve(parts - 1);
  } catch (const std::bad_alloc&) {
    errors.clear();
    pool.clear();
  }
  unsigned started = 1;  // part 0 always runs on the calling thread
  for (unsigned p = 1; p < parts && !errors.empty(); ++p) {
    try {
      pool.push_back(spawn([&run, &errors, p] {
        try {
          run(p);
        } catch (...) {
          errors[p] = std::current_exception();
        }
      }));
    } catch (const std::system_error&) {
      break;
    } catch (const std::bad_alloc&) {
      break;
    }
    started = p + 1;
  }
  std::exception_ptr mine;
  try {
    run(0);
    for (unsigned p = started; p < parts; ++p) run(p);
  } catch (...) {
    mine = std::current_exception();
  }
  for (auto& t : pool) t.join();
  if (mine) std::rethrow_exception(mine);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace zipccl::host::detail
