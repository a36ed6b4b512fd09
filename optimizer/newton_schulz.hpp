#pragma once
// Orthogonalization of one matrix held as bf16 values (spec §2.6.1 Polar Express with the exact
// eager-PyTorch rounding sequence; §2.6.2 legacy quintic NS; §2.6.3 Gram Newton-Schulz in fp16 as
// the upstream package runs it — decisions in docs/optimizer.md). GEMMs accumulate in fp32 and
// round once to the working type. Coefficients: optimizer/newton_schulz_coefficients.hpp. Eigen
// stays inside the .cpp.
#include <cstdint>
#include <span>

#include "optimizer/plan.hpp"

namespace dionsim::opt {

// x: [rows, cols] row-major, every value exactly representable in bf16; overwritten with the
// result (bf16 values). An all-zero matrix is returned unchanged (0 / eps = 0, exactly what the
// arithmetic gives). epsilon is the optimizer's; Gram NS ignores it (its own 1e-7, §2.6).
void orthogonalize_bf16(std::span<float> x, std::int64_t rows, std::int64_t cols, NsKind ns, float epsilon);

// Gram Newton-Schulz (§2.6.3): transpose tall to wide, X = fp16(X / (|X|_F + 1e-7)) in fp32;
// m == n: the standard 5-step iteration, else the Gram form with a restart at iteration 2; every
// GEMM (fp32 accumulation, the alpha/beta epilogue in fp32) rounds once to fp16; the result is
// rounded fp16 -> bf16. Used by orthogonalize_bf16 for NsKind::gram.
void orthogonalize_gram(std::span<float> x, std::int64_t rows, std::int64_t cols);

}  // namespace dionsim::opt
