#!/usr/bin/env python3
"""Black-box fuzzing of the dionsim command line (complements fuzz/: libFuzzer on each parser).

Starts from valid invocations of every subcommand and mutates, one thing at a time,
  * flags: every option a subcommand's --help lists gets each of a list of bad values
    (NaN, inf, negative, 1e300, empty, text, huge ranges and counts, paths that are folders,
    devices or missing);
  * input files: topology and GPU TOML, inventory and calibration JSON, case folders (case.json
    and .npy), measurement / anchor / published CSV, nccl-tests logs, Kineto traces and SQLite
    databases get truncations, BOM, CRLF, duplicated and deleted lines, numbers replaced by
    garbage, JSON values of the wrong type, CSV rows with missing / extra / quoted-newline fields,
    flipped bytes, and (databases) SQL-level damage.
A case is a finding when dionsim exits 1 or with a code outside 0/2/3/4/5/77, dies of a signal,
runs past --timeout, prints "internal error" / a sanitizer report / "terminate called", refuses
without naming the mutated flag or file, or accepts a value no input means (NaN, inf, 1e300, text
where a number goes).

  scripts/fuzz_cli.py [--dionsim build/dionsim] [--only SUB,..] [--jobs N] [--out DIR]

Prints one line per finding and a count of cases per subcommand / format; exits 1 on findings.
"""
import argparse
import concurrent.futures as cf
import gzip
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DIONSIM_SHARED_DIR", ROOT.parent / "shared"))
OK_CODES = {0, 2, 3, 4, 5, 77}
# Values no flag means: acceptance is a finding. (Values such as -1 or 0 may be legitimate for
# some flags, so they only have to be refused cleanly or accepted.)
GARBAGE = {"nan", "inf", "-inf", "1e300", "abc", "1e-320", "nan,1", "1,nan", "0x10", "1e15x"}
BAD_VALUES = ["", "nan", "inf", "-inf", "-1", "0", "1e300", "1e-320", "abc", "1e15", "1e15x",
              "99999999999999999999", "0x10", "1,", ",", "1,,2", "nan,1", "1,nan", "1..", "..4",
              "4..1", "1..1073741824", "1..64:x0", "1..64:x1", " 1", "-0", "2147483648",
              "4294967297", "=", "k=", "=v", "a=b=c", "x" * 5000, "/dev/zero", "/tmp",
              "/nonexistent/dir/file", "é\u202e", "1" * 400]


# Flags whose value is a name or a path ("nan" is a valid file name): a refusal may name the
# value instead of the flag, and accepting text is no finding.
TEXT_FLAGS = {"db", "out", "calibration", "measured", "trace-out", "dump-topology", "dump-series", "python",
              "script", "name", "where", "vs", "kind", "metric", "ignore", "nccl-tests", "databases", "case",
              "published"}


PATH_FLAGS = {"fabric", "hardware", "model", "topology"}  # preset names or files


class Case:
    value = None

    def __init__(self, group, sub, argv, must_name, label, garbage=False):
        self.group, self.sub, self.argv, self.must_name = group, sub, argv, must_name
        self.label, self.garbage = label, garbage


def help_options(exe, sub):
    """(option, takes_value) for every option of `dionsim SUB --help`."""
    out = subprocess.run([exe, sub, "--help"], capture_output=True, text=True).stdout
    opts = []
    for m in re.finditer(r"^\s+(?:-\w \[ )?--([\w-]+)(?: \])?( \[?=?arg|\s+[A-Z][\w.\[\]|/,…-]*)?", out, re.M):
        name, arg = m.group(1), m.group(2)
        if name in ("help",):
            continue
        opts.append((name, bool(arg and arg.strip())))
    return opts


