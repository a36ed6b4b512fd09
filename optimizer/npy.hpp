#pragma once
// Minimal .npy I/O for numerics cases: reads little-endian float32 / float64 C-order arrays
// (anything else is rejected by name), writes float32.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dionsim::opt {

// Limits of the reader, checked before anything is allocated: the header (numpy writes < 4 KiB)
// and each dimension; the element count must match the bytes the file holds.
inline constexpr std::uint32_t kMaxNpyHeaderBytes = 65536;
inline constexpr std::int64_t kMaxNpyDimension = std::int64_t{1} << 31;

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // float64 inputs are narrowed to float32
};

// Throws InputError "PATH: FIELD: got '...', expected ..." (FIELD = magic, descr, fortran_order,
// shape, data); a missing file is an InputError too (it is an input of the case).
[[nodiscard]] NpyArray read_npy(const std::string& path);
// Throws IoError when the file cannot be written; written to a temporary file and renamed.
void write_npy(const std::string& path, std::span<const std::int64_t> shape, std::span<const float> data);

}  // namespace dionsim::opt
