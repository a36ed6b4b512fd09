"""Drawing what report_series decided (python3-matplotlib, headless), and atomic output files.

One figure per panel: a grid of sub-plots (one per facet value, at most FACETS_PER_ROW across, so a
figure keeps the page's width), one line per legend value, a shared legend below, the panel's own
description (what it held fixed, what follows what) under it. A line whose points carry `lo`/`hi`
gets its interval as a band; a line without them gets none.
"""
import math
import os
import sys
import tempfile
import textwrap

import report_series as rs

SCOPE_COLORS = {"local": "#1f77b4", "global": "#d62728", "global_capped": "#2ca02c"}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]
STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 1)), "P")]
FACETS_PER_ROW = 3
FIGURE_WIDTH_IN = 13.5  # at 100 dpi: 1350 px, the report page's width
DPI = 100


def plt_module():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("report.py: error: python3-matplotlib is not installed (scripts/install-deps.sh installs it)",
              file=sys.stderr)
        raise SystemExit(3)


def write_atomically(path, data):
    """Writes bytes or text to a temporary file beside `path`, fsyncs it and renames it over `path`:
    a failure (a full disk) leaves the previous file whole."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the report from everyone else
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_figure(plt, fig, path):
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    write_atomically(path, buf.getvalue())


def _styles(panel):
    """Colour by the first legend key (scope colours for scopes; with the capacity factor, shades of
    the capped green per c), line style and marker by the others."""
    legend = panel["legend"]
    n_color = 2 if legend[:2] == ["scope", "capacity_factor"] else 1

    def keyed(line, ks):
        return tuple(line["legend"].get(k) for k in ks)

    def ordered(ks):
        return sorted({keyed(l, ks) for l in panel["lines"]}, key=lambda t: [rs.sort_value(v) for v in t])
    first, rest = ordered(legend[:n_color]), ordered(legend[n_color:])
    colors = {}
    if legend and legend[0] == "scope":
        capped = [t for t in first if t[0] == "global_capped"]
        for t in first:
            if t[0] == "global_capped" and len(capped) > 1:
                shade = capped.index(t) / (len(capped) - 1)  # light to dark green by c
                colors[t] = (0.55 - 0.45 * shade, 0.85 - 0.45 * shade, 0.45 - 0.35 * shade)
            else:
                colors[t] = SCOPE_COLORS.get(t[0], PALETTE[len(colors) % len(PALETTE)])
    else:
        colors = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(first)}
    styles = {t: STYLES[i % len(STYLES)] for i, t in enumerate(rest)}

    def style(line):
        ls, marker = styles[keyed(line, legend[n_color:])]
        return colors[keyed(line, legend[:n_color])], ls, marker
    return style


def draw_panel(plt, panel, path, ylabel, title, xlabel=None, logx=True, logy=False, integer_x=False):
    """One figure for a panel of report_series.analyse; returns the facets drawn."""
    facets = []
    for line in panel["lines"]:
        if line["facet"] not in facets:
            facets.append(line["facet"])
    n = len(facets)
    cols = min(n, FACETS_PER_ROW)
    rows = math.ceil(n / cols)
    width = FIGURE_WIDTH_IN if cols > 1 else 7.5
    sub_h = 3.3 if cols > 1 else 4.2
    desc = textwrap.wrap(rs.describe(panel), 190 if cols > 1 else 110)
    fig, axes = plt.subplots(rows, cols, figsize=(width, sub_h * rows + 0.9 + 0.13 * len(desc)), squeeze=False)
    style = _styles(panel)
    handles = {}
    # On a log axis a zero (a configuration without any deferred row) has no place: it is drawn as an
    # open triangle on the bottom edge, not joined to the line.
    positive = [p["y"] for l in panel["lines"] for p in l["points"] if p["y"] > 0]
    floor = min(positive) / 3 if positive else 1e-6
    any_zero = any(p["y"] <= 0 for l in panel["lines"] for p in l["points"]) and logy
    for i, facet in enumerate(facets):
        ax = axes[i // cols][i % cols]
        for line in (l for l in panel["lines"] if l["facet"] == facet):
            pts = [p for p in line["points"] if p["y"] > 0 or not logy]
            color, ls, marker = style(line)
            h, = ax.plot([p["x"] for p in pts], [p["y"] for p in pts], ls=ls, marker=marker, ms=4, color=color, lw=1.4)
            zero = [p["x"] for p in line["points"] if logy and p["y"] <= 0]
            if zero:
                ax.plot(zero, [floor] * len(zero), ls="none", marker="v", mfc="none", color=color, ms=7)
            ref = [p for p in line["points"] if "ref" in p and (p["ref"] > floor or not logy)]
            if ref:
                ax.plot([p["x"] for p in ref], [p["ref"] for p in ref], ls="--", color=color, alpha=0.55, lw=1)
            band = [p for p in line["points"] if "lo" in p]
            if band:
                ax.fill_between([p["x"] for p in band], [p["lo"] for p in band], [p["hi"] for p in band],
                                color=color, alpha=0.14, lw=0)
            handles.setdefault(rs.label(line["legend"]), h)
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
            if any_zero:
                ax.set_ylim(bottom=floor / 1.5)
        if integer_x:
            from matplotlib.ticker import MaxNLocator
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel or panel["x"], fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="both" if logy else "major", alpha=0.3)
        if facet:
            ax.set_title(rs.label(facet), fontsize=9)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    if any_zero:
        handles["(open triangle: none deferred)"] = plt.Line2D([], [], ls="none", marker="v", mfc="none", color="gray")
    fig.suptitle(title, fontsize=11)
    # Bottom up, in inches: the description, the shared legend, then the sub-plots.
    height = fig.get_figheight()
    desc_in = 0.13 * len(desc) + 0.05
    # Legend columns that fit the width: ~6 px a character at 8 pt, ~60 px of handle and spacing.
    ncol = max(1, min(5, len(handles), int(width * DPI // (6 * max([len(k) for k in handles] + [1]) + 60))))
    legend_in = 0.2 * math.ceil(len(handles) / ncol) + 0.1 if handles else 0.0
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=ncol,
                   fontsize=8, frameon=False, bbox_to_anchor=(0.5, desc_in / height))
    fig.text(0.01, 0.01, "\n".join(desc), fontsize=7, va="bottom", ha="left", color="#333333")
    fig.tight_layout(rect=(0, min((desc_in + legend_in) / height, 0.6), 1, 1 - 0.35 / height))
    save_figure(plt, fig, path)
    return facets
