#pragma once
// Readers for the measured inputs in ../shared/data: the long-form measurement CSV
// (seed-measurements.csv: one metric per row) and the H200 anchor table (h200-anchors.csv: GEMM
// throughput, NCCL bus bandwidth, reference optimizer step times). Both are validated completely
// before anything uses them; every error names `file:line: column`.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim::analysis {

// ---- measurement CSV ----------------------------------------------------------------------------

// Columns, in the order of DESIGN.md "Measurement CSV" (any order is accepted when reading).
[[nodiscard]] const std::vector<std::string>& measurement_columns();

// A metric the CSV may carry and the unit it must be given in.
struct MetricInfo {
  std::string_view name;
  std::string_view unit;
  std::string_view meaning;
};
[[nodiscard]] const std::vector<MetricInfo>& known_metrics();
[[nodiscard]] const MetricInfo* find_metric(std::string_view name);

// Everything that identifies one measured configuration (all columns except metric/value/unit/notes).
struct MeasurementConfig {
  std::string source;
  std::string run;
  std::string hardware;
  int gpus_per_node = 0;
  int nodes = 0;
  int world = 0;  // = gpus_per_node · nodes (checked)
  std::string model;
  std::string optimizer;                  // "dion2" | "nordion2" (lower-cased)
  std::string ns;                         // Newton–Schulz variant, lower case ("gram", "gram+triton", …): NsVariant
  std::string scope;                      // local | global | global_capped
  double fraction = 0;                    // (0, 1]
  std::optional<double> capacity_factor;  // nullopt = "auto"

  [[nodiscard]] std::string label() const;  // "run/model/optimizer/scope/f=0.25/w=8"
  auto operator<=>(const MeasurementConfig&) const = default;
};

// The Newton–Schulz variant of a run: its numerics (what the plan's FLOP model and the CPU
// reference compute: polar_express, newton_schulz5 or gram — opt::NsKind, optimizer/plan.hpp) and,
// after a '+', the implementation that ran them ("triton": the reference's Triton kernels). The
// variant is a key of the configuration: one numerics with another implementation has the same
// FLOPs but its own kernel rates (docs/calibration.md, "NS variants").
struct NsVariant {
  std::string numerics;        // polar_express | newton_schulz5 | gram
  std::string implementation;  // "" (the numerics' default kernels) or a tag: [a-z0-9_]+, e.g. "triton"
  [[nodiscard]] std::string text() const { return implementation.empty() ? numerics : numerics + "+" + implementation; }
};
// Case-insensitive "<numerics>[+<implementation>]". InputError naming `where` and the field `ns`.
[[nodiscard]] NsVariant parse_ns_variant(std::string_view text, const std::string& where);

struct MeasurementRow {
  MeasurementConfig config;
  std::string metric;
  double value = 0;
  std::string unit;
  std::string notes;
  int line = 0;  // 1-based line in the file (header = 1)
};

// Reads and validates the whole file. InputError on a missing or unknown column, an unknown
// metric, a unit that does not match the metric, a non-numeric or out-of-range value, a world
// that is not gpus_per_node · nodes, or a metric given twice for one configuration.
[[nodiscard]] std::vector<MeasurementRow> read_measurement_csv(const std::filesystem::path& path);
[[nodiscard]] std::vector<MeasurementRow> parse_measurement_csv(const std::string& text, const std::string& source);

// One configuration with all its metrics (name → value in the metric's unit).
struct MeasuredConfiguration {
  MeasurementConfig config;
  std::map<std::string, double> metrics;
  std::string notes;  // of its first row
  int first_line = 0;
};
// Groups rows by their full configuration (ns included), in order of first appearance.
[[nodiscard]] std::vector<MeasuredConfiguration> group_configurations(const std::vector<MeasurementRow>& rows);
// The configuration's columns ("capacity_factor": null for auto) plus "metrics": {name: value}.
[[nodiscard]] nlohmann::json to_json(const MeasuredConfiguration& configuration);

// ---- H200 anchors -------------------------------------------------------------------------------

