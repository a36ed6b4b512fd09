#pragma once
// Worker threads and memory: an exception inside a worker (std::bad_alloc above all) must reach
// the caller as an error, never std::terminate; and work whose memory can be computed up front is
// refused by name before it allocates (require_memory).
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dionsim {

// Runs fn(i) for i in [0, count) on `count` threads and joins them all; the first exception any
// of them threw is rethrown here (the others run to their end first).
void run_threads(int count, const std::function<void(int)>& fn);

// Physical memory of this machine in bytes (0 when unknown).
[[nodiscard]] std::uint64_t physical_memory_bytes();

// Throws UsageError naming `flag` when `bytes` (what the request will allocate) exceeds half of
// the physical memory: the refusal comes before the allocation. `what` says what needs it.
void require_memory(double bytes, std::string_view flag, std::string_view value, std::string_view what);

}  // namespace dionsim
