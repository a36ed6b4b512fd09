#!/usr/bin/env python3
"""dionsim what-if report: sweep tables and plots from a dionsim SQLite database.

    report.py report --db results/demo.db --out results/report [--dump-series FILE]
        -> OUT/report.md (tables + PNG links), OUT/report.html (self-contained, PNGs inlined) and the
           PNGs. One section per study (runs that differ from another run of the study in at most two
           of the keys a user chooses, scripts/report_series.py): step and optimizer wall vs nodes
           (vs GPUs when GPUs per node vary), all-to-all payload vs world, exposed communication vs
           NIC bandwidth where a line sweeps it, optimizer wall and predicted deferral vs capacity
           factor where a line sweeps at least three; every panel groups its lines by every key that
           varies (facets and legend entries) and says what it held fixed. A metric stored with
           `<metric>_lo` / `<metric>_hi` gets its interval as a band.
        + a deferral section from the `dionsim deferral --db` runs: deferral vs world and vs
          capacity factor, waiting times, the smallest stored c per world with deferral <= --deferral-target
        + with --dionsim EXE, when the database holds them: a validation section (the latest
          `dionsim validate --db` run) and an extrapolation study (OUT/extrapolation.png: predicted step
          and optimizer wall vs nodes, three scopes, with the 90 % interval band of the latest calibration
          that has a covariance, propagated to first order) of --extrapolate JSON (model, gpus_per_node,
          fabric [...], nic [...], nodes [...]; `dionsim report --extrapolate` validates it), by default
          of the database's own what-if runs on the calibration's GPU
        --dump-series FILE: every plotted series as JSON (the roles of every configuration key per panel
          and the run ids behind every point), for tests and notebooks
    report.py validate --dionsim build/dionsim --csv ../shared/data/seed-measurements.csv
        -> the seed validation table (Markdown) on stdout: predicted vs measured, error % per metric
    report.py validate-h200 --dionsim build/dionsim --anchors ../shared/data/h200-anchors.csv --calibration CAL
        -> the 2 x H200 reference opt.step times vs predicted optimizer wall (CAL: dionsim calibrate of the traces)

Needs only python3 and python3-matplotlib (Debian). `dionsim report` runs the first form. Every
output file is written to a temporary file beside it and renamed.
"""
import argparse
import base64
import collections
import csv
import html as htmllib
import json
import math
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deferral_plots  # noqa: E402
import report_plot as rp  # noqa: E402
import report_series as rs  # noqa: E402

SCOPES = ["local", "global", "global_capped"]
COLORS = rp.SCOPE_COLORS
TABLE_COLUMNS = [
    ("fabric", "fabric", "{}"), ("scope", "scope", "{}"), ("fraction", "frac", "{:g}"),
    ("capacity_factor", "cap", "{}"), ("nodes", "nodes", "{}"), ("world", "world", "{}"),
    ("nic_effective_GBps", "nic GB/s", "{:.1f}"), ("step_wall_ms", "step ms", "{:.2f}"),
    ("opt_wall_ms", "opt ms", "{:.2f}"), ("opt_gpu_ms", "opt GPU ms", "{:.2f}"),
    ("opt_gpu_idle_pct", "GPU idle %", "{:.1f}"), ("a2a_payload_MB", "a2a MB", "{:.1f}"),
    ("a2a_ms", "a2a ms", "{:.2f}"), ("exposed_comm_ms", "exposed ms", "{:.2f}"), ("mfu_pct", "MFU %", "{:.2f}"),
    ("deferral_pct", "deferral %", "{:.4f}"),
    ("step_wall_ms_collectives_at_record", "step ms, collectives at the record's ends", "{:.2f}"),
]
# A column of two stored metrics <key>_low and <key>_high, shown as "low – high" (whatif's stress
# bounds: the step with every collective at the published record's ends).
RANGE_COLUMNS = {"step_wall_ms_collectives_at_record"}
# Shown before the fixed columns when they vary within a study.
VARYING_COLUMNS = [("model", "model", "{}"), ("hardware", "hardware", "{}"), ("gpus_per_node", "GPUs/node", "{}"),
                   ("shard_group", "shard", "{}"), ("tokens_per_gpu", "tok/GPU", "{}"), ("optimizer", "optimizer", "{}"),
                   ("mfu", "mfu", "{}"), ("fwd_bwd_ms", "fwd+bwd ms", "{}"),
                   ("interval_options", "interval options", "{}")]


def fail(message, code=3):
    print(f"report.py: error: {message}", file=sys.stderr)
    sys.exit(code)


# ---- reading the database ------------------------------------------------------------------------

def connect(db_path):
    if not os.path.exists(db_path):
        fail(f"{db_path}: no such database", 4)
    try:
        return sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        fail(f"{db_path}: {e} (expected a dionsim database)", 4)


