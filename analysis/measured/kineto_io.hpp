#pragma once
// Reading a whole file that may be gzip-compressed (detected by its magic bytes 1f 8b, not by its
// name): Kineto writes `.json` or `.json.gz` depending on how the profiler was asked to export.
#include <filesystem>
#include <string>

namespace dionsim::analysis {

// The file's bytes, inflated when they start with the gzip magic. A missing or unreadable file
// throws IoError; a damaged or truncated gzip stream throws InputError naming the file.
[[nodiscard]] std::string read_maybe_gzipped(const std::filesystem::path& path);

// Inflates a gzip (or concatenated multi-member gzip) buffer; `where` names the source in errors.
[[nodiscard]] std::string gunzip(const std::string& compressed, const std::string& where, std::size_t max_bytes = std::size_t{1} << 30);
// (max_bytes: the inflated size refused beyond, InputError; a 1 MB file can inflate to 1 GiB.)

}  // namespace dionsim::analysis
