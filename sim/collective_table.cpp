#include "sim/collective_table.hpp"

#include <iomanip>
#include <sstream>

namespace dionsim::sim {

namespace {
const char* const kType = "bf16";  // 2-byte elements: what Dion2's all-to-all moves
}

CollectiveRow collective_row(const CollectiveSpec& spec, const CollectiveResult& r, int ranks) {
  CollectiveRow row;
  row.bytes = spec.bytes;
  row.time_us = r.time.to_us();
  row.algbw_GBps = row.time_us > 0 ? static_cast<double>(spec.bytes) / (row.time_us * 1e-6) / 1e9 : 0.0;
  row.busbw_GBps = row.algbw_GBps * bus_factor(spec.op, ranks);
  return row;
}

nlohmann::json collective_config_json(const CollectiveSpec& spec, const std::string& mode, std::int64_t nodes,
                                      std::int64_t gpus_per_node, const topo::Topology& topology,
                                      const topo::FabricSpec& fabric) {
  return {{"op", to_string(spec.op)}, {"algorithm", to_string(spec.algorithm)}, {"mode", mode},
          {"nodes", nodes}, {"gpus_per_node", gpus_per_node}, {"ranks", topology.ranks()}, {"fabric", fabric.name},
          {"nvlink_GBps", fabric.nvlink_GBps}, {"nvlink_latency_us", fabric.nvlink_latency_us},
          {"nvlink_efficiency", fabric.nvlink_efficiency}, {"nic_GBps", fabric.nic_GBps},
          {"nic_latency_us", fabric.nic_latency_us}, {"net_step_latency_us", fabric.net_step_latency_us},
          {"nic_efficiency", fabric.nic_efficiency},
          {"layout", topo::to_string(fabric.layout)}, {"leaf_radix", fabric.leaf_radix},
          {"oversubscription", fabric.oversubscription}, {"nvls_multicast", fabric.nvls_multicast}};
}

std::string collective_table_header(const CollectiveSpec& spec, const std::string& mode, std::int64_t nodes,
                                    std::int64_t gpus_per_node, const topo::Topology& topology,
                                    const topo::FabricSpec& fabric, bool model, bool nccl) {
  std::ostringstream out;
  out << "#\n#  " << to_string(spec.op) << " (" << (model ? "collective model" : to_string(spec.algorithm)) << "), "
      << nodes << " x "
      << gpus_per_node << " = " << topology.ranks() << " ranks, fabric " << fabric.name << ", mode " << mode
      << "\n#\n"
      << "#" << std::setw(14) << "size" << std::setw(13) << "count" << std::setw(7) << "type" << std::setw(7)
      << "redop" << std::setw(6) << "root" << std::setw(11) << "time" << std::setw(9) << "algbw" << std::setw(9)
      << "busbw"
      << "  #wrong";
  if (model) out << "  algo/proto";
  if (nccl) out << "  nccl_time  nccl_algo/proto";
  out << "\n#" << std::setw(14) << "(B)" << std::setw(13) << "(elements)" << std::setw(31) << "(us)" << std::setw(9)
      << "(GB/s)" << std::setw(9) << "(GB/s)";
  if (nccl) out << std::setw(22) << "(us)";
  out << '\n';
  return out.str();
}

std::string collective_table_row(CollectiveOp op, const CollectiveRow& row, const CollectiveCost* cost, bool nccl) {
  std::ostringstream out;
  out << std::setw(15) << row.bytes << std::setw(13) << row.bytes / 2 << std::setw(7) << kType << std::setw(7)
      << (op == CollectiveOp::reducescatter ? "sum" : "none") << std::setw(6) << -1 << std::fixed
      << std::setprecision(2) << std::setw(11) << row.time_us << std::setw(9) << row.algbw_GBps << std::setw(9)
      << row.busbw_GBps << std::setw(8) << "N/A";
  if (cost) out << "  " << std::setw(10) << (cost->algorithm + "/" + cost->protocol);
  if (cost && nccl) {
    if (cost->nccl) {
      out << std::setw(11) << cost->nccl->time_us << "  " << to_string(cost->nccl->algo) << "/"
          << to_string(cost->nccl->proto);
    } else {
      out << std::setw(11) << "N/A" << "  (NCCL's model has no all-to-all)";
    }
  }
  out << '\n';
  return out.str();
}

nlohmann::json collective_json_row(const nlohmann::json& config, const CollectiveRow& row, const CollectiveResult& r,
                                   const CollectiveCost* cost) {
  nlohmann::json out = config;
  out.update({{"size_bytes", row.bytes}, {"count", row.bytes / 2}, {"type", kType}, {"time_us", row.time_us},
              {"algbw_GBps", row.algbw_GBps}, {"busbw_GBps", row.busbw_GBps}, {"used_symmetry", r.used_symmetry},
              {"messages", r.messages}});
  if (cost) {
    out.update({{"nccl_algorithm_used", cost->algorithm}, {"nccl_protocol_used", cost->protocol},
                {"latency_us", cost->latency_us}});
    if (!cost->chosen_by.empty()) out["chosen_by"] = cost->chosen_by;
    if (cost->nccl) {
      out.update({{"nccl_model_time_us", cost->nccl->time_us}, {"nccl_model_algorithm", to_string(cost->nccl->algo)},
                  {"nccl_model_protocol", to_string(cost->nccl->proto)}});
    } else {
      out["nccl_model_time_us"] = nullptr;
    }
  }
  return out;
}

}  // namespace dionsim::sim
