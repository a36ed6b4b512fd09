#!/usr/bin/python3
"""Unit tests of scripts/report_series.py (which lines a report panel draws) and of the checker
tests/cli/issue20/check_series.py (that it catches a line joining configurations that differ in an
unshown key). No matplotlib, no dionsim: synthetic rows with known structure."""
import itertools
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
sys.path.insert(0, HERE)
import check_series  # noqa: E402
import deferral_plots  # noqa: E402
import report_series as rs  # noqa: E402

BASE = {"model": "gpt-1b", "optimizer": "nordion2", "gpus_per_node": 8, "hardware": "h100-sxm", "mfu": 0.45}
FABRICS = {"h100-ndr400": {"nic_effective_GBps": 45.0, "layout": "rail"},
           "p5-efa": {"nic_effective_GBps": 37.5, "layout": "node"}}


def sweep(nodes=(1, 2, 4, 8), caps=(1.0, 1.5, "auto"), fabrics=("h100-ndr400", "p5-efa"), band_for=()):
    """whatif-like rows: scopes x capacity factors (capped only) x fabrics x nodes; the metric depends
    on every key, so every key must split lines; the payload depends on scope and c only."""
    rows = []
    configs = [("local", None), ("global", None)] + [("global_capped", c) for c in caps]
    for i, ((scope, cap), fabric, n) in enumerate(itertools.product(configs, fabrics, nodes)):
        c = dict(BASE, scope=scope, capacity_factor=cap, fabric=fabric, nodes=n, world=8 * n, **FABRICS[fabric])
        cval = 2.0 if cap == "auto" else (cap or 1.0)
        step = 100 + 10 * n * (2 if fabric == "p5-efa" else 1) + 5 * cval + {"local": 0, "global": 7, "global_capped": 3}[scope]
        m = {"step_wall_ms": step, "a2a_payload_MB": 10 * cval + len(scope)}
        if (scope, fabric) in band_for:
            m["step_wall_ms_lo"], m["step_wall_ms_hi"] = step - 1, step + 1
        rows.append({"run_id": i + 1, "config": rs.with_virtual_keys(c), "metrics": m})
    return rows


def checker_errors(rows, panel):
    configs = {r["run_id"]: r["config"] for r in rows}
    metrics = {r["run_id"]: r["metrics"] for r in rows}
    errors = []
    check_series.check_panel("test", panel, configs, metrics, errors)
    return errors


