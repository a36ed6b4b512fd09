#!/usr/bin/python3
"""Checks the series `dionsim report --dump-series` wrote against the database itself (issue 20):

* no line joins configurations that differ in a key the panel does not show: inside a line, runs
  differ only in x, the panel's along_x keys and its same_metric (merged) keys; one point per x;
* at a point, merged runs differ only in same_metric keys and have the plotted value (read here
  from the database, not from the dump);
* every configuration key has a role (x, facet, legend, along_x, follows, same_metric, fixed), fixed
  keys have their one value in every run of the panel, facet and legend values are the runs' own;
* a band exactly where the database holds <metric>_lo and <metric>_hi.

    check_series.py DB SERIES.json [--expect-panel STUDY:METRIC:X ...] [--expect-deferral FILE ...]
Exit 0 when every check passes, 1 with one line per failure.
"""
import argparse
import collections
import json
import sqlite3
import sys

MISSING = "-"


def value(config, key):
    v = config.get(key)
    if v is None:
        return MISSING
    if key == "fabric_family" and "fabric" in config:
        return config["fabric"].split("@")[0]
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def load_db(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    configs, metrics = {}, collections.defaultdict(dict)
    for rid, cj in con.execute("SELECT id, config_json FROM runs"):
        c = json.loads(cj)
        if isinstance(c.get("fabric"), str):
            c["fabric_family"] = c["fabric"].split("@")[0]
        configs[rid] = c
    for rid, name, v in con.execute("SELECT run_id, name, value FROM metrics WHERE step IS NULL AND rank IS NULL"):
        metrics[rid][name] = v
    for rid, m in metrics.items():
        for s in ("", "_lo", "_hi"):
            if "a2a_payload_bytes" + s in m:
                m["a2a_payload_MB" + s] = m["a2a_payload_bytes" + s] / 1e6
    return configs, metrics


def check_panel(where, panel, configs, metrics, errors, histogram=None):
    x, metric = panel["x"], panel["metric"]
    roles = {x} | set(panel["facets"]) | set(panel["legend"]) | set(panel["along_x"]) | set(panel["follows"]) \
        | set(panel["same_metric"]) | set(panel["fixed"])
    loose = set(panel["along_x"]) | set(panel["same_metric"])
    run_ids = [rid for line in panel["lines"] for p in line["points"] for rid in p["run_ids"]]
    for rid in run_ids:
        c = configs[rid]
        for k in c:
            if k not in roles and not (histogram and k == "wait_steps"):
                errors.append(f"{where}: key {k} of run {rid} has no role")
        for k, v in panel["fixed"].items():
            if value(c, k) != v:
                errors.append(f"{where}: fixed {k}={v} but run {rid} has {value(c, k)}")
    for li, line in enumerate(panel["lines"]):
        lw = f"{where} line {li} {line['facet']} {line['legend']}"
        xs = [p["x"] for p in line["points"]]
        if len(xs) != len(set(xs)) or xs != sorted(xs):
            errors.append(f"{lw}: x values not one per point in order: {xs}")
        runs = [rid for p in line["points"] for rid in p["run_ids"]]
        keys = {k for rid in runs for k in configs[rid]}
        for k in keys:
            if k == x or k in loose:
                continue
            vals = {value(configs[rid], k) for rid in runs}
            if len(vals) > 1:
                errors.append(f"{lw}: joins runs that differ in unshown key {k}: {sorted(map(str, vals))}")
        for k, v in list(line["facet"].items()) + list(line["legend"].items()):
            for rid in runs:
                if value(configs[rid], k) != v:
                    errors.append(f"{lw}: {k}={v} but run {rid} has {value(configs[rid], k)}")
        for k in panel["along_x"]:
            for p in line["points"]:
                if len({value(configs[rid], k) for rid in p["run_ids"]}) > 1:
                    errors.append(f"{lw}: along_x key {k} has several values at x={p['x']}")
        for p in line["points"]:
            for rid in p["run_ids"]:
                if histogram is None and value(configs[rid], x) != p["x"]:
                    errors.append(f"{lw}: run {rid} has {x}={value(configs[rid], x)}, drawn at {p['x']}")
                truth = histogram(rid, p["x"]) if histogram else metrics[rid].get(metric)
                if truth is None or abs(truth - p["y"]) > 1e-9 * max(1.0, abs(truth)):
                    errors.append(f"{lw}: run {rid} {metric} is {truth} in the DB, drawn as {p['y']}")
                if histogram is None:
                    has_band = metric + "_lo" in metrics[rid] and metric + "_hi" in metrics[rid]
                    if has_band != ("lo" in p):
                        errors.append(f"{lw}: run {rid}: band drawn={'lo' in p}, stored={has_band}")
            if len(p["run_ids"]) > 1:
                for k in {k for rid in p["run_ids"] for k in configs[rid]}:
                    if k in panel["same_metric"] or k == x:
                        continue
                    if len({value(configs[rid], k) for rid in p["run_ids"]}) > 1:
                        errors.append(f"{lw}: point x={p['x']} merges runs that differ in {k}")
    return len(panel["lines"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("series")
    ap.add_argument("--expect-panel", nargs="*", default=[], help="STUDY:METRIC:X panels that must exist")
    ap.add_argument("--expect-deferral", nargs="*", default=[], help="deferral plot files that must exist")
    ap.add_argument("--expect-studies", type=int)
    ap.add_argument("--expect-extrapolation", help="JSON the extrapolation's spec must equal")
    args = ap.parse_args()
    configs, metrics = load_db(args.db)
    dump = json.load(open(args.series))
    errors, lines = [], 0
    panels = set()
    for si, study in enumerate(dump["studies"], 1):
        for panel in study["panels"]:
            panels.add(f"{si}:{panel['metric']}:{panel['x']}")
            lines += check_panel(f"study {si} {panel['file']}", panel, configs, metrics, errors)
    waits = collections.defaultdict(dict)
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    for rid, v, lab in con.execute("SELECT run_id, value, labels_json FROM metrics WHERE name = 'wait_steps_count'"):
        waits[rid][json.loads(lab)["steps"]] = v
    for panel in (dump.get("deferral") or {}).get("panels", []):
        histogram = None
        if panel["x"] == "wait_steps":
            def histogram(rid, steps):
                total = sum(waits[rid].values())
                return waits[rid].get(steps, 0) / total if total else None
        lines += check_panel(f"deferral {panel['file']}", panel, configs, metrics, errors, histogram)
    deferral_files = {p["file"] for p in (dump.get("deferral") or {}).get("panels", [])}
    for want in args.expect_panel:
        if want not in panels:
            errors.append(f"no panel {want} (have {sorted(panels)})")
    for want in args.expect_deferral:
        if want not in deferral_files:
            errors.append(f"no deferral plot {want} (have {sorted(deferral_files)})")
    if args.expect_studies is not None and len(dump["studies"]) != args.expect_studies:
        errors.append(f"{len(dump['studies'])} studies, expected {args.expect_studies}")
    if args.expect_extrapolation:
        ex = dump.get("extrapolation") or {}
        if ex.get("spec") != json.loads(args.expect_extrapolation):
            errors.append(f"extrapolation spec {ex.get('spec')}, expected {args.expect_extrapolation}")
        for line in ex.get("series", []):
            for p in line["points"]:
                if not (p["lo"] <= p["y"] <= p["hi"]) or (line["metric"] == "step_wall_ms" and not p["lo"] < p["hi"]):
                    errors.append(f"extrapolation {line['column']} {line['scope']}: band {p} does not hold its value")
        want = {(c["fabric"], c["nic"]) for c in json.loads(args.expect_extrapolation)["columns"]}
        have = {(l["column"]["fabric"], l["column"]["nic"]) for l in ex.get("series", [])}
        if want != have:
            errors.append(f"extrapolation columns drawn {sorted(map(str, have))}, expected {sorted(map(str, want))}")
    if errors:
        print("\n".join(errors[:50]) + (f"\n... {len(errors)} failures" if len(errors) > 50 else ""))
        sys.exit(1)
    print(f"check_series: {len(panels)} what-if panels, {len(deferral_files)} deferral plots, {lines} lines: ok")


if __name__ == "__main__":
    main()
