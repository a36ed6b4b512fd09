#include "analysis/measured/measurements.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "common/csv.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

std::string read_text(const std::filesystem::path& path) {
  return read_input_file(path.string(), "a measurement file");
}

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

// Maps header names to column indices; every expected column must be there and nothing else.
class Header {
 public:
  Header(const CsvRecord& record, const std::vector<std::string>& expected, const std::string& source) {
    const std::string where = source + ":" + std::to_string(record.line);
    for (std::size_t i = 0; i < record.fields.size(); ++i) {
      const std::string name = trim(record.fields[i]);
      if (std::find(expected.begin(), expected.end(), name) == expected.end()) {
        throw_bad_input(where, "header", name, "one of the columns " + join(expected));
      }
      if (index_.count(name) != 0) {
        throw_bad_input(where, "header", name, "each column once");
      }
      index_[name] = i;
    }
    for (const auto& name : expected) {
      if (index_.count(name) == 0) {
        throw_bad_input(where, "header", join_fields(record),
                        "the column '" + name + "' (columns: " + join(expected) + ")");
      }
    }
    width_ = record.fields.size();
  }
  [[nodiscard]] const std::string& get(const CsvRecord& r, const std::string& column) const {
    return r.fields[index_.at(column)];
  }
  [[nodiscard]] std::size_t width() const { return width_; }

  static std::string join(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
  }

 private:
  static std::string join_fields(const CsvRecord& r) { return join(r.fields); }
  std::map<std::string, std::size_t> index_;
  std::size_t width_ = 0;
};

// Typed field access with `file:line: column: got 'X', expected Y` errors.
class Fields {
 public:
  Fields(const Header& header, const CsvRecord& record, const std::string& source)
      : header_(header), record_(record), where_(source + ":" + std::to_string(record.line)) {
    if (record.fields.size() != header.width()) {
      throw_bad_input(where_, "row", std::to_string(record.fields.size()) + " fields",
                      std::to_string(header.width()) + " fields like the header");
    }
  }
  [[nodiscard]] std::string text(const std::string& column) const { return trim(header_.get(record_, column)); }
  [[nodiscard]] std::string nonempty(const std::string& column) const {
    std::string t = text(column);
    if (t.empty()) throw_bad_input(where_, column, t, "a non-empty value");
    return t;
  }
  [[nodiscard]] double number(const std::string& column) const {
    const std::string t = text(column);
    const std::optional<double> value = to_number(t);  // the one number rule (common/parse.hpp)
    if (!value) throw_bad_input(where_, column, t, "a number");
    return *value;
  }
  // Bounded above too: a count of 2^31 became a negative int (and world = gpus_per_node x nodes overflowed).
  [[nodiscard]] std::int64_t integer(const std::string& column, std::int64_t min_value, std::int64_t max_value) const {
    const std::string t = text(column);
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || value < min_value || value > max_value) {
      throw_bad_input(where_, column, t,
                      "an integer in [" + std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
    }
    return value;
  }
  [[nodiscard]] double fraction(const std::string& column) const {
    const double f = number(column);
    if (!(f > 0.0 && f <= 1.0)) throw_bad_input(where_, column, text(column), "a fraction in (0, 1]");
    return f;
  }
  [[nodiscard]] std::string scope(const std::string& column) const {
    const std::string s = text(column);
    if (s != "local" && s != "global" && s != "global_capped") {
      throw_bad_input(where_, column, s, "local, global or global_capped");
    }
    return s;
  }
  [[nodiscard]] std::string optimizer(const std::string& column) const {
    const std::string o = lower(text(column));
    if (o != "dion2" && o != "nordion2") throw_bad_input(where_, column, text(column), "Dion2 or NorDion2");
    return o;
  }
  [[nodiscard]] const std::string& where() const { return where_; }

 private:
  const Header& header_;
  const CsvRecord& record_;
  std::string where_;
};


}  // namespace

// ---- nccl-tests output --------------------------------------------------------------------------

namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool all_digits(const std::string& t) {
  return !t.empty() && std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// "alltoall_perf" → "all_to_all"; the names nccl-tests builds (src/*.cu).
std::string op_of_program(const std::string& program) {
  static const std::map<std::string, std::string> ops = {
      {"alltoall_perf", "all_to_all"},   {"all_gather_perf", "all_gather"},
      {"all_reduce_perf", "all_reduce"}, {"reduce_scatter_perf", "reduce_scatter"},
      {"broadcast_perf", "broadcast"},   {"reduce_perf", "reduce"},
      {"sendrecv_perf", "send_recv"},    {"gather_perf", "gather"},
      {"scatter_perf", "scatter"},       {"hypercube_perf", "hypercube"}};
  const std::string base = program.substr(program.find_last_of('/') + 1);
  const auto it = ops.find(base);
  return it == ops.end() ? base : it->second;
}

}  // namespace

bool looks_like_nccl_tests(const std::string& text) {
  return text.find("# Collective test starting:") != std::string::npos ||
         text.find("# nccl-tests version") != std::string::npos ||
         (text.find("#       size ") != std::string::npos && text.find("algbw") != std::string::npos);
}

int nccl_version_code(const std::string& version) {
  // Three dot-separated numbers of one or two digits; by hand, not std::regex: a log line can
  // be arbitrarily long and libstdc++'s regex recurses per character.
  int parts[3] = {0, 0, 0};
  std::size_t at = 0;
  for (int k = 0; k < 3; ++k) {
    std::size_t digits = 0;
    while (at < version.size() && std::isdigit(static_cast<unsigned char>(version[at])) && digits < 3) {
      parts[k] = parts[k] * 10 + (version[at++] - '0');
      ++digits;
    }
    if (digits == 0 || digits > 2) return 0;
    if (k < 2) {
      if (at >= version.size() || version[at] != '.') return 0;
      ++at;
    }
  }
  if (at != version.size()) return 0;
  return parts[0] * 10000 + parts[1] * 100 + parts[2];
}

