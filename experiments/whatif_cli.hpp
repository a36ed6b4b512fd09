#pragma once
// The options `whatif` and `recommend` share — model, optimizer, cluster (nodes, GPUs, fabric),
// compute, calibration, deferral estimate — and what they resolve to: one parser for both, so the
// two subcommands cannot drift apart. Each subcommand adds its own options beside these.
#include <cstdint>
#include <optional>
#include <string>

#include "analysis/calibration/intervals.hpp"
#include "analysis/store/store.hpp"
#include "experiments/cli.hpp"
#include "optimizer/inventory.hpp"
#include "sim/kernel_model.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::cli {

// The command line as given (defaults preset by the caller before add_whatif_options: they become
// the options' shown defaults).
struct WhatifCli {
  sim::WhatifOptions options;
  std::string hardware = "h100-sxm", calibration;
  std::int64_t layers = 0;
  analysis::IntervalOptions intervals;  // --fabric-spread
  // The subcommand always simulates gradient dynamics (recommend: the selection quality), so
  // --norms and --steps always apply; else only with --deferral-estimate simulated.
  bool dynamics_always = false;
};
void add_whatif_options(po::options_description& options, WhatifCli& cli);

// The resolved study: validated options, the calibration applied, the inventory, the kernel model,
// and the database (--db) when given (opened before any work: a refused file exits 4 first).
// A replayed gradient stream (--norms replay:DB) is loaded here too.
struct WhatifSetup {
  sim::WhatifStudy study;
  opt::Inventory inventory;
  sim::KernelCalibration calibration;
  std::optional<analysis::Database> db;
  std::optional<sim::KernelModel> kernels;
  // The 90 % intervals of these predictions (analysis/calibration/intervals.hpp): the calibration's
  // covariance and model-form error, priors for what it does not hold; the command line's own
  // step values are inputs, not uncertain.
  std::optional<analysis::IntervalModel> intervals;
};
[[nodiscard]] WhatifSetup resolve_whatif(WhatifCli& cli, const Command& cmd);

// The study's configurations with the calibration's fabric-scoped values on its own fabric only;
// each other fabric of the sweep is named once on stderr (sim::apply_fabric_calibration).
[[nodiscard]] std::vector<sim::WhatifConfig> expand_calibrated(const WhatifSetup& setup, const CommonOptions& common);

// Prints each note once on stderr ("dionsim: warning: ..."), --quiet or not: a configuration that
// is not what its scope says is a result, not a log line.
void warn_degenerate(const std::vector<std::string>& notes);

}  // namespace dionsim::cli
