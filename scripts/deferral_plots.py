#!/usr/bin/python3
"""Deferral plots and the recommended capacity factor, from `dionsim deferral` results
(python3-matplotlib). `dionsim report` draws them from the `deferral --db` runs of its database;
this script draws the same from `dionsim deferral --json` output:

  scripts/deferral_plots.py --worlds worlds.json --waits iid.json skew.json ... --out DIR

--worlds: configurations over world sizes and capacity factors
          -> DIR/deferral_vs_world.png: simulated deferred fraction vs world, one line per capacity
             factor (and per any other key that varies), the spec §4.12 analytic prediction dashed;
             DIR/deferral_vs_capacity.png: the same vs the capacity factor, one line per world
--waits:  configurations that differ in the gradient stream (--norms) or anything else
          -> DIR/deferral_waits.png: how many steps a deferred winner waited (share per wait)
Each input file holds one JSON array (or several concatenated, as from a shell loop). Lines follow
the data as in the report (scripts/report_series.py): no line joins configurations that differ in a
key the plot does not show.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_plot as rp  # noqa: E402
import report_series as rs  # noqa: E402

# Result fields of `deferral --json` that are not configuration keys.
CONFIG_KEYS = ("model", "optimizer", "world", "fraction", "capacity_factor", "ef", "norms", "steps", "trials",
               "mode", "seed", "momentum_dtype", "replayed")
DEFAULT_TARGET = 1e-4  # deferral --recommend's default target


def _row(run_id, config, metrics, histogram):
    return {"run_id": run_id, "config": dict(config), "metrics": dict(metrics), "wait_histogram": histogram}


def load_json(paths):
    """Rows from `dionsim deferral --json` files."""
    rows = []
    dec = json.JSONDecoder()
    for path in paths:
        text = open(path).read()
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            value, pos = dec.raw_decode(text, pos)
            for r in value if isinstance(value, list) else [value]:
                config = {k: r[k] for k in CONFIG_KEYS if k in r}
                metrics = {k: v for k, v in r.items() if k not in CONFIG_KEYS and isinstance(v, (int, float))}
                rows.append(_row(f"{os.path.basename(path)}#{len(rows)}", config, metrics, r.get("wait_histogram", [])))
    return rows


def load_db(con):
    """Rows from the `deferral --db` runs of an open database (status ok)."""
    runs = collections.OrderedDict()
    for run_id, config_json, name, value, labels in con.execute(
            "SELECT run_id, config_json, name, value, labels_json FROM run_metrics "
            "WHERE kind = 'deferral' AND status = 'ok' ORDER BY run_id"):
        if run_id not in runs:
            runs[run_id] = _row(run_id, rs.stored_config(run_id, config_json), {}, [])
        r = runs[run_id]
        value = rs.stored_value(run_id, name, value)
        if name == "wait_steps_count":
            lab = json.loads(labels)
            if not isinstance(lab, dict) or not isinstance(lab.get("steps"), int):
                raise ValueError(f"run {run_id}: wait_steps_count labels_json: got {labels[:120]}, "
                                 "expected {\"steps\": an integer}")
            r["wait_histogram"].append({"steps": lab["steps"], "count": value})
        else:
            r["metrics"][name] = value
    for r in runs.values():  # what every deferral run stores and the plots read (a KeyError before)
        if "deferred_fraction" not in r["metrics"]:
            raise ValueError(f"run {r['run_id']}: metric deferred_fraction: got none, expected the metric every "
                             "`dionsim deferral --db` run stores")
    return list(runs.values())


def _panel(rows, x, metric, min_points=2):
    p = rs.analyse(rows, x, metric, min_points=min_points)
    if p is None:
        return None
    by_id = {r["run_id"]: r for r in rows}
    for line in p["lines"]:
        for pt in line["points"]:
            ref = by_id[pt["run_ids"][0]]["metrics"].get("analytic_deferred_fraction")
            if ref is not None:
                pt["ref"] = ref
    return p


def panels(rows):
    """[(panel, file, draw options)] of the deferral plots these rows support."""
    out = []
    packed = [r for r in rows if r["metrics"].get("packed_groups", 1) > 0]
    p = _panel(packed, "world", "deferred_fraction")
    if p:
        out.append((p, "deferral_vs_world.png", dict(
            ylabel="deferred winners / winners", xlabel="world size (ranks)", logy=True,
            title="global_capped deferral vs world (dashed: spec §4.12 analytic, first step)")))
    p = _panel(packed, "capacity_factor", "deferred_fraction")
    if p:
        out.append((p, "deferral_vs_capacity.png", dict(
            ylabel="deferred winners / winners", xlabel="capacity factor c (auto: in the table)", logx=False,
            logy=True, title="global_capped deferral vs capacity factor (dashed: spec §4.12 analytic)")))
    bins = []
    for r in rows:
        total = sum(h["count"] for h in r["wait_histogram"])
        for h in r["wait_histogram"]:
            if total > 0:
                bins.append({"run_id": r["run_id"], "config": dict(r["config"], wait_steps=h["steps"]),
                             "metrics": {"share": h["count"] / total}})
    p = rs.analyse(bins, "wait_steps", "share") if bins else None
    if p:
        out.append((p, "deferral_waits.png", dict(
            ylabel="share of applied deferred winners", xlabel="steps a deferred winner waited", logx=False, integer_x=True,
            logy=True, title="waiting times of deferred winners")))
    return out


def recommendations(rows, target=DEFAULT_TARGET):
    """Per configuration without its capacity factor (world, model, stream, ...): the smallest stored
    numeric c whose deferral is <= target, the largest stored c above it, and auto's deferral."""
    keys = sorted({k for r in rows for k in r["config"]} - {"capacity_factor"})
    varying = [k for k in keys if len({rs.value_of(r, k) for r in rows}) > 1]
    groups = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: [rs.sort_value(rs.value_of(r, k)) for k in varying]):
        groups.setdefault(tuple(rs.value_of(r, k) for k in varying), []).append(r)
    table = []
    for key, g in groups.items():
        numeric = sorted((r["config"]["capacity_factor"], r["metrics"]["deferred_fraction"]) for r in g
                         if isinstance(r["config"].get("capacity_factor"), (int, float)))
        ok = [c for c, d in numeric if d <= target]
        best = ok[0] if ok else None
        above = [c for c, d in numeric if d > target and (best is None or c < best)]
        auto = [r["metrics"]["deferred_fraction"] for r in g if r["config"].get("capacity_factor") == "auto"]
        table.append({"config": dict(zip(varying, key)), "recommended_c": best,
                      "largest_c_above_target": above[-1] if above else None,
                      "stored_c": [c for c, _ in numeric], "auto_deferred_fraction": auto[0] if auto else None})
    return varying, table