namespace {

// NCCL_VERSION_CODE (>= 2.9: major * 10000 + minor * 100 + patch) as "2.29.2"; empty if it is none.
std::string nccl_version_of_code(const std::string& digits) {
  if (digits.size() != 5 || !all_digits(digits)) return {};
  const int code = std::stoi(digits);
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

// nccl-tests' names for its data types and reductions (src/common.cu test_typenames, test_opnames;
// "none" where the test reduces nothing).
bool is_nccl_tests_type(const std::string& word) {
  static const std::set<std::string> types = {"int8",  "uint8", "int32",    "uint32", "int64",  "uint64",
                                              "half",  "float", "double",   "bfloat16", "f8e4m3", "f8e5m2",
                                              "fp8_e4m3", "fp8_e5m2"};
  return types.count(word) > 0;
}
bool is_nccl_tests_redop(const std::string& word) {
  static const std::set<std::string> ops = {"sum", "prod", "max", "min", "avg", "mulsum", "none"};
  return ops.count(word) > 0;
}
}  // namespace

std::vector<NcclTestsRun> parse_nccl_tests_output(const std::string& text, const std::string& source) {
  std::vector<NcclTestsRun> runs;
  std::set<std::string> hosts;
  std::string banner_version;  // the last "# nccl-tests version … nccl-library=NNNNN" seen
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto current = [&]() -> NcclTestsRun& {
    if (runs.empty()) {  // output of an old nccl-tests without the banner: one anonymous block
      runs.emplace_back();
      runs.back().nccl_version = banner_version;
      runs.back().line = number;
      hosts.clear();
    }
    return runs.back();
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto t = tokens(line);
    if (t.empty()) continue;
    if (line.rfind("# nccl-tests version", 0) == 0) {
      // "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902": the library that ran.
      for (const auto& word : t)
        if (word.rfind("nccl-library=", 0) == 0) banner_version = nccl_version_of_code(word.substr(13));
    } else if (line.rfind("# Collective test starting:", 0) == 0 && t.size() >= 5) {
      runs.emplace_back();
      runs.back().nccl_version = banner_version;
      runs.back().program = t[4];
      runs.back().op = op_of_program(t[4]);
      runs.back().line = number;
      hosts.clear();
    } else if (t.size() >= 7 && t[0] == "#" && t[1] == "Rank" && t[3] == "Group") {
      // "#  Rank  1 Group  0 Pid   1001 on nodeA device  1 [0000:01:00] NVIDIA H100 80GB HBM3"
      const std::string where = source + ":" + std::to_string(number);
      const auto integer_after = [&](const char* label) {
        const auto at = std::find(t.begin(), t.end(), label);
        if (at != t.end() && std::next(at) != t.end() && !all_digits(*std::next(at))) {
          throw_bad_input(where, label, *std::next(at), "a non-negative integer (nccl-tests' rank line)");
        }
      };
      for (const char* label : {"Rank", "Group", "Pid", "device"}) integer_after(label);
      if (const auto open = line.find('['); open != std::string::npos) {
        const auto close = line.find(']', open);
        const std::string bus = line.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
        // cudaDeviceGetPCIBusId's domain:bus:device(.function), or an old nccl-tests' hex id.
        static const std::regex kBusId(
            "0x[0-9a-fA-F]{1,8}|[0-9a-fA-F]{4}([0-9a-fA-F]{4})?:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(\\.[0-9a-fA-F])?");
        if (close == std::string::npos || !std::regex_match(bus, kBusId)) {
          throw_bad_input(where, "bus id", bus, "a PCI bus id in brackets, e.g. [0000:01:00] or [0x18]");
        }
      }
      NcclTestsRun& run = current();
      ++run.world;
      const auto on = std::find(t.begin(), t.end(), "on");
      if (on != t.end() && std::next(on) != t.end() && hosts.insert(*std::next(on)).second) ++run.nodes;
      if (const auto bracket = line.find("] "); run.device.empty() && bracket != std::string::npos) {
        run.device = trim(line.substr(bracket + 2));
      }
    } else if (const auto said = line.find("NCCL version "); said != std::string::npos && t[0] != "#") {
      // NCCL's own line (rank 0, NCCL_DEBUG=VERSION or INFO): "... NCCL INFO NCCL version
      // 2.29.2+cuda13.1", or bare "NCCL version 2.29.2+cuda13.1".
      const std::size_t from = said + std::string_view("NCCL version ").size();
      const std::size_t to = std::min(line.find_first_of("+ \t", from), std::min(line.size(), from + 16));
      const std::string version = line.substr(from, to - from);
      if (nccl_version_code(version) > 0) current().nccl_version = version;
    } else if (const auto info = line.find(" NCCL INFO NCCL_"); info != std::string::npos) {
      // "<host>:<pid>:<tid> [<dev>] NCCL INFO NCCL_ALGO set by environment to Ring" (integer
      // parameters end in a period: "... to 0.").
      static const std::string kSet = " set by environment to ";
      const auto from = info + std::string_view(" NCCL INFO ").size();
      const auto set = line.find(kSet, from);
      if (set == std::string::npos) continue;
      const std::string key = trim(line.substr(from, set - from));
      std::string value = trim(line.substr(set + kSet.size()));
      if (!value.empty() && value.back() == '.') value.pop_back();
      if (!key.empty() && key.find(' ') == std::string::npos) current().env[key] = value;
    } else if (t[0][0] != '#' && t.size() >= 12 &&
               ((all_digits(t[0]) && all_digits(t[1])) || (is_nccl_tests_type(t[2]) && is_nccl_tests_redop(t[3])))) {
      // size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong. A line of
      // that shape (nccl-tests' type and reduction in their columns) is a result row even where
      // its size or count is damaged: refused, not skipped as noise.
      const std::size_t o = t.size() >= 13 ? 5 : 4;  // older versions print no root column
      const std::string where = source + ":" + std::to_string(number);
      if (!all_digits(t[0])) throw_bad_input(where, "size", t[0], "a byte count (digits only)");
      if (!all_digits(t[1])) throw_bad_input(where, "count", t[1], "an element count (digits only)");
      NcclTestsRow row;
      row.line = number;
      auto number_at = [&](std::size_t i, const char* column) {
        const std::optional<double> v = to_number(t[i]);  // the one number rule (common/parse.hpp)
        if (!v || *v < 0) throw_bad_input(where, column, t[i], "a non-negative number of at most 1e15");
        return *v;
      };
      row.bytes = static_cast<std::int64_t>(number_at(0, "size"));
      row.count = static_cast<std::int64_t>(number_at(1, "count"));
      row.type = t[2];
      row.time_us = number_at(o, "time");
      row.algbw_GBps = number_at(o + 1, "algbw");
      row.busbw_GBps = number_at(o + 2, "busbw");
      // The columns dionsim does not use are still nccl-tests' own: a root rank (-1 for none),
      // #wrong counts (or N/A), the in-place bandwidths.
      const auto check_count = [&](std::size_t i, const char* column, bool minus_one) {
        if (i >= t.size() || t[i] == "N/A" || all_digits(t[i]) || (minus_one && t[i] == "-1")) return;
        throw_bad_input(where, column, t[i], minus_one ? "a rank or -1" : "a count of wrong elements or N/A");
      };
      if (o == 5) check_count(4, "root", true);
      check_count(o + 3, "#wrong", false);
      if (t.size() > o + 4) row.in_place_time_us = number_at(o + 4, "in-place time");
      if (t.size() > o + 6) {
        (void)number_at(o + 5, "in-place algbw");
        (void)number_at(o + 6, "in-place busbw");
      }
      check_count(o + 7, "in-place #wrong", false);
      if (!(row.time_us > 0)) throw_bad_input(where, "time", t[o], "a positive time in us");
      current().rows.push_back(row);
    }
  }
  std::erase_if(runs, [](const NcclTestsRun& r) { return r.rows.empty(); });
  if (runs.empty()) {
    throw_bad_input(
        source, "content", "no nccl-tests result rows",
        "the stdout of an nccl-tests program (a table of size, count, type, redop, root, time, algbw, busbw)");
  }
  for (auto& run : runs) {
    if (run.op.empty())
      throw_bad_input(source + ":" + std::to_string(run.line), "collective", "(unknown)",
                      "a '# Collective test starting: <name>_perf' line (nccl-tests >= 2.17)");
  }
  return runs;
}

nlohmann::json to_json(const NcclTestsRun& run) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : run.rows) {
    rows.push_back(
        {{"bytes", r.bytes}, {"time_us", r.time_us}, {"algbw_GBps", r.algbw_GBps}, {"busbw_GBps", r.busbw_GBps}});
  }
  nlohmann::json out = {{"program", run.program}, {"op", run.op},         {"world", run.world},
                        {"nodes", run.nodes},     {"device", run.device}, {"rows", rows}};
  if (!run.env.empty()) out["env"] = run.env;
  if (!run.nccl_version.empty()) out["nccl_version"] = run.nccl_version;
  return out;
}

