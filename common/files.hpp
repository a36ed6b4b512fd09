#pragma once
// Every file dionsim reads from or writes for a user goes through here, so that no input can block
// (a FIFO, a device), read forever (/dev/zero) or loop (a symlink loop), and no output is left
// half-written: outputs are written to a temporary file beside the target and renamed over it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim {

// The largest input file dionsim reads whole (and the largest a .gz may inflate to): 1 GiB.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

// Throws InputError naming `path` unless it names a regular file (after symlinks): a directory,
// FIFO, socket, character or block device, a missing file and a symlink loop are each refused by
// name. `what` says what the file was meant to be ("a measurement CSV").
void require_regular_file(const std::string& path, std::string_view what);

// Reads a whole regular file; refuses files larger than max_bytes (checked before reading and
// again while reading, so a file that grows cannot make it read forever).
[[nodiscard]] std::string read_input_file(const std::string& path, std::string_view what,
                                          std::size_t max_bytes = kMaxInputBytes);

// Throws UsageError (naming `flag`) when `path` cannot be an output file: an existing directory,
// anything else that is not a regular file, or the same file as one of `inputs`.
void require_output_file(const std::string& path, std::string_view flag, const std::vector<std::string>& inputs = {});

// Creates the output folder `path` (and its parents) unless it exists; UsageError naming `flag`
// when it (or a parent) is an existing file, a symlink loop or cannot be created.
void require_output_folder(const std::string& path, std::string_view flag);

// Writes `path` atomically: `write` fills a temporary file in the same folder, which is flushed,
// fsync'ed and renamed over `path` only when everything succeeded; on any failure the temporary
// is removed and `path` is left as it was. Throws IoError naming `path`.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace dionsim
