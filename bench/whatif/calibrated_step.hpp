#pragma once
// A calibrated what-if optimizer step for the scheduler benchmarks: seed-5120x8 (NorDion2, Gram
// NS, f = 0.25) with the kernel model and all-to-all calibration of docs/calibration-seed-h100.json
// (ns_gemm overlap slowdown 1.70: every kernel beside a collective is rate-modulated), as
// `dionsim whatif --calibration` builds it (sim/whatif.cpp), on h100-ndr400.
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "analysis/calibration/parameters.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "sim/step_program.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"
#include "topologies/topology.hpp"

namespace dionsim::bench {

inline sim::KernelCalibration seed_calibration() {
  const std::string path = std::string(DIONSIM_SOURCE_DIR) + "/docs/calibration-seed-h100.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str());
  std::map<std::string, double> parameters;
  for (const auto& [key, p] : doc.at("parameters").items()) parameters[key] = p.at("value").get<double>();
  return analysis::kernel_calibration_from_parameters(doc.at("name").get<std::string>(),
                                                 doc.at("hardware").get<std::string>(), parameters,
                                                 sim::hardware_preset("h100-sxm", "bench"));
}

// The all-to-all calibration of sim/whatif.cpp: the fabric's time / efficiency + latency.
class CalibratedTimer final : public sim::CollectiveTimer {
 public:
  CalibratedTimer(const sim::WhatifConfig& c)
      : fabric_(c.fabric, c.nodes, c.gpus_per_node, c.alltoall_algbw_GBps),
        efficiency_(c.nodes > 1 ? c.alltoall_inter_efficiency : c.alltoall_intra_efficiency),
        latency_ns_(std::llround(c.alltoall_latency_us * 1e3)) {}
  [[nodiscard]] sim::DurationNs time_ns(const sim::CollectiveRequest& request) const override {
    const sim::DurationNs t = fabric_.time_ns(request);
    if (request.kind != sim::StepCollective::all_to_all) return t;
    return static_cast<sim::DurationNs>(std::llround(static_cast<double>(t) / efficiency_)) + latency_ns_;
  }

 private:
  sim::FabricCollectiveTimer fabric_;
  double efficiency_;
  sim::DurationNs latency_ns_;
};

struct CalibratedStep {
  opt::Plan plan;
  std::unique_ptr<sim::KernelModel> kernels;
  std::unique_ptr<CalibratedTimer> timer;
  sim::StepProgramOptions options;
};

// hbm_slowdown: StepProgramOptions::collective_hbm_slowdown (whatif applies it on one node only).
inline CalibratedStep calibrated_step(const sim::KernelCalibration& cal, opt::Scope scope, int nodes, int gpus_per_node,
                                      double hbm_slowdown, bool host_ahead) {
  sim::WhatifConfig c;
  c.model = "seed-5120x8";
  c.plan.optimizer = opt::OptimizerKind::nordion2;
  c.plan.ns = opt::NsKind::gram;
  c.plan.scope = scope;
  c.plan.fraction = 0.25;
  c.fabric = topo::preset("h100-ndr400");
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  sim::apply_step_calibration(cal.step, c);
  CalibratedStep s;
  s.plan = opt::make_plan(opt::seed_5120x8(), c.plan_config());
  s.kernels = std::make_unique<sim::KernelModel>(cal.config, cal.measured);
  s.timer = std::make_unique<CalibratedTimer>(c);
  s.options.host_launch_us = c.host_launch_us;
  s.options.host_ahead = host_ahead;
  s.options.collective_hbm_slowdown = hbm_slowdown;
  return s;
}

}  // namespace dionsim::bench
