#include "optimizer/npy.hpp"

#include <bit>
#include <cstring>
#include <fstream>
#include <charconv>
#include <filesystem>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"

namespace dionsim::opt {

namespace {

// A numpy header is a Python dict literal; numpy itself writes headers below 4 KiB. Longer ones
// are refused before they are read (a 30 000-character header crashed the regex reader).
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::string quoted = "'" + key + "'";
  const std::size_t at = header.find(quoted);
  if (at == std::string::npos) throw_bad_input(path, key, header, "a .npy header with '" + key + "'");
  std::size_t i = header.find_first_not_of(" \t", at + quoted.size());
  if (i == std::string::npos || header[i] != ':') throw_bad_input(path, key, header, "'" + key + "': VALUE");
  i = header.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos) throw_bad_input(path, key, header, "'" + key + "': VALUE");
  std::size_t end = std::string::npos;
  if (header[i] == '\'') {
    end = header.find('\'', i + 1);
  } else if (header[i] == '(') {
    end = header.find(')', i + 1);
  } else if (header.compare(i, 4, "True") == 0) {
    end = i + 3;
  } else if (header.compare(i, 5, "False") == 0) {
    end = i + 4;
  }
  if (end == std::string::npos) throw_bad_input(path, key, header.substr(i), "a quoted string, True, False or a tuple");
  return header.substr(i, end - i + 1);
}

// "(16, 32)" / "(16,)" / "()" -> dimensions; each a plain decimal in [0, kMaxNpyDimension].
std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& path) {
  std::vector<std::int64_t> shape;
  std::string_view rest(text);
  rest.remove_prefix(1);
  rest.remove_suffix(1);
  while (true) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (rest.empty()) break;
    std::int64_t dim = -1;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), dim);
    if (ec != std::errc{} || dim < 0 || dim > kMaxNpyDimension || ptr == rest.data()) {
      throw_bad_input(path, "shape", text,
                      "a tuple of dimensions, each an integer in [0, " + std::to_string(kMaxNpyDimension) + "]");
    }
    shape.push_back(dim);
    rest.remove_prefix(static_cast<std::size_t>(ptr - rest.data()));
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (rest.empty()) break;
    if (rest.front() != ',') throw_bad_input(path, "shape", text, "a tuple of integers separated by commas");
    rest.remove_prefix(1);
  }
  if (shape.size() > 8) throw_bad_input(path, "shape", text, "at most 8 dimensions");
  return shape;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  require_regular_file(path, "a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input(path, "(file)", "missing or unreadable", "a .npy file");
  std::error_code size_error;
  const auto file_bytes = static_cast<std::uint64_t>(std::filesystem::file_size(path, size_error));
  if (size_error) throw IoError(path + ": cannot read its size");
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw_bad_input(path, "magic", "not a .npy file", "\\x93NUMPY");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_len = 0;
  std::uint64_t prefix = 0;
  if (major == 1) {
    unsigned char b[2] = {};
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = static_cast<std::uint32_t>(b[0] | (b[1] << 8));
    prefix = 10;
  } else if (major == 2 || major == 3) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = static_cast<std::uint32_t>(b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24));
    prefix = 12;
  } else {
    throw_bad_input(path, "version", std::to_string(major), "1, 2 or 3");
  }
  if (!in) throw_bad_input(path, "header", "truncated", "a complete .npy header");
  if (header_len > kMaxNpyHeaderBytes || prefix + header_len > file_bytes) {
    throw_bad_input(path, "header length", std::to_string(header_len) + " bytes (file " + std::to_string(file_bytes) + " bytes)",
                    "at most " + std::to_string(kMaxNpyHeaderBytes) + " bytes, within the file");
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
  if (shape_text.front() != '(') throw_bad_input(path, "shape", shape_text, "a tuple");
  NpyArray out;
  out.shape = parse_shape(shape_text, path);
  // The element count is checked against the bytes the file holds before anything is allocated
  // (a header claiming (40000, 40000) allocated 6.4 GB before the size check).
  const std::uint64_t data_bytes = file_bytes - prefix - header_len;
  std::uint64_t count = 1;
  for (const std::int64_t d : out.shape) {
    if (d != 0 && count > data_bytes / static_cast<std::uint64_t>(d)) {
      count = data_bytes + 1;  // more elements than bytes: certainly too large
      break;
    }
    count *= static_cast<std::uint64_t>(d);
  }
  if (count > data_bytes / elem || count * elem != data_bytes) {
    throw_bad_input(path, "data", std::to_string(data_bytes) + " bytes",
                    (count > data_bytes ? std::string("more than the file holds") : std::to_string(count * elem) + " bytes") +
                        " for shape " + shape_text);
  }
  std::vector<char> raw(static_cast<std::size_t>(count * elem));
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
  write_file_atomically(path, [&](std::ostream& out) {
    out.write("\x93NUMPY\x01\x00", 8);
    const auto len = static_cast<std::uint16_t>(header.size());
    const char lenb[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
    out.write(lenb, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
  });
}

}  // namespace dionsim::opt