std::vector<NcclTestsRun> read_nccl_tests_output(const std::filesystem::path& path) {
  return parse_nccl_tests_output(read_text(path), path.string());
}

// ---- measurement CSV ----------------------------------------------------------------------------

const std::vector<std::string>& measurement_columns() {
  static const std::vector<std::string> columns = {
      "source", "run",   "hardware", "gpus_per_node",   "nodes",  "world", "model", "optimizer",
      "ns",     "scope", "fraction", "capacity_factor", "metric", "value", "unit",  "notes"};
  return columns;
}

const std::vector<MetricInfo>& known_metrics() {
  static const std::vector<MetricInfo> metrics = {
      {"step_wall_ms", "ms", "training step wall time"},
      {"step_gpu_ms", "ms", "training step time between CUDA events"},
      {"opt_step_ms", "ms", "optimizer.step() time"},
      {"opt_wall_ms", "ms", "optimizer step wall time"},
      {"opt_gpu_ms", "ms", "GPU busy time inside the optimizer step"},
      {"opt_gpu_window_ms", "ms", "first to last optimizer kernel on the GPU"},
      {"opt_stream_window_ms", "ms", "first to last optimizer collective on its NCCL stream"},
      {"opt_window_gemm_ms", "ms", "GEMM time inside the optimizer window"},
      {"opt_gpu_idle_pct", "%", "idle share of the optimizer GPU window"},
      {"ns_gemm_ms", "ms", "Newton-Schulz GEMM kernel time"},
      {"non_gemm_ms", "ms", "optimizer kernel time other than GEMMs and collectives"},
      {"a2a_ms", "ms", "optimizer all-to-all kernel time"},
      {"a2a_payload_MB", "MB", "optimizer all-to-all bytes sent per rank per step (1e6 B)"},
      {"a2a_effective_GBps", "GB/s", "payload / a2a time"},
      {"opt_cpu_span_ms", "ms", "host time of the optimizer step"},
      {"opt_kernel_launches", "count", "kernels launched per optimizer step"},
      {"mfu_pct", "%", "model FLOPs utilisation"},
      // written by `dionsim measure` (compared, not fitted)
      {"ns_tflops", "TFLOP/s", "Newton-Schulz throughput: nominal GEMM FLOPs / GEMM time"},
      {"winner_rows", "rows", "global_capped winners (summed over ranks and timed steps)"},
      {"deferred_rows", "rows", "global_capped winners deferred (summed over ranks and timed steps)"},
  };
  return metrics;
}

