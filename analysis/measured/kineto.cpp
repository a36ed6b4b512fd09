#include "analysis/measured/kineto.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/measured/kineto_io.hpp"
#include "common/error.hpp"
#include "common/json_input.hpp"
#include "common/parse.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

constexpr double kNsPerMs = 1e6;

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }
bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Kineto writes ts/dur in µs as numbers with three decimals; integer ns keeps them exact.
// |value| < 9e15 µs keeps the product inside int64 ns (an epoch timestamp is ~1.7e15 µs).
std::int64_t micros_to_ns(const json& value) {
  return std::llround(value.get<double>() * 1000.0);
}

// Sorted intervals answering "does any interval contain t?" in O(log n), nesting allowed.
class IntervalSet {
 public:
  void add(std::int64_t start, std::int64_t end) { spans_.emplace_back(start, end); }
  void finish() {
    std::sort(spans_.begin(), spans_.end());
    prefix_max_end_.resize(spans_.size());
    std::int64_t best = INT64_MIN;
    for (std::size_t i = 0; i < spans_.size(); ++i) {
      best = std::max(best, spans_[i].second);
      prefix_max_end_[i] = best;
    }
  }
  [[nodiscard]] bool covers(std::int64_t t) const {
    auto it = std::upper_bound(spans_.begin(), spans_.end(), std::make_pair(t, INT64_MAX));
    if (it == spans_.begin()) {
      return false;
    }
    return prefix_max_end_[static_cast<std::size_t>(it - spans_.begin()) - 1] >= t;
  }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;
  std::vector<std::int64_t> prefix_max_end_;
};

// "_allgather_base", "all_gather_into_tensor_coalesced", "AllGather" → "all_gather", etc.
std::string normalize_collective(std::string_view raw) {
  const std::string name = lower(raw);
  std::string squashed;
  for (char c : name) {
    if (c != '_') {
      squashed.push_back(c);
    }
  }
  if (contains(squashed, "alltoall")) return "all_to_all";
  if (contains(squashed, "allgather")) return "all_gather";
  if (contains(squashed, "reducescatter")) return "reduce_scatter";
  if (contains(squashed, "allreduce")) return "all_reduce";
  if (contains(squashed, "sendrecv")) return "send_recv";
  if (contains(squashed, "broadcast")) return "broadcast";
  return name;
}

bool is_nccl_kernel(std::string_view name) {
  return starts_with(name, "ncclDevKernel") || starts_with(name, "ncclKernel");
}

// cuBLAS(Lt) / CUTLASS / Triton GEMM kernel names seen on Hopper and Ampere.
bool looks_like_gemm(std::string_view name) {
  const std::string n = lower(name.substr(0, 200));
  return starts_with(n, "nvjet") || contains(n, "gemm") || contains(n, "xmma") ||
         (contains(n, "cutlass") && contains(n, "mm")) || starts_with(n, "triton_tem_fused_mm") ||
         starts_with(n, "triton_tem_fused_bmm") || starts_with(n, "triton_tem_fused_addmm");
}

[[noreturn]] void bad_event(const std::string& source, std::size_t index, const std::string& what);

// An integer of an event's args: absent = 0, else an integer (or an integral float) in [lo, 2^50].
// get<std::int64_t>() of 1e300 or of a uint64 past 2^63 is undefined; a string was read as 0.
std::int64_t event_int(const json& value, const char* key, const std::string& source, std::size_t index,
                       std::int64_t lo = 0) {
  constexpr std::int64_t kMax = std::int64_t{1} << 50;
  if (value.is_number_unsigned() && value.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMax)) {
    const auto v = static_cast<std::int64_t>(value.get<std::uint64_t>());
    if (v >= lo) return v;
  } else if (value.is_number_integer() && !value.is_number_unsigned()) {
    const auto v = value.get<std::int64_t>();
    if (v >= lo && v <= kMax) return v;
  } else if (value.is_number_float()) {
    const double v = value.get<double>();
    if (v >= static_cast<double>(lo) && v <= static_cast<double>(kMax) && v == std::floor(v)) return static_cast<std::int64_t>(v);
  }
  bad_event(source, index, std::string(key) + ": got " + json_excerpt(value) + ", expected an integer in [" +
                               std::to_string(lo) + ", 2^50]");
}

struct GemmShape {
  std::int64_t flops = 0;
  std::int64_t bytes = 0;
};

