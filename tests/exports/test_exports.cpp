// analysis/exports: export round-trips a database bit for bit through CSV; --where, --kind and
// --metric are checked against what the database holds; compare pairs configurations, sets aside
// the keys that define the sides, and says whether intervals overlap.
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/exports/exports.hpp"
#include "analysis/store/store.hpp"
#include "common/csv.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;
using nlohmann::json;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dionsim-exports-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::int64_t store(Database& db, const std::string& kind, const json& config, const std::map<std::string, double>& metrics) {
  auto r = RunRecord::begin(kind, RunMode::simulated, config, 7);
  for (const auto& [name, value] : metrics) r.metrics.push_back({.name = name, .value = value, .unit = "ms"});
  return db.store(r);
}

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

double read_double(const std::string& text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  REQUIRE(r.ec == std::errc());
  return v;
}

const std::vector<std::string>& fields(const std::vector<CsvRecord>& records, std::size_t i) { return records.at(i).fields; }

}  // namespace

TEST_CASE("export: every stored value comes back bit for bit through the CSV", "[exports]") {
  TempDir dir;
  auto db = Database::open(dir.file("r.db"));
  const std::vector<double> awkward{0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, 1e-15, 5e-324, 578.108648, -2.5e-7};
  for (std::size_t i = 0; i < awkward.size(); ++i) {
    auto r = RunRecord::begin("whatif", RunMode::simulated,
                              {{"world", 8 << i}, {"scope", "global_capped"}, {"fabric", {{"name", "a,\"b\""}, {"nic_GBps", 0.1 * static_cast<double>(i)}}},
                               {"seed", 3}, {"capacity_factor", nullptr}},
                              i);
    r.metrics.push_back({.name = "step_wall_ms", .value = awkward[i], .unit = "ms"});
    r.metrics.push_back({.name = "wait_steps_count", .value = static_cast<double>(i), .unit = "", .rank = 2, .step = 5,
                         .labels = {{"steps", 3}}});
    db.store(r);
  }
  store(db, "deferral", {{"world", 16}, {"mode", "auto"}}, {{"deferred_fraction", 1.4014175257731959e-4}});

  const Table t = export_table(db, {});
  const auto records = parse_csv(to_csv(std::span<const Table>(&t, 1)), "export.csv");
  const auto& header = fields(records, 0);
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<std::size_t>(it - header.begin());
  };
  CHECK(header.front() == "run_id");
  // A configuration key that is also a column of export's own is written config.<key>.
  CHECK(std::find(header.begin(), header.end(), "config.seed") != header.end());
  CHECK(std::find(header.begin(), header.end(), "config.mode") != header.end());
  RunQuery all;
  const auto stored = db.metrics(all);
  REQUIRE(records.size() == stored.size() + 1);
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const auto& f = fields(records, i + 1);
    CHECK(std::stoll(f[col("run_id")]) == stored[i].run_id);
    CHECK(f[col("metric")] == stored[i].metric.name);
    CHECK(bits(read_double(f[col("value")])) == bits(stored[i].metric.value));
    CHECK(f[col("unit")] == stored[i].metric.unit);
    CHECK(f[col("rank")] == (stored[i].metric.rank ? std::to_string(*stored[i].metric.rank) : ""));
    if (stored[i].kind == "whatif") {
      CHECK(f[col("fabric.name")] == "a,\"b\"");
      CHECK(bits(read_double(f[col("fabric.nic_GBps")])) == bits(stored[i].config["fabric"]["nic_GBps"].get<double>()));
      CHECK(f[col("capacity_factor")].empty());
      CHECK(f[col("config.seed")] == "3");
      CHECK(f[col("label.steps")] == (stored[i].metric.labels.empty() ? "" : "3"));
    } else {
      CHECK(f[col("config.mode")] == "auto");
      CHECK(f[col("mode")] == "simulated");
    }
  }
}

