#pragma once
// CPU reference Dion2 / NorDion2 step over a simulated world of W ranks in one process (spec §2–4).
// Each rank holds only its FSDP2 row shard (or, unsharded, a full replica); the norm all-gather and
// the all-to-alls move real bytes between ranks through SimTransport, whose byte counts equal the
// plan's. Rounding follows spec §2.10 (bf16 wire rows and NS, momentum/param dtype writes).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "optimizer/plan.hpp"
#include "optimizer/transport.hpp"

namespace dionsim::opt {

enum class AdjustLr { none, spectral_norm, rms_norm };

struct StepConfig {
  // The plan's inputs (optimizer, scope, world, fraction, capacity factor, NS variant, FSDP row
  // shards or DDP replicas). Its dtype bytes are not read: `dtype` below sets them (plan_config()).
  PlanConfig plan;
  double lr = 0.01;
  double ef = 0.95;            // Dion2 ef_decay, NorDion2 mu
  double weight_decay = 0.01;
  AdjustLr adjust_lr = AdjustLr::spectral_norm;
  double muon_beta2 = 0.95;    // NorDion2 only
  double epsilon = 1e-8;       // NS normalization epsilon
  Dtype dtype = Dtype::float32;  // parameter = momentum dtype (§1.2)
  int threads = 2;             // worker threads for independent matrices (results do not depend on it)
  // `plan` with the dtype's bytes: what the step's plan is made from.
  [[nodiscard]] PlanConfig plan_config() const;
};

struct ParamSpec {
  std::string name;
  std::int64_t rows = 0, cols = 0;
};

// CAPPED_STATS of one rank for one step (§4.10); packed = a packed megabatch ran on this step.
struct RankStepStats {
  std::int64_t deferred_rows = 0;
  std::int64_t winner_rows = 0;
  bool packed = false;
};

class ReferenceOptimizer {
 public:
  // initial[i]: full row-major [rows, cols] fp32 matrix of param i (sharded by rows internally).
  ReferenceOptimizer(const StepConfig& config, std::vector<ParamSpec> params,
                     const std::vector<std::vector<float>>& initial);
  ~ReferenceOptimizer();
  ReferenceOptimizer(const ReferenceOptimizer&) = delete;
  ReferenceOptimizer& operator=(const ReferenceOptimizer&) = delete;

  // One optimizer step; grads[i] full [rows, cols] fp32 (each rank takes its own rows, as after
  // FSDP2's reduce-scatter).
  void step(const std::vector<std::vector<float>>& grads);

  [[nodiscard]] std::vector<float> weight(std::size_t param) const;    // gathered full matrix
  [[nodiscard]] std::vector<float> momentum(std::size_t param) const;  // gathered full matrix
  [[nodiscard]] const std::vector<std::vector<RankStepStats>>& stats() const;  // [rank][step]
  [[nodiscard]] const std::vector<CollectiveRecord>& last_collectives() const;  // of the last step
  [[nodiscard]] const std::vector<GroupPlan>& groups() const;                   // plan per shape group
  [[nodiscard]] const std::vector<std::vector<std::size_t>>& group_params() const;  // param indices per group
  // Rows (global indices) whose weights received an update in the last step, per param.
  [[nodiscard]] const std::vector<std::vector<std::int64_t>>& last_applied_rows() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dionsim::opt