class Panels(unittest.TestCase):
    def test_capacity_factor_sweep_has_no_zigzag(self):
        rows = sweep()
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        shown = set(p["facets"]) | set(p["legend"])
        self.assertEqual(shown, {"scope", "capacity_factor", "fabric"})
        self.assertEqual(p["along_x"], ["world"])
        self.assertEqual(len(p["lines"]), 5 * 2)  # 5 scope/c choices x 2 fabrics
        for line in p["lines"]:
            self.assertEqual([pt["x"] for pt in line["points"]], [1, 2, 4, 8])
        self.assertEqual(checker_errors(rows, p), [])
        self.assertIn("mfu=0.45", rs.describe(p))  # says what it held fixed

    def test_checker_catches_a_line_through_several_capacity_factors(self):
        rows = sweep()
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        capped = [l for l in p["lines"] if l["legend"].get("scope") == "global_capped"
                  and (l["facet"].get("fabric") or l["legend"].get("fabric")) == "h100-ndr400"]
        self.assertEqual(len(capped), 3)
        # The old report's grouping: one line per scope, the capacity factors' points in one line.
        merged = sorted((pt for l in capped for pt in l["points"]), key=lambda pt: pt["x"])
        capped[0]["points"] = merged
        p["lines"] = [l for l in p["lines"] if l is capped[0] or l not in capped]
        errors = checker_errors(rows, p)
        self.assertTrue(any("joins runs that differ in unshown key capacity_factor" in e for e in errors), errors)
        self.assertTrue(any("x values not one per point" in e for e in errors), errors)

    def test_checker_catches_a_wrong_value_and_a_missing_role(self):
        rows = sweep()
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        p["lines"][0]["points"][0]["y"] += 1.0
        del p["fixed"]["mfu"]
        errors = checker_errors(rows, p)
        self.assertTrue(any("drawn as" in e for e in errors), errors)
        self.assertTrue(any("key mfu of run" in e for e in errors), errors)

    def test_a_key_that_changes_with_x_is_not_joined_unless_it_is_a_consequence_of_x(self):
        rows = []
        for i, (n, f) in enumerate([(1, 0.25), (2, 0.5), (4, 0.125)]):
            c = dict(BASE, scope="local", fabric="h100-ndr400", nodes=n, world=8 * n, fraction=f)
            rows.append({"run_id": i + 1, "config": c, "metrics": {"step_wall_ms": 100.0 + n}})
        self.assertIsNone(rs.analyse(rows, "nodes", "step_wall_ms"))

    def test_world_and_tokens_per_gpu_follow_nodes_at_a_fixed_global_batch(self):
        rows = []
        for i, (fabric, gpn) in enumerate([("b200-ndr400", 8), ("gb200-nvl72@64", 4)]):
            for n in (8, 16, 32):
                c = dict(BASE, scope="global", fabric=fabric, gpus_per_node=gpn, nodes=n, world=gpn * n,
                         tokens_per_gpu=4194304 // (gpn * n))
                rows.append({"run_id": len(rows) + 1, "config": rs.with_virtual_keys(c),
                             "metrics": {"step_wall_ms": 1e4 / n + gpn}})
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        self.assertEqual(sorted(p["along_x"]), ["tokens_per_gpu", "world"])
        self.assertEqual(p["follows"]["gpus_per_node"], ["fabric"])
        self.assertEqual(checker_errors(rows, p), [])

    def test_keys_the_metric_does_not_depend_on_are_merged_and_said(self):
        rows = sweep()
        p = rs.analyse(rows, "world", "a2a_payload_MB")
        self.assertIn("fabric", p["same_metric"])
        self.assertEqual(len(p["lines"]), 5)
        self.assertTrue(all(len(pt["run_ids"]) == 2 for l in p["lines"] for pt in l["points"]))
        self.assertIn("is the same for every", rs.describe(p))
        self.assertEqual(checker_errors(rows, p), [])

    def test_a_band_exactly_where_intervals_are_stored(self):
        rows = sweep(band_for=[("global", "p5-efa")])
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        for line in p["lines"]:
            banded = line["legend"].get("scope") == "global" and \
                (line["facet"].get("fabric") or line["legend"].get("fabric")) == "p5-efa"
            self.assertEqual(all("lo" in pt and "hi" in pt for pt in line["points"]), banded)
            self.assertEqual(any("lo" in pt for pt in line["points"]), banded)
        self.assertEqual(checker_errors(rows, p), [])

    def test_legend_overflow_goes_to_facets(self):
        rows = sweep(caps=(1.0, 1.1, 1.25, 1.5, 2.0, "auto"))
        p = rs.analyse(rows, "nodes", "step_wall_ms")
        n_legend = len({tuple(sorted(l["legend"].items(), key=str)) for l in p["lines"]})
        self.assertLessEqual(n_legend, rs.LEGEND_MAX)
        self.assertEqual(p["facets"], ["fabric"])


class Studies(unittest.TestCase):
    def test_a_section_per_study(self):
        a = sweep(nodes=(1, 2))
        b = []
        for i, n in enumerate((1, 2)):
            c = dict(BASE, model="gpt-14b", mfu=0.4, fwd_bwd_ms=None, scope="global", capacity_factor=None,
                     fabric="b200-ndr400", hardware="b200", nodes=n, world=8 * n)
            b.append({"run_id": 100 + i, "config": rs.with_virtual_keys(c), "metrics": {"step_wall_ms": 1.0}})
        groups = rs.studies(a + b)
        self.assertEqual(sorted(len(g) for g in groups), [2, len(a)])

    def test_runs_two_chosen_keys_apart_are_one_study(self):
        rows = sweep(nodes=(1,), caps=(1.0,), fabrics=("h100-ndr400",))
        extra = dict(rows[0]["config"], fabric="p5-efa", shard_group=8, layout="node")
        rows.append({"run_id": 99, "config": extra, "metrics": {"step_wall_ms": 1.0}})
        self.assertEqual(len(rs.studies(rows)), 1)


class StoredConfig(unittest.TestCase):
    def test_interval_options_are_checked_as_whatif_stores_them(self):
        ok = '{"scope": "global", "interval_options": {"net_step_prior_us": [0, 5], "fabric_spread": 0.05}}'
        self.assertEqual(rs.stored_config(1, ok)["interval_options"]["net_step_prior_us"], [0, 5])
        for bad in ('{"interval_options": {"net_step_prior_us": [0]}}', '{"interval_options": {"fabric_spread": "x"}}',
                    '{"interval_options": {"other": 1}}', '{"interval_options": {}}', '{"interval_options": [1, 2]}'):
            with self.assertRaisesRegex(ValueError, "run 7: config_json.interval_options: got .* expected an object"):
                rs.stored_config(7, bad)
        # Runs that differ only in their interval options are told apart in tables and plots.
        row = {"config": rs.stored_config(1, ok)}
        self.assertEqual(rs.value_of(row, "interval_options"), '{"fabric_spread": 0.05, "net_step_prior_us": [0, 5]}')


class Deferral(unittest.TestCase):
    def test_recommended_c_is_the_smallest_stored_c_under_the_target(self):
        rows = []
        for world, table in ((16, {1.0: 1e-2, 1.25: 5e-5, 1.5: 1e-5, "auto": 2e-4}), (64, {1.0: 3e-2, 1.5: 2e-3})):
            for c, d in table.items():
                rows.append({"run_id": len(rows) + 1, "config": {"model": "m", "world": world, "capacity_factor": c},
                             "metrics": {"deferred_fraction": d}, "wait_histogram": []})
        varying, table = deferral_plots.recommendations(rows, 1e-4)
        self.assertEqual(varying, ["world"])
        self.assertEqual([(t["config"]["world"], t["recommended_c"], t["largest_c_above_target"]) for t in table],
                         [(16, 1.25, 1.0), (64, None, 1.5)])
        self.assertEqual(table[0]["auto_deferred_fraction"], 2e-4)


if __name__ == "__main__":
    unittest.main()
