#pragma once
// The numeric metrics of a what-if result, in one table: name (the --json key, the stored metric,
// the calibration's predicted metric), unit, and how to read it from the result. metrics_json
// prints them; the calibration reads its predictions through metric_value, with no JSON between.
#include <optional>
#include <string_view>
#include <vector>

#include "sim/whatif.hpp"

namespace dionsim::sim {

// How metrics_json prints a metric: a number, an integer (bytes, counts), or not at all (a
// metric only the calibration compares, in the measurement CSV's unit).
enum class MetricOutput { real, integer, not_printed };

struct WhatifMetric {
  std::string_view name;
  std::string_view unit;  // "ms", "bytes", "pct", "MB", "" (a count or a ratio)
  std::optional<double> (*read)(const WhatifResult& result);  // nullopt: not defined for this result
  MetricOutput output = MetricOutput::real;
};

[[nodiscard]] const std::vector<WhatifMetric>& whatif_metrics();
// The metric of that name, or nullopt (an unknown name, or a metric the result does not define).
[[nodiscard]] std::optional<double> metric_value(const WhatifResult& result, std::string_view name);

}  // namespace dionsim::sim
