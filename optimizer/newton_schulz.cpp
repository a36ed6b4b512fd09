#include "optimizer/newton_schulz.hpp"

#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <stdexcept>

#include "optimizer/bf16.hpp"

namespace dionsim::opt {

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Coeff {
  double a, b, c;
};
// Polar Express (arXiv 2505.16932), safety factor 1.02 folded into all but the last (§2.6.1).
constexpr std::array<Coeff, 5> kPolarExpress{{{8.156554524902461, -22.48329292557795, 15.878769915207462},
                                              {4.042929935166739, -2.808917465908714, 0.5000178451051316},
                                              {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
                                              {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
                                              {2.3465413258596377, -1.7097828382687081, 0.42323551169305323}}};
constexpr std::array<Coeff, 5> kQuintic{{{4.0848, -6.8946, 2.9270},
                                         {3.9505, -6.3029, 2.6377},
                                         {3.7418, -5.5913, 2.3037},
                                         {2.8769, -3.1427, 1.2046},
                                         {2.8366, -3.0525, 1.2012}}};

void round_in_place(Mat& m) { m = m.unaryExpr([](float v) { return round_bf16(v); }); }

// bf16 tensor * Python scalar: the scalar becomes the fp32 op-math value, the product rounds once.
Mat scaled(const Mat& m, double s) {
  const float f = static_cast<float>(s);
  return m.unaryExpr([f](float v) { return round_bf16(v * f); });
}

}  // namespace

void orthogonalize_bf16(std::span<float> x, std::int64_t rows, std::int64_t cols, NsKind ns, float epsilon) {
  if (ns == NsKind::gram) {
    throw std::invalid_argument("orthogonalize_bf16: Gram Newton-Schulz has a FLOP model only");
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
  const auto& coeffs = ns == NsKind::polar_express ? kPolarExpress : kQuintic;
  Mat A, AA, B, BX;
  for (const Coeff& k : coeffs) {
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
