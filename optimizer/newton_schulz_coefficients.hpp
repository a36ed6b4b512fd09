#pragma once
// The one home of the Newton-Schulz iteration coefficients (spec §2.6): the CPU reference
// (optimizer/newton_schulz.cpp), the kernels' CPU reference (kernels/reference.cpp) and the CUDA
// Newton-Schulz (kernels/newton_schulz.cu) all read them from here. Plain C++17, no dependencies.
#include <array>

namespace dionsim::ns_coefficients {

struct Abc {
  double a, b, c;
};
using Schedule = std::array<Abc, 5>;

// Polar Express (arXiv 2505.16932) as the reference's dion/polar_express.py has it: safety factor
// 1.02 folded into all but the last iteration (§2.6.1).
inline constexpr Schedule kPolarExpress{{{8.156554524902461, -22.48329292557795, 15.878769915207462},
                                         {4.042929935166739, -2.808917465908714, 0.5000178451051316},
                                         {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
                                         {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
                                         {2.3465413258596377, -1.7097828382687081, 0.42323551169305323}}};

// Legacy quintic (zeropower_via_newtonschulz5, §2.6.2).
inline constexpr Schedule kQuintic{{{4.0848, -6.8946, 2.9270},
                                    {3.9505, -6.3029, 2.6377},
                                    {3.7418, -5.5913, 2.3037},
                                    {2.8769, -3.1427, 1.2046},
                                    {2.8366, -3.0525, 1.2012}}};

// Gram Newton-Schulz (§2.6.3): the upstream package's default preset (Dao-AILab/gram-newton-schulz,
// gram_newton_schulz/coefficients.py POLAR_EXPRESS_COEFFICIENTS): the unmodified Polar Express
// coefficients divided by (1.05, 1.05^3, 1.05^5) in every iteration, the last one included.
namespace detail {
inline constexpr Schedule kPolarExpressUnmodified{{{8.28721201814563, -23.595886519098837, 17.300387312530933},
                                                   {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
                                                   {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
                                                   {3.3184196573706015, -2.488488024314874, 0.51004894012372},
                                                   {2.300652019954817, -1.6689039845747493, 0.4188073119525673}}};
inline constexpr double kGramSafety = 1.05;
constexpr Schedule gram_schedule() {
  Schedule s{};
  for (std::size_t i = 0; i < s.size(); ++i) {
    const Abc& u = kPolarExpressUnmodified[i];
    s[i] = {u.a / kGramSafety, u.b / (kGramSafety * kGramSafety * kGramSafety),
            u.c / (kGramSafety * kGramSafety * kGramSafety * kGramSafety * kGramSafety)};
  }
  return s;
}
}  // namespace detail
inline constexpr Schedule kGram = detail::gram_schedule();
// Iterations at which Gram NS restarts from X (upstream gram_newton_schulz_reset_iterations=[2], as
// microsoft/dion's megabatch_base.py constructs it).
inline constexpr int kGramReset = 2;
// Normalization epsilon of Gram NS (upstream ns_epsilon default; the optimizer's epsilon is ignored).
inline constexpr float kGramEpsilon = 1e-7F;

}  // namespace dionsim::ns_coefficients
