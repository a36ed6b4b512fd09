#include "analysis/perfetto/perfetto.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/error.hpp"

namespace dionsim::analysis {

using nlohmann::json;

std::string format_ps_as_us(std::int64_t ps) {
  const bool negative = ps < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(ps) : static_cast<std::uint64_t>(ps);
  const std::string frac = std::to_string(magnitude % 1'000'000);
  std::string out = negative ? "-" : "";
  out.append(std::to_string(magnitude / 1'000'000)).append(1, '.').append(6 - frac.size(), '0').append(frac);
  return out;
}

namespace {

// ".<name>.tmp-<pid>" beside the trace (built by appending: GCC 12 flags "." + std::string&&).
std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp-";
  name += std::to_string(::getpid());
  return path.parent_path() / name;
}

}  // namespace

TraceWriter::TraceWriter(const std::filesystem::path& path)
    : path_(path),
      temporary_(temporary_beside(path)),
      out_(temporary_, std::ios::trunc) {
  if (std::filesystem::is_directory(path)) {
    throw IoError(path.string() + ": is a directory, expected a trace file name");
  }
  if (!out_) {
    throw IoError(path.string() + ": cannot open a temporary file beside it for writing");
  }
  out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
}

TraceWriter::~TraceWriter() {
  if (!closed_) {
    try {
      close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors must not throw
    }
  }
}

void TraceWriter::begin_event() {
  if (closed_) {
    throw IoError(path_.string() + ": trace already closed");
  }
  out_ << (events_ == 0 ? "\n" : ",\n");
  ++events_;
}

void TraceWriter::process_name(int pid, std::string_view name) {
  begin_event();
  out_ << json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", std::string(name)}}}}
              .dump();
  begin_event();
  out_ << json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}}
              .dump();
}

void TraceWriter::thread_name(int pid, std::int64_t tid, std::string_view name) {
  begin_event();
  out_
      << json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", std::string(name)}}}}
             .dump();
}

void TraceWriter::complete(int pid, std::int64_t tid, std::string_view name, std::string_view category, TracePs start,
                           TracePs duration, const json& args) {
  if (duration.value < 0) {
    throw std::invalid_argument("TraceWriter::complete: negative duration for '" + std::string(name) + "'");
  }
  begin_event();
  // ts/dur are written by hand so that integer picoseconds stay exact; the rest goes through json.
  out_ << "{\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << tid << ",\"ts\":" << format_ps_as_us(start.value)
       << ",\"dur\":" << format_ps_as_us(duration.value) << ",\"name\":" << json(std::string(name)).dump()
       << ",\"cat\":" << json(std::string(category)).dump();
  if (!args.is_null()) {
    out_ << ",\"args\":" << args.dump();
  }
  out_ << "}";
}

void TraceWriter::close() {
  if (closed_) return;
  closed_ = true;
  out_ << "\n]}\n";
  out_.flush();
  std::error_code ec;
  if (!out_) {
    out_.close();
    std::filesystem::remove(temporary_, ec);
    throw IoError(path_.string() + ": write failed (disk full?); no trace written");
  }
  out_.close();
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) {
    std::filesystem::remove(temporary_, ec);
    throw IoError(path_.string() + ": cannot move the written trace into place");
  }
}

std::vector<NestingViolation> nesting_violations(const json& trace) {
  struct Span {
    std::int64_t start, end;  // ps, rounded from the µs written, so back-to-back spans compare exactly
    std::string name;
  };
  std::map<std::pair<int, std::int64_t>, std::vector<Span>> lanes;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    const std::int64_t start = std::llround(e.at("ts").get<double>() * 1e6);
    const std::int64_t end = start + std::llround(e.at("dur").get<double>() * 1e6);
    lanes[{e.at("pid").get<int>(), e.at("tid").get<std::int64_t>()}].push_back(Span{start, end, e.value("name", "")});
  }
  std::vector<NestingViolation> violations;
  for (auto& [lane, spans] : lanes) {
    // Outer spans first at equal starts, so that a stack of open spans sees nesting in order.
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    std::vector<const Span*> open;
    for (const auto& s : spans) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty() && s.end > open.back()->end) {
        violations.push_back(NestingViolation{lane.first, lane.second, open.back()->name, s.name});
      }
      open.push_back(&s);
    }
  }
  return violations;
}

}  // namespace dionsim::analysis
