#!/usr/bin/python3
"""Report plots of the deferral study from `dionsim deferral --json` output (python3-matplotlib).

  scripts/deferral_plots.py --worlds worlds.json --waits iid.json skew.json ... --out DIR

--worlds: configurations over several world sizes and capacity factors (one model, one stream)
          -> DIR/deferral_vs_world.png: simulated deferred_fraction per world, one line per
             capacity_factor, with the spec §4.12 analytic prediction dashed.
--waits:  configurations that differ in the gradient stream (--norms)
          -> DIR/deferral_waits.png: histogram of how many steps a deferred winner waited.
Each input file holds one JSON array (or several concatenated, as from a shell loop).
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
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
            rows.extend(value if isinstance(value, list) else [value])
    return rows


def c_label(c):
    return "auto" if c == "auto" else f"c = {c:g}"


def plot_worlds(rows, out):
    groups = {}
    for r in rows:
        groups.setdefault(str(r["capacity_factor"]), []).append(r)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    # A configuration without any deferred row has no place on a log axis: it is drawn as an open
    # triangle on the bottom edge (not connected to the measured points).
    positive = [r["deferred_fraction"] for r in rows if r["deferred_fraction"] > 0]
    floor = min(positive) / 3 if positive else 1e-6
    any_zero = False
    for key in sorted(groups, key=lambda k: (k == "auto", float(k) if k != "auto" else 0.0)):
        rs = sorted(groups[key], key=lambda r: r["world"])
        pts = [(r["world"], r["deferred_fraction"]) for r in rs if r["packed_groups"] > 0 and r["deferred_fraction"] > 0]
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=c_label(rs[0]["capacity_factor"]) + " (simulated)")
        ana = [(r["world"], r["analytic_deferred_fraction"]) for r in rs
               if r["packed_groups"] > 0 and r["analytic_deferred_fraction"] > floor]
        ax.plot([p[0] for p in ana], [p[1] for p in ana], ls="--", color=line.get_color(), alpha=0.6)
        zero = [r["world"] for r in rs if r["packed_groups"] > 0 and r["deferred_fraction"] == 0]
        if zero:
            any_zero = True
            ax.plot(zero, [floor] * len(zero), ls="none", marker="v", mfc="none", color=line.get_color(), ms=8)
    r0 = rows[0]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("deferred winners / winners")
    title = (f"global_capped deferral, {r0['model']}, f = {r0['fraction']}, {r0['norms']}, "
             f"{r0['steps']} steps x {r0['trials']} trial(s)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    handles.append(plt.Line2D([], [], ls="--", color="gray"))
    labels.append("spec §4.12 analytic (first step)")
    if any_zero:
        handles.append(plt.Line2D([], [], ls="none", marker="v", mfc="none", color="gray"))
        labels.append("no deferred row in the run")
    ax.set_ylim(bottom=floor / 1.5)
    ax.legend(handles, labels, fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "deferral_vs_world.png")
    fig.savefig(path, dpi=130)
    print(path)


def plot_waits(rows, out):
    fig, ax = plt.subplots(figsize=(7.5, 5))
    n = len(rows)
    width = 0.8 / max(n, 1)
    for i, r in enumerate(rows):
        hist = {h["steps"]: h["count"] for h in r["wait_histogram"]}
        total = sum(hist.values())
        if total == 0:
            continue
        xs = sorted(hist)
        ax.bar([x + (i - (n - 1) / 2) * width for x in xs], [hist[x] / total for x in xs], width=width,
               label=f"{r['norms']}  (deferred {r['deferred_fraction']:.2e}, censored {r['waits_censored']})")
    r0 = rows[0]
    ax.set_yscale("log")
    ax.set_xlabel("steps a deferred winner waited before it was applied")
    ax.set_ylabel("share of applied deferred winners")
    ax.set_title(f"waiting times, {r0['model']}, world {r0['world']}, c = {r0['capacity_factor']}, "
                 f"f = {r0['fraction']}, {r0['steps']} steps x {r0['trials']} trial(s)", fontsize=9)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "deferral_waits.png")
    fig.savefig(path, dpi=130)
    print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", nargs="*", default=[], help="JSON over world sizes and capacity factors")
    ap.add_argument("--waits", nargs="*", default=[], help="JSON of configurations differing in --norms")
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.worlds:
        plot_worlds(load(args.worlds), args.out)
    if args.waits:
        plot_waits(load(args.waits), args.out)
    if not args.worlds and not args.waits:
        ap.error("nothing to plot: give --worlds and/or --waits")


if __name__ == "__main__":
    main()