struct GemmAnchor {
  std::int64_t m = 0, n = 0, k = 0;  // shape as written "MxNxK"
  double tflops = 0;                 // measured bf16 TFLOP/s
  int line = 0;
  [[nodiscard]] double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  [[nodiscard]] double time_us() const { return flops() / (tflops * 1e12) * 1e6; }
};

// nccl-tests conventions: size = bytes per rank, busbw = algbw · (n−1)/n, algbw = size / time.
struct CollectiveAnchor {
  std::string op;  // all_to_all | all_gather
  int world = 0;
  std::int64_t bytes = 0;
  double busbw_GBps = 0;
  int line = 0;
  [[nodiscard]] double algbw_GBps() const { return busbw_GBps * world / (world - 1.0); }
  [[nodiscard]] double time_us() const { return static_cast<double>(bytes) / (algbw_GBps() * 1e9) * 1e6; }
};

struct ReferenceStepAnchor {
  std::string optimizer;  // dion2 | nordion2
  int world = 0;
  std::string model;
  std::string scope;
  double fraction = 0;
  double opt_step_ms = 0;
  bool compiled = false;  // torch.compile on (from the notes: "(compiled…" vs "(eager…")
  std::string notes;
  int line = 0;
};

struct Anchors {
  std::vector<GemmAnchor> gemm;
  std::vector<CollectiveAnchor> collectives;
  std::vector<ReferenceStepAnchor> reference_steps;
  std::vector<std::string> notes;  // rows without a value (documented failures)
};

[[nodiscard]] Anchors read_anchors_csv(const std::filesystem::path& path);
[[nodiscard]] Anchors parse_anchors_csv(const std::string& text, const std::string& source);

// ---- nccl-tests output --------------------------------------------------------------------------

// One "# Collective test starting: <name>_perf" block of nccl-tests stdout (a log may hold several).
struct NcclTestsRow {
  std::int64_t bytes = 0;  // "size": bytes per rank
  std::int64_t count = 0;  // elements
  std::string type;        // float, bfloat16, …
  double time_us = 0;      // out-of-place
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double in_place_time_us = 0;
  int line = 0;
};
struct NcclTestsRun {
  std::string program;  // e.g. alltoall_perf
  std::string op;       // all_to_all | all_gather | all_reduce | reduce_scatter | broadcast | reduce | send_recv | …
  int world = 0;        // "#  Rank N …" lines
  int nodes = 0;        // distinct host names on those lines
  std::string device;   // GPU name on the first rank line ("NVIDIA H100 80GB HBM3")
  std::vector<NcclTestsRow> rows;
  int line = 0;  // of the "Collective test starting" line
  // NCCL's own report of its environment in an NCCL_DEBUG=INFO log ("NCCL INFO NCCL_ALGO set by
  // environment to Ring"): variable -> value, the last line of the block for each.
  std::map<std::string, std::string> env;
  // The NCCL library that ran the block, "2.29.2": nccl-tests' banner ("nccl-library=22902",
  // from the last banner before the block) or NCCL's own "NCCL version 2.29.2+cuda13.1" line
  // inside it; empty when the log has neither.
  std::string nccl_version;
};
// "2.29.2" -> 22902 (NCCL_VERSION_CODE), 0 for anything else.
[[nodiscard]] int nccl_version_code(const std::string& version);
// Parses every block; lines that are neither nccl-tests comments nor data rows (mpirun noise,
// "NCCL version …") are skipped. InputError naming file:line for a data row that does not parse,
// and when no block with rows is found.
[[nodiscard]] std::vector<NcclTestsRun> parse_nccl_tests_output(const std::string& text, const std::string& source);
[[nodiscard]] std::vector<NcclTestsRun> read_nccl_tests_output(const std::filesystem::path& path);
// {"program", "op", "world", "nodes", "device", "rows": [{"bytes", "time_us", "algbw_GBps", "busbw_GBps"}]},
// "env" (NCCL's reported variables) and "nccl_version" when the log has them.
[[nodiscard]] nlohmann::json to_json(const NcclTestsRun& run);
// True when `text` looks like nccl-tests stdout (has its banner or its table header).
[[nodiscard]] bool looks_like_nccl_tests(const std::string& text);

}  // namespace dionsim::analysis
