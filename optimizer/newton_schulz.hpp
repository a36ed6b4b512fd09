#pragma once
// Orthogonalization of one matrix held as bf16 values (spec §2.6.1 Polar Express with the exact
// eager-PyTorch rounding sequence; §2.6.2 legacy quintic NS). GEMMs accumulate in fp32 and round
// once to bf16. Eigen stays inside the .cpp.
#include <cstdint>
#include <span>

#include "optimizer/plan.hpp"

namespace dionsim::opt {

// x: [rows, cols] row-major, every value exactly representable in bf16; overwritten with the
// result (bf16 values). ns must be polar_express or newton_schulz5 (gram: std::invalid_argument).
// An all-zero matrix is returned unchanged (0 / eps = 0, exactly what the arithmetic gives).
void orthogonalize_bf16(std::span<float> x, std::int64_t rows, std::int64_t cols, NsKind ns, float epsilon);

}  // namespace dionsim::opt
