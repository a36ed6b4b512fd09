#pragma once
// printf-style formatting into a std::string, for fixed-width result tables (nccl-tests style).
#include <string>

namespace dionsim {

[[nodiscard]] std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// printf's %g (six significant digits): a value echoed in a message or a name.
[[nodiscard]] std::string format_g(double v);

}  // namespace dionsim
