#pragma once
// Shared by the fuzz targets: a parser may refuse an input with one of dionsim's typed errors
// (that is the contract); anything else — another exception, a crash, a sanitizer report, a hang
// past -timeout, memory past -rss_limit_mb — is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "common/error.hpp"

namespace dionsim::fuzz {

// A private folder for this process (file-based parsers read from a path).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("dionsim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const auto path = scratch() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

template <class Fn>
int run_one(Fn&& fn) {
  try {
    fn();
  } catch (const dionsim::Error&) {
    // a named refusal: expected
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: untyped exception %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}

}  // namespace dionsim::fuzz