const MetricInfo* find_metric(std::string_view name) {
  for (const auto& m : known_metrics()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

NsVariant parse_ns_variant(std::string_view text, const std::string& where) {
  std::string lower;
  for (char ch : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  const auto plus = lower.find('+');
  NsVariant v{lower.substr(0, plus), plus == std::string::npos ? "" : lower.substr(plus + 1)};
  // The numerics of opt::NsKind (optimizer/plan.hpp), written out: this reader needs only common.
  static const char* const numerics[] = {"polar_express", "newton_schulz5", "gram"};
  const bool known = std::any_of(std::begin(numerics), std::end(numerics), [&](const char* n) { return v.numerics == n; });
  const bool tag_ok = plus == std::string::npos ||
                      (!v.implementation.empty() && v.implementation.size() <= 32 &&
                       std::all_of(v.implementation.begin(), v.implementation.end(), [](char ch) {
                         return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
                       }));
  if (!known || !tag_ok) {
    throw_bad_input(where, "ns", std::string(text),
                    "polar_express, newton_schulz5 or gram, optionally followed by '+' and the implementation "
                    "(letters, digits, '_': e.g. gram+triton)");
  }
  return v;
}

std::string MeasurementConfig::label() const {
  std::ostringstream out;
  out << run << "/" << model << "/" << optimizer << "/" << scope << "/f=" << fraction << "/w=" << world;
  if (capacity_factor) out << "/c=" << *capacity_factor;
  return out.str();
}

std::vector<MeasurementRow> parse_measurement_csv(const std::string& text, const std::string& source) {
  const auto records = parse_csv(text, source);
  if (records.empty() || is_blank(records[0])) {
    throw_bad_input(source + ":1", "header", "", "the columns " + Header::join(measurement_columns()));
  }
  const Header header(records[0], measurement_columns(), source);
  std::vector<MeasurementRow> rows;
  std::string metric_list;
  for (const auto& m : known_metrics()) metric_list += (metric_list.empty() ? "" : ", ") + std::string(m.name);
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (is_blank(records[r])) continue;
    const Fields f(header, records[r], source);
    MeasurementRow row;
    row.line = records[r].line;
    MeasurementConfig& c = row.config;
    c.source = f.nonempty("source");
    c.run = f.nonempty("run");
    c.hardware = f.nonempty("hardware");
    c.gpus_per_node = static_cast<int>(f.integer("gpus_per_node", 1, 1024));
    c.nodes = static_cast<int>(f.integer("nodes", 1, 1 << 20));
    c.world = static_cast<int>(f.integer("world", 1, 1 << 30));
    if (c.world != c.gpus_per_node * c.nodes) {
      throw_bad_input(f.where(), "world", f.text("world"),
                      "gpus_per_node x nodes = " + std::to_string(c.gpus_per_node * c.nodes));
    }
    c.model = f.nonempty("model");
    c.optimizer = f.optimizer("optimizer");
    c.ns = parse_ns_variant(f.text("ns"), f.where()).text();
    c.scope = f.scope("scope");
    c.fraction = f.fraction("fraction");
    const std::string cf = f.text("capacity_factor");
    if (cf != "auto") {
      const double value = f.number("capacity_factor");
      // The rule of opt::is_valid_capacity_factor (spec §4.1), written out: this reader needs only common.
      if (!(value >= 1.0 && std::isfinite(value)))
        throw_bad_input(f.where(), "capacity_factor", cf, "'auto' or a finite number >= 1 (spec §4.1)");
      c.capacity_factor = value;
    }
    row.metric = f.nonempty("metric");
    const MetricInfo* info = find_metric(row.metric);
    if (info == nullptr) throw_bad_input(f.where(), "metric", row.metric, "one of " + metric_list);
    row.value = f.number("value");
    row.unit = f.text("unit");
    if (row.unit != info->unit)
      throw_bad_input(f.where(), "unit", row.unit, "'" + std::string(info->unit) + "' for " + row.metric);
    const bool percent = info->unit == "%";
    if (row.value < 0 || (percent && row.value > 100)) {
      throw_bad_input(f.where(), "value", f.text("value"),
                      percent ? "a percentage in [0, 100]" : "a non-negative number");
    }
    row.notes = f.text("notes");
    for (const auto& earlier : rows) {
      if (earlier.config == c && earlier.metric == row.metric) {
        throw_bad_input(f.where(), "metric", row.metric,
                        "each metric once per configuration (first at line " + std::to_string(earlier.line) + ")");
      }
    }
    rows.push_back(std::move(row));
  }
  // A header alone is no measurement (it was refused later as "--where: got ''", naming no file).
  if (rows.empty()) throw_bad_input(source, "rows", "none", "at least one measured row under the header");
  return rows;
}

std::vector<MeasurementRow> read_measurement_csv(const std::filesystem::path& path) {
  return parse_measurement_csv(read_text(path), path.string());
}

std::vector<MeasuredConfiguration> group_configurations(const std::vector<MeasurementRow>& rows) {
  std::vector<MeasuredConfiguration> groups;
  for (const auto& row : rows) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.config == row.config; });
    if (it == groups.end()) {
      groups.push_back(MeasuredConfiguration{row.config, {}, row.notes, row.line});
      it = std::prev(groups.end());
    }
    it->metrics[row.metric] = row.value;
  }
  return groups;
}

