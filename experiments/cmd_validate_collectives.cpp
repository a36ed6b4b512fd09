// dionsim validate-collectives: every row of the published nccl-tests CSV — or of a user's own
// nccl-tests logs on the fabric preset they name — predicted from the cluster's nominal
// description (analysis/calibration/published_collectives.hpp), with the error per row and per
// size regime beside NCCL's own tuning model (all-to-all: the old closed form). Nothing is fitted.
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "topologies/topology.hpp"
#include "experiments/cli.hpp"
#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/calibration/published_collectives.hpp"
#include "analysis/calibration/published_extrapolation.hpp"
#include "analysis/calibration/published_intervals.hpp"

namespace dionsim::cli {

namespace {

double pct(int part, int whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

nlohmann::json regime_json(const analysis::RegimeSummary& s, const char* dionsim, const char* baseline) {
  return {{"regime", analysis::to_string(s.regime)},
          {"rows", s.rows},
          {std::string(dionsim) + "_within_goal_pct", pct(s.dionsim_within, s.rows)},
          {std::string(baseline) + "_within_goal_pct", pct(s.baseline_within, s.rows)},
          {std::string(dionsim) + "_median_abs_err", s.dionsim_median_abs_err},
          {std::string(baseline) + "_median_abs_err", s.baseline_median_abs_err}};
}

std::string fitted_parameters(const analysis::ClusterExtrapolation& c) {
  if (!c.not_fitted.empty()) return "not fitted: " + c.not_fitted;
  const auto& v = c.fit.value;
  const auto& e = c.fit.std_error;
  std::string out;
  const auto add = [&](const std::string& name, double value, double se) {
    for (const auto& f : c.fit.fitted) {
      if (f != name) continue;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %.3g±%.2g", out.empty() ? "" : ", ", name.c_str(), value, se);
      out += buf;
    }
  };
  add("collective_call_overhead_us", v.call_overhead_us, e.call_overhead_us);
  add("collective_net_hop_extra_us", v.net_hop_extra_us, e.net_hop_extra_us);
  add("nic_efficiency", v.nic_efficiency, e.nic_efficiency);
  add("collective_nvlink_scale", v.nvlink_scale, e.nvlink_scale);
  add("collective_p2p_channel_GBps", v.p2p_channel_GBps, e.p2p_channel_GBps);
  return out;
}

// --extrapolate: fit each cluster's smallest node count, predict its larger ones.
int print_extrapolation(const Command& cmd, const analysis::PublishedExtrapolation& x) {
  if (cmd.common().machine()) {
    nlohmann::json out = {{"regimes", nlohmann::json::array()}, {"clusters", nlohmann::json::array()}, {"rows", nlohmann::json::array()}};
    for (const auto& s : x.summary)
      if (s.rows > 0) out["regimes"].push_back(regime_json(s, "calibrated", "nominal"));
    for (const auto& c : x.clusters) {
      nlohmann::json j = {{"cluster", c.cluster}, {"preset", c.preset}, {"gpus_per_node", c.gpus_per_node},
                          {"fit_nodes", c.fit_nodes}, {"fit_rows", c.fit_rows}, {"predicted_nodes", c.predicted_nodes},
                          {"fitted", fitted_parameters(c)}};
      if (c.not_fitted.empty()) {
        j["fit_rms_relative_error"] = c.fit.rms_relative_error;
        j["fit_rms_relative_error_before"] = c.fit.rms_relative_error_before;
      }
      j["held_out"] = nlohmann::json::array();
      for (const auto& s : c.held_out)
        if (s.rows > 0) j["held_out"].push_back(regime_json(s, "calibrated", "nominal"));
      out["clusters"].push_back(j);
    }
    for (const auto& p : x.held_out) {
      out["rows"].push_back({{"line", p.row->line}, {"preset", p.preset}, {"collective", p.row->collective},
                             {"nodes", p.row->world / p.row->gpus_per_node}, {"gpus_per_node", p.row->gpus_per_node},
                             {"size_bytes", p.row->size_bytes}, {"measured_us", p.row->time_us},
                             {"regime", analysis::to_string(analysis::regime_of(p.row->size_bytes))},
                             {"calibrated_us", p.dionsim_us}, {"nominal_us", p.baseline_us}});
    }
    print_result(cmd.common(), out);
    return 0;
  }
  std::printf("# each cluster's collective parameters fitted to its smallest node count only (as calibrate --nccl-tests),\n"
              "# its larger node counts predicted; %zu held-out rows of %zu clusters, none of them fitted\n",
              x.held_out.size(), x.clusters.size());
  std::printf("%-24s %6s %20s %20s %18s %18s\n", "regime", "rows", "calibrated in goal %", "nominal in goal %",
              "calibrated med |e|", "nominal med |e|");
  for (const auto& s : x.summary) {
    if (s.rows == 0) continue;  // no held-out row in that regime
    std::printf("%-24s %6d %20.1f %20.1f %18.3f %18.3f\n", analysis::to_string(s.regime), s.rows,
                pct(s.dionsim_within, s.rows), pct(s.baseline_within, s.rows), s.dionsim_median_abs_err,
                s.baseline_median_abs_err);
  }
  std::printf("# per cluster: fitted at nodes (rows) -> predicted nodes; in goal %% calibrated / nominal (held-out rows) per regime\n");
  for (const auto& c : x.clusters) {
    std::string predicted;
    for (const int n : c.predicted_nodes) predicted += (predicted.empty() ? "" : ",") + std::to_string(n);
    std::string cells;
    for (const auto& s : c.held_out) {
      if (s.rows == 0) continue;
      char buf[96];
      std::snprintf(buf, sizeof buf, "  %s %.0f / %.0f (%d)", s.regime == analysis::SizeRegime::latency  ? "latency"
                                                            : s.regime == analysis::SizeRegime::middle ? "middle"
                                                                                                        : "bandwidth",
                    pct(s.dionsim_within, s.rows), pct(s.baseline_within, s.rows), s.rows);
      cells += buf;
    }
    std::printf("%s (%s, %d GPUs per node): %d (%d rows) -> %s;%s\n    %s\n", c.cluster.c_str(), c.preset.c_str(),
                c.gpus_per_node, c.fit_nodes, c.fit_rows, predicted.c_str(), cells.c_str(), fitted_parameters(c).c_str());
  }
  return 0;
}

// --intervals: each cluster held out, its rows' 90 % intervals from the other clusters' priors and
// errors; with --nccl-tests (against_record) the logs' rows by the whole published record's.
int print_intervals(const Command& cmd, const analysis::PublishedIntervals& x, bool against_record) {
  if (cmd.common().machine()) {
    nlohmann::json out = {{"regimes", nlohmann::json::array()}, {"folds", nlohmann::json::array()}, {"rows", nlohmann::json::array()}};
    const auto coverage_json = [](const analysis::IntervalCoverage& c) {
      return nlohmann::json{{"regime", analysis::to_string(c.regime)}, {"rows", c.rows}, {"covered", c.covered},
                            {"covered_pct", pct(c.covered, c.rows)}, {"mean_half_width_pct", c.mean_half_width_pct},
                            {"model_form_covered", c.model_form_covered},
                            {"model_form_covered_pct", pct(c.model_form_covered, c.rows)},
                            {"model_form_mean_half_width_pct", c.model_form_mean_half_width_pct}};
    };
    for (const auto& c : x.summary) out["regimes"].push_back(coverage_json(c));
    out["regimes_by_preset"] = nlohmann::json::array();
    for (const auto& [preset, regimes] : x.summary_by_preset) {
      for (const auto& c : regimes) {
        auto j = coverage_json(c);
        j["preset"] = preset;
        out["regimes_by_preset"].push_back(j);
      }
    }
    for (const auto& f : x.folds)
      out["folds"].push_back({{"held_out", f.cluster}, {"link_time_low", f.link_low}, {"link_time_high", f.link_high},
                              {"alltoall_inter_low", f.alltoall_inter_low}, {"alltoall_inter_high", f.alltoall_inter_high},
                              {"nvlink_time_low", f.nvlink_low}, {"nvlink_time_high", f.nvlink_high},
                              {"alltoall_intra_low", f.alltoall_intra_low}, {"alltoall_intra_high", f.alltoall_intra_high},
                              {"net_step_low_us", f.net_step_low_us}, {"net_step_high_us", f.net_step_high_us},
                              {"fabric_spread", f.fabric_spread},
                              {"ratio_low", f.record.low}, {"ratio_high", f.record.high}});
    for (const auto& r : x.rows) {
      const auto& p = *r.prediction;
      out["rows"].push_back({{"line", p.row->line}, {"cluster", r.cluster}, {"preset", p.preset},
                             {"collective", p.row->collective}, {"nodes", p.row->nodes},
                             {"gpus_per_node", p.row->gpus_per_node}, {"size_bytes", p.row->size_bytes},
                             {"regime", analysis::to_string(analysis::regime_of(p.row->size_bytes))},
                             {"measured_us", p.row->time_us}, {"dionsim_us", p.dionsim_us}, {"lo_us", r.lo_us},
                             {"hi_us", r.hi_us}, {"covered", r.covered}, {"model_form_lo_us", r.model_form_lo_us},
                             {"model_form_hi_us", r.model_form_hi_us}, {"model_form_covered", r.model_form_covered}});
    }
    print_result(cmd.common(), out);
    return 0;
  }
  if (cmd.has("rows")) {
    std::printf("%5s %-13s %-13s %5s %4s %12s %11s %11s %26s %26s\n", "line", "preset", "collective", "nodes", "gpn",
                "size_B", "measured", "dionsim", "priors' 90 % interval", "model-form 90 % interval");
    for (const auto& r : x.rows) {
      const auto& p = *r.prediction;
      std::printf("%5d %-13s %-13s %5d %4d %12lld %11.2f %11.2f [%10.2f, %10.2f] %-3s [%10.2f, %10.2f] %s\n",
                  p.row->line, p.preset.c_str(), p.row->collective.c_str(), p.row->nodes, p.row->gpus_per_node,
                  static_cast<long long>(p.row->size_bytes), p.row->time_us, p.dionsim_us, r.lo_us, r.hi_us,
                  r.covered ? "in" : "out", r.model_form_lo_us, r.model_form_hi_us, r.model_form_covered ? "in" : "out");
    }
  }
  if (against_record) {
    std::printf("# 90 %% intervals of these rows by the published record: the priors (the inter-node link and the\n"
                "# all-to-all's share, NCCL's NVLink rate and the one-domain all-to-all's share, the network step, the\n"
                "# fabric spread) drawn from its rows, the rows predicted at their ends\n");
  } else {
    std::printf("# 90 %% intervals, each of %zu clusters held out: the priors (the inter-node link and the all-to-all's share,\n"
                "# NCCL's NVLink rate and the one-domain all-to-all's share, the network step, the fabric spread)\n"
                "# re-derived from the other clusters' rows, the held-out rows predicted at their ends\n",
                x.folds.size());
  }
  std::printf("# beside them the model-form interval: the prediction times the %s measured / modelled\n"
              "# range in the row's regime (distribution-free 90 %%)\n",
              against_record ? "published rows'" : "other clusters'");
  std::printf("%-24s %6s %18s %20s %22s %24s\n", "regime", "rows", "priors covered %", "priors half-width %",
              "model-form covered %", "model-form half-width %");
  for (const auto& c : x.summary)
    std::printf("%-24s %6d %18.1f %20.1f %22.1f %24.1f\n", analysis::to_string(c.regime), c.rows,
                pct(c.covered, c.rows), c.mean_half_width_pct, pct(c.model_form_covered, c.rows),
                c.model_form_mean_half_width_pct);
  std::printf("# by fabric preset: covered %%, priors / model-form (rows)\n%-20s %22s %22s %22s\n", "preset", "latency",
              "middle", "bandwidth");
  for (const auto& [preset, regimes] : x.summary_by_preset) {
    std::string cells[3];
    for (const auto& c : regimes) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f / %.0f (%d)", pct(c.covered, c.rows), pct(c.model_form_covered, c.rows), c.rows);
      cells[static_cast<int>(c.regime)] = buf;
    }
    std::printf("%-20s %22s %22s %22s\n", preset.c_str(), cells[0].empty() ? "-" : cells[0].c_str(),
                cells[1].empty() ? "-" : cells[1].c_str(), cells[2].empty() ? "-" : cells[2].c_str());
  }
  return 0;
}

}  // namespace

int run_validate_collectives(std::span<const std::string> args) {
  Command cmd("validate-collectives",
              "[--published FILE | --nccl-tests LOG[,LOG…] --fabric F] [--rows] [--mapping] [--calibration CALIB.json | "
              "--extrapolate | --intervals] [--json | --csv]",
              "Predicts every row of published nccl-tests output from the cluster's nominal description (the "
              "fabric preset of the committed cluster table, the row's shape, NCCL_ALGO/NCCL_PROTO from its env) "
              "and prints the error per size regime (latency <= 64 KiB, middle, bandwidth >= 64 MiB) beside NCCL's "
              "own tuning model (all-to-all: the closed form max(intra, inter) + latency; send/recv: the raw DES of one "
              "message per pair). With --nccl-tests: the "
              "rows of your own cluster's nccl-tests logs on the fabric preset you name.");
  cmd.options().add_options()
      ("published", po::value<std::string>()->default_value("../shared/data/nccl-published/measurements.csv"),
       "published rows (measurements.csv columns; --csv is the output format); with --nccl-tests --intervals, "
       "the record the intervals are drawn from")
      ("nccl-tests", po::value<std::string>()->value_name("LOG[,LOG…]"),
       "instead of --published: nccl-tests logs of your cluster (shape, GPU, NCCL version and NCCL_DEBUG=INFO's "
       "variables from each log; both placements), predicted on --fabric")
      ("fabric", po::value<std::string>()->value_name("F"), "with --nccl-tests: the fabric preset the logs ran on")
      ("rows", "print every row's prediction")
      ("calibration", po::value<std::string>()->value_name("CALIB.json"),
       "apply a `calibrate --nccl-tests` calibration to every preset (rows it was fitted to are no longer predictions)")
      ("extrapolate", "per cluster with several node counts: fit the collective parameters to its smallest node count "
                      "only and predict its larger ones, calibrated beside nominal")
      ("intervals", "each published cluster held out, its rows' 90 % intervals from the priors and errors of the "
                    "other clusters (as whatif's intervals draw them) and their coverage per regime; with --nccl-tests: "
                    "your logs' rows by the whole published record (--published names it)")
      ("mapping", "print the cluster -> preset table and exit");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  if (!cmd.common().db.empty())  // a shared option every subcommand takes; this one stores nothing
    throw_bad_usage("--db", cmd.common().db,
                    "no --db: validate-collectives records nothing (--json / --csv print every row and regime)");
  const auto& vm = cmd.vm();
  if (cmd.has("mapping")) {
    std::printf("%-14s %-8s %s\n", "gpu contains", "nic word", "preset");
    for (const auto& e : analysis::cluster_presets()) std::printf("%-14s %-8s %s\n", e.gpu, e.nic[0] ? e.nic : "-", e.preset);
    std::printf("# a NIC the row's nic column states ('8x400 Gb/s per tray', '3.2 Tb/s per node') sets its NIC bandwidth\n"
                "# per GPU; one it leaves unstated ('not stated') takes the preset's\n");
    return 0;
  }
  if (cmd.has("extrapolate") && cmd.has("calibration"))
    throw_bad_usage("--extrapolate", "with --calibration", "one of them: --extrapolate fits each cluster's own calibration");
  if (cmd.has("intervals") && (cmd.has("extrapolate") || cmd.has("calibration")))
    throw_bad_usage("--intervals", std::string("with --") + (cmd.has("extrapolate") ? "extrapolate" : "calibration"),
                    "--intervals without --extrapolate / --calibration: its intervals are the nominal model's");
  if (cmd.has("nccl-tests") != cmd.has("fabric"))
    throw UsageError("validate-collectives: --nccl-tests LOG[,LOG…] and --fabric F go together");
  std::vector<analysis::PublishedRow> rows;
  if (cmd.has("nccl-tests")) {
    if (!vm["published"].defaulted() && !cmd.has("intervals"))
      throw_bad_usage("--published", vm["published"].as<std::string>(),
                      "no --published with --nccl-tests (one set of rows) unless --intervals, which draws from it");
    const std::string fabric = vm["fabric"].as<std::string>();
    const std::string preset = topo::preset(fabric, "--fabric").name;  // refused by name before any log is read
    for (const auto& log : split_list(vm["nccl-tests"].as<std::string>(), "--nccl-tests")) {
      auto more = analysis::rows_from_nccl_tests(analysis::read_nccl_tests_output(log), log, preset);
      rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  } else {
    rows = analysis::read_published_rows(vm["published"].as<std::string>());
  }
  if (cmd.has("intervals") && cmd.has("nccl-tests")) {
    const auto record = analysis::read_published_rows(vm["published"].as<std::string>());
    return print_intervals(cmd, analysis::intervals_against_record(rows, record), true);
  }
  if (cmd.has("intervals")) return print_intervals(cmd, analysis::published_intervals(rows), false);
  std::optional<analysis::Calibration> calibration;
  if (cmd.has("calibration")) calibration = analysis::read_calibration(vm["calibration"].as<std::string>());
  const auto predictions = analysis::predict_published(rows, calibration ? &*calibration : nullptr);
  if (cmd.has("extrapolate")) return print_extrapolation(cmd, analysis::extrapolate_published(predictions));
  const auto summary = analysis::summarize(predictions);
  const auto by_preset = analysis::summarize_by_preset(predictions);
  const auto by_collective = analysis::summarize_by_collective(predictions);
  int skipped = 0;
  for (const auto& p : predictions) skipped += !p.skipped.empty();

  // Why rows went unpredicted: CollNet/SHARP (out of scope), GPUs no preset describes (named),
  // an env whose NCCL_ALGO / NCCL_PROTO NCCL would refuse, nccl-tests' tests the model does not price.
  int collnet = 0, refused = 0, unmapped_rows = 0, other_rows = 0, uneven = 0;
  std::set<std::string> unmapped, other_tests;
  for (const auto& p : predictions) {
    if (p.skipped.empty()) continue;
    if (p.preset.empty()) {
      unmapped.insert(p.row->gpu);
      ++unmapped_rows;
    } else if (p.skipped.starts_with("CollNet")) {
      ++collnet;
    } else if (p.skipped.starts_with("not modelled")) {
      other_tests.insert(p.row->collective);
      ++other_rows;
    } else if (p.skipped.starts_with("uneven ranks")) {
      ++uneven;
    } else {
      ++refused;
    }
  }
  if (cmd.common().machine()) {
    nlohmann::json out = {{"rows", nlohmann::json::array()}, {"regimes", nlohmann::json::array()}, {"skipped", skipped}};
    out["skipped_by_reason"] = {{"collnet_sharp", collnet}, {"env_refused_by_nccl", refused},
                                {"no_fabric_preset", unmapped_rows}, {"not_modelled", other_rows},
                                {"uneven_ranks_per_node", uneven},
                                {"gpus_without_preset", unmapped}, {"tests_not_modelled", other_tests}};
    for (const auto& p : predictions) {
      nlohmann::json j = {{"line", p.row->line}, {"gpu", p.row->gpu}, {"preset", p.preset},
                          {"collective", p.row->collective}, {"nodes", p.row->nodes},
                          {"gpus_per_node", p.row->gpus_per_node}, {"size_bytes", p.row->size_bytes},
                          {"measured_us", p.row->time_us}, {"regime", analysis::to_string(analysis::regime_of(p.row->size_bytes))}};
      if (p.stated_nic_GBps) j["stated_nic_GBps"] = *p.stated_nic_GBps;  // per GPU, replacing the preset's
      if (!p.skipped.empty()) {
        j["skipped"] = p.skipped;
      } else {
        j.update({{"algorithm", p.algorithm}, {"protocol", p.protocol}, {"chosen_by", p.chosen_by}, {"dionsim_us", p.dionsim_us},
                  {"baseline", p.baseline}, {"baseline_us", p.baseline_us}, {"nccl_algorithm", p.nccl_algorithm},
                  {"nccl_protocol", p.nccl_protocol}});
      }
      out["rows"].push_back(j);
    }
    for (const auto& s : summary) out["regimes"].push_back(regime_json(s, "dionsim", "baseline"));
    const auto grouped = [&](const char* table, const char* key, const auto& by) {
      out[table] = nlohmann::json::array();
      for (const auto& [group, regimes] : by) {
        for (const auto& s : regimes) {
          nlohmann::json j = regime_json(s, "dionsim", "baseline");
          j[key] = group;
          out[table].push_back(j);
        }
      }
    };
    grouped("regimes_by_preset", "preset", by_preset);
    grouped("regimes_by_collective", "collective", by_collective);
    print_result(cmd.common(), out);
    return 0;
  }
  if (cmd.has("rows")) {
    std::printf("%5s %-13s %-13s %5s %4s %12s %11s %11s %7s %11s %7s  %s\n", "line", "preset", "collective", "nodes",
                "gpn", "size_B", "measured", "dionsim", "ratio", "baseline", "ratio", "dionsim's choice");
    for (const auto& p : predictions) {
      if (!p.skipped.empty()) {
        std::printf("%5d %-13s %-13s %5d %4d %12lld %11.2f  skipped: %s\n", p.row->line, p.preset.c_str(),
                    p.row->collective.c_str(), p.row->nodes, p.row->gpus_per_node,
                    static_cast<long long>(p.row->size_bytes), p.row->time_us, p.skipped.c_str());
        continue;
      }
      // A pair a tuner plugin picked (not NCCL's own model) is named.
      const std::string by = p.chosen_by.empty() || p.chosen_by == "nccl" ? "" : " (" + p.chosen_by + ")";
      std::printf("%5d %-13s %-13s %5d %4d %12lld %11.2f %11.2f %7.3f %11.2f %7.3f  %s/%s%s\n", p.row->line,
                  p.preset.c_str(), p.row->collective.c_str(), p.row->nodes, p.row->gpus_per_node,
                  static_cast<long long>(p.row->size_bytes), p.row->time_us, p.dionsim_us,
                  p.dionsim_us / p.row->time_us, p.baseline_us, p.baseline_us / p.row->time_us, p.algorithm.c_str(),
                  p.protocol.c_str(), by.c_str());
    }
  }
  std::string why = std::to_string(collnet) + " CollNet/SHARP";
  if (refused > 0) why += ", " + std::to_string(refused) + " whose NCCL_ALGO/NCCL_PROTO leave NCCL nothing to run";
  if (!unmapped.empty()) {
    why += ", " + std::to_string(unmapped_rows) + " with no fabric preset for GPU";
    for (const auto& g : unmapped) why += " '" + g + "'";
  }
  if (uneven > 0) why += ", " + std::to_string(uneven) + " with uneven ranks per node";
  if (!other_tests.empty()) {
    why += ", " + std::to_string(other_rows) + " of tests not modelled:";
    for (const auto& t : other_tests) why += " " + t;
  }
  std::printf("# %zu rows, %d skipped (%s); goal: latency within x1.5, middle 25 %%, bandwidth 10 %%\n",
              predictions.size(), skipped, why.c_str());
  std::printf("%-24s %6s %18s %18s %16s %16s\n", "regime", "rows", "dionsim in goal %", "baseline in goal %",
              "dionsim med |e|", "baseline med |e|");
  for (const auto& s : summary) {
    std::printf("%-24s %6d %18.1f %18.1f %16.3f %16.3f\n", analysis::to_string(s.regime), s.rows,
                pct(s.dionsim_within, s.rows), pct(s.baseline_within, s.rows), s.dionsim_median_abs_err,
                s.baseline_median_abs_err);
  }
  // Per fabric preset (where a prediction can be trusted and where it cannot) and per collective.
  const auto print_grouped = [](const char* title, const char* key, const auto& by) {
    std::printf("# by %s: in goal %%, dionsim / baseline (rows)\n%-20s %22s %22s %22s\n", title, key, "latency",
                "middle", "bandwidth");
    for (const auto& [group, regimes] : by) {
      std::string cells[3];
      for (const auto& s : regimes) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.0f / %.0f (%d)", pct(s.dionsim_within, s.rows), pct(s.baseline_within, s.rows),
                      s.rows);
        cells[static_cast<int>(s.regime)] = buf;
      }
      std::printf("%-20s %22s %22s %22s\n", group.c_str(), cells[0].empty() ? "-" : cells[0].c_str(),
                  cells[1].empty() ? "-" : cells[1].c_str(), cells[2].empty() ? "-" : cells[2].c_str());
    }
  };
  print_grouped("fabric preset", "preset", by_preset);
  print_grouped("collective", "collective", by_collective);
  return 0;
}

}  // namespace dionsim::cli
