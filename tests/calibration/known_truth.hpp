#pragma once
// The known parameters the synthetic-truth tests (fit recovery, interval coverage, cross-validated
// coverage) generate their measurements from: whatif run at these values is the truth.
#include <map>
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

}  // namespace dionsim::analysis
