"""Which lines a report panel draws: the data decide, not a fixed list of keys.

A panel plots one metric against one x key. Every configuration key of its runs is given exactly one
role, and the roles are what the panel says about itself (`dionsim report --dump-series` writes them):

* x            the x axis;
* facets       one sub-plot per combination of their values;
* legend       one line per combination of their values inside a sub-plot;
* along_x      keys that are a consequence of x inside a line (world follows nodes at a fixed number
               of GPUs per node; tokens per GPU follows the world at a fixed global batch); only the
               keys ALONG_X names may take this role;
* follows      keys constant along every line because other shown keys determine them
               (a fabric's latency, layout, hardware): {key: [the shown keys it follows]};
* same_metric  keys the metric does not depend on (the optimizer's payload does not depend on the
               fabric): points of configurations that differ only in them, with equal values, are one;
* fixed        keys with one value in the panel: {key: value}.

So no line joins two configurations that differ in a key the panel does not show: inside a line the
configurations differ in x and along_x only, one configuration per x (the zig-zag a fixed grouping
drew through the points of several capacity factors at one node count cannot happen). Lines with a
single x value are not drawn (a sweep of something else); the panel counts them.

Pure Python (no matplotlib): scripts/report.py draws what this module decides, and the tests check
the decisions on the series it dumps.
"""
import collections
import itertools
import json
import math

MISSING = "-"  # a key a configuration does not have (HSDP's shard_group on an FSDP run)

# Keys that may vary along a line of the given x (each a function of x at the line's other keys).
ALONG_X = {
    "nodes": ("world", "tokens_per_gpu"),
    "world": ("nodes", "tokens_per_gpu"),
    "nic_effective_GBps": ("fabric",),  # h100-ndr400@12.5, @25, ...: the bandwidth override of one fabric
}

# Shown keys, most wanted in the legend first (the rest become facets).
LEGEND_ORDER = ["scope", "capacity_factor", "shard_group", "world", "fraction", "norms", "model",
                "fabric_family", "fabric", "hardware", "gpus_per_node", "nodes", "optimizer", "ns"]
FACET_ORDER = ["model", "fabric_family", "fabric", "hardware", "fraction", "gpus_per_node", "shard_group",
               "norms", "optimizer", "ns", "steps", "trials", "mode", "ef", "momentum_dtype"]
# Keys hidden first when other shown keys determine them (derived, or less readable as a label).
HIDE_FIRST = ["world", "nodes", "tokens_per_gpu", "nic_effective_GBps", "nvlink_effective_GBps", "nic_latency_us",
              "nvlink_latency_us", "layout", "network", "leaf_radix", "oversubscription", "gpus_per_nvlink_domain",
              "calibration", "hardware", "gpus_per_node", "host_launch_us", "alltoall_algbw_GBps", "fwd_bwd_ms",
              "mfu", "seed", "mode", "fabric_family"]
LEGEND_MAX = 10  # distinct lines in one sub-plot's legend (one colour each)

# A study: runs that differ from another run of it in at most STUDY_LINK_KEYS of the keys a user
# chooses; keys the tool derives from those (world from nodes, a fabric's bandwidths, the hardware
# and GPUs per node of a preset) do not count.
STUDY_LINK_KEYS = 2
STUDY_DERIVED = {"world", "tokens_per_gpu", "calibration", "hardware", "gpus_per_node", "nic_effective_GBps",
                 "nvlink_effective_GBps", "nic_latency_us", "nvlink_latency_us", "layout", "network", "leaf_radix",
                 "oversubscription", "gpus_per_nvlink_domain", "fabric_family"}


def value_of(row, key):
    """A configuration value as a hashable, comparable label (None and absent -> '-')."""
    v = row["config"].get(key)
    if v is None:
        return MISSING
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


