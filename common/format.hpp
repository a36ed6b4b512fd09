#pragma once
// printf-style formatting into a std::string, for fixed-width result tables (nccl-tests style).
#include <string>

namespace dionsim {

[[nodiscard]] std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dionsim
