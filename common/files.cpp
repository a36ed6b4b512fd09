#include "common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.hpp"

namespace dionsim {

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string errno_text(int err) {
  if (err == ELOOP) return "a symlink loop";
  if (err == ENOENT) return "missing";
  if (err == ENOTDIR) return "missing (a path component is not a folder)";
  if (err == EACCES) return "not readable (permission denied)";
  return std::strerror(err);
}

}  // namespace

void require_regular_file(const std::string& path, std::string_view what) {
  // An empty path (--calibration '') printed as ": cannot open…", naming nothing.
  if (path.empty()) throw_bad_input("(empty file name)", "(file)", "", what);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw_bad_input(path, "(file)", errno_text(errno), what);
  }
  if (!S_ISREG(st.st_mode)) throw_bad_input(path, "(file)", kind_of(st.st_mode), what);
}

std::string read_input_file(const std::string& path, std::string_view what, std::size_t max_bytes) {
  if (path.empty()) throw_bad_input("(empty file name)", "(file)", "", what);
  struct stat probe {};
  if (::stat(path.c_str(), &probe) != 0 && (errno == ENOENT || errno == EACCES || errno == ENOTDIR)) {
    // A missing or unreadable file stays an I/O error (exit 4), as the readers always said.
    throw IoError(path + ": cannot open for reading (" + errno_text(errno) + "), expected " + std::string(what));
  }
  require_regular_file(path, what);
  // O_NONBLOCK: should the path be swapped for a FIFO after the check, open() must not block;
  // fstat on the descriptor is the check that counts.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_bad_input(path, "(file)", errno_text(errno), what);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw_bad_input(path, "(file)", kind_of(st.st_mode), what);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw_bad_input(path, "(size)", std::to_string(st.st_size) + " bytes",
                    std::string(what) + " of at most " + std::to_string(max_bytes) + " bytes");
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(path + ": read error: " + std::strerror(errno));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      throw_bad_input(path, "(size)", "more than " + std::to_string(max_bytes) + " bytes",
                      std::string(what) + " of at most " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

void require_output_file(const std::string& path, std::string_view flag, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw_bad_usage(flag, path, "a file name");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec.value() == ELOOP) throw_bad_usage(flag, path, "an output file (this path is a symlink loop)");
  if (fs::exists(st)) {
    if (fs::is_directory(st)) throw_bad_usage(flag, path, "an output file, not an existing directory");
    if (!fs::is_regular_file(st)) throw_bad_usage(flag, path, "an output file (this path exists and is not a regular file)");
    for (const std::string& in : inputs) {
      std::error_code e2;
      if (!in.empty() && fs::equivalent(path, in, e2)) {
        throw_bad_usage(flag, path, "an output file other than the input '" + in + "'");
      }
    }
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    const fs::file_status ps = fs::status(parent, ec);
    if (!fs::is_directory(ps)) throw_bad_usage(flag, path, "an output file in an existing folder");
  }
}

void require_output_folder(const std::string& path, std::string_view flag) {
  namespace fs = std::filesystem;
  if (path.empty()) throw_bad_usage(flag, path, "a folder name");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec.value() == ELOOP) throw_bad_usage(flag, path, "an output folder (this path is a symlink loop)");
  if (fs::exists(st) && !fs::is_directory(st)) throw_bad_usage(flag, path, "an output folder, not an existing file");
  fs::create_directories(path, ec);
  if (ec) throw_bad_usage(flag, path, "an output folder that can be created (" + ec.message() + ")");
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw IoError(path + ": is a directory, expected an output file");
  const fs::path target(path);
  std::random_device rd;
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  const std::string tmp = (target.parent_path() / tmp_name).string();
  struct Cleanup {
    const std::string& tmp;
    bool armed = true;
    ~Cleanup() {
      if (armed) ::unlink(tmp.c_str());
    }
  } cleanup{tmp};
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(path + ": cannot create a temporary file beside it (" + std::strerror(errno) + ")");
    write(out);
    out.flush();
    if (!out) throw IoError(path + ": write failed (disk full?); the previous file is unchanged");
  }
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw IoError(path + ": cannot sync the written file (" + std::strerror(errno) + "); the previous file is unchanged");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError(path + ": cannot replace the file (" + std::string(std::strerror(errno)) + ")");
  }
  cleanup.armed = false;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  write_file_atomically(path, [&](std::ostream& out) { out.write(content.data(), static_cast<std::streamsize>(content.size())); });
}

}  // namespace dionsim