// FLOPs and bytes of an aten GEMM op from its recorded "Input Dims" / "Input type".
// mm: [m,k],[k,n]; bmm: [b,m,k],[b,k,n]; addmm: bias,[m,k],[k,n]; baddbmm: bias,[b,m,k],[b,k,n].
std::optional<GemmShape> gemm_shape(std::string_view op, const json& args, const std::string& source,
                                    std::size_t index) {
  const auto dims_it = args.find("Input Dims");
  if (dims_it == args.end() || !dims_it->is_array()) {
    return std::nullopt;
  }
  const json& dims = *dims_it;
  std::size_t a = 0;
  if (op == "aten::addmm" || op == "aten::baddbmm") {
    a = 1;
  } else if (op != "aten::mm" && op != "aten::bmm") {
    return std::nullopt;
  }
  if (dims.size() < a + 2 || !dims[a].is_array() || !dims[a + 1].is_array()) {
    return std::nullopt;
  }
  const json& lhs = dims[a];
  const json& rhs = dims[a + 1];
  std::int64_t b = 1, m = 0, k = 0, n = 0;
  // Each dimension at most 2^24 (an inventory's limit), the batch 2^20: 2·b·m·n·k stays in int64.
  const auto dim = [&](const json& v, std::int64_t hi) {
    const std::int64_t d = event_int(v, "Input Dims", source, index);
    if (d > hi) bad_event(source, index, "Input Dims: got " + std::to_string(d) + ", expected at most " + std::to_string(hi));
    return d;
  };
  constexpr std::int64_t kDim = std::int64_t{1} << 24;
  if (lhs.size() == 2 && rhs.size() == 2) {
    m = dim(lhs[0], kDim);
    k = dim(lhs[1], kDim);
    n = dim(rhs[1], kDim);
  } else if (lhs.size() == 3 && rhs.size() == 3) {
    b = dim(lhs[0], std::int64_t{1} << 20);
    m = dim(lhs[1], kDim);
    k = dim(lhs[2], kDim);
    n = dim(rhs[2], kDim);
  } else {
    return std::nullopt;
  }
  int elem = 2;
  if (const auto types = args.find("Input type"); types != args.end() && types->is_array() && types->size() > a) {
    const int size = dtype_size_bytes((*types)[a].get<std::string>());
    elem = size > 0 ? size : elem;
  }
  return GemmShape{2 * b * m * n * k, b * (m * k + k * n + m * n) * elem};
}

std::int64_t arg_int(const json& args, const char* key, const std::string& source, std::size_t index,
                     std::int64_t lo = 0) {
  const auto it = args.find(key);
  return it == args.end() ? 0 : event_int(*it, key, source, index, lo);
}

struct Launch {
  std::int64_t ts_ns;
  std::int64_t tid;
};

std::int64_t tid_of(const json& event) {
  const auto it = event.find("tid");
  return it != event.end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
}

[[noreturn]] void bad_event(const std::string& source, std::size_t index, const std::string& what) {
  throw InputError(source + ": traceEvents[" + std::to_string(index) + "]: " + what);
}

}  // namespace

std::string_view to_string(KernelRole role) {
  switch (role) {
    case KernelRole::ns_gemm:
      return "ns_gemm";
    case KernelRole::opt_alltoall:
      return "opt_alltoall";
    case KernelRole::opt_allgather:
      return "opt_allgather";
    case KernelRole::opt_other:
      return "opt_other";
    case KernelRole::fsdp_collective:
      return "fsdp_collective";
    case KernelRole::forward:
      return "forward";
    case KernelRole::backward:
      return "backward";
    case KernelRole::other:
      return "other";
  }
  return "other";
}

