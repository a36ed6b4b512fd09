#pragma once
// The known parameters the synthetic-truth tests (fit recovery, interval coverage, cross-validated
// coverage) generate their measurements from: whatif run at these values is the truth.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"

namespace dionsim::analysis {

// The step parameters, and every HBM class a fit of `runs` has at 0.6 (one fit to learn the classes).
inline std::map<std::string, double> known_truth(const std::vector<MeasuredConfiguration>& runs) {
  std::map<std::string, double> truth = {{"fwd_bwd_ms", 430.0},
                                         {"ns_gemm_efficiency", 0.8},
                                         {"nic_efficiency", 0.6},
                                         {"alltoall_intra_efficiency", 0.5},
                                         {"alltoall_inter_efficiency", 0.45},
                                         {"alltoall_latency_us", 80.0},
                                         {"rank_skew_ms", 0.8},
                                         {"ns_gemm_overlap_slowdown", 1.3},
                                         {"host_launch_us", 12.0},
                                         {"launch_gap_us", 0.0}};
  for (const auto& [name, value] : fit_step_model(runs).parameters)
    if (name.starts_with("hbm_efficiency.")) truth[name] = 0.6;
  return truth;
}

// One synthetic measurement of `runs`: every metric the exact prediction has, times (1 + noise)
// with noise ~ N(0, sd) (a fresh distribution per draw, so that a seed gives the same draw however
// many draws came before it with other generators).
inline std::vector<MeasuredConfiguration> noisy_draw(const std::vector<MeasuredConfiguration>& runs,
                                                     const std::vector<PredictionRow>& exact, std::mt19937_64& rng,
                                                     double sd = 0.03) {
  std::normal_distribution<double> noise(0.0, sd);
  auto out = runs;
  for (auto& c : out)
    for (auto& [metric, value] : c.metrics)
      for (const auto& r : exact)
        if (r.configuration == c.config.label() && r.metric == metric) value = r.predicted * (1.0 + noise(rng));
  return out;
}

}  // namespace dionsim::analysis