def load_whatif_rows(db_path):
    """[{run_id, config, metrics}] of the database's simulated what-if runs (status ok)."""
    con = connect(db_path)
    try:
        runs = collections.OrderedDict()
        for run_id, config_json, name, value in con.execute(
                "SELECT run_id, config_json, name, value FROM run_metrics "
                "WHERE kind = 'whatif' AND status = 'ok' AND mode = 'simulated' ORDER BY run_id"):
            if run_id not in runs:
                runs[run_id] = {"run_id": run_id, "config": rs.with_virtual_keys(rs.stored_config(run_id, config_json)),
                                "metrics": {}}
            r = runs[run_id]
            r["metrics"][name] = rs.stored_value(run_id, name, value)
        deferral_rows = deferral_plots.load_db(con)
    except sqlite3.Error as e:
        fail(f"{db_path}: {e} (expected a dionsim database)", 4)
    except ValueError as e:  # a stored configuration of the wrong shape (report_series.stored_config)
        fail(f"{db_path}: {e}", 3)
    finally:
        con.close()
    rows = list(runs.values())
    for r in rows:
        # deferral_fraction (issue 19: the deferral engine's estimate, a fraction) is shown in percent
        # as deferral_pct; runs stored before it hold deferral_pct itself (whatif's own formula).
        if "deferral_fraction" in r["metrics"]:
            r["metrics"]["deferral_pct"] = 100.0 * r["metrics"]["deferral_fraction"]
        for suffix in ("", "_lo", "_hi"):
            if "a2a_payload_bytes" + suffix in r["metrics"]:
                r["metrics"]["a2a_payload_MB" + suffix] = r["metrics"]["a2a_payload_bytes" + suffix] / 1e6
    if not rows and not deferral_rows:
        fail(f"{db_path}: no whatif or deferral runs (run `dionsim whatif ... --db {db_path}` first)", 3)
    return rows, deferral_rows


def cell(r, key):
    v = r["config"][key] if key in r["config"] else r["metrics"].get(key)
    return rs.value_of(r, key) if isinstance(v, (dict, list)) else v


def sweep_key(r):
    c = r["config"]
    return ([rs.sort_value(rs.value_of(r, k)) for k in ("model", "hardware", "shard_group")],
            c.get("fabric", ""), SCOPES.index(c["scope"]) if c.get("scope") in SCOPES else 9, c.get("fraction", 0),
            str(c.get("capacity_factor")), c.get("nic_effective_GBps", 0), c.get("world", 0), c.get("nodes", 0))


# ---- page: Markdown and HTML built side by side --------------------------------------------------