# Valid, fast invocations per subcommand (the fuzzer mutates one flag at a time on top).
def base_commands(tmp):
    seed = str(SHARED / "data/seed-measurements.csv")
    case = str(SHARED / "fixtures/numerics/d2_local_w2")
    return {
        "plan": ["plan", "--model", "seed-5120x8", "--world", "16", "--scope", "global_capped", "--fraction", "0.25"],
        "collective": ["collective", "--op", "alltoall", "--nodes", "2", "--gpus-per-node", "8", "--fabric",
                       "h200-ndr400", "-b", "1M", "-e", "4M", "-f", "4"],
        # One message of the model's send/recv: --src/--dst's values reach the model.
        "collective sendrecv": ["collective", "--op", "sendrecv", "--nodes", "2", "--gpus-per-node", "8", "--fabric",
                                "h100-ndr400", "--src", "7", "--dst", "8", "-b", "1M", "-e", "4M", "-f", "4"],
        "whatif": ["whatif", "--model", "seed-5120x8", "--scope", "global_capped", "--nodes", "2", "--mfu", "0.5"],
        "recommend": ["recommend", "--model", "gpt-512x4", "--gpus", "16", "--fabric", "h100-ndr400", "--mfu", "0.45"],
        "deferral": ["deferral", "--model", "gpt-256x2", "--world", "4", "--steps", "3"],
        "measure": ["measure", "--model", "gpt-256x2", "--scope", "local"],
        "calibrate": ["calibrate", "--measured", seed, "--where", "run=1node-real-step", "--dump-metrics"],
        "validate": ["validate", "--measured", seed, "--where", "run=1node-real-step",
                     "--calibration", str(ROOT / "docs/calibration-seed-h100.json")],
        "validate-collectives": ["validate-collectives", "--published", str(SHARED / "data/nccl-published/measurements.csv")],
        "step": ["step", case, "--out", str(tmp / "step-out")],
        # /bin/true for the interpreter: the flags are dionsim's to check (database cases run the script).
        "report": ["report", "--db", str(tmp / "base.db"), "--out", str(tmp / "report-out"), "--python", "/bin/true"],
        "export": ["export", "--db", str(tmp / "base.db")],
        "compare": ["compare", str(tmp / "base.db"), str(tmp / "base.db")],
    }


def set_flag(argv, flag, value):
    """argv with --flag's value replaced (or the flag appended)."""
    out = list(argv)
    short = {"minbytes": "-b", "maxbytes": "-e", "stepfactor": "-f"}.get(flag)
    for i, a in enumerate(out):
        if a in ("--" + flag, short) and i + 1 < len(out):
            out[i + 1] = value
            return out
    return out + ["--" + flag, value]


def flag_cases(exe, tmp, only):
    cases = []
    for sub, argv in base_commands(tmp).items():
        if only and sub not in only and argv[0] not in only:
            continue
        cases.append(Case("flags", sub, argv, None, "base"))
        for name, takes in help_options(exe, argv[0]):
            if not takes:
                cases.append(Case("flags", sub, argv + ["--" + name], None, f"--{name} (switch)"))
                continue
            for v in BAD_VALUES:
                c = Case("flags", sub, set_flag(argv, name, v), "--" + name, f"--{name}={v[:40]!r}",
                         garbage=v in GARBAGE and name not in TEXT_FLAGS)
                c.value = v
                cases.append(c)
            cases.append(Case("flags", sub, argv + ["--" + name], "--" + name, f"--{name} (no value)"))
            cases.append(Case("flags", sub, argv + ["--" + name, "1", "--" + name, "2"], None, f"--{name} twice"))
        if "--fabric" in argv:  # <preset>@<GPUs per rack>: only NVL72 presets, whole trays up to 72
            for suffix in BAD_VALUES[:22] + ["66", "76", "@64", "64@64", "4"]:
                for base in ("gb200-nvl72", "h100-ndr400"):
                    v = base + "@" + suffix
                    c = Case("flags", sub, set_flag(argv, "fabric", v), "--fabric", f"--fabric={v[:40]!r}")
                    c.value = v
                    cases.append(c)
        cases.append(Case("flags", sub, argv + ["--no-such-flag"], "no-such-flag", "unknown flag"))
        cases.append(Case("flags", sub, argv + ["stray-positional"], None, "stray positional"))
    return cases


# ---- file mutations --------------------------------------------------------------------------
NUM = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
NUM_SUBS = [b"nan", b"inf", b"-1", b"0", b"1e300", b"1e-320", b"-0", b"", b"abc", b"99999999999999999999",
            b"2147483648", b"1e15"]


def in_text(data, pos, kind):
    """Whether pos is inside a quoted string or a comment of its line (a number there is text)."""
    line = data[data.rfind(b"\n", 0, pos) + 1: pos]
    if kind == "toml" and b"#" in line:
        return True
    return line.count(b'"') % 2 == 1


def whole_csv_field(data, m):
    """Whether a number is a CSV field of its own: "19" in "...,19,..." is a value the reader must
    check; "19" in an unquoted note "~19 GB/s" or a date "2024-07-19" is part of a text field,
    which no reader can be asked to refuse for a changed digit."""
    start = max(data.rfind(b",", 0, m.start()), data.rfind(b"\n", 0, m.start())) + 1
    ends = [e for e in (data.find(b",", m.end()), data.find(b"\n", m.end())) if e >= 0]
    end = min(ends) if ends else len(data)
    return data[start:end].strip() == m.group()


