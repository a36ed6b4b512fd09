#include "sim/whatif_metrics.hpp"

namespace dionsim::sim {

namespace {

using M = std::optional<double>;
using R = const WhatifResult&;

const std::vector<WhatifMetric> kMetrics = {
    {"step_wall_ms", "ms", [](R r) -> M { return ns_to_ms(r.step_wall_ns); }},
    {"opt_wall_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt_wall_seen_ns()); }},
    {"opt_critical_path_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.wall_ns); }},
    {"opt_comm_window_ms", "ms", [](R r) -> M { return ns_to_ms(r.comm_window_seen_ns()); }},
    {"opt_gpu_idle_comm_window_pct", "pct", [](R r) -> M { return r.gpu_idle_comm_window_pct(); }},
    {"opt_cpu_span_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.host_issue_ns); }},
    {"rank_wait_ms", "ms", [](R r) -> M { return ns_to_ms(r.rank_wait_ns); }},
    {"opt_gpu_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.gpu_busy_ns); }},
    {"opt_gpu_idle_pct", "pct", [](R r) -> M { return r.gpu_idle_seen_pct(); }},
    {"ns_gemm_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.ns_gemm_ns); }},
    {"non_gemm_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.non_gemm_ns); }},
    {"a2a_ms", "ms", [](R r) -> M { return ns_to_ms(r.a2a_seen_ns()); }},
    {"a2a_payload_bytes", "bytes", [](R r) -> M { return static_cast<double>(r.plan.a2a_payload_bytes); }, MetricOutput::integer},
    // The measurement CSV's unit (MB = 1e6 B): what calibration compares with a2a_payload_MB.
    {"a2a_payload_MB", "MB", [](R r) -> M { return static_cast<double>(r.opt.a2a_bytes) / 1e6; }, MetricOutput::not_printed},
    {"norms_allgather_bytes", "bytes", [](R r) -> M { return static_cast<double>(r.plan.norms_allgather_bytes); }, MetricOutput::integer},
    {"norms_allgather_ms", "ms", [](R r) -> M { return ns_to_ms(r.allgather_seen_ns()); }},
    {"opt_exposed_comm_ms", "ms", [](R r) -> M { return ns_to_ms(r.opt.exposed_comm_ns); }},
    {"exposed_comm_ms", "ms", [](R r) -> M { return ns_to_ms(r.exposed_comm_ns); }},
    {"fwd_bwd_ms", "ms", [](R r) -> M { return ns_to_ms(r.fwd_bwd.wall_ns); }},
    {"fwd_bwd_compute_ms", "ms", [](R r) -> M { return ns_to_ms(r.fwd_bwd.compute_ns); }},
    {"fsdp_comm_ms", "ms", [](R r) -> M { return ns_to_ms(r.fwd_bwd.fsdp_comm_ns); }},
    {"fsdp_exposed_ms", "ms", [](R r) -> M { return ns_to_ms(r.fwd_bwd.fsdp_exposed_ns); }},
    {"replica_reduce_ms", "ms", [](R r) -> M { return ns_to_ms(r.fwd_bwd.replica_reduce_ns); }},
    {"fsdp_layers", "", [](R r) -> M { return static_cast<double>(r.layers); }, MetricOutput::integer},
    {"mfu_pct", "pct", [](R r) -> M { return r.mfu_pct; }},
    // A fraction (issue 19; before it: deferral_pct, in percent, whatif's own formula — a stored
    // run of that name is read as deferral_fraction = deferral_pct / 100, docs/database.md).
    {"deferral_fraction", "", [](R r) -> M { return r.deferral_fraction; }},
    {"groups_packed", "", [](R r) -> M { return static_cast<double>(r.routing.packed); }, MetricOutput::integer},
    {"groups_exact_global", "", [](R r) -> M { return static_cast<double>(r.routing.exact_global); }, MetricOutput::integer},
    {"groups_local", "", [](R r) -> M { return static_cast<double>(r.routing.local); }, MetricOutput::integer},
    {"groups_unsharded", "", [](R r) -> M { return static_cast<double>(r.routing.unsharded); }, MetricOutput::integer},
    {"capacity_factor_resolved_min", "", [](R r) -> M { return r.routing.capacity_factor_min; }},
    {"capacity_factor_resolved_max", "", [](R r) -> M { return r.routing.capacity_factor_max; }},
    {"opt_kernel_launches", "", [](R r) -> M { return static_cast<double>(r.opt.launches); }, MetricOutput::integer},
    {"opt_collectives", "", [](R r) -> M { return static_cast<double>(r.opt.collectives); }, MetricOutput::integer},
    {"params", "", [](R r) -> M { return static_cast<double>(r.params); }, MetricOutput::integer},
};

}  // namespace

const std::vector<WhatifMetric>& whatif_metrics() { return kMetrics; }

std::optional<double> metric_value(const WhatifResult& result, std::string_view name) {
  for (const auto& m : kMetrics) {
    if (m.name == name) return m.read(result);
  }
  return std::nullopt;
}

}  // namespace dionsim::sim