class Page:
    def __init__(self, out, title):
        self.out, self.md = out, [f"# {title}", ""]
        self.html = ["<!doctype html><html><head><meta charset='utf-8'>", f"<title>{htmllib.escape(title)}</title>",
                     "<style>body{font-family:sans-serif;max-width:1400px;margin:auto;padding:0 8px}"
                     "img{max-width:100%;height:auto}table{border-collapse:collapse;font-size:12px}"
                     "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
                     "p.caption{font-size:12px;color:#444}</style></head><body>",
                     f"<h1>{htmllib.escape(title)}</h1>"]

    def heading(self, level, text):
        self.md += ["#" * level + " " + text, ""]
        self.html.append(f"<h{level}>{htmllib.escape(text)}</h{level}>")

    def para(self, text, caption=False):
        self.md += [text, ""]
        self.html.append(f"<p{' class=caption' if caption else ''}>{htmllib.escape(text)}</p>")

    def image(self, png, title):
        self.md += [f"![{title}]({png})", ""]
        with open(os.path.join(self.out, png), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        self.html.append(f"<img alt='{htmllib.escape(title)}' src='data:image/png;base64,{data}'/>")

    def table(self, lines):
        """Markdown table lines (header, separator, rows)."""
        self.md += lines + [""]
        cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
        self.html.append("<table><tr>" + "".join(f"<th>{htmllib.escape(c)}</th>" for c in cells[0]) + "</tr>")
        for row in cells[2:]:
            self.html.append("<tr>" + "".join(f"<td>{htmllib.escape(c)}</td>" for c in row) + "</tr>")
        self.html.append("</table>")

    def write(self):
        rp.write_atomically(os.path.join(self.out, "report.md"), "\n".join(self.md))
        rp.write_atomically(os.path.join(self.out, "report.html"), "\n".join(self.html + ["</body></html>"]))


# ---- tables --------------------------------------------------------------------------------------

def markdown_table(rows):
    extra = [c for c in VARYING_COLUMNS if len({rs.value_of(r, c[0]) for r in rows}) > 1]
    columns = extra + TABLE_COLUMNS
    head = "| " + " | ".join(c[1] for c in columns) + " |"
    sep = "|" + "|".join("---:" if i > 1 + len(extra) else "---" for i in range(len(columns))) + "|"
    lines = [head, sep]
    for r in sorted(rows, key=sweep_key):
        cells = []
        for key, _, fmt in columns:
            v = cell(r, key)
            if key == "capacity_factor" and v is None:
                v = "-"
            if key in RANGE_COLUMNS:
                low, high = r["metrics"].get(key + "_low"), r["metrics"].get(key + "_high")
                v = "-" if low is None or high is None else fmt.format(low) + " – " + fmt.format(high)
            text = "-" if v is None or v == "" else (fmt.format(v) if not isinstance(v, str) else v)
            lo, hi = r["metrics"].get(key + "_lo"), r["metrics"].get(key + "_hi")
            if key not in r["config"] and lo is not None and hi is not None:
                text += " ± " + fmt.format((hi - lo) / 2)  # the stored interval's half-width
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---- the what-if panels of one study -------------------------------------------------------------

def study_panels(rows):
    """[(panel, file stem, draw options)] for one study's rows."""
    scale = "world" if len({r["config"].get("gpus_per_node") for r in rows}) > 1 else "nodes"
    scale_label = "GPUs (world)" if scale == "world" else "nodes"
    specs = [
        ("step_wall_ms", scale, 2, dict(ylabel="step wall (ms)", xlabel=scale_label, title="training step wall time")),
        ("opt_wall_ms", scale, 2, dict(ylabel="optimizer wall (ms)", xlabel=scale_label, title="optimizer step wall time")),
        ("a2a_payload_MB", "world", 2, dict(ylabel="MB per rank per step", xlabel="world size (GPUs)", logy=True,
                                            title="optimizer all-to-all payload (fwd + rev, sent, MB = 1e6 B)")),
        ("exposed_comm_ms", "nic_effective_GBps", 2, dict(
            ylabel="exposed communication (ms)", xlabel="NIC effective bandwidth per GPU (GB/s)",
            title="exposed communication (FSDP + optimizer) vs bandwidth")),
        ("opt_exposed_comm_ms", "nic_effective_GBps", 2, dict(
            ylabel="exposed communication (ms)", xlabel="NIC effective bandwidth per GPU (GB/s)",
            title="optimizer exposed communication vs bandwidth")),
        ("opt_wall_ms", "capacity_factor", 3, dict(ylabel="optimizer wall (ms)", logx=False,
                                                   xlabel="capacity factor c (auto: in the table)",
                                                   title="optimizer step wall time vs capacity factor")),
        ("deferral_pct", "capacity_factor", 3, dict(ylabel="predicted deferral (%)", logx=False, logy=True,
                                                    xlabel="capacity factor c (auto: in the table)",
                                                    title="predicted global_capped deferral vs capacity factor")),
    ]
    out = []
    for metric, x, min_points, opts in specs:
        panel = rs.analyse(rows, x, metric, min_points=min_points)
        if panel is not None:
            out.append((panel, f"{metric}_vs_{x}", opts))
    return out


def study_title(rows):
    models = sorted({str(rs.value_of(r, "model")) for r in rows})
    fixed = [str(rs.value_of(rows[0], k)) for k in ("hardware", "fabric_family")
             if len({rs.value_of(r, k) for r in rows}) == 1]
    return f"{' vs '.join(models)}{', ' if fixed else ''}{', '.join(fixed)} ({len(rows)} configurations)"


def report(args):
    rows, deferral_rows = load_whatif_rows(args.db)
    if args.extrapolate and None in load_calibration(args.db):  # before drawing anything
        fail(f"{args.db}: --extrapolate needs a step-model calibration with a covariance and a measured run of "
             "its GPU in the database (`dionsim calibrate ... --db`)", 3)
    os.makedirs(args.out, exist_ok=True)
    plt = rp.plt_module()
    page = Page(args.out, "dionsim what-if report")
    groups = rs.studies(rows) if rows else []
    page.para(f"{len(rows)} simulated configurations from `{os.path.basename(args.db)}` in {len(groups)} "
              f"stud{'y' if len(groups) == 1 else 'ies'}"
              + (f", {len(deferral_rows)} deferral runs" if deferral_rows else "")
              + ". Times per training step; payload = optimizer all-to-all bytes sent per rank (fwd + rev, "
              "MB = 1e6 B); exposed = FSDP beyond compute + optimizer collectives the GPU waits on; deferral % = "
              "predicted for global_capped. A study: runs that differ from another of its runs in at most two "
              "of the keys a user chooses. Each plot draws one line per combination of the keys that vary "
              "(sub-plots and legend) and lists the keys it held fixed.")
    dump = {"database": os.path.abspath(args.db), "runs": {}, "studies": []}
    for i, srows in enumerate(groups, 1):
        title = study_title(srows)
        page.heading(2, f"Study {i}: {title}" if len(groups) > 1 else title)
        entry = {"title": title, "run_ids": [r["run_id"] for r in srows], "panels": []}
        for panel, stem, opts in study_panels(srows):
            png = f"study{i}_{stem}.png"
            rp.draw_panel(plt, panel, os.path.join(args.out, png), **opts)
            page.heading(3, opts["title"])
            page.image(png, opts["title"])
            page.para(rs.describe(panel), caption=True)
            entry["panels"].append(dict(panel, file=png))
        page.heading(3, "Sweep table")
        page.table(markdown_table(srows))
        dump["studies"].append(entry)
        for r in srows:
            dump["runs"][str(r["run_id"])] = {k: v for k, v in r["config"].items() if k != "fabric_family"}
    if deferral_rows:
        dump["deferral"] = deferral_section(args, plt, page, deferral_rows)
        for r in deferral_rows:
            dump["runs"][str(r["run_id"])] = r["config"]
    dump["extrapolation"] = calibration_sections(args, plt, page, rows)
    page.write()
    if args.dump_series:
        rp.write_atomically(args.dump_series, json.dumps(dump, indent=1, default=str))
    print(os.path.join(args.out, "report.html"))


def deferral_section(args, plt, page, rows):
    page.heading(2, f"Deferral ({len(rows)} `dionsim deferral --db` runs)")
    page.para("global_capped deferral simulated with the optimizer's own capped selection and pooled pack "
              "(docs/deferral.md); one line per combination of the keys that vary.")
    panels = []
    for panel, png, title in deferral_plots.draw(plt, rows, args.out):
        page.heading(3, title)
        page.image(png, title)
        page.para(rs.describe(panel), caption=True)
        panels.append(dict(panel, file=png))
    page.heading(3, f"Recommended capacity factor per world (deferral <= {args.deferral_target:g})")
    page.para("The smallest stored c whose simulated deferred fraction is at most the target (the true "
              "smallest c lies between the largest stored c above the target and it; "
              "`dionsim deferral --recommend` bisects).", caption=True)
    page.table(deferral_plots.recommendation_lines(rows, args.deferral_target))
    return {"panels": panels, "recommendations": deferral_plots.recommendations(rows, args.deferral_target)[1]}

# ---- calibration: validation section and extrapolation study -------------------------------------

def load_validation(db_path):
    """The latest leave-one-out `dionsim validate --db` run: (rows, summary, coverage) or None."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        run = con.execute("SELECT id FROM runs WHERE kind = 'validate' AND status = 'ok' AND id IN "
                          "(SELECT run_id FROM metrics WHERE name = 'loo_error_pct') ORDER BY id DESC LIMIT 1").fetchone()
        if run is None:
            return None
        rows, summary, coverage = [], collections.OrderedDict(), collections.OrderedDict()
        for name, value, labels in con.execute(
                "SELECT name, value, labels_json FROM metrics WHERE run_id = ? ORDER BY rowid", (run[0],)):
            lab = json.loads(labels)
            if name == "loo_error_pct":
                rows.append(dict(lab, error_pct=value))
            elif name in ("loo_mean_abs_error_pct", "loo_max_abs_error_pct"):
                summary.setdefault(lab["metric"], {"count": lab["count"]})[name] = value
            elif name in ("loo_coverage", "loo_mean_half_width_pct"):
                # the cross-validated intervals (validate runs recorded since issue 19b)
                coverage.setdefault(lab["metric"], {"count": lab["count"], "covered": lab["covered"]})[name] = value
        return rows, summary, coverage
    finally:
        con.close()


def load_calibration(db_path):
    """The newest stored calibration with a covariance, and a measured configuration of its GPU."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        cal = None
        for (cal_id, body) in con.execute("SELECT id, body_json FROM calibrations ORDER BY id DESC"):
            doc = json.loads(body)
            # dionsim stores calibrations it validated; another tool's edit is named, not a traceback.
            if not (isinstance(doc, dict) and isinstance(doc.get("parameters", {}), dict)
                    and isinstance(doc.get("hardware", ""), str)):
                fail(f"{db_path}: calibration {cal_id}: body_json: got {body[:120]}, expected a dionsim calibration", 3)
            if doc.get("covariance") and "fwd_bwd_ms" in doc.get("parameters", {}):
                cal = doc
                break
        if cal is None:
            return None, None
        config = None
        for (run_id, cj) in con.execute("SELECT id, config_json FROM runs WHERE mode = 'measured' ORDER BY id"):
            c = rs.stored_config(run_id, cj)
            if "model" in c and "gpus_per_node" in c and str(c.get("hardware", "")).lower()[:4] == cal["hardware"].lower()[:4]:
                config = c
                break
        return cal, config
    except (ValueError, KeyError, TypeError) as e:  # JSON that is not one, a stored config of the wrong shape
        fail(f"{db_path}: {e}", 3)
    finally:
        con.close()



def run_sweep(exe, cal, config, path, spec):
    """(column, scope, nodes) -> {metric: value} of whatif --json with the calibration as stored (its
    covariance and leave-one-out model error included: whatif's 90 % intervals, <metric>_lo/_hi)."""
    with open(path, "w") as f:
        json.dump(cal, f)
    out = {}
    for i, col in enumerate(spec["columns"]):
        rows = whatif_json(exe, [
            "--model", spec["model"], "--optimizer", config.get("optimizer", "nordion2").lower(),
            "--ns", config.get("ns", "gram"), "--fraction", str(config.get("fraction", 0.25)),
            "--gpus-per-node", str(spec["gpus_per_node"]), "--hardware", calibration_hardware(cal),
            "--scope", "local,global,global_capped", "--nodes", ",".join(str(n) for n in spec["nodes"]),
            "--fabric", col["fabric"], "--calibration", path]
            + (["--nic-GBps", f"{col['nic']:g}"] if col.get("nic") is not None else []))
        out.update({(i, r["scope"], r["nodes"]): r for r in rows})
    return out


def calibration_hardware(cal):
    return "h200" if "h200" in cal["hardware"].lower() else "h100-sxm"


def same_gpu(hardware, cal):
    return str(hardware).lower()[:4] == cal["hardware"].lower()[:4]


def extrapolation_spec(args, rows, cal, measured):
    """What the extrapolation predicts: --extrapolate's values, the rest from the database's what-if
    runs on the calibration's GPU (the most frequent model and GPUs per node, their fabrics with the
    NIC overrides they ran, nodes 1 to at least 128), else from the measured run. (spec, note)."""
    given = json.loads(args.extrapolate) if args.extrapolate else {}
    mine = [r for r in rows if same_gpu(r["config"].get("hardware", ""), cal)]
    if not mine and not given.get("model"):
        return None, (f"No what-if run of the database ran on the calibration's GPU ({cal['hardware']}): "
                      "give `dionsim report --extrapolate model=...,fabric=...`.")

    def most_common(values):
        return collections.Counter(values).most_common(1)[0][0]
    model = given.get("model") or most_common(r["config"]["model"] for r in mine)
    of_model = [r for r in mine if r["config"].get("model") == model] or mine
    gpn = given.get("gpus_per_node") or (most_common(r["config"]["gpus_per_node"] for r in of_model)
                                         if of_model else measured["gpus_per_node"])
    columns = []
    fabrics = given.get("fabric") or []
    nics = given.get("nic") or []
    if not fabrics:
        seen = collections.Counter()
        for r in of_model:
            name = str(r["config"].get("fabric", ""))
            base, _, tail = name.partition("@")
            nic = float(tail) if tail.replace(".", "", 1).isdigit() else None
            if tail and nic is None:
                continue  # a topology file's own name: not a preset that can be run again
            seen[(base, nic if not nics else None)] += 1
        fabrics_nics = [k for k, _ in seen.most_common(4)]
        if nics:
            fabrics_nics = [(f, n) for f in dict.fromkeys(f for f, _ in fabrics_nics) for n in nics]
        columns = [{"fabric": f, "nic": n} for f, n in sorted(fabrics_nics, key=lambda t: (t[0], t[1] or 0))]
    else:
        columns = [{"fabric": f, "nic": n} for f in fabrics for n in (nics or [None])]
    if not columns:
        return None, "The what-if runs on the calibration's GPU use topology files only: give --extrapolate fabric=FILE."
    top = max([r["config"]["nodes"] for r in of_model] + [128])
    nodes = given.get("nodes") or [n for n in (2 ** i for i in range(0, 21)) if n <= top]
    spec = {"model": model, "gpus_per_node": int(gpn), "columns": columns, "nodes": nodes}
    source = "--extrapolate and " if given else ""
    return spec, (f"Model, GPUs per node, fabrics and NIC values from {source}the database's what-if runs on "
                  f"{cal['hardware']}" if mine else "from --extrapolate")


EXTRAPOLATED = ("step_wall_ms", "opt_wall_ms")


def extrapolate(exe, cal, config, spec):
    """Predicted (step, opt) wall per (column, scope, nodes) with whatif's own 90 % intervals
    (docs/calibration.md "Intervals": the calibration's covariance, its leave-one-out model-form
    error, the fabric spread between node sets, and a prior for what it does not hold):
    (step, opt, step_lo, step_hi, opt_lo, opt_hi)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_sweep(exe, cal, config, os.path.join(tmp, "cal.json"), spec)
    out = {}
    for k, r in rows.items():
        values = [r[m] for m in EXTRAPOLATED]
        ends = [r.get(m + end, r[m]) for m in EXTRAPOLATED for end in ("_lo", "_hi")]
        out[k] = tuple(values + ends)
    return out


def column_label(col):
    return col["fabric"] + (f", NIC {col['nic']:g} GB/s nominal per GPU" if col.get("nic") is not None else
                            " (its own NIC)")


def plot_extrapolation(plt, results, cal, spec, path):
    ncols = len(spec["columns"])
    width = min(rp.FIGURE_WIDTH_IN, max(7.5, 4.5 * ncols))
    fig, axes = plt.subplots(2, ncols, figsize=(width, 7.5), squeeze=False)
    eff = cal["parameters"].get("nic_efficiency", {}).get("value", 1.0)
    table, series = [], []
    for col, c in enumerate(spec["columns"]):
        for row, label in enumerate(["step wall (ms)", "optimizer wall (ms)"]):
            ax = axes[row][col]
            for scope in SCOPES:
                keys = sorted(k for k in results if k[0] == col and k[1] == scope)
                if not keys:
                    continue
                nodes = [k[2] for k in keys]
                y = [results[k][row] for k in keys]
                lo = [results[k][2 + 2 * row] for k in keys]
                hi = [results[k][3 + 2 * row] for k in keys]
                ax.plot(nodes, y, marker="o", ms=3, color=COLORS[scope], label=scope)
                ax.fill_between(nodes, lo, hi, color=COLORS[scope], alpha=0.2)
                series.append({"metric": EXTRAPOLATED[row], "column": c, "scope": scope,
                               "points": [{"x": n, "y": v, "lo": a, "hi": b} for n, v, a, b in zip(nodes, y, lo, hi)]})
                if row == 0:
                    table += [(column_label(c), scope, k[2]) + results[k] for k in keys]
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"nodes ({spec['gpus_per_node']} GPUs each)", fontsize=9)
            ax.set_ylabel(label, fontsize=9)
            ax.set_title(column_label(c) + (f"\n(x {eff:.2f} fitted NIC efficiency)" if "nic_efficiency" in
                                            cal["parameters"] else ""), fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"extrapolation with calibration '{cal['name']}' ({spec['model']}, {cal['hardware']})\n"
                 "band = 90 % interval (covariance, leave-one-out model error, fabric spread, priors)", fontsize=10)
    fig.tight_layout()
    rp.save_figure(plt, fig, path)
    return table, series


def calibration_sections(args, plt, page, rows):
    """The validation and extrapolation sections; returns the extrapolation's series (or None)."""
    validation = load_validation(args.db)
    if validation:
        vrows, summary, coverage = validation
        page.heading(2, "Validation: leave one configuration out")
        page.para("Each measured configuration predicted by the step model fitted on all the others "
                  "(`dionsim validate`), with its 90 % interval where the run recorded one (each fold's own "
                  "calibration; model-form error from a nested leave-one-out; docs/calibration.md).")

        def interval(r):
            if "predicted_lo" not in r:
                return "| - | - |"
            half = (r["predicted_hi"] - r["predicted_lo"]) / 2
            return f"| ± {half:.4g} | {'yes' if r['covered'] else 'no'} |"
        page.table(["| configuration | metric | measured | predicted | error % | 90 % half-width | covered |",
                    "|---|---|---:|---:|---:|---:|---|"]
                   + [f"| {r['configuration']} | {r['metric']} | {r['measured']:g} | {r['predicted']:.4g} | "
                      f"{r['error_pct']:+.1f} {interval(r)}" for r in vrows])
        page.table(["| metric | cells | mean abs error % | max abs error % |", "|---|---:|---:|---:|"]
                   + [f"| {m} | {s['count']} | {s.get('loo_mean_abs_error_pct', float('nan')):.2f} | "
                      f"{s.get('loo_max_abs_error_pct', float('nan')):.2f} |" for m, s in summary.items()])
        if coverage:
            page.table(["| metric | cells | covered | mean half-width % |", "|---|---:|---:|---:|"]
                       + [f"| {m} | {c['count']} | {c['covered']} ({100 * c.get('loo_coverage', 0):.0f} %) | "
                          f"{c.get('loo_mean_half_width_pct', float('nan')):.1f} |" for m, c in coverage.items()])
    cal, config = load_calibration(args.db)
    if not (cal and config and args.dionsim):
        return None
    title = "Extrapolation: step and optimizer wall vs nodes with the calibration's uncertainty"
    page.heading(2, title)
    spec, note = extrapolation_spec(args, rows, cal, config)
    if spec is None:
        page.para(note)
        return None
    try:
        results = extrapolate(args.dionsim, cal, config, spec)
    except subprocess.CalledProcessError as e:
        # The calibration and the configuration came from the database (written to a temporary file
        # for whatif): name the database and the stored calibration, not only the temporary path.
        fail(f"{args.db}: calibration '{cal.get('name', '?')}' and its runs' configuration: the extrapolation's "
             f"`dionsim whatif` failed: {e.stderr.strip()}", 3 if e.returncode in (2, 3) else 4)
    png = "extrapolation.png"
    table, series = plot_extrapolation(plt, results, cal, spec, os.path.join(args.out, png))
    page.image(png, title)
    page.para(f"Calibration `{cal['name']}`. {note}: {spec['model']}, {spec['gpus_per_node']} GPUs per node, "
              f"nodes {spec['nodes'][0]}..{spec['nodes'][-1]}; the optimizer, NS and fraction of the first measured "
              "run of its GPU in the database (`--extrapolate model=...,gpus-per-node=...,fabric=...,nic=...` "
              "chooses others). NIC values are nominal, times the fitted `nic_efficiency`. Bands and intervals: "
              "`dionsim whatif`'s 90 % intervals with this calibration (its covariance, its own leave-one-out "
              "model-form error, the inter-node bandwidth's spread between node sets, and a prior range for every "
              "parameter it does not hold; docs/calibration.md, Intervals).", caption=True)
    page.table(["| fabric | scope | nodes | step ms | 90 % interval | opt ms | 90 % interval |",
                "|---|---|---:|---:|---|---:|---|"]
               + [f"| {t[0]} | {t[1]} | {t[2]} | {t[3]:.1f} | [{t[5]:.1f}, {t[6]:.1f}] | {t[4]:.2f} | "
                  f"[{t[7]:.2f}, {t[8]:.2f}] |" for t in table])
    return {"spec": spec, "file": png, "series": series}



# ---- validation against the seed's measured runs -------------------------------------------------

def read_seed(csv_path):
    runs = collections.defaultdict(dict)
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            if row["source"] != "seed thread" or row["model"] != "seed-5120x8":
                continue
            key = (row["run"], int(row["gpus_per_node"]), int(row["nodes"]), row["scope"])
            runs[key][row["metric"]] = float(row["value"])
    return runs


def whatif_json(exe, extra):
    out = subprocess.run([exe, "whatif", "--json", "--quiet"] + extra, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def validate(args):
    seed = read_seed(args.csv)
    one = {k[3]: v for k, v in seed.items() if k[2] == 1}
    two = {k[3]: v for k, v in seed.items() if k[2] == 2}
    common = ["--model", "seed-5120x8", "--optimizer", "nordion2", "--ns", "gram", "--fraction", "0.25",
              "--gpus-per-node", "4", "--hardware", "h100-sxm", "--tokens-per-gpu", "16384"]

    # --- fits (each from one measured number; everything else is predicted) ---
    # 1. fwd/bwd compute: 1-node local step wall minus its optimizer GPU window.
    fwd_bwd = one["local"]["step_wall_ms"] - one["local"]["opt_gpu_window_ms"]
    # 2. GEMM efficiency scale: bisection on the 1-node local NS GEMM time.
    # 3. HBM efficiency: bisection on the 1-node local non-GEMM time.
    # Launch gaps are set to 0: the plan counts eager launches (~700 per step) while the measured,
    # compiled reference launched 60-117 kernels, so per-launch gaps would charge ~1.4 ms of gaps
    # that the measured kernel times already contain. The fitted HBM efficiency is that of the
    # non-GEMM (elementwise, gather/scatter) kernels; NS GEMM operand traffic keeps the preset's measured 0.907.
    cal_path = args.calibration_out

    def write_cal(scale, hbm):
        with open(cal_path, "w") as f:
            json.dump({"schema": "dionsim.kernel-calibration/1", "name": "seed-h100-1node-local",
                       "hardware": "h100-sxm", "gemm_efficiency_scale": scale, "hbm_efficiency": hbm,
                       "launch_gap_us": 0.0, "hbm_efficiency_by_kernel": {"ns_gemm": 0.907},
                       "notes": "fitted by scripts/report.py validate on the seed's 1-node local run "
                                "(ns_gemm_ms, non_gemm_ms) in ../shared/data/seed-measurements.csv"}, f, indent=2)

    def local1(scale, hbm):
        write_cal(scale, hbm)
        return whatif_json(args.dionsim, common + ["--scope", "local", "--nodes", "1", "--fwd-bwd-ms", str(fwd_bwd),
                                                   "--calibration", cal_path])[0]

    def bisect(f, lo, hi, target, increasing):
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if (f(mid) < target) == increasing:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    scale = bisect(lambda s: local1(s, 0.907)["ns_gemm_ms"], 0.5, 3.0, one["local"]["ns_gemm_ms"], increasing=False)
    hbm = bisect(lambda h: local1(scale, h)["non_gemm_ms"], 0.05, 1.0, one["local"]["non_gemm_ms"], increasing=False)
    write_cal(scale, hbm)
    # 4. Inter-node all-to-all pinned to the 2-node global run's algbw (payload / a2a time, the
    #    nccl-tests algbw convention): the a2a reached ~2/3 of the link the FSDP rings reached.
    # 5. Inter-node NIC effective bandwidth (what FSDP's rings see): bisection on the 2-node global
    #    step wall. The 2-node capped step wall is then a prediction.
    algbw = two["global"]["a2a_payload_MB"] * 1e6 / (two["global"]["a2a_ms"] * 1e-3) / 1e9
    topo = os.path.join(os.path.dirname(cal_path), "whatif-seed-2node-fabric.toml")

    def two_node(scope, nic):
        with open(topo, "w") as f:
            f.write(f'base = "h100-ndr400"\nname = "seed-2node"\nnic_GBps = {nic:.4f}\nnic_efficiency = 1.0\n')
        return whatif_json(args.dionsim, common + [
            "--scope", scope, "--nodes", "2", "--fwd-bwd-ms", str(fwd_bwd), "--calibration", cal_path,
            "--fabric", topo, "--alltoall-algbw-GBps", str(algbw)])[0]

    nic = bisect(lambda n: two_node("global", n)["step_wall_ms"], 5.0, 200.0, two["global"]["step_wall_ms"],
                 increasing=False)
    nic = round(nic, 4)

    preds = {}
    for scope in one:
        preds[(1, scope)] = whatif_json(args.dionsim, common + ["--scope", scope, "--nodes", "1", "--fwd-bwd-ms",
                                                                str(fwd_bwd), "--calibration", cal_path])[0]
    for scope in two:
        preds[(2, scope)] = two_node(scope, nic)

    # measured metric -> predicted key (the optimizer's GPU window on one node had no idle gaps)
    mapping = {
        "step_wall_ms": "step_wall_ms", "opt_gpu_window_ms": "opt_wall_ms", "ns_gemm_ms": "ns_gemm_ms",
        "non_gemm_ms": "non_gemm_ms", "a2a_ms": "a2a_ms", "a2a_payload_MB": "a2a_payload_MB",
        "opt_kernel_launches": "opt_kernel_launches", "opt_stream_window_ms": "opt_comm_window_ms",
        "opt_gpu_ms": "opt_gpu_ms", "opt_gpu_idle_pct": "opt_gpu_idle_pct", "mfu_pct": "mfu_pct",
    }
    fitted = {(1, "local", "step_wall_ms"), (1, "local", "ns_gemm_ms"), (1, "local", "non_gemm_ms"),
              (2, "global", "a2a_ms"), (2, "global", "step_wall_ms"), (2, "global", "mfu_pct")}
    lines = ["| run | scope | metric | measured | predicted | error % | |", "|---|---|---|---:|---:|---:|---|"]
    errors = []
    for (nodes, scope), p in sorted(preds.items(), key=lambda kv: (kv[0][0], SCOPES.index(kv[0][1]))):
        p = dict(p, a2a_payload_MB=p["a2a_payload_bytes"] / 1e6)
        measured = (one if nodes == 1 else two)[scope]
        for metric, value in measured.items():
            if metric not in mapping:
                continue
            key = mapping[metric]
            if metric == "opt_gpu_idle_pct" and "opt_stream_window_ms" in measured:
                key = "opt_gpu_idle_comm_window_pct"  # idle against the window that run measured
            pred = p[key]
            err = 100.0 * (pred - value) / value if value else float("nan")
            tag = "fitted" if (nodes, scope, metric) in fitted else "predicted"
            if tag == "predicted":
                errors.append(abs(err))
            label = f"{nodes}×4 H100" if nodes == 2 else "1×4 H100"
            lines.append(f"| {label} | {scope} | {metric} | {value:g} | {pred:.4g} | {err:+.1f} | {tag} |")
    print("\n".join(lines))
    print(f"\nfits: fwd_bwd_ms {fwd_bwd:.1f}, gemm_efficiency_scale {scale:.4f}, hbm_efficiency {hbm:.4f}, "
          f"nic_GBps {nic}, alltoall_algbw_GBps {algbw:.3f}; median |error| of predicted cells "
          f"{sorted(errors)[len(errors) // 2]:.1f} %")


def validate_h200(args):
    """The reference optimizer's opt.step on 2 x H200 (h200-anchors.csv) vs whatif's optimizer wall,
    with the NS GEMM throughput from a `dionsim calibrate` file of the shared H200 traces."""
    rows = []
    with open(args.anchors) as f:
        for row in csv.DictReader(f):
            if row["what"].startswith("reference_") and row["value"]:
                rows.append(row)
    lines = ["| optimizer | scope | fraction | reference build | measured opt.step ms | predicted opt wall ms | error % |",
             "|---|---|---:|---|---:|---:|---:|"]
    errors = []
    for row in rows:
        opt = "nordion2" if "NorDion2" in row["what"] else "dion2"
        build = row["notes"].split("(")[1].split(";")[0]
        p = whatif_json(args.dionsim, ["--model", row["shape"], "--optimizer", opt, "--ns", "polar_express",
                                       "--scope", row["scope"], "--fraction", row["fraction"], "--hardware", "h200",
                                       "--fabric", "h200-ndr400", "--gpus-per-node", row["world"], "--nodes", "1",
                                       "--mfu", "0.5", "--calibration", args.calibration])[0]
        measured = float(row["value"])
        err = 100.0 * (p["opt_wall_ms"] - measured) / measured
        errors.append(err)
        lines.append(f"| {opt} | {row['scope']} | {row['fraction']} | {build} | {measured:g} | "
                     f"{p['opt_wall_ms']:.2f} | {err:+.1f} |")
    print("\n".join(lines))
    print(f"\nmedian error {sorted(errors)[len(errors) // 2]:+.1f} %")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="tables and plots from a database")
    r.add_argument("--db", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--dionsim", default="", help="the dionsim executable (for the extrapolation study)")
    r.add_argument("--extrapolate", default="", help="JSON {model, gpus_per_node, fabric: [..], nic: [..], nodes: [..]} "
                   "(dionsim report --extrapolate validates it); default: the database's what-if runs")
    r.add_argument("--deferral-target", type=float, default=deferral_plots.DEFAULT_TARGET,
                   help="deferral target of the recommended capacity factor, in (0, 1)")
    r.add_argument("--dump-series", default="", help="write every plotted series as JSON to this file")
    v = sub.add_parser("validate", help="the seed validation table")
    v.add_argument("--dionsim", required=True)
    v.add_argument("--csv", required=True)
    v.add_argument("--calibration-out", required=True, help="where to write the fitted calibration JSON")
    h = sub.add_parser("validate-h200", help="the 2 x H200 reference opt.step times vs predictions")
    h.add_argument("--dionsim", required=True)
    h.add_argument("--anchors", required=True)
    h.add_argument("--calibration", required=True, help="a `dionsim calibrate` file of the H200 traces")
    args = ap.parse_args()
    if args.cmd == "report":
        if not 0.0 < args.deferral_target < 1.0:
            fail(f"--deferral-target: got '{args.deferral_target}', expected a number in (0, 1)", 2)
        if args.extrapolate:
            try:
                spec = json.loads(args.extrapolate)
                assert isinstance(spec, dict) and set(spec) <= {"model", "gpus_per_node", "fabric", "nic", "nodes"}
            except (ValueError, AssertionError):
                fail(f"--extrapolate: got '{args.extrapolate}', expected a JSON object with keys model, "
                     "gpus_per_node, fabric, nic, nodes", 2)
    {"report": report, "validate": validate, "validate-h200": validate_h200}[args.cmd](args)


if __name__ == "__main__":
    main()