TEST_CASE("select_runs: --where alternatives, unknown keys, kinds and metrics refused by name", "[exports]") {
  TempDir dir;
  auto db = Database::open(dir.file("s.db"));
  for (int w : {8, 16, 32}) store(db, "whatif", {{"world", w}, {"scope", "local"}}, {{"step_wall_ms", w * 1.5}});
  store(db, "deferral", {{"world", 16}}, {{"deferred_fraction", 0.01}});
  CHECK(select_runs(db, {.where = {"world=16"}}).size() == 2);
  CHECK(select_runs(db, {.kind = "whatif", .where = {"world=8", "world=32"}}).size() == 2);
  CHECK(select_runs(db, {.kind = "whatif", .where = {"world=8", "scope=global"}}).empty());
  CHECK(export_table(db, {.kind = "whatif", .where = {"world=16"}}).rows.size() == 1);
  CHECK_THROWS_AS(select_runs(db, {.where = {"wrold=16"}}), UsageError);
  CHECK_THROWS_WITH(select_runs(db, {.kind = "whatif", .where = {"wrold=16"}}),
                    Catch::Contains("--where: got 'wrold=16', expected a configuration key of the whatif runs in") &&
                        Catch::Contains("(scope, world)"));
  CHECK_THROWS_WITH(select_runs(db, {.where = {"world"}}), Catch::Contains("--where: got 'world', expected key=value"));
  CHECK_THROWS_WITH(select_runs(db, {.kind = "measure"}),
                    Catch::Contains("--kind: got 'measure', expected a kind of run stored in") && Catch::Contains("(deferral, whatif)"));
  CHECK_THROWS_WITH(select_runs(db, {.metrics = {"step_ms"}}),
                    Catch::Contains("--metric: got 'step_ms', expected a metric stored in") && Catch::Contains("step_wall_ms"));
}

