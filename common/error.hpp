#pragma once
// Typed errors. Libraries throw these; only main() turns them into exit codes (STYLE.md point 8).
#include <stdexcept>
#include <string>
#include <string_view>

namespace dionsim {

enum class ExitCode : int {
  ok = 0,
  usage = 2,       // bad command line
  bad_input = 3,   // bad config or input file
  io = 4,          // I/O or database
  device = 5,      // CUDA / NCCL, or a build without CUDA asked for GPU work
  no_device = 77,  // no GPU present (tests skip)
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ExitCode::usage, m) {}
};
struct InputError : Error {
  explicit InputError(const std::string& m) : Error(ExitCode::bad_input, m) {}
};
struct IoError : Error {
  explicit IoError(const std::string& m) : Error(ExitCode::io, m) {}
};
struct DeviceError : Error {
  explicit DeviceError(const std::string& m) : Error(ExitCode::device, m) {}
};
struct NoDeviceError : Error {
  explicit NoDeviceError(const std::string& m) : Error(ExitCode::no_device, m) {}
};

// "WHERE: FIELD: got 'VALUE', expected EXPECTED" — the one shape of every validation message.
// WHERE is a file (optionally file:line) or a flag context such as "--fraction"; may be empty.
[[nodiscard]] std::string describe_bad_value(std::string_view where, std::string_view field,
                                             std::string_view got, std::string_view expected);

[[noreturn]] void throw_bad_input(std::string_view where, std::string_view field, std::string_view got,
                                  std::string_view expected);
[[noreturn]] void throw_bad_usage(std::string_view flag, std::string_view got, std::string_view expected);

}  // namespace dionsim
