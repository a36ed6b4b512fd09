#pragma once
// aws-ofi-nccl's region tuner: on AWS p5 / p5e / p5en / p6-b200 / p6-b300 the EFA net plugin also carries a NCCL tuner
// plugin, which NCCL >= 2.21 loads from the net plugin by default (aws-ofi-nccl src/Makefile.am:
// "By bundling the tuner in the net plugin, we cause the tuner to be used by default on NCCL 2.21
// or later"). For a communicator of more than two nodes it overrides NCCL's (algorithm, protocol)
// choice by regions of the (message bytes, ranks) plane that AWS measured, checked in order in
// log2 coordinates, a point on a region's edge counting as inside; outside every region, at <= 2
// nodes, or with NCCL_ALGO / NCCL_PROTO set it leaves NCCL's own choice.
//
// Written from the region tables of aws-ofi-nccl src/tuner/nccl_ofi_regions.cpp (commit
// 2daf7d3, 2026-08): p5 / p5e all-reduce, p5en, p6-b200 and p6-b300 all-reduce, all-gather
// and reduce-scatter at 8 GPUs per node (the presets' shape). Other shapes (1 or 2 GPUs per node) have their own tables
// that dionsim does not carry: NCCL's choice is kept there, and the docs say so.
#include <cstdint>
#include <functional>
#include <optional>

#include "sim/nccl_tuning.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

using topo::TunerPlugin;

struct TunerPick {
  NcclAlgo algo = NcclAlgo::ring;
  NcclProto proto = NcclProto::simple;
};

// The plugin's pick for one call of `bytes` (NCCL's nBytes: the nccl-tests size) on `nodes`
// NCCL nodes of `ranks_per_node`; `enabled` says which pairs NCCL enables (a region whose pair is
// disabled is skipped, as the tuner skips NCCL_ALGO_PROTO_IGNORE entries). nullopt: NCCL's own
// choice stands.
[[nodiscard]] std::optional<TunerPick> tuner_plugin_pick(TunerPlugin plugin, NcclFunc f, int nodes,
                                                         int ranks_per_node, std::int64_t bytes,
                                                         const std::function<bool(NcclAlgo, NcclProto)>& enabled);

}  // namespace dionsim::sim
