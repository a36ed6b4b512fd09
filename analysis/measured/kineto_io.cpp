#include "analysis/measured/kineto_io.hpp"

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <limits>

#include "common/files.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

bool has_gzip_magic(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

}  // namespace

std::string gunzip(const std::string& compressed, const std::string& where, std::size_t max_bytes) {
  z_stream stream{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (CRC and length are checked by zlib).
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    throw IoError(where + ": cannot initialise zlib");
  }
  std::string out;
  std::string chunk(1 << 20, '\0');
  std::size_t consumed = 0;
  int status = Z_OK;
  while (true) {
    const std::size_t remaining = compressed.size() - consumed;
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + consumed));
    stream.avail_in = static_cast<uInt>(std::min<std::size_t>(remaining, std::numeric_limits<uInt>::max()));
    const uInt offered = stream.avail_in;
    stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
    stream.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&stream, Z_NO_FLUSH);
    const std::size_t produced = chunk.size() - stream.avail_out;
    if (out.size() + produced > max_bytes) {
      inflateEnd(&stream);
      // A 1 MB file can inflate to 1 GiB: stop at the same limit as an uncompressed input.
      throw InputError(where + ": inflates to more than " + std::to_string(max_bytes) +
                       " bytes; expected a trace of at most that size");
    }
    out.append(chunk.data(), produced);
    consumed += offered - stream.avail_in;
    if (status == Z_STREAM_END) {
      // Another gzip member may follow (gzip allows concatenation); trailing padding is not one.
      if (consumed + 2 <= compressed.size() && has_gzip_magic(compressed.substr(consumed, 2))) {
        inflateReset(&stream);
        continue;
      }
      break;
    }
    if (status != Z_OK && status != Z_BUF_ERROR) {
      const std::string message = stream.msg != nullptr ? stream.msg : "zlib error " + std::to_string(status);
      inflateEnd(&stream);
      throw InputError(where + ": damaged gzip stream after " + std::to_string(consumed) +
                       " compressed bytes: " + message + "; expected a complete .gz file");
    }
    if (produced == 0 && offered == stream.avail_in) {
      break;  // no progress: the input ended before the gzip trailer
    }
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END) {
    throw InputError(where + ": gzip stream truncated after " + std::to_string(compressed.size()) +
                     " compressed bytes (" + std::to_string(out.size()) + " inflated); expected a complete .gz file");
  }
  return out;
}

std::string read_maybe_gzipped(const std::filesystem::path& path) {
  const std::string bytes = read_input_file(path.string(), "a profiler trace (JSON, optionally gzipped)");
  return has_gzip_magic(bytes) ? gunzip(bytes, path.string()) : bytes;
}

}  // namespace dionsim::analysis
