#pragma once
// Chrome trace-event writer (the JSON that ui.perfetto.dev and chrome://tracing open), streaming
// events to a file as they come so a trace of thousands of ranks never sits in memory.
//
// Conventions: pid = rank, tid = stream; complete events (ph "X") carry name, category, ts and dur
// in µs (written exactly from integer picoseconds: "12.345678"), and args such as bytes or FLOPs.
// Process and thread names come as metadata events (ph "M").
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim::analysis {

// Integer simulated time in picoseconds (the engine's unit); from_ns for nanosecond sources.
struct TracePs {
  std::int64_t value = 0;
  [[nodiscard]] static constexpr TracePs from_ns(std::int64_t ns) { return TracePs{ns * 1000}; }
};

// µs with six decimals from integer ps, without going through floating point.
[[nodiscard]] std::string format_ps_as_us(std::int64_t ps);

class TraceWriter {
 public:
  // Opens (truncates) `path`; IoError when it cannot be written.
  explicit TraceWriter(const std::filesystem::path& path);
  ~TraceWriter();  // closes the JSON if close() was not called (errors are swallowed there)
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void process_name(int pid, std::string_view name);
  void thread_name(int pid, std::int64_t tid, std::string_view name);
  // A complete event [start, start + duration). `args` must be a JSON object (or null).
  void complete(int pid, std::int64_t tid, std::string_view name, std::string_view category, TracePs start,
                TracePs duration, const nlohmann::json& args = nullptr);

  // Writes the closing brackets and flushes; IoError when the disk is full or similar.
  void close();
  [[nodiscard]] std::int64_t events_written() const { return events_; }

 private:
  void begin_event();
  std::filesystem::path path_;
  std::filesystem::path temporary_;  // written here, renamed to path_ by close(): never a partial file
  std::ofstream out_;
  std::int64_t events_ = 0;
  bool closed_ = false;
};

// A partial overlap between two complete events on one (pid, tid): neither nests in the other.
struct NestingViolation {
  int pid = 0;
  std::int64_t tid = 0;
  std::string first, second;
};
// Checks a parsed trace (object with traceEvents) for partial overlaps per thread, the property
// trace viewers need to draw one lane per thread. Times are compared as written (µs).
[[nodiscard]] std::vector<NestingViolation> nesting_violations(const nlohmann::json& trace);

}  // namespace dionsim::analysis
