#include "optimizer/npy.hpp"

#include <bit>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.hpp"

namespace dionsim::opt {

namespace {

std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::regex re("'" + key + R"('\s*:\s*('[^']*'|True|False|\([^)]*\)))");
  std::smatch m;
  if (!std::regex_search(header, m, re)) throw_bad_input(path, key, header, "a .npy header with '" + key + "'");
  return m[1];
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input(path, "(file)", "missing or unreadable", "a .npy file");
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw_bad_input(path, "magic", "not a .npy file", "\\x93NUMPY");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = static_cast<std::uint32_t>(b[0] | (b[1] << 8));
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = static_cast<std::uint32_t>(b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24));
  } else {
    throw_bad_input(path, "version", std::to_string(major), "1, 2 or 3");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) throw_bad_input(path, "header", "truncated", "a complete .npy header");
  const std::string descr = header_field(header, "descr", path);
  std::size_t elem = 0;
  if (descr == "'<f4'") {
    elem = 4;
  } else if (descr == "'<f8'") {
    elem = 8;
  } else {
    throw_bad_input(path, "descr", descr, "'<f4' (little-endian float32) or '<f8' (float64)");
  }
  const std::string order = header_field(header, "fortran_order", path);
  if (order != "False") throw_bad_input(path, "fortran_order", order, "False (C order)");
  const std::string shape_text = header_field(header, "shape", path);
  NpyArray out;
  std::int64_t count = 1;
  const std::regex num(R"(\d+)");
  for (auto it = std::sregex_iterator(shape_text.begin(), shape_text.end(), num); it != std::sregex_iterator(); ++it) {
    out.shape.push_back(std::stoll(it->str()));
    count *= out.shape.back();
  }
  std::vector<char> raw(static_cast<std::size_t>(count) * elem);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (in.gcount() != static_cast<std::streamsize>(raw.size())) {
    throw_bad_input(path, "data", std::to_string(in.gcount()) + " bytes", std::to_string(raw.size()) + " bytes for shape " + shape_text);
  }
  out.data.resize(static_cast<std::size_t>(count));
  static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");
  for (std::size_t i = 0; i < out.data.size(); ++i) {
    if (elem == 4) {
      std::memcpy(&out.data[i], raw.data() + i * 4, 4);
    } else {
      double d = 0.0;
      std::memcpy(&d, raw.data() + i * 8, 8);
      out.data[i] = static_cast<float>(d);
    }
  }
  return out;
}

void write_npy(const std::string& path, std::span<const std::int64_t> shape, std::span<const float> data) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  dict << "), }";
  std::string header = dict.str();
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw IoError(path + ": cannot open for writing");
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char lenb[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out.write(lenb, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
  if (!out) throw IoError(path + ": write failed");
}

}  // namespace dionsim::opt