def log_noise(data, m):
    """Whether a number of an nccl-tests log is on a line NCCL or nccl-tests writes for people, not
    for readers (NCCL INFO lines: channel lists, device tags; nccl-tests' closing summary), apart
    from the value a "set by environment to" line reports: the parser skips such text as it skips
    mpirun's, so a changed digit there is no value it can be asked to refuse."""
    start = data.rfind(b"\n", 0, m.start()) + 1
    end = data.find(b"\n", m.end())
    line = data[start: end if end >= 0 else len(data)]
    # nccl-tests' closing summary ("# Out of bounds values : 0 OK", "# Avg bus bandwidth : 100.0")
    # is for people: the reader takes every value from the size rows.
    if line.startswith((b"# Out of bounds values", b"# Avg bus bandwidth")):
        return True
    if b" NCCL INFO " not in line:
        return False
    reported = line.find(b" set by environment to ")
    return reported < 0 or m.start() - start < reported


def text_mutants(data, rng, kind):
    """(label, bytes, garbage?) mutants of a text file."""
    out = [("empty", b"", False), ("bom", b"\xef\xbb\xbf" + data, False),
           ("crlf", data.replace(b"\n", b"\r\n"), False), ("nul byte", data[: len(data) // 2] + b"\0" + data[len(data) // 2:], False),
           ("no final newline", data.rstrip(b"\n"), False), ("garbage", b"\x89PNG\r\n\x1a\n" + bytes(range(256)), False)]
    for frac in (0.1, 0.5, 0.9, 0.99):
        out.append((f"truncated at {frac}", data[: int(len(data) * frac)], False))
    lines = data.split(b"\n")
    for _ in range(6):
        i = rng.randrange(len(lines))
        out.append((f"line {i + 1} deleted", b"\n".join(lines[:i] + lines[i + 1:]), False))
        out.append((f"line {i + 1} doubled", b"\n".join(lines[: i + 1] + lines[i:]), False))
    nums = [m for m in NUM.finditer(data) if not in_text(data, m.start(), kind)]
    if nums:
        picks = rng.sample(nums, min(len(nums), 10))
        for m in picks:
            for s in NUM_SUBS:
                mutated = data[: m.start()] + s + data[m.end():]
                garbage = s in (b"nan", b"inf", b"1e300", b"abc", b"1e-320")
                if kind == "csv" and not whole_csv_field(data, m):
                    garbage = False  # still run (nothing may crash), but text may hold anything
                if kind == "log" and log_noise(data, m):
                    garbage = False
                out.append((f"number {m.group().decode()} at byte {m.start()} -> {s.decode()!r}", mutated, garbage))
    for _ in range(8):
        b = bytearray(data)
        if not b:
            break
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(("bytes flipped", bytes(b), False))
    if kind == "csv":
        out += csv_mutants(data, rng)
    if kind == "json":
        out += json_mutants(data, rng)
    if kind == "toml":
        out += toml_mutants(data, rng)
    return out


def csv_mutants(data, rng):
    lines = data.split(b"\n")
    out = []
    body = [i for i in range(1, len(lines)) if lines[i].strip()]
    for i in rng.sample(body, min(3, len(body))):
        out.append((f"row {i + 1} extra column", b"\n".join(lines[:i] + [lines[i] + b",extra"] + lines[i + 1:]), False))
        cut = lines[i].rsplit(b",", 1)[0]
        out.append((f"row {i + 1} missing column", b"\n".join(lines[:i] + [cut] + lines[i + 1:]), False))
        out.append((f"row {i + 1} quoted newline", b"\n".join(lines[:i] + [b'"a\nb",' + lines[i]] + lines[i + 1:]), False))
        out.append((f"row {i + 1} unterminated quote", b"\n".join(lines[:i] + [b'"' + lines[i]] + lines[i + 1:]), False))
    hdr = lines[0].split(b",")
    out.append(("header only", lines[0] + b"\n", False))
    out.append(("header column duplicated", b"\n".join([lines[0] + b"," + hdr[-1]] + lines[1:]), False))
    out.append(("header columns swapped", b"\n".join([b",".join(hdr[1:2] + hdr[:1] + hdr[2:])] + lines[1:]), False))
    out.append(("header column renamed", b"\n".join([lines[0].replace(hdr[0], b"bogus", 1)] + lines[1:]), False))
    out.append(("no header", b"\n".join(lines[1:]), False))
    out.append(("semicolons", data.replace(b",", b";"), False))
    return out


def json_mutants(data, rng):
    try:
        doc = json.loads(data.decode("utf-8"))
    except Exception:  # noqa: BLE001 - e.g. a gzip file handled elsewhere
        return []
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node[:3]):
                walk(v, path + [i])

    walk(doc, [])
    out = []
    for path in rng.sample(paths[1:], min(len(paths) - 1, 25)):
        for repl, garbage in (("str", True), ([], False), ({}, False), (None, False), (True, False), (-1, False),
                              (1e300, True), (2**64, False), (0.5, False)):
            d = json.loads(data)
            node = d
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = repl
            out.append((f"{'.'.join(map(str, path))} = {json.dumps(repl)}", json.dumps(d).encode(), False))
        d = json.loads(data)
        node = d
        for p in path[:-1]:
            node = node[p]
        if isinstance(node, dict):
            del node[path[-1]]
            out.append((f"{'.'.join(map(str, path))} removed", json.dumps(d).encode(), False))
            node["no_such_key"] = 1
            out.append(("unknown key", json.dumps(d).encode(), False))
    text = data.decode("utf-8", "replace")
    m = re.search(r'"(\w+)"\s*:\s*([^,{}\[\]]+)', text)
    if m:
        dup = text[: m.start()] + m.group(0) + ", " + m.group(0).replace(m.group(2), "7") + text[m.end():]
        out.append((f"duplicate key {m.group(1)}", dup.encode(), False))
    out.append(("NaN literal", re.sub(r":\s*(-?\d+\.\d+)", ": NaN", text, count=1).encode(), False))
    out.append(("Infinity literal", re.sub(r":\s*(-?\d+\.\d+)", ": Infinity", text, count=1).encode(), False))
    out.append(("top-level array", b"[" + data + b"]", False))
    out.append(("top-level number", b"42", False))
    out.append(("trailing garbage", data + b"}", False))
    return out


def toml_mutants(data, rng):
    text = data.decode("utf-8", "replace")
    out = []
    keys = re.findall(r"^(\w+)\s*=\s*(.*)$", text, re.M)
    for k, v in keys:
        for repl in ('"text"', "[1, 2]", "{a = 1}", "true", "nan", "inf", "-inf", "-1", "0", "1e300", "1979-05-27",
                     "0x10", "9223372036854775807", "1_000"):
            t = re.sub(rf"^{k}\s*=.*$", f"{k} = {repl}", text, count=1, flags=re.M)
            out.append((f"{k} = {repl}", t.encode(), repl in ("nan", "inf", "-inf", "1e300")))
        out.append((f"{k} duplicated", (text + f"\n{k} = {v}\n").encode(), False))
        out.append((f"{k} removed", re.sub(rf"^{k}\s*=.*$", "", text, count=1, flags=re.M).encode(), False))
    out.append(("unknown key", (text + "\nno_such_key = 1\n").encode(), False))
    out.append(("table header", (text + "\n[extra]\nx = 1\n").encode(), False))
    return out


def file_targets(tmp):
    """(group, sub, source file, kind, argv builder taking the mutant's path)."""
    seed = SHARED / "data/seed-measurements.csv"
    cal = ROOT / "docs/calibration-seed-h100.json"
    t = []
    t.append(("topology toml", "collective", ROOT / "tests/sim/data/good.toml", "toml",
              lambda p: ["collective", "--op", "alltoall", "--nodes", "2", "--gpus-per-node", "8", "--topology", p, "--bytes", "1M"]))
    t.append(("topology toml", "whatif", ROOT / "docs/gb200-nvl72-64.toml", "toml",
              lambda p: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--gpus", "64", "--fabric", p, "--mfu", "0.5"]))
    t.append(("topology toml", "whatif", ROOT / "docs/whatif-seed-2node-fabric.toml", "toml",
              lambda p: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "2", "--fabric", p, "--mfu", "0.5"]))
    t.append(("gpu toml", "whatif", ROOT / "tests/whatif/data/gpu_good.toml", "toml",
              lambda p: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "1", "--hardware", p, "--mfu", "0.5"]))
    t.append(("inventory json", "plan", None, "json",
              lambda p: ["plan", "--model", p, "--world", "4", "--scope", "global_capped"]))
    t.append(("inventory json", "deferral", None, "json",
              lambda p: ["deferral", "--model", p, "--world", "4", "--steps", "2"]))
    t.append(("calibration json", "whatif", cal, "json",
              lambda p: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "2", "--calibration", p, "--mfu", "0.5"]))
    t.append(("kernel calibration json", "whatif", ROOT / "docs/whatif-seed-h100-calibration.json", "json",
              lambda p: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "2", "--calibration", p, "--mfu", "0.5"]))
    t.append(("calibration json", "validate", ROOT / "docs/calibration-seed-h100.json", "json",
              lambda p: ["validate", "--measured", str(seed), "--where", "run=1node-real-step", "--calibration", p]))
    t.append(("calibration json", "collective", ROOT / "tests/calibration/data/calibration_ib.json", "json",
              lambda p: ["collective", "--op", "alltoall", "--nodes", "2", "--gpus-per-node", "8", "--fabric", "h100-ndr400",
                         "--bytes", "1M", "--calibration", p]))
    t.append(("measurement csv", "calibrate", seed, "csv",
              lambda p: ["calibrate", "--measured", p, "--dump-metrics"]))
    t.append(("measurement csv", "validate", seed, "csv",
              lambda p: ["validate", "--measured", p, "--where", "run=1node-real-step", "--calibration", str(cal)]))
    t.append(("anchor csv", "calibrate", SHARED / "data/h200-anchors.csv", "csv",
              lambda p: ["calibrate", "--measured", p]))
    t.append(("one-gpu csv", "calibrate", SHARED / "data/h200-one-gpu.csv", "csv",
              lambda p: ["calibrate", "--measured", p]))
    t.append(("published csv", "validate-collectives", None, "csv",
              lambda p: ["validate-collectives", "--published", p]))
    t.append(("nccl-tests log", "calibrate", ROOT / "fuzz/seeds/nccl_tests/alltoall.log", "log",
              lambda p: ["calibrate", "--nccl-tests", p, "--fabric", "h200-ndr400"]))
    t.append(("nccl-tests log", "calibrate", ROOT / "fuzz/seeds/nccl_tests/alltoall.log", "log",
              lambda p: ["calibrate", "--measured", p, "--dump-metrics"]))
    # An NCCL_DEBUG=INFO log: NCCL's "set by environment" lines are inputs too (sim/nccl_env.hpp).
    t.append(("nccl-tests log", "calibrate", ROOT / "fuzz/seeds/nccl_tests/allreduce_info.log", "log",
              lambda p: ["calibrate", "--nccl-tests", p, "--fabric", "h200-ndr400"]))
    # validate-collectives reads the same logs as published rows (a block's shape, env, version).
    t.append(("nccl-tests log", "validate-collectives", ROOT / "fuzz/seeds/nccl_tests/allreduce_info.log", "log",
              lambda p: ["validate-collectives", "--nccl-tests", p, "--fabric", "h200-ndr400", "--rows"]))
    t.append(("nccl-tests log", "validate-collectives", ROOT / "fuzz/seeds/nccl_tests/alltoall.log", "log",
              lambda p: ["validate-collectives", "--nccl-tests", p, "--fabric", "p5-efa", "--extrapolate"]))
    t.append(("kineto trace", "calibrate", ROOT / "tests/measured/data/tiny_trace.json", "json",
              lambda p: ["calibrate", "--measured", p, "--dump-metrics"]))
    return t


