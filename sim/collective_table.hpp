#pragma once
// Output of a simulated collective sweep (`dionsim collective`), nccl-tests style: the
// configuration a run is identified by, the fixed-width table (lines end in '\n') and the
// per-size numbers (size = bytes of each rank's buffer, 2-byte bf16 elements, GB = 1e9).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/collective_model.hpp"
#include "sim/collectives.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

// One size of the sweep: time and nccl-tests algbw = bytes/time, busbw = algbw · bus_factor.
struct CollectiveRow {
  std::int64_t bytes = 0;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};
[[nodiscard]] CollectiveRow collective_row(const CollectiveSpec& spec, const CollectiveResult& r, int ranks);

// The configuration of a sweep (without the size): op, algorithm, mode, shape and every fabric field.
[[nodiscard]] nlohmann::json collective_config_json(const CollectiveSpec& spec, const std::string& mode,
                                                    std::int64_t nodes, std::int64_t gpus_per_node,
                                                    const topo::Topology& topology, const topo::FabricSpec& fabric);

// The table's title and column header lines, and one row.
// With the collective model (`model`) the rows end in the algorithm/protocol it chose and, with
// `nccl`, NCCL's own tuning-model time and choice.
[[nodiscard]] std::string collective_table_header(const CollectiveSpec& spec, const std::string& mode,
                                                  std::int64_t nodes, std::int64_t gpus_per_node,
                                                  const topo::Topology& topology, const topo::FabricSpec& fabric,
                                                  bool model = false, bool nccl = false);
[[nodiscard]] std::string collective_table_row(CollectiveOp op, const CollectiveRow& row,
                                               const CollectiveCost* cost = nullptr, bool nccl = false);

// The --json row: the configuration, the row's numbers, whether symmetry was used, message count.
[[nodiscard]] nlohmann::json collective_json_row(const nlohmann::json& config, const CollectiveRow& row,
                                                 const CollectiveResult& r, const CollectiveCost* cost = nullptr);

}  // namespace dionsim::sim