TEST_CASE("compare: pairs configurations, sets the defining keys aside, differences and interval overlap", "[exports]") {
  TempDir dir;
  auto a = Database::open(dir.file("a.db"));
  auto b = Database::open(dir.file("b.db"));
  for (int w : {8, 16}) {
    store(a, "whatif", {{"world", w}, {"calibration", "old"}},
          {{"step_wall_ms", 100.0 * w}, {"step_wall_ms_lo", 100.0 * w - 5}, {"step_wall_ms_hi", 100.0 * w + 5}, {"only_a", 1}});
    store(b, "whatif", {{"world", w}, {"calibration", "new"}},
          {{"step_wall_ms", 100.0 * w + (w == 8 ? 8 : 20)}, {"step_wall_ms_lo", 100.0 * w + 3}, {"step_wall_ms_hi", 100.0 * w + 40}});
  }
  store(a, "whatif", {{"world", 64}, {"calibration", "old"}}, {{"step_wall_ms", 1}});
  // Stored again: the newest run of a configuration is the one compared.
  const auto newest = store(b, "whatif", {{"world", 16}, {"calibration", "new"}},
                            {{"step_wall_ms", 1620}, {"step_wall_ms_lo", 1610}, {"step_wall_ms_hi", 1630}});

  const auto c = compare_runs({&a, {}}, {&b, {}}, {});
  CHECK(c.matched == 2);
  CHECK(c.only_a == 1);
  CHECK(c.only_b == 0);
  CHECK(c.superseded == 1);
  REQUIRE(c.side_keys.size() == 1);
  CHECK(c.side_keys[0].key == "calibration");
  CHECK(c.side_keys[0].a == "old");
  CHECK(c.varying_keys == std::vector<std::string>{"world"});
  const Table& t = c.table;
  const auto at = [&](std::size_t row, const std::string& column) { return t.rows.at(row).at(t.column(column)); };
  // Per pair, in stored order: only_a (no b, no diff) and step_wall_ms (its _lo/_hi folded in).
  REQUIRE(t.rows.size() == 4);
  CHECK(at(0, "metric") == "only_a");
  CHECK(at(0, "b").is_null());
  CHECK(at(0, "diff").is_null());
  CHECK(at(1, "metric") == "step_wall_ms");
  CHECK(at(1, "world") == 8);
  CHECK(at(1, "a").get<double>() == 800);
  CHECK(at(1, "b").get<double>() == 808);
  CHECK(at(1, "diff").get<double>() == 8);
  CHECK(at(1, "diff_pct").get<double>() == Approx(1.0));
  CHECK(at(1, "a_lo").get<double>() == 795);
  CHECK(at(1, "b_hi").get<double>() == 840);
  CHECK(at(1, "overlap") == true);  // [795, 805] and [803, 840]
  CHECK(at(3, "world") == 16);
  CHECK(at(3, "run_b") == newest);
  CHECK(at(3, "overlap") == false);  // [1595, 1605] and [1610, 1630]
  for (const auto& row : t.rows) CHECK(row.at(t.column("metric")) != "step_wall_ms_lo");
  // --metric m brings m's interval along.
  const auto only = compare_runs({&a, {.metrics = {"step_wall_ms"}}}, {&b, {.metrics = {"step_wall_ms"}}}, {});
  REQUIRE(only.table.rows.size() == 2);
  CHECK(only.table.rows[0].at(only.table.column("a_lo")).get<double>() == 795);
  CHECK(only.table.rows[0].at(only.table.column("overlap")) == true);

  // A side without an interval is its point: 1600 lies outside [1610, 1630].
  auto p = Database::open(dir.file("p.db"));
  store(p, "whatif", {{"world", 16}, {"calibration", "old"}}, {{"step_wall_ms", 1600}});
  const auto point = compare_runs({&p, {}}, {&b, {.where = {"world=16"}}}, {});
  REQUIRE(point.matched == 1);
  CHECK(point.table.rows.at(0).at(point.table.column("overlap")) == false);

  // Nothing pairs: the keys that never agree are named; --ignore pairs without them.
  auto d = Database::open(dir.file("d.db"));
  store(d, "whatif", {{"world", 8}, {"calibration", "x"}}, {{"step_wall_ms", 1}});
  store(d, "whatif", {{"world", 16}, {"calibration", "y"}}, {{"step_wall_ms", 2}});
  const auto none = compare_runs({&a, {}}, {&d, {}}, {});
  CHECK(none.matched == 0);
  CHECK(none.differing_keys == std::vector<std::string>{"calibration"});
  CHECK(compare_runs({&a, {}}, {&d, {}}, {"calibration"}).matched == 2);
  CHECK_THROWS_WITH(compare_runs({&a, {}}, {&d, {}}, {"nope"}), Catch::Contains("--ignore: got 'nope'"));

  // Two selections of one database: where calibration=old vs the same key's other value.
  auto one = Database::open(dir.file("one.db"));
  for (const char* cal : {"old", "new"})
    for (int w : {8, 16}) store(one, "whatif", {{"world", w}, {"calibration", cal}}, {{"step_wall_ms", w + (cal[0] == 'n')}});
  const auto sel = compare_runs({&one, {.where = {"calibration=old"}}}, {&one, {.where = {"calibration=new"}}}, {});
  CHECK(sel.matched == 2);
  CHECK(sel.table.rows.at(1).at(sel.table.column("diff")).get<double>() == 1);
  CHECK(sel.side_keys.at(0).key == "calibration");
}

TEST_CASE("compare: side keys are found per kind, and runs of other kinds do not hide them", "[exports]") {
  TempDir dir;
  auto a = Database::open(dir.file("a.db"));
  auto b = Database::open(dir.file("b.db"));
  for (int w : {8, 16}) {
    store(a, "whatif", {{"world", w}, {"calibration", "old"}}, {{"step_wall_ms", w}});
    store(b, "whatif", {{"world", w}, {"calibration", "new"}}, {{"step_wall_ms", w + 1.0}});
  }
  // A deferral run lacks "calibration": over both kinds the key would have two values in A.
  store(a, "deferral", {{"world", 16}, {"steps", 20}}, {{"deferred_fraction", 0.01}});
  const auto c = compare_runs({&a, {}}, {&b, {}}, {});
  CHECK(c.matched == 2);
  CHECK(c.only_a == 1);
  REQUIRE(c.side_keys.size() == 1);
  CHECK(c.side_keys[0].key == "calibration");
  // Nothing of a kind in common: the kind is what differs.
  auto d = Database::open(dir.file("d.db"));
  store(d, "deferral", {{"world", 16}, {"steps", 5}}, {{"deferred_fraction", 0.02}});
  const auto none = compare_runs({&b, {}}, {&d, {}}, {});
  CHECK(none.matched == 0);
  CHECK(none.differing_keys == std::vector<std::string>{"kind"});
}
