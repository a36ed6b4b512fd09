#include "analysis/measured/nccl_published.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"

namespace dionsim::analysis {

namespace {

// YYYY, YYYY-MM, YYYY-MM-DD (month 01-12, day 01-31) or YYYY-YYYY (a span, not backwards).
bool valid_published_date(const std::string& d) {
  const auto digits = [&](std::size_t from, std::size_t n) {
    if (from + n > d.size()) return -1;
    int v = 0;
    for (std::size_t i = from; i < from + n; ++i) {
      if (d[i] < '0' || d[i] > '9') return -1;
      v = v * 10 + (d[i] - '0');
    }
    return v;
  };
  const int year = digits(0, 4);
  if (year < 1900) return false;
  if (d.size() == 4) return true;
  if (d[4] != '-') return false;
  if (d.size() == 9) return digits(5, 4) >= year;
  const int month = digits(5, 2);
  if (month < 1 || month > 12) return false;
  if (d.size() == 7) return true;
  if (d.size() != 10 || d[7] != '-') return false;
  const int day = digits(8, 2);
  return day >= 1 && day <= 31;
}

}  // namespace

std::vector<PublishedRow> read_published_rows(const std::string& path) {
  // A regular file, read whole with the inputs' size cap (common/files.hpp): a FIFO or a device
  // is refused by name instead of blocking.
  const auto records = parse_csv(read_input_file(path, "the published nccl-tests CSV"), path);
  if (records.empty() || is_blank(records[0]))
    throw_bad_input(path, "header", "an empty file", "the measurements.csv header");
  const auto& header = records[0].fields;
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"source", "gpu", "gpus_per_node", "nodes", "world", "nic", "env", "collective", "placement",
                           "size_bytes", "time_us"}) {
    if (!col.count(need)) throw_bad_input(path + ":1", need, "no such column", "the measurements.csv columns");
  }
  std::vector<PublishedRow> rows;
  for (std::size_t k = 1; k < records.size(); ++k) {
    if (is_blank(records[k])) continue;
    const auto& f = records[k].fields;
    const int number = records[k].line;
    const std::string where = path + ":" + std::to_string(number);
    if (f.size() != header.size()) {
      throw_bad_input(where, "fields", std::to_string(f.size()), std::to_string(header.size()) + " fields as in the header");
    }
    const auto get = [&](const char* name) -> const std::string& { return f[col.at(name)]; };
    const auto integer = [&](const char* name, long long lo, long long hi) {
      const std::string& v = get(name);
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < lo || x > hi) {
        throw_bad_input(where, name, v, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      return x;
    };
    PublishedRow r;
    r.file = path;
    r.line = number;
    r.source = get("source");
    r.gpu = get("gpu");
    r.nic = get("nic");
    r.env = get("env");
    r.collective = get("collective");
    r.placement = get("placement");
    if (col.count("intra_fabric")) r.intra_fabric = get("intra_fabric");
    if (col.count("nccl_version")) r.nccl_version = get("nccl_version");
    if (col.count("notes")) r.notes = get("notes");
    r.gpus_per_node = static_cast<int>(integer("gpus_per_node", 1, 1024));
    r.nodes = static_cast<int>(integer("nodes", 1, 1 << 20));
    r.world = static_cast<int>(integer("world", 1, 1 << 24));
    r.size_bytes = integer("size_bytes", 0, 1LL << 50);
    // The one number rule (common/parse): strtod took 1e300 and the subnormal 1e-320 as times.
    const auto t = to_number(get("time_us"));
    if (!t || *t <= 0) throw_bad_input(where, "time_us", get("time_us"), "a positive time in us (at most 1e15)");
    r.time_us = *t;
    // Columns the validation does not use are still numbers when given (nan in count was accepted).
    for (const char* optional : {"count", "algbw_GBps", "busbw_GBps"}) {
      if (col.count(optional) && !get(optional).empty() && !to_number(get(optional))) {
        throw_bad_input(where, optional, get(optional), "empty or a finite number (at most 1e15)");
      }
    }
    // The date says when the source published its run: a year, a month, a day or a span of years.
    if (col.count("date") && !valid_published_date(get("date"))) {
      throw_bad_input(where, "date", get("date"), "YYYY, YYYY-MM, YYYY-MM-DD or YYYY-YYYY");
    }
    // nccl-tests' other tests are rows of the file too; validate-collectives reports them as not
    // modelled instead of refusing the file.
    const auto name = published_collective_name(r.collective);
    if (!name) {
      throw_bad_input(where, "collective", r.collective,
                      "allgather, reducescatter, allreduce or alltoall, or another nccl-tests test (broadcast, reduce, "
                      "sendrecv, gather, scatter, hypercube); any case, '_' or '-' between words");
    }
    r.collective = *name;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::optional<std::string> published_collective_name(const std::string& collective) {
  std::string name;
  for (const char c : lower(collective))
    if (c != '_' && c != '-' && c != ' ') name += c;
  if (name.size() > 4 && name.ends_with("perf")) name.erase(name.size() - 4);
  static const std::set<std::string> known = {"allgather", "reducescatter", "allreduce", "alltoall", "broadcast",
                                              "reduce", "sendrecv", "gather", "scatter", "hypercube"};
  if (!known.count(name)) return std::nullopt;
  return name;
}

std::vector<PublishedRow> rows_from_nccl_tests(const std::vector<NcclTestsRun>& runs, const std::string& file,
                                               const std::string& preset) {
  std::vector<PublishedRow> rows;
  for (const auto& run : runs) {
    const std::string where = file + ":" + std::to_string(run.line);
    // The shape is the log's own: its "#  Rank N … on HOST device D" lines.
    if (run.world < 1) {
      throw_bad_input(where, "ranks", "no '#  Rank N ... on HOST' lines",
                      "nccl-tests' device list (each rank and its host) above the block's table");
    }
    const int hosts = std::max(1, run.nodes);
    if (run.world % hosts != 0) {
      throw_bad_input(where, "ranks", std::to_string(run.world),
                      "a multiple of the host count (" + std::to_string(hosts) + "): the same GPUs on every host");
    }
    PublishedRow base;
    base.file = file;
    base.source = "nccl-tests-logs " + file;
    base.gpu = run.device.empty() ? "GPU not printed" : run.device;
    base.nic = "not stated (the fabric preset's)";
    base.nccl_version = run.nccl_version;
    // What NCCL reported reading from its environment, as a shell line the env reader takes.
    for (const auto& [key, value] : run.env) {
      std::string v = value;
      if (v.find_first_of(" \t;\"'") != std::string::npos) {
        const char q = v.find('"') == std::string::npos ? '"' : '\'';
        v = q + v + q;
      }
      base.env += (base.env.empty() ? "" : " ") + key + "=" + v;
    }
    // A program no nccl-tests test names keeps its name: validate-collectives reports it as not modelled.
    base.collective = published_collective_name(run.op).value_or(run.op);
    base.gpus_per_node = run.world / hosts;
    base.nodes = hosts;
    base.world = run.world;
    base.preset = preset;
    for (const auto& row : run.rows) {
      for (const bool in_place : {false, true}) {
        const double t = in_place ? row.in_place_time_us : row.time_us;
        if (!(t > 0)) continue;  // nccl-tests left the column out
        PublishedRow r = base;
        r.line = row.line;
        r.placement = in_place ? "in-place" : "out-of-place";
        r.size_bytes = row.bytes;
        r.time_us = t;
        rows.push_back(std::move(r));
      }
    }
  }
  return rows;
}

}  // namespace dionsim::analysis