# The types of the stored configuration keys the report reads (names, counts, numbers); a database
# edited by hand or by another tool is refused naming the run and key, never a Python traceback.
TEXT_KEYS = {"model", "fabric", "scope", "hardware", "optimizer", "ns", "layout", "momentum_dtype", "norms", "mode"}
COUNT_KEYS = {"nodes", "world", "gpus_per_node", "tokens_per_gpu", "leaf_radix", "shard_group", "layers", "steps",
              "trials", "global_batch_tokens"}
NUMBER_KEYS = {"fraction", "mfu", "fwd_bwd_ms", "nic_GBps", "ef", "host_launch_us"}


def _finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _interval_options_ok(value):
    """whatif's interval_options: the command line's interval settings that differ from the defaults."""
    if not isinstance(value, dict) or not value:
        return False
    for k, v in value.items():
        if k == "fabric_spread" and _finite(v):
            continue
        if k in ("inter_node_prior", "net_step_prior_us") and isinstance(v, list) and len(v) == 2 and all(map(_finite, v)):
            continue
        return False
    return True


def stored_config(run_id, config_json):
    """The configuration of stored run `run_id`, checked; ValueError says which key is wrong."""
    def bad(key, value, expected):
        raise ValueError(f"run {run_id}: config_json{'.' + key if key else ''}: got {json.dumps(value)[:120]}, "
                         f"expected {expected}")
    try:
        c = json.loads(config_json)
    except ValueError:
        bad("", config_json, "a JSON object")
    if not isinstance(c, dict):
        bad("", c, "a JSON object")
    for key, value in c.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in TEXT_KEYS and value is not None and not isinstance(value, str):
            bad(key, value, "a string")
        elif key in COUNT_KEYS and value is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                                              and 0 <= value <= 2**40):
            bad(key, value, "an integer in [0, 2^40]")
        elif key in NUMBER_KEYS and value is not None and not number:
            bad(key, value, "a number or null")
        elif key == "capacity_factor" and not (value in (None, "auto") or (number and 1 <= value <= 1e6)):
            bad(key, value, "null, \"auto\" or a number in [1, 1e6]")
        elif key == "interval_options" and not _interval_options_ok(value):
            bad(key, value, "an object of fabric_spread (a number) and inter_node_prior / net_step_prior_us "
                "(two finite numbers each), as whatif stores them")
        elif number and not (math.isfinite(value) and abs(value) <= 1e15):
            bad(key, value, "a finite number of magnitude <= 1e15")
    return c


def stored_value(run_id, name, value):
    """A stored metric value, checked: dionsim stores finite values only; an infinity or 1e300 written
    by another tool made matplotlib fail ("no positive values") or hang on its log axes."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) > 1e18:
        raise ValueError(f"run {run_id}: metric {name}: got {value!r}, expected a finite number of magnitude <= 1e18")
    return value


def with_virtual_keys(config):
    """The stored configuration plus fabric_family: the fabric's name before its '@' override."""
    c = dict(config)
    if isinstance(c.get("fabric"), str):
        c["fabric_family"] = c["fabric"].split("@")[0]
    return c


SCOPE_ORDER = ["local", "global", "global_capped"]


def sort_value(v):
    """Absent first, then numbers in order, the scopes in their order, other strings ('auto' after
    every numeric capacity factor)."""
    if v == MISSING:
        return (0, 0, "")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (1, v, "")
    if v in SCOPE_ORDER:
        return (2, SCOPE_ORDER.index(v), "")
    return (3, 0, str(v))


def _groups(rows, keys):
    out = collections.OrderedDict()
    for r in rows:
        out.setdefault(tuple(value_of(r, k) for k in keys), []).append(r)
    return out


def determined(rows, key, by):
    """True when the values of `by` determine `key` on these rows."""
    return all(len({value_of(r, key) for r in g}) == 1 for g in _groups(rows, by).values())