nlohmann::json to_json(const MeasuredConfiguration& g) {
  const MeasurementConfig& c = g.config;
  nlohmann::json out = {
      {"source", c.source}, {"run", c.run},     {"hardware", c.hardware}, {"gpus_per_node", c.gpus_per_node},
      {"nodes", c.nodes},   {"world", c.world}, {"model", c.model},       {"optimizer", c.optimizer},
      {"ns", c.ns},         {"scope", c.scope}, {"fraction", c.fraction}};
  out["capacity_factor"] = c.capacity_factor ? nlohmann::json(*c.capacity_factor) : nlohmann::json(nullptr);
  out["metrics"] = g.metrics;
  return out;
}

// ---- H200 anchors -------------------------------------------------------------------------------

Anchors parse_anchors_csv(const std::string& text, const std::string& source) {
  static const std::vector<std::string> columns = {"what",     "world", "shape", "bytes", "scope",
                                                   "fraction", "value", "unit",  "notes"};
  const auto records = parse_csv(text, source);
  if (records.empty() || is_blank(records[0]))
    throw_bad_input(source + ":1", "header", "", "the columns " + Header::join(columns));
  const Header header(records[0], columns, source);
  Anchors anchors;
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (is_blank(records[r])) continue;
    const Fields f(header, records[r], source);
    const std::string what = f.nonempty("what");
    const int line = records[r].line;
    auto expect_unit = [&](const char* unit) {
      if (f.text("unit") != unit)
        throw_bad_input(f.where(), "unit", f.text("unit"), std::string("'") + unit + "' for " + what);
    };
    if (f.text("value").empty()) {
      // A documented non-measurement (e.g. a configuration that failed to compile): kept as a note.
      if (!f.text("unit").empty()) throw_bad_input(f.where(), "value", "", "a number (the unit is given)");
      if (!f.text("world").empty()) (void)f.integer("world", 1, 1 << 30);
      anchors.notes.push_back(what + ": " + f.text("notes"));
      continue;
    }
    const double value = f.number("value");
    if (!(value > 0)) throw_bad_input(f.where(), "value", f.text("value"), "a positive number");
    if (what == "gemm_bf16") {
      expect_unit("TFLOP/s");
      (void)f.integer("world", 1, 1);  // one GPU's GEMM (a world of nan was accepted and ignored)
      const std::string shape = f.nonempty("shape");
      GemmAnchor g;
      g.line = line;
      g.tflops = value;
      char x1 = 0, x2 = 0;
      std::istringstream in(shape);
      if (!(in >> g.m >> x1 >> g.n >> x2 >> g.k) || x1 != 'x' || x2 != 'x' || !in.eof() || g.m <= 0 || g.n <= 0 ||
          g.k <= 0) {
        throw_bad_input(f.where(), "shape", shape, "MxNxK with positive integers");
      }
      anchors.gemm.push_back(g);
    } else if (what == "alltoall_busbw" || what == "allgather_busbw") {
      expect_unit("GB/s");
      CollectiveAnchor c;
      c.line = line;
      c.op = what == "alltoall_busbw" ? "all_to_all" : "all_gather";
      c.world = static_cast<int>(f.integer("world", 2, 1 << 30));
      c.bytes = f.integer("bytes", 1, std::int64_t{1} << 50);
      c.busbw_GBps = value;
      anchors.collectives.push_back(c);
    } else if (what.rfind("reference_", 0) == 0 && what.size() > 22 &&
               what.substr(what.size() - 12) == "_opt_step_ms") {
      expect_unit("ms");
      ReferenceStepAnchor s;
      s.line = line;
      s.optimizer = lower(what.substr(10, what.size() - 22));
      if (s.optimizer != "dion2" && s.optimizer != "nordion2") {
        throw_bad_input(f.where(), "what", what, "reference_Dion2_opt_step_ms or reference_NorDion2_opt_step_ms");
      }
      s.world = static_cast<int>(f.integer("world", 1, 1 << 30));
      s.model = f.nonempty("shape");
      s.scope = f.scope("scope");
      s.fraction = f.fraction("fraction");
      s.opt_step_ms = value;
      s.notes = f.text("notes");
      s.compiled = s.notes.find("(compiled") != std::string::npos;
      anchors.reference_steps.push_back(s);
    } else {
      throw_bad_input(f.where(), "what", what,
                      "gemm_bf16, alltoall_busbw, allgather_busbw or reference_<Optimizer>_opt_step_ms");
    }
  }
  // A header alone (or notes alone) is no anchor: refused here, naming the file, not later by a fit.
  if (anchors.gemm.empty() && anchors.collectives.empty() && anchors.reference_steps.empty())
    throw_bad_input(source, "rows", "none", "at least one measured anchor row under the header");
  return anchors;
}

Anchors read_anchors_csv(const std::filesystem::path& path) {
  return parse_anchors_csv(read_text(path), path.string());
}

}  // namespace dionsim::analysis