def recommendation_lines(rows, target):
    """Markdown table lines of recommendations()."""
    varying, table = recommendations(rows, target)
    head = varying + ["recommended c", "largest stored c above target", "stored c", "auto: deferred fraction"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for t in table:
        cells = [str(t["config"][k]) for k in varying]
        cells.append(f"{t['recommended_c']:g}" if t["recommended_c"] is not None
                     else f"none stored (max {max(t['stored_c']):g})" if t["stored_c"] else "-")
        cells.append(f"{t['largest_c_above_target']:g}" if t["largest_c_above_target"] is not None else "-")
        cells.append(", ".join(f"{c:g}" for c in t["stored_c"]) or "-")
        cells.append(f"{t['auto_deferred_fraction']:.3g}" if t["auto_deferred_fraction"] is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def draw(plt, rows, out, prefix=""):
    """Draws every deferral plot into `out`; returns [(panel, file name, title)]."""
    drawn = []
    for panel, name, opts in panels(rows):
        rp.draw_panel(plt, panel, os.path.join(out, prefix + name), **opts)
        drawn.append((panel, prefix + name, opts["title"]))
    return drawn


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", nargs="*", default=[], help="JSON over world sizes and capacity factors")
    ap.add_argument("--waits", nargs="*", default=[], help="JSON of configurations differing in --norms")
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    args = ap.parse_args()
    if not args.worlds and not args.waits:
        ap.error("nothing to plot: give --worlds and/or --waits")
    os.makedirs(args.out, exist_ok=True)
    plt = rp.plt_module()
    if args.worlds:
        rows = load_json(args.worlds)
        for panel, name, opts in panels(rows):
            if name != "deferral_waits.png":
                rp.draw_panel(plt, panel, os.path.join(args.out, name), **opts)
                print(os.path.join(args.out, name))
    if args.waits:
        for panel, name, opts in panels(load_json(args.waits)):
            if name == "deferral_waits.png":
                rp.draw_panel(plt, panel, os.path.join(args.out, name), **opts)
                print(os.path.join(args.out, name))


if __name__ == "__main__":
    main()