def _same_metric(rows, key, by, metric):
    """True when the metric has one value (relative 1e-9) among rows that share `by` (so `key` does not move it)."""
    for g in _groups(rows, by).values():
        vals = [r["metrics"][metric] for r in g]
        lo, hi = min(vals), max(vals)
        if hi - lo > 1e-9 * max(abs(hi), abs(lo), 1e-300):
            return False
    return True


def _rank(order, key):
    return order.index(key) if key in order else len(order)


def studies(rows):
    """Partition rows into studies (single linkage on STUDY_LINK_KEYS differing chosen keys)."""
    keys = sorted({k for r in rows for k in r["config"]} - STUDY_DERIVED)
    parent = list(range(len(rows)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # Two rows differ in at most n chosen keys iff they agree once some n keys are ignored.
    for n in range(STUDY_LINK_KEYS + 1):
        for ignored in itertools.combinations(keys, n):
            kept = [k for k in keys if k not in ignored]
            first = {}
            for i, r in enumerate(rows):
                j = first.setdefault(tuple(value_of(r, k) for k in kept), i)
                if j != i:
                    parent[find(i)] = find(j)
    out = collections.OrderedDict()
    for i, r in enumerate(rows):
        out.setdefault(find(i), []).append(r)
    return list(out.values())


def analyse(rows, x, metric, band=True, min_points=2):
    """The roles of every key on a panel of `metric` vs `x`, and its lines. Returns None when no line
    has min_points x values. rows: [{"run_id", "config", "metrics"}]; the numeric x and metric are required."""
    rows = [r for r in rows if isinstance(r["config"].get(x), (int, float))
            and not isinstance(r["config"].get(x), bool) and metric in r["metrics"]]
    dropped = 0
    for _ in range(8):  # dropping single-point lines can change which keys vary; a fixpoint in a few rounds
        if not rows:
            return None
        keys = sorted({k for r in rows for k in r["config"]} - {x})
        varying = [k for k in keys if len({value_of(r, k) for r in rows}) > 1]
        fixed = collections.OrderedDict((k, value_of(rows[0], k)) for k in keys if k not in varying)
        shown = list(varying)
        along, follows, same = [], collections.OrderedDict(), []
        # Judged without the other candidates: world and tokens per GPU determine each other at a
        # fixed global batch, and both follow nodes.
        candidates = [k for k in ALONG_X.get(x, ()) if k in shown]
        base = [s for s in shown if s not in candidates]
        for k in candidates:
            if determined(rows, k, [x] + base) and not determined(rows, k, base):
                shown.remove(k)
                along.append(k)
        for k in sorted(shown, key=lambda k: (_rank(HIDE_FIRST, k), -_rank(LEGEND_ORDER, k), k)):
            rest = [s for s in shown if s != k]
            if determined(rows, k, rest):
                shown.remove(k)
                follows[k] = rest
        for k in sorted(shown, key=lambda k: (_rank(HIDE_FIRST, k), -_rank(LEGEND_ORDER, k), k)):
            rest = [s for s in shown if s != k]
            # Only a key that takes several values at one x of a line can be merged there.
            if not determined(rows, k, [x] + rest) and _same_metric(rows, k, [x] + rest, metric):
                shown.remove(k)
                same.append(k)
        # Each hidden key names the shown keys that determine it; one that only a merged key
        # determines (gpus_per_node of a fabric the payload does not depend on) is merged with it.
        for k in list(follows):
            if determined(rows, k, shown):
                follows[k] = [s for s in shown if not determined(rows, k, [t for t in shown if t != s])] or shown
            else:
                del follows[k]
                same.append(k)
        for k in list(along):
            if not determined(rows, k, [x] + shown):
                along.remove(k)
                same.append(k)
        lines = _groups(rows, shown)
        keep = [r for g in lines.values() if len({r["config"][x] for r in g}) >= min_points for r in g]
        if len(keep) == len(rows):
            break
        dropped += len(rows) - len(keep)
        rows = keep
    else:
        return None
    legend, facets = [], []
    for k in sorted(shown, key=lambda k: (_rank(LEGEND_ORDER, k), k)):
        n = len(_groups(rows, legend + [k]))
        (legend if n <= LEGEND_MAX else facets).append(k)
    facets.sort(key=lambda k: (_rank(FACET_ORDER, k), k))
    panel_lines = []
    for fkey, frows in sorted(_groups(rows, facets).items(), key=lambda kv: [sort_value(v) for v in kv[0]]):
        for lkey, lrows in sorted(_groups(frows, legend).items(), key=lambda kv: [sort_value(v) for v in kv[0]]):
            points = []
            for xv, prows in sorted(collections.OrderedDict(
                    (xv, [r for r in lrows if r["config"][x] == xv])
                    for xv in {r["config"][x] for r in lrows}).items()):
                p = {"x": xv, "y": prows[0]["metrics"][metric], "run_ids": sorted(r["run_id"] for r in prows)}
                lo, hi = prows[0]["metrics"].get(metric + "_lo"), prows[0]["metrics"].get(metric + "_hi")
                if band and lo is not None and hi is not None:
                    p["lo"], p["hi"] = lo, hi
                points.append(p)
            panel_lines.append({"facet": dict(zip(facets, fkey)), "legend": dict(zip(legend, lkey)), "points": points})
    return {"metric": metric, "x": x, "facets": facets, "legend": legend, "along_x": along,
            "follows": dict(follows), "same_metric": same, "fixed": dict(fixed), "lines": panel_lines,
            "single_point_configurations": dropped}


# ---- labels --------------------------------------------------------------------------------------

SHORT = {"capacity_factor": "c", "fraction": "f", "shard_group": "shard", "nic_effective_GBps": "nic GB/s",
         "gpus_per_node": "GPUs/node", "tokens_per_gpu": "tok/GPU", "fabric_family": "fabric"}


def label(values):
    """'global_capped c=1.5' from {scope: global_capped, capacity_factor: 1.5}; absent values left out."""
    parts = []
    for k, v in values.items():
        if v == MISSING:
            continue
        if k == "scope" or k in ("fabric", "fabric_family", "model", "hardware", "norms"):
            parts.append(str(v))
        else:
            parts.append(f"{SHORT.get(k, k)}={v:g}" if isinstance(v, float) else f"{SHORT.get(k, k)}={v}")
    return " ".join(parts) or "all"


def _short(v):
    """A file path as its file name (a calibration or topology file given by path)."""
    return v.rsplit("/", 1)[1] if isinstance(v, str) and "/" in v else v


def describe(panel):
    """One sentence per role: what the panel held fixed and what follows what."""
    out = []
    if panel["fixed"]:
        out.append("Held fixed: " + ", ".join(f"{k}={_short(v)}" for k, v in panel["fixed"].items()
                                               if k != "fabric_family" and v != MISSING) + ".")
    if panel["facets"]:
        out.append("One plot per " + ", ".join(panel["facets"]) + ".")
    if panel["legend"]:
        out.append("One line per " + ", ".join(panel["legend"]) + ".")
    if panel["along_x"]:
        out.append(", ".join(panel["along_x"]) + f" follow{'s' if len(panel['along_x']) == 1 else ''} "
                   f"{panel['x']} along a line.")
    fol = collections.OrderedDict()
    for k, by in panel["follows"].items():
        if k != "fabric_family":
            fol.setdefault(", ".join(by) or "the shown keys", []).append(k)
    for by, ks in fol.items():
        out.append(f"{', '.join(ks)}: determined by {by}.")
    same = [k for k in panel["same_metric"] if k != "fabric_family"]
    if same:
        out.append(f"{panel['metric']} is the same for every {', '.join(same)} (merged).")
    if panel["single_point_configurations"]:
        out.append(f"{panel['single_point_configurations']} configurations on lines with fewer {panel['x']} values "
                   "are not drawn here (table).")
    return " ".join(out)
