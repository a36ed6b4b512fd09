#include "common/resources.hpp"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "common/error.hpp"

namespace dionsim {

void run_threads(int count, const std::function<void(int)>& fn) {
  if (count <= 1) {
    fn(0);
    return;
  }
  std::exception_ptr first;
  std::mutex lock;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    pool.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> guard(lock);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size);
}

void require_memory(double bytes, std::string_view flag, std::string_view value, std::string_view what) {
  const std::uint64_t physical = physical_memory_bytes();
  const double budget = physical > 0 ? static_cast<double>(physical) / 2 : 64.0 * (1ULL << 30);
  if (bytes > budget) {
    char expected[256];
    std::snprintf(expected, sizeof expected, "a request that fits in memory: %s needs %.3g GB, this machine allows %.3g GB (half its RAM)",
                  std::string(what).c_str(), bytes / 1e9, budget / 1e9);
    throw_bad_usage(flag, value, expected);
  }
}

}  // namespace dionsim
