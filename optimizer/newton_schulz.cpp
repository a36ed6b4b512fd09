#include "optimizer/newton_schulz.hpp"

#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <stdexcept>

#include "optimizer/bf16.hpp"
#include "optimizer/newton_schulz_coefficients.hpp"

namespace dionsim::opt {

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void round_in_place(Mat& m) { m = m.unaryExpr([](float v) { return round_bf16(v); }); }

// bf16 tensor * Python scalar: the scalar becomes the fp32 op-math value, the product rounds once.
Mat scaled(const Mat& m, double s) {
  const float f = static_cast<float>(s);
  return m.unaryExpr([f](float v) { return round_bf16(v * f); });
}

void round_fp16_in_place(Mat& m) { m = m.unaryExpr([](float v) { return round_fp16(v); }); }

// Gram Newton-Schulz (spec §2.6.3, upstream gram_newton_schulz.py) on the wide X [m][n] (m <= n)
// already normalized and in fp16. Every product is one fp32-accumulated GEMM whose scaled sum
// (cuBLAS's alpha*AB + beta*C epilogue, as torch.baddbmm runs it) rounds once to fp16; Q = Z + a*I
// rounds once (upstream compiles the call, so the pointwise ops are fused).
void gram_wide(Mat& X) {
  const auto& k = ns_coefficients::kGram;
  const std::int64_t m = X.rows();
  // D = fp16(alpha * P Q + beta * C) for the GEMM epilogues (beta = 0: no C).
  auto gemm = [](const Mat& P, const Mat& Q, float alpha, float beta, const Mat* C) {
    Mat D;
    D.noalias() = P * Q;
    if (C != nullptr) {
      D = (alpha * D.array() + beta * C->array()).matrix();
    } else if (alpha != 1.0F) {
      D *= alpha;
    }
    round_fp16_in_place(D);
    return D;
  };
  if (m == X.cols()) {  // square: the standard iteration with the same coefficients
    for (const auto& c : k) {
      const Mat A = gemm(X, X.transpose(), 1.0F, 0.0F, nullptr);
      const Mat B = gemm(A, A, static_cast<float>(c.c), static_cast<float>(c.b), &A);
      X = gemm(B, X, 1.0F, static_cast<float>(c.a), &X);
    }
    return;
  }
  Mat R = gemm(X, X.transpose(), 1.0F, 0.0F, nullptr);
  Mat Q, Z, RZ;
  const int iters = static_cast<int>(k.size());
  for (int i = 0; i < iters; ++i) {
    const auto& c = k[static_cast<std::size_t>(i)];
    const float a = static_cast<float>(c.a);
    const bool reset = i == ns_coefficients::kGramReset;
    if (reset) {
      X = gemm(Q, X, 1.0F, 0.0F, nullptr);
      R = gemm(X, X.transpose(), 1.0F, 0.0F, nullptr);
    }
    Z = gemm(R, R, static_cast<float>(c.c), static_cast<float>(c.b), &R);
    if (i == 0 || reset) {
      Q = Z;
      for (std::int64_t d = 0; d < m; ++d) Q(d, d) = round_fp16(Z(d, d) + a);
    } else {
      Q = gemm(Q, Z, 1.0F, a, &Q);
    }
    if (i < iters - 1 && i + 1 != ns_coefficients::kGramReset) {
      RZ = gemm(R, Z, 1.0F, a, &R);
      R = gemm(Z, RZ, 1.0F, a, &RZ);
    }
  }
  X = gemm(Q, X, 1.0F, 0.0F, nullptr);
}

}  // namespace

void orthogonalize_gram(std::span<float> x, std::int64_t rows, std::int64_t cols) {
  Eigen::Map<Mat> in(x.data(), rows, cols);
  const bool tall = rows > cols;
  Mat X = tall ? Mat(in.transpose()) : Mat(in);
  // X = fp16(X / (|X|_F + 1e-7)) with the norm and the division in fp32 (upstream casts to fp32 first).
  double sumsq = 0.0;
  for (float v : x) sumsq += static_cast<double>(v) * static_cast<double>(v);
  const float d = static_cast<float>(std::sqrt(sumsq)) + ns_coefficients::kGramEpsilon;
  X = X.unaryExpr([d](float v) { return round_fp16(v / d); });
  gram_wide(X);
  // fp16 -> the input dtype (bf16): a second rounding, as X.to(original_dtype).
  X = X.unaryExpr([](float v) { return round_bf16(v); });
  if (tall) {
    in = X.transpose();
  } else {
    in = X;
  }
}

void orthogonalize_bf16(std::span<float> x, std::int64_t rows, std::int64_t cols, NsKind ns, float epsilon) {
  if (ns == NsKind::gram) {
    orthogonalize_gram(x, rows, cols);
    return;
  }
  Eigen::Map<Mat> in(x.data(), rows, cols);
  double sumsq = 0.0;
  for (float v : x) sumsq += static_cast<double>(v) * static_cast<double>(v);
  if (sumsq == 0.0) return;
  const bool tall = rows > cols;
  // Work on the wide orientation: the tall form X^T X / X B is the transpose of the wide one.
  Mat X = tall ? Mat(in.transpose()) : Mat(in);
  // n = bf16(frobenius_fp32(X)); d = bf16(bf16(n * 1.02) + eps); X = bf16(X / d)   (legacy: no 1.02)
  const float n = round_bf16(static_cast<float>(std::sqrt(sumsq)));
  const float scaled_n = ns == NsKind::polar_express ? round_bf16(n * static_cast<float>(1.02)) : n;
  const float d = round_bf16(scaled_n + epsilon);
  X = X.unaryExpr([d](float v) { return round_bf16(v / d); });
  const auto& coeffs = ns == NsKind::polar_express ? ns_coefficients::kPolarExpress : ns_coefficients::kQuintic;
  Mat A, AA, B, BX;
  for (const ns_coefficients::Abc& k : coeffs) {
    A.noalias() = X * X.transpose();  // fp32 accumulation, one rounding
    round_in_place(A);
    AA.noalias() = A * A;
    round_in_place(AA);
    B = (scaled(A, k.b) + scaled(AA, k.c)).unaryExpr([](float v) { return round_bf16(v); });
    BX.noalias() = B * X;
    round_in_place(BX);
    X = (scaled(X, k.a) + BX).unaryExpr([](float v) { return round_bf16(v); });
  }
  if (tall) {
    in = X.transpose();
  } else {
    in = X;
  }
}

}  // namespace dionsim::opt