def small_published(tmp):
    src = (SHARED / "data/nccl-published/measurements.csv").read_bytes().split(b"\n")
    p = tmp / "published-small.csv"
    p.write_bytes(b"\n".join(src[:1] + src[1:1633:80]) + b"\n")
    return p


def small_inventory(tmp):
    p = tmp / "inventory.json"
    p.write_text(json.dumps([{"name": "a", "rows": 256, "cols": 128, "count": 2}, {"name": "b", "rows": 128, "cols": 256}]))
    return p


def file_cases(tmp, rng, only):
    cases = []
    mdir = tmp / "mutants"
    mdir.mkdir(exist_ok=True)
    n = 0
    for group, sub, src, kind, build in file_targets(tmp):
        if only and sub not in only:
            continue
        if src is None:
            src = small_inventory(tmp) if kind == "json" else small_published(tmp)
        data = src.read_bytes()
        for label, mutant, garbage in text_mutants(data, rng, kind):
            n += 1
            p = mdir / f"m{n}{src.suffix}"
            p.write_bytes(mutant)
            cases.append(Case(group, sub, build(str(p)), p.name, f"{src.name}: {label}", garbage))
    # gzip traces: truncated / corrupt / valid gzip of garbage
    if not only or "calibrate" in only:
        gz = (SHARED / "data/traces/trace_local_rank0.json.gz").read_bytes()
        raw = gzip.decompress(gz)
        for label, mutant in [("gz truncated", gz[: len(gz) // 2]), ("gz header only", gz[:10]),
                              ("gz of garbage", gzip.compress(b"{\"traceEvents\": [1, 2, \"x\"]}")),
                              ("gz of truncated json", gzip.compress(raw[: len(raw) // 3])),
                              ("gz crc broken", gz[:-8] + b"\0" * 8), ("gz empty", gzip.compress(b""))]:
            n += 1
            p = mdir / f"m{n}.json.gz"
            p.write_bytes(mutant)
            cases.append(Case("kineto trace", "calibrate", ["calibrate", "--measured", str(p), "--dump-metrics"], p.name, label))
    if not only or "step" in only:
        cases += case_folder_cases(tmp, rng)
    if not only or set(only) & {"export", "compare", "report", "whatif", "deferral", "calibrate", "validate"}:
        cases += database_cases(tmp, rng)
    return cases


def case_folder_cases(tmp, rng):
    cases = []
    src = SHARED / "fixtures/numerics/d2_local_w2"
    data = (src / "case.json").read_bytes()
    n = 0
    for label, mutant, garbage in text_mutants(data, rng, "json"):
        n += 1
        d = tmp / "cases" / f"c{n}"
        shutil.copytree(src, d)
        (d / "case.json").write_bytes(mutant)
        cases.append(Case("case folder", "step", ["step", str(d), "--out", str(tmp / "cases" / f"o{n}")], f"c{n}",
                          f"case.json: {label}", garbage))
    npy = (src / "G0_p0.npy").read_bytes()
    hdr_end = npy.index(b"\n") + 1
    npy_mutants = [("npy empty", b""), ("npy truncated header", npy[:20]), ("npy truncated data", npy[: hdr_end + 10]),
                   ("npy extra data", npy + b"\0" * 64), ("npy bad magic", b"\x93NUMPZ" + npy[6:]),
                   ("npy dtype f8", npy.replace(b"<f4", b"<f8", 1)), ("npy dtype i4", npy.replace(b"<f4", b"<i4", 1)),
                   ("npy big endian", npy.replace(b"<f4", b">f4", 1)), ("npy fortran", npy.replace(b"False", b"True ", 1)),
                   ("npy shape swapped", npy.replace(b"(16, 32)", b"(32, 16)", 1)),
                   ("npy NaN data", npy[:hdr_end] + b"\x00\x00\xc0\x7f" * ((len(npy) - hdr_end) // 4)),
                   ("npy inf data", npy[:hdr_end] + b"\x00\x00\x80\x7f" * ((len(npy) - hdr_end) // 4))]
    for label, mutant in npy_mutants:
        for fname in ("G0_p0.npy", "W0_p0.npy"):
            n += 1
            d = tmp / "cases" / f"c{n}"
            shutil.copytree(src, d)
            (d / fname).write_bytes(mutant)
            cases.append(Case("case folder", "step", ["step", str(d), "--out", str(tmp / "cases" / f"o{n}")], fname,
                              f"{fname}: {label}", garbage="NaN" in label or "inf" in label))
    return cases


def make_base_db(exe, tmp):
    db = tmp / "base.db"
    if db.exists():
        return db
    for argv in (["whatif", "--model", "seed-5120x8", "--scope", "local,global_capped", "--nodes", "1,2", "--mfu", "0.5"],
                 ["deferral", "--model", "gpt-256x2", "--world", "4", "--steps", "3"],
                 ["step", str(SHARED / "fixtures/numerics/d2_local_w2"), "--out", str(tmp / "base-step")],
                 ["calibrate", "--measured", str(SHARED / "data/seed-measurements.csv"), "--where", "run=1node-real-step",
                  "--where", "run=2node-real-step", "--name", "cal1"],
                 ["collective", "--op", "alltoall", "--nodes", "2", "--gpus-per-node", "8", "--fabric", "h200-ndr400", "--bytes", "1M"]):
        subprocess.run([exe] + argv + ["--db", str(db), "-q"], check=True, capture_output=True)
    return db


SQL_MUTATIONS = [
    ("user_version 999", "PRAGMA user_version = 999"),
    ("user_version -1", "PRAGMA user_version = -1"),
    ("config_json not an object", "UPDATE runs SET config_json = '[1,2]'"),
    ("config_json string", "UPDATE runs SET config_json = '\"x\"'"),
    ("config_json deep", "UPDATE runs SET config_json = '" + "[" * 200 + "]" * 200 + "'"),
    ("config model number", "UPDATE runs SET config_json = json_set(config_json, '$.model', 5)"),
    ("config nodes text", "UPDATE runs SET config_json = json_set(config_json, '$.nodes', 'x')"),
    ("config nodes 1e300", "UPDATE runs SET config_json = json_set(config_json, '$.nodes', 1e300)"),
    ("config world -1", "UPDATE runs SET config_json = json_set(config_json, '$.world', -1)"),
    ("config fraction text", "UPDATE runs SET config_json = json_set(config_json, '$.fraction', 'half')"),
    ("config fabric null", "UPDATE runs SET config_json = json_set(config_json, '$.fabric', json('null'))"),
    ("config keys removed", "UPDATE runs SET config_json = '{}'"),
    ("metric value 1e300", "UPDATE metrics SET value = 1e300"),
    ("metric value -1e300", "UPDATE metrics SET value = -1e300 WHERE rowid % 2 = 0"),
    ("metric value inf", "UPDATE metrics SET value = 9e999"),
    ("metric name odd", "UPDATE metrics SET name = 'a,b\n\"c' WHERE rowid % 3 = 0"),
    ("metric labels array", "UPDATE metrics SET labels_json = '[1]'"),
    ("metrics deleted", "DELETE FROM metrics"),
    ("runs deleted", "DELETE FROM runs"),
    ("status failed", "UPDATE runs SET status = 'failed'"),
    ("kind odd", "UPDATE runs SET kind = 'zz\"'"),
    ("seed huge", "UPDATE runs SET seed = -9223372036854775808"),
    ("metrics table dropped", "DROP TABLE metrics"),
    ("runs table dropped", "PRAGMA foreign_keys=OFF; DROP VIEW run_metrics; DROP TABLE runs"),
    ("index dropped", "DROP INDEX metrics_by_run"),
    ("extra table", "CREATE TABLE zz (a)"),
    ("calibration json broken", "UPDATE calibrations SET body_json = '{}'"),
    ("calibration json array", "UPDATE calibrations SET body_json = '[1]'"),
    ("calibration parameter text", "UPDATE calibrations SET body_json = json_set(body_json, '$.parameters.fwd_bwd_ms', 'x')"),
    ("calibration covariance text", "UPDATE calibrations SET body_json = json_set(body_json, '$.covariance', 'x')"),
    ("deferral rows huge", "UPDATE deferral SET winner_rows = 9223372036854775807"),
    ("deferral step negative", "UPDATE deferral SET step = -5"),
    ("phases 1e18", "UPDATE phases SET duration_ns = 1000000000000000000"),
    ("duplicated runs", "INSERT INTO runs (kind, mode, config_json, config_hash, seed, git_revision, dionsim_version, host, "
                        "started_utc, finished_utc, status) SELECT kind, mode, config_json, config_hash, seed, git_revision, "
                        "dionsim_version, host, started_utc, finished_utc, status FROM runs"),
]


def database_cases(tmp, rng):
    cases = []
    exe = EXE
    base = make_base_db(exe, tmp)
    ddir = tmp / "dbs"
    ddir.mkdir(exist_ok=True)
    raw = base.read_bytes()
    mutants = [("empty", b""), ("100 bytes", raw[:100]), ("one page", raw[:4096]), ("half", raw[: len(raw) // 2]),
               ("header zeroed", b"\0" * 100 + raw[100:]), ("page size byte", raw[:16] + b"\x00\x03" + raw[18:]),
               ("appended garbage", raw + b"\xde\xad" * 1000), ("text file", b"hello\n"),
               ("page 2 zeroed", raw[:4096] + b"\0" * 4096 + raw[8192:]),
               ("page 3 random", raw[:8192] + bytes(rng.randrange(256) for _ in range(4096)) + raw[12288:])]
    for i in range(8):
        b = bytearray(raw)
        for _ in range(16):
            b[rng.randrange(100, len(b))] = rng.randrange(256)
        mutants.append((f"random bytes {i}", bytes(b)))
    n = 0
    for label, data in mutants:
        n += 1
        p = ddir / f"d{n}.db"
        p.write_bytes(data)
        cases += db_uses(p, label)
    for label, sql in SQL_MUTATIONS:
        n += 1
        p = ddir / f"d{n}.db"
        shutil.copy(base, p)
        try:
            con = sqlite3.connect(p)
            con.execute("PRAGMA ignore_check_constraints = ON")
            con.executescript(sql)
            con.commit()
            con.close()
        except sqlite3.Error as e:
            print(f"(skipped SQL mutation {label}: {e})", file=sys.stderr)
            continue
        cases += db_uses(p, "sql: " + label)
    return cases


def db_uses(p, label):
    """Every subcommand that reads a database, on a copy of p each (writers change the file)."""
    uses = [("export", lambda q: ["export", "--db", q]),
            ("export", lambda q: ["export", "--db", q, "--format", "json", "--kind", "whatif"]),
            ("compare", lambda q: ["compare", q, str(p)]),
            ("compare", lambda q: ["compare", "--db", q, "--where", "scope=local", "--vs", "scope=global_capped"]),
            ("report", lambda q: ["report", "--db", q, "--out", q + ".report"]),
            ("whatif", lambda q: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "4", "--mfu", "0.5", "--db", q]),
            ("whatif", lambda q: ["whatif", "--model", "seed-5120x8", "--scope", "local", "--nodes", "1", "--mfu", "0.5",
                                  "--db", q, "--calibration", "cal1"]),
            ("deferral", lambda q: ["deferral", "--model", "gpt-256x2", "--world", "4", "--steps", "2", "--norms", "replay:" + q]),
            ("calibrate", lambda q: ["calibrate", "--db", q, "--where", "run=1node-real-step"]),
            ("validate", lambda q: ["validate", "--db", q, "--where", "run=1node-real-step", "--calibration", "cal1"])]
    out = []
    for sub, build in uses:
        q = str(p) + f".{sub}{len(out)}.db"
        out.append(DbCase(sub, build(q), Path(q).name, f"db {label}", p, q))
    return out


class DbCase(Case):
    def __init__(self, sub, argv, must_name, label, src, dst):
        super().__init__("database", sub, argv, must_name, label)
        self.src, self.dst = src, dst


# ---- running ---------------------------------------------------------------------------------
BAD_TEXT = re.compile(r"internal error|terminate called|runtime error:|AddressSanitizer|LeakSanitizer|Assertion|"
                      r"what\(\)|Segmentation|core dumped|std::|boost::|bad_any_cast|stoi|stod")


def run_case(case, timeout):
    before = None
    if isinstance(case, DbCase):
        shutil.copy(case.src, case.dst)
        before = Path(case.dst).read_bytes()
    try:
        r = subprocess.run([EXE] + case.argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=CWD)
    except subprocess.TimeoutExpired:
        return ("timeout", f"> {timeout} s")
    rc = r.returncode
    err = r.stderr.decode("utf-8", "replace")
    problems = []
    if rc < 0:
        problems.append(f"signal {-rc}")
    elif rc not in OK_CODES:
        problems.append(f"exit {rc}")
    if BAD_TEXT.search(err):
        problems.append("stderr: " + BAD_TEXT.search(err).group())
    bare = (case.must_name or "").lstrip("-")
    named = case.must_name is None or case.must_name in err or (
        # a path flag may be named by its value; a flag by its field (--nic-GBps as nic_GBps, -b as 'minbytes')
        case.value and bare in TEXT_FLAGS | PATH_FLAGS and case.value.strip()[:60] in err) or (
        case.value is not None and (bare.replace("-", "_") in err or f"'{bare}'" in err))
    if rc in (2, 3, 4) and not named:
        problems.append(f"refusal does not name {case.must_name}")
    if rc == 0 and case.garbage:
        problems.append("accepted garbage")
    if isinstance(case, DbCase) and rc != 0 and before is not None:
        p = Path(case.dst)
        if p.exists() and p.read_bytes() != before and rc in (3, 4) and before:
            problems.append("refused database was changed")
    if problems:
        return ("; ".join(problems), f"rc={rc} stderr={err.strip()[-400:]!r}")
    return None


EXE = None
CWD = None  # a scratch folder: relative paths a mutated flag names land there


def main():
    global EXE, CWD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dionsim", default=str(ROOT / "build/dionsim"))
    ap.add_argument("--only", default="", help="comma list of subcommands")
    ap.add_argument("--kinds", default="flags,files", help="flags, files or both")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="", help="keep the work folder (mutants) here")
    args = ap.parse_args()
    EXE = os.path.abspath(args.dionsim)
    only = [s for s in args.only.split(",") if s]
    rng = random.Random(args.seed)
    tmp = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="dionsim-fuzz-cli-"))
    tmp.mkdir(parents=True, exist_ok=True)
    make_base_db(EXE, tmp)
    CWD = tmp / "cwd"
    CWD.mkdir(exist_ok=True)
    cases = []
    if "flags" in args.kinds:
        cases += flag_cases(EXE, tmp, only)
    if "files" in args.kinds:
        cases += file_cases(tmp, rng, only)
    counts, findings = {}, []
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(run_case, c, args.timeout): c for c in cases}
        for f in cf.as_completed(futs):
            c = futs[f]
            key = f"{c.group}/{c.sub}"
            counts[key] = counts.get(key, 0) + 1
            res = f.result()
            if res:
                findings.append((c, res))
                print(f"FINDING [{key}] {c.label}: {res[0]}\n    dionsim {' '.join(c.argv)[:300]}\n    {res[1]}", flush=True)
    print("\ncases per subcommand / format:")
    for k in sorted(counts):
        print(f"  {k:40} {counts[k]}")
    print(f"total {sum(counts.values())} cases, {len(findings)} findings (work folder {tmp})")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
