#pragma once
// Least squares with uncertainty (Eigen), and the fits of measured data that need no simulator:
// collective time vs message size, GEMM time vs FLOPs, kernel time vs (FLOPs, bytes).
//
// Uncertainty convention: the covariance of the parameters is σ̂² (JᵀWJ)⁻¹ with σ̂² = Σ wᵢ rᵢ² / (n − p),
// i.e. the weights give relative precision and the scatter of the residuals sets the scale (as
// scipy's curve_fit with absolute_sigma=False). Standard errors are the square roots of its diagonal;
// derived quantities (a bandwidth from its reciprocal) carry first-order (delta-method) errors.
#include <Eigen/Dense>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dionsim::analysis {

struct LinearFit {
  Eigen::VectorXd params;
  Eigen::VectorXd std_errors;
  Eigen::MatrixXd covariance;
  Eigen::VectorXd residuals;  // y − ŷ, unweighted
  double sigma2 = 0;          // weighted residual variance per degree of freedom
  double r_squared = 0;       // 1 − Σw r² / Σw (y − ȳ_w)²
  int dof = 0;                // n − p
};

// Minimises Σ wᵢ (yᵢ − xᵢᵀβ)² over β. `weights` empty = all ones. InputError when there are no
// more points than parameters, a weight is negative or not finite, or the columns are linearly
// dependent (`what` names the fit in the message).
[[nodiscard]] LinearFit fit_weighted_linear(const Eigen::MatrixXd& design, const Eigen::VectorXd& y,
                                            const Eigen::VectorXd& weights = {}, const std::string& what = "fit");

// y ≈ f(β, xᵢ): Levenberg–Marquardt with a central-difference Jacobian. x has one point per row.
// Bounded nonlinear least squares by Levenberg–Marquardt — the one implementation behind every
// nonlinear fit (fit_levenberg_marquardt below and the step-model fit, step_fit.hpp). Minimises
// ‖r(θ)‖² over lower ≤ θ ≤ upper (±infinity for an unbounded parameter): damped Gauss–Newton steps
// (JᵀJ + λ·diag(JᵀJ)) δ = −Jᵀr clamped into the bounds, λ lowered after an accepted step and raised
// after a rejected one; J by central differences that stay inside the bounds.
using ResidualFunction = std::function<Eigen::VectorXd(const Eigen::VectorXd& theta)>;
struct LeastSquaresOptions {
  int max_iterations = 200;
  int attempts = 30;                  // damping increases tried per iteration before stopping
  double initial_damping = 1e-3;      // λ
  double damping_down = 10, damping_up = 10, min_damping = 1e-12;
  double damping_floor = 1e-30;       // diag(JᵀJ) entries below this are damped as this
  double relative_cost_tolerance = 1e-14;  // converged: an accepted step gains less than this × cost
  double absolute_cost_tolerance = 0;      //   (+ this)
  double relative_step_tolerance = 1e-10;  // or moves θ by less than this × |θ|
  // A crawl: less than plateau_gain × cost gained over the last plateau_window iterations (0 = off).
  int plateau_window = 0;
  double plateau_gain = 0;
  // Jacobian step: jacobian_step × max(|θ_j|, floor_j), floor_j = jacobian_range_floor × (upper − lower)
  // for a bounded parameter, jacobian_unbounded_floor otherwise.
  double jacobian_step = 1e-6, jacobian_range_floor = 0, jacobian_unbounded_floor = 1e-8;
};
struct LeastSquaresSolution {
  Eigen::VectorXd theta, residuals;
  double cost = 0;  // ‖r‖²
  int iterations = 0;
  bool converged = false;
};
[[nodiscard]] LeastSquaresSolution minimize_least_squares(const ResidualFunction& residuals, const Eigen::VectorXd& start,
                                                          const Eigen::VectorXd& lower, const Eigen::VectorXd& upper,
                                                          const LeastSquaresOptions& options, const std::string& what);
// ∂r/∂θ by central differences inside [lower, upper], with minimize_least_squares's step rule.
[[nodiscard]] Eigen::MatrixXd central_jacobian(const ResidualFunction& residuals, const Eigen::VectorXd& theta,
                                               const Eigen::VectorXd& lower, const Eigen::VectorXd& upper,
                                               const LeastSquaresOptions& options);

using ModelFunction = std::function<double(const Eigen::VectorXd& params, const Eigen::VectorXd& x)>;
struct NonlinearFit : LinearFit {
  int iterations = 0;
  bool converged = false;  // relative step and cost change below 1e-10
};
[[nodiscard]] NonlinearFit fit_levenberg_marquardt(const ModelFunction& model, const Eigen::MatrixXd& x,
                                                   const Eigen::VectorXd& y, const Eigen::VectorXd& start,
                                                   const Eigen::VectorXd& weights = {}, int max_iterations = 200,
                                                   const std::string& what = "fit");

// A value with its standard error.
struct Estimate {
  double value = 0;
  double std_error = 0;
};

// ---- (a) collective time vs size: t = latency + bytes / algbw ------------------------------------
struct CollectivePoint {
  std::int64_t bytes = 0;  // per rank (nccl-tests "size")
  double time_us = 0;
};
struct CollectiveFit {
  std::string op;  // all_to_all | all_gather
  int world = 0;
  int points = 0;
  Estimate latency_us;
  Estimate algbw_GBps;  // asymptotic algorithm bandwidth (size / time for large sizes)
  Estimate busbw_GBps;  // algbw · (n−1)/n
  double r_squared = 0;
  double max_rel_residual = 0;  // max |t − t̂| / t over the points
  // Predicted time of one collective of `bytes` per rank.
  [[nodiscard]] double time_us(std::int64_t bytes) const;
};
// Relative-error weighting (wᵢ = 1/tᵢ²): small messages are latency-bound and as informative as
// large ones. Needs at least three sizes.
[[nodiscard]] CollectiveFit fit_collective(const std::string& op, int world,
                                           const std::vector<CollectivePoint>& points);

// ---- (b)/(c) kernel time vs work: t = overhead + flops / throughput [+ bytes / bandwidth] ---------
struct KernelPoint {
  double flops = 0;
  double bytes = 0;
  double time_us = 0;
};
struct KernelFit {
  std::string kernel_class;
  int points = 0;
  Estimate overhead_us;  // fixed cost per kernel (launch tail, wave quantisation, …)
  Estimate tflops;       // asymptotic throughput, TFLOP/s (absent when no point has FLOPs)
  Estimate hbm_GBps;     // asymptotic memory bandwidth term, GB/s (only with use_bytes)
  bool has_flops_term = false;
  bool has_bytes_term = false;
  double r_squared = 0;
  double max_rel_residual = 0;
  [[nodiscard]] double time_us(double flops, double bytes = 0) const;
};
// Relative-error weighting as above. use_bytes adds the bytes/bandwidth term (a roofline whose
// two ceilings add, the usual calibration form when kernels are neither purely bound).
[[nodiscard]] KernelFit fit_kernel_time(const std::string& kernel_class, const std::vector<KernelPoint>& points,
                                        bool use_bytes = false);

}  // namespace dionsim::analysis