int dtype_size_bytes(std::string_view dtype) {
  std::string d = lower(dtype);
  if (starts_with(d, "c10::")) d = d.substr(5);
  if (starts_with(d, "torch.")) d = d.substr(6);
  static const std::map<std::string, int, std::less<>> sizes = {
      {"bfloat16", 2},        {"half", 2},           {"float16", 2},       {"float", 4},
      {"float32", 4},         {"double", 8},         {"float64", 8},       {"int", 4},
      {"int32", 4},           {"long", 8},           {"int64", 8},         {"short", 2},
      {"int16", 2},           {"char", 1},           {"int8", 1},          {"byte", 1},
      {"uint8", 1},           {"bool", 1},           {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
      {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::int64_t total = 0;
  std::int64_t cur_start = 0, cur_end = INT64_MIN;
  for (const auto& [s, e] : intervals) {
    if (s > cur_end) {
      if (cur_end > cur_start) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (cur_end > cur_start) total += cur_end - cur_start;
  return total;
}

namespace {

// The reader proper; `at_event` says which event it is looking at, so that a JSON value of the
// wrong type anywhere (nlohmann's type_error) is reported with the file and the event.
KinetoTrace parse_kineto_events(const std::string& json_text, const std::string& source, std::int64_t& at_event) {
  // Epoch timestamps in µs exceed 1e15: only finiteness is required of the numbers here; the
  // conversion to integer ns checks its own range.
  json root;
  try {
    root = parse_json_input(json_text, source, /*allow_large=*/true);
  } catch (const InputError& e) {
    throw InputError(source + ": not a JSON trace (" + e.what() + "); expected PyTorch-profiler Chrome-trace JSON, optionally gzipped");
  }
  const json* events = nullptr;
  if (root.is_object()) {
    const auto it = root.find("traceEvents");
    if (it == root.end() || !it->is_array()) {
      throw InputError(source + ": traceEvents: got " + (it == root.end() ? std::string("nothing") : it->type_name()) +
                       ", expected an array of trace events (Chrome trace format)");
    }
    events = &*it;
    // The Chrome-trace schema version, when given, is a small positive integer (1e300 was accepted).
    if (const auto v = root.find("schemaVersion");
        v != root.end() && !(v->is_number_integer() && v->get<std::int64_t>() >= 1 && v->get<std::int64_t>() <= 1000)) {
      throw InputError(source + ": schemaVersion: got " + json_excerpt(*v) + ", expected an integer in [1, 1000]");
    }
  } else if (root.is_array()) {
    events = &root;  // the bare-array variant of the Chrome trace format
  } else {
    throw InputError(source + ": top level: got a JSON " + std::string(root.type_name()) +
                     ", expected an object with traceEvents");
  }

  KinetoTrace trace;
  trace.source = source;
  std::unordered_map<std::int64_t, Launch> launches;       // correlation id → runtime call
  std::unordered_map<std::int64_t, GemmShape> gemm_ops;    // External id → GEMM shape
  std::unordered_map<std::int64_t, IntervalSet> autograd;  // host tid → backward op windows
  IntervalSet profiler_steps;
  std::vector<std::int64_t> kernel_external_ids;

  for (std::size_t i = 0; i < events->size(); ++i) {
    at_event = static_cast<std::int64_t>(i);
    const json& e = (*events)[i];
    if (!e.is_object()) {
      bad_event(source, i, "got a JSON " + std::string(e.type_name()) + ", expected an event object");
    }
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") {
      continue;
    }
    const std::string cat = e.value("cat", "");
    const std::string name = e.value("name", "");
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number()) {
      bad_event(source, i, "complete event '" + name + "' without numeric ts and dur");
    }
    // Subnormal values (1e-320) are no time a profiler writes: refused with the rest.
    const auto plain = [](double v) { return std::fpclassify(v) == FP_ZERO || std::fpclassify(v) == FP_NORMAL; };
    if (!(std::fabs(ts->get<double>()) < 9e15) || !(dur->get<double>() >= 0 && dur->get<double>() < 9e15) ||
        !plain(ts->get<double>()) || !plain(dur->get<double>())) {
      bad_event(source, i, "complete event '" + name + "': ts " + json_excerpt(*ts) + ", dur " + json_excerpt(*dur) +
                               " µs, expected |ts| < 9e15 and 0 <= dur < 9e15 (no subnormal numbers)");
    }
    // A numeric pid or tid is an integer id (4.5 or 1e300 were read as 0 / -1); a text one is a label.
    for (const char* id : {"pid", "tid"}) {
      const auto v = e.find(id);
      if (v != e.end() && v->is_number() &&
          !(v->is_number_integer() && std::llabs(v->get<std::int64_t>()) <= (std::int64_t{1} << 40))) {
        bad_event(source, i, std::string(id) + ": got " + json_excerpt(*v) + ", expected an integer id (|id| <= 2^40) or a label");
      }
    }
    const std::int64_t start = micros_to_ns(*ts);
    const std::int64_t length = micros_to_ns(*dur);
    static const json kEmpty = json::object();
    const json& args = e.contains("args") && e["args"].is_object() ? e["args"] : kEmpty;

    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      KernelEvent k;
      k.name = name;
      k.category = cat;
      k.device = e.contains("pid") && e["pid"].is_number_integer()
                     ? static_cast<int>(std::clamp<std::int64_t>(e["pid"].get<std::int64_t>(), INT32_MIN, INT32_MAX))
                     : 0;
      k.stream = tid_of(e);
      k.start_ns = start;
      k.dur_ns = length;
      k.launch_ns = arg_int(args, "correlation", source, i, -(std::int64_t{1} << 50));  // resolved to a time below
      if (cat == "kernel" && is_nccl_kernel(name)) {
        const auto coll = args.find("Collective name");
        // Without collective args (older PyTorch) the kernel name says it: ncclDevKernel_AllGather_RING_LL.
        k.collective = normalize_collective(coll != args.end() && coll->is_string() ? coll->get<std::string>() : name);
        k.in_nelems = arg_int(args, "In msg nelems", source, i);
        k.out_nelems = arg_int(args, "Out msg nelems", source, i);
        k.group_size = static_cast<int>(std::min<std::int64_t>(arg_int(args, "Group size", source, i), 1 << 30));
        if (const auto dt = args.find("dtype"); dt != args.end() && dt->is_string()) {
          k.dtype_bytes = dtype_size_bytes(dt->get<std::string>());
          if (k.dtype_bytes == 0) {
            bad_event(source, i,
                      "dtype: got '" + dt->get<std::string>() + "', expected a PyTorch dtype name such as BFloat16");
          }
        }
      } else if (cat == "kernel") {
        k.is_gemm = looks_like_gemm(name);
      }
      kernel_external_ids.push_back(arg_int(args, "External id", source, i, -(std::int64_t{1} << 50)));
      trace.kernels.push_back(std::move(k));
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      // A runtime call's correlation id, when given, is the integer its kernel names (1e300 was
      // skipped without a word, and that kernel then had no launch).
      if (args.contains("correlation"))
        launches[arg_int(args, "correlation", source, i, -(std::int64_t{1} << 50))] = Launch{start, tid_of(e)};
    } else if (cat == "user_annotation" || cat == "cpu_op" || cat == "python_function") {
      if (starts_with(name, "Optimizer.step#")) {
        trace.steps.push_back(StepWindow{name, start, start + length});
      } else if (starts_with(name, "ProfilerStep#")) {
        profiler_steps.add(start, start + length);
      } else if (starts_with(name, "autograd::engine::evaluate_function")) {
        autograd[tid_of(e)].add(start, start + length);
      } else if (cat == "cpu_op") {
        if (const auto shape = gemm_shape(name, args, source, i)) {
          gemm_ops[arg_int(args, "External id", source, i, -(std::int64_t{1} << 50))] = *shape;
        }
      }
    }
  }

  std::size_t kernel_count = 0;
  for (const auto& k : trace.kernels) kernel_count += k.category == "kernel" ? 1 : 0;
  if (kernel_count == 0) {
    throw InputError(source +
                     ": traceEvents: got no events with cat 'kernel', expected CUDA kernels "
                     "(profile with ProfilerActivity.CUDA)");
  }

  profiler_steps.finish();
  for (auto& [tid, set] : autograd) set.finish();
  std::sort(trace.steps.begin(), trace.steps.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.cpu_start_ns < b.cpu_start_ns; });

  auto step_containing = [&](std::int64_t t) {
    for (std::size_t s = 0; s < trace.steps.size(); ++s) {
      if (t >= trace.steps[s].cpu_start_ns && t <= trace.steps[s].cpu_end_ns) return static_cast<int>(s);
    }
    return -1;
  };

  for (std::size_t i = 0; i < trace.kernels.size(); ++i) {
    KernelEvent& k = trace.kernels[i];
    const auto launch = launches.find(k.launch_ns);
    std::int64_t launch_tid = -1;
    if (launch != launches.end()) {
      k.launch_ns = launch->second.ts_ns;
      launch_tid = launch->second.tid;
    } else {
      k.launch_ns = -1;
      ++trace.kernels_without_launch;
    }
    if (const auto op = gemm_ops.find(kernel_external_ids[i]);
        op != gemm_ops.end() && k.category == "kernel" && k.collective.empty()) {
      k.is_gemm = true;
      k.gemm_flops = op->second.flops;
      k.gemm_bytes = op->second.bytes;
    }
    const std::int64_t when = k.launch_ns >= 0 ? k.launch_ns : k.start_ns;
    k.step = step_containing(when);
    if (k.step >= 0) {
      if (k.collective == "all_to_all")
        k.role = KernelRole::opt_alltoall;
      else if (k.collective == "all_gather")
        k.role = KernelRole::opt_allgather;
      else if (k.is_gemm)
        k.role = KernelRole::ns_gemm;
      else
        k.role = KernelRole::opt_other;
    } else if (k.collective == "all_gather" || k.collective == "reduce_scatter" || k.collective == "all_reduce") {
      k.role = KernelRole::fsdp_collective;
    } else if (const auto ag = autograd.find(launch_tid);
               ag != autograd.end() && k.launch_ns >= 0 && ag->second.covers(k.launch_ns)) {
      k.role = KernelRole::backward;
    } else if (profiler_steps.covers(when)) {
      k.role = KernelRole::forward;
    } else {
      k.role = KernelRole::other;
    }
  }
  std::sort(trace.kernels.begin(), trace.kernels.end(),
            [](const KernelEvent& a, const KernelEvent& b) { return a.start_ns < b.start_ns; });

  at_event = -1;
  // Which rank and device this file is.
  int lowest_device = INT32_MAX;
  for (const auto& k : trace.kernels) lowest_device = std::min(lowest_device, k.device);
  trace.rank = lowest_device;
  if (root.is_object()) {
    if (const auto info = root.find("distributedInfo"); info != root.end() && info->is_object()) {
      trace.rank = info->value("rank", trace.rank);
      trace.world_size = info->value("world_size", 1);
    }
    if (const auto props = root.find("deviceProperties"); props != root.end() && props->is_array()) {
      for (const auto& p : *props) {
        if (p.is_object() && p.value("id", -1) == lowest_device) trace.device_name = p.value("name", "");
      }
    }
  }
  return trace;
}

}  // namespace

KinetoTrace parse_kineto_trace(const std::string& json_text, const std::string& source) {
  std::int64_t at_event = -1;
  try {
    return parse_kineto_events(json_text, source, at_event);
  } catch (const json::exception& e) {
    throw InputError(source + ": " + (at_event >= 0 ? "traceEvents[" + std::to_string(at_event) + "]" : std::string("(trace)")) +
                     ": a value of the wrong JSON type (" + e.what() +
                     "); expected PyTorch-profiler Chrome-trace JSON");
  }
}

KinetoTrace read_kineto_trace(const std::filesystem::path& path) {
  return parse_kineto_trace(read_maybe_gzipped(path), path.string());
}

std::vector<StepMetrics> reduce_steps(const KinetoTrace& trace) {
  std::vector<StepMetrics> out;
  for (std::size_t s = 0; s < trace.steps.size(); ++s) {
    const StepWindow& window = trace.steps[s];
    StepMetrics m;
    m.rank = trace.rank;
    m.step = static_cast<int>(s);
    m.opt_cpu_span_ms = static_cast<double>(window.cpu_end_ns - window.cpu_start_ns) / kNsPerMs;
    std::int64_t first = INT64_MAX, last = INT64_MIN;
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (const auto& k : trace.kernels) {
      if (k.step != static_cast<int>(s)) continue;
      first = std::min(first, k.start_ns);
      last = std::max(last, k.end_ns());
      busy.emplace_back(k.start_ns, k.end_ns());
      const double ms = static_cast<double>(k.dur_ns) / kNsPerMs;
      m.kernel_count += k.category == "kernel" ? 1 : 0;
      switch (k.role) {
        case KernelRole::opt_alltoall:
          m.a2a_ms += ms;
          m.a2a_payload_bytes += k.payload_bytes();
          ++m.a2a_count;
          break;
        case KernelRole::opt_allgather:
          m.allgather_ms += ms;
          m.allgather_bytes += k.payload_bytes();
          break;
        case KernelRole::ns_gemm:
          m.gemm_ms += ms;
          ++m.gemm_count;
          m.gemm_flops += k.gemm_flops;
          break;
        default:
          if (k.collective.empty()) m.non_gemm_ms += ms;
          break;
      }
    }
    const std::int64_t end = std::max(window.cpu_end_ns, busy.empty() ? window.cpu_end_ns : last);
    m.opt_step_ms = static_cast<double>(end - window.cpu_start_ns) / kNsPerMs;
    if (!busy.empty()) {
      m.opt_gpu_window_ms = static_cast<double>(last - first) / kNsPerMs;
      m.opt_gpu_ms = static_cast<double>(union_length_ns(std::move(busy))) / kNsPerMs;
      m.opt_gpu_idle_pct = m.opt_gpu_window_ms > 0 ? 100.0 * (1.0 - m.opt_gpu_ms / m.opt_gpu_window_ms) : 0.0;
    }
    out.push_back(m);
  }
  return out;
}

json to_json(const StepMetrics& m) {
  return {{"rank", m.rank},
          {"step", m.step},
          {"opt_step_ms", m.opt_step_ms},
          {"opt_cpu_span_ms", m.opt_cpu_span_ms},
          {"opt_gpu_window_ms", m.opt_gpu_window_ms},
          {"opt_gpu_ms", m.opt_gpu_ms},
          {"opt_gpu_idle_pct", m.opt_gpu_idle_pct},
          {"a2a_ms", m.a2a_ms},
          {"a2a_payload_bytes", m.a2a_payload_bytes},
          {"a2a_count", m.a2a_count},
          {"allgather_ms", m.allgather_ms},
          {"allgather_bytes", m.allgather_bytes},
          {"gemm_ms", m.gemm_ms},
          {"gemm_count", m.gemm_count},
          {"gemm_flops", m.gemm_flops},
          {"non_gemm_ms", m.non_gemm_ms},
          {"kernel_count", m.kernel_count}};
}

namespace {

// Per step, the all-to-all kernels of one trace in launch order: (duration ns, bytes per rank).
std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> alltoalls_by_step(const KinetoTrace& t) {
  std::vector<std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>> launched(t.steps.size());
  for (const auto& k : t.kernels) {
    if (k.role == KernelRole::opt_alltoall) {
      launched[static_cast<std::size_t>(k.step)].emplace_back(k.launch_ns, k.dur_ns, k.payload_bytes());
    }
  }
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> out;
  for (auto& step : launched) {
    std::sort(step.begin(), step.end());
    auto& row = out.emplace_back();
    for (const auto& [launch, dur, bytes] : step) row.emplace_back(dur, bytes);
  }
  return out;
}

}  // namespace

std::vector<AlltoallTransfer> alltoall_transfers(const std::vector<KinetoTrace>& traces) {
  std::vector<AlltoallTransfer> out;
  if (traces.empty()) return out;
  std::set<int> ranks;
  std::vector<std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>> per_trace;
  for (const auto& t : traces) {
    if (!ranks.insert(t.rank).second) {
      throw_bad_input(t.source, "rank", std::to_string(t.rank), "one trace per rank (this rank was given twice)");
    }
    per_trace.push_back(alltoalls_by_step(t));
  }
  const auto& first = per_trace.front();
  for (std::size_t t = 1; t < traces.size(); ++t) {
    if (per_trace[t].size() != first.size()) {
      throw_bad_input(traces[t].source, "optimizer steps", std::to_string(per_trace[t].size()),
                      std::to_string(first.size()) + " like " + traces.front().source);
    }
    for (std::size_t s = 0; s < first.size(); ++s) {
      if (per_trace[t][s].size() != first[s].size() ||
          !std::equal(first[s].begin(), first[s].end(), per_trace[t][s].begin(),
                      [](const auto& a, const auto& b) { return a.second == b.second; })) {
        std::int64_t bytes = 0, bytes0 = 0;
        for (const auto& a : per_trace[t][s]) bytes += a.second;
        for (const auto& a : first[s]) bytes0 += a.second;
        throw_bad_input(traces[t].source, "step " + std::to_string(s) + " all-to-alls",
                        std::to_string(per_trace[t][s].size()) + " sending " + std::to_string(bytes) + " B",
                        std::to_string(first[s].size()) + " sending " + std::to_string(bytes0) + " B like " +
                            traces.front().source);
      }
    }
  }
  for (std::size_t s = 0; s < first.size(); ++s) {
    for (std::size_t i = 0; i < first[s].size(); ++i) {
      std::int64_t fastest = INT64_MAX;
      for (const auto& trace : per_trace) fastest = std::min(fastest, trace[s][i].first);
      out.push_back(AlltoallTransfer{static_cast<int>(s), static_cast<int>(i), first[s][i].second, fastest});
    }
  }
  return out;
}

std::vector<CrossRankStep> reduce_across_ranks(const std::vector<KinetoTrace>& traces) {
  const auto transfers = alltoall_transfers(traces);  // validates ranks, steps and all-to-alls
  std::vector<CrossRankStep> out;
  if (traces.empty()) return out;
  std::vector<std::vector<StepMetrics>> per_rank;
  for (const auto& t : traces) per_rank.push_back(reduce_steps(t));
  for (std::size_t s = 0; s < per_rank[0].size(); ++s) {
    CrossRankStep c;
    c.step = static_cast<int>(s);
    c.ranks = static_cast<int>(traces.size());
    c.a2a_payload_bytes = per_rank[0][s].a2a_payload_bytes;
    for (const auto& x : transfers) {
      if (x.step == c.step) c.a2a_transfer_ms += static_cast<double>(x.transfer_ns) / kNsPerMs;
    }
    for (const auto& rank : per_rank) {
      c.opt_step_ms_max = std::max(c.opt_step_ms_max, rank[s].opt_step_ms);
      c.a2a_wait_ms_max = std::max(c.a2a_wait_ms_max, rank[s].a2a_ms - c.a2a_transfer_ms);
    }
    c.a2a_algbw_GBps =
        c.a2a_transfer_ms > 0 ? static_cast<double>(c.a2a_payload_bytes) / (c.a2a_transfer_ms * 1e6) : 0.0;
    out.push_back(c);
  }
  return out;
}

std::vector<std::vector<KinetoTrace>> group_into_runs(std::vector<KinetoTrace> traces) {
  std::sort(traces.begin(), traces.end(), [](const KinetoTrace& a, const KinetoTrace& b) {
    return a.kernels.front().start_ns < b.kernels.front().start_ns;
  });
  std::vector<std::vector<KinetoTrace>> runs;
  std::int64_t run_end = INT64_MIN;
  for (auto& t : traces) {
    const std::int64_t start = t.kernels.front().start_ns;
    std::int64_t end = start;
    for (const auto& k : t.kernels) end = std::max(end, k.end_ns());
    if (runs.empty() || start > run_end) {
      runs.emplace_back();
      run_end = end;
    } else {
      run_end = std::max(run_end, end);
    }
    runs.back().push_back(std::move(t));
  }
  for (auto& run : runs) {
    std::sort(run.begin(), run.end(), [](const KinetoTrace& a, const KinetoTrace& b) { return a.rank < b.rank; });
  }
  return runs;
}

json to_json(const CrossRankStep& c) {
  return {{"step", c.step},
          {"ranks", c.ranks},
          {"opt_step_ms_max", c.opt_step_ms_max},
          {"a2a_transfer_ms", c.a2a_transfer_ms},
          {"a2a_wait_ms_max", c.a2a_wait_ms_max},
          {"a2a_payload_bytes", c.a2a_payload_bytes},
          {"a2a_algbw_GBps", c.a2a_algbw_GBps}};
}

json dump_metrics(const std::vector<KinetoTrace>& traces) {
  json per_rank = json::array();
  for (const auto& t : traces) {
    const auto steps = reduce_steps(t);
    if (steps.empty()) {
      throw InputError(t.source + ": no 'Optimizer.step#…' annotation; expected a profiled optimizer step");
    }
    for (const auto& m : steps) {
      json row = to_json(m);
      row["file"] = t.source;
      per_rank.push_back(row);
    }
  }
  json across = json::array();
  int run_index = 0;
  for (const auto& run : group_into_runs(traces)) {
    if (run.size() > 1) {
      for (const auto& c : reduce_across_ranks(run)) {
        json row = to_json(c);
        row["run"] = run_index;
        across.push_back(row);
      }
    }
    ++run_index;
  }
  return {{"per_rank", per_rank}, {"across_ranks", across}};
}

std::vector<RoleTotal> role_totals(const KinetoTrace& trace) {
  std::vector<RoleTotal> totals;
  for (KernelRole role :
       {KernelRole::ns_gemm, KernelRole::opt_alltoall, KernelRole::opt_allgather, KernelRole::opt_other,
        KernelRole::fsdp_collective, KernelRole::forward, KernelRole::backward, KernelRole::other}) {
    totals.push_back(RoleTotal{role, 0, 0.0});
  }
  for (const auto& k : trace.kernels) {
    RoleTotal& t = totals[static_cast<std::size_t>(k.role)];
    ++t.count;
    t.ms += static_cast<double>(k.dur_ns) / kNsPerMs;
  }
  return totals;
}

}  // namespace dionsim::analysis
