#!/usr/bin/env python3
"""Issue 20: `dionsim export` round-trips a database, read back by Python's own csv and sqlite3
modules (an independent reader): every stored double is the same double, every configuration
key the same value; --json and --csv of export, whatif and compare hold the same columns.
usage: issue20_roundtrip.py DIONSIM WORKDIR"""
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
db = os.path.join(work, "issue20-roundtrip.db")
for f in (db, db + "-wal", db + "-shm"):
    if os.path.exists(f):
        os.remove(f)


def run(*args, code=0):
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    if p.returncode != code:
        sys.exit(f"dionsim {' '.join(args)}: exit {p.returncode}, expected {code}\n{p.stdout}\n{p.stderr}")
    return p


def flatten(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        elif isinstance(v, (dict, list)):
            out[key] = json.dumps(v, separators=(",", ":"))
        else:
            out[key] = v
    return out


def same(cell, value, where):
    """A CSV cell against the JSON / SQLite value it must hold exactly."""
    if value is None:
        ok = cell == ""
    elif isinstance(value, bool):
        ok = cell == ("true" if value else "false")
    elif isinstance(value, (int, float)):
        ok = cell != "" and float(cell) == float(value) and float(cell).hex() == float(value).hex()
    else:
        ok = cell == value
    if not ok:
        sys.exit(f"{where}: CSV cell {cell!r}, expected {value!r}")


sweep = ["--model", "seed-5120x8", "--nodes", "1,2", "--scope", "local,global_capped", "--mfu", "0.45",
         "--fabric", "h100-ndr400,p5-efa", "--quiet"]
run("whatif", *sweep, "--db", db)
run("deferral", "--model", "seed-5120x8", "--world", "16", "--steps", "3", "--quiet", "--db", db)

# export --format csv, read back against the database itself.
out = os.path.join(work, "issue20-export.csv")
run("export", "--db", db, "--format", "csv", "--out", out, "--quiet")
with open(out, newline="") as f:
    rows = list(csv.DictReader(f))
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
stored = con.execute("SELECT m.run_id, r.kind, r.config_json, m.name, m.value, m.unit, m.rank, m.step, m.labels_json "
                     "FROM metrics m JOIN runs r ON r.id = m.run_id ORDER BY m.run_id, m.rowid").fetchall()
if len(rows) != len(stored) or len(rows) < 100:
    sys.exit(f"export: {len(rows)} rows, the database holds {len(stored)} metrics")
fixed = {"run_id", "kind", "mode", "seed", "metric", "value", "unit", "rank", "step"}
for row, (run_id, kind, config_json, name, value, unit, rank, step, labels) in zip(rows, stored):
    where = f"run {run_id} {name}"
    same(row["run_id"], run_id, where)
    same(row["kind"], kind, where)
    same(row["metric"], name, where)
    same(row["value"], value, where)
    same(row["unit"], unit, where)
    same(row["rank"], rank, where)
    same(row["step"], step, where)
    for key, v in flatten(json.loads(config_json)).items():
        same(row["config." + key if key in fixed else key], v, f"{where} config {key}")
    for key, v in json.loads(labels).items():
        same(row["label." + key], v, f"{where} label {key}")

# export --format json: the same rows and columns.
exported = json.loads(run("export", "--db", db, "--format", "json", "--quiet").stdout)
if len(exported) != len(rows) or set(exported[0]) != set(rows[0]):
    sys.exit("export --format json: not the columns of --format csv")
for row, obj in zip(rows, exported):
    for key, v in obj.items():
        same(row[key], v, f"export json {key}")

# whatif --csv is its --json: same columns, same values.
as_json = json.loads(run("whatif", *sweep, "--json").stdout)
as_csv = list(csv.DictReader(io.StringIO(run("whatif", *sweep, "--csv").stdout)))
if len(as_json) != len(as_csv):
    sys.exit("whatif: --csv rows differ from --json")
union = set()
for obj, row in zip(as_json, as_csv):
    flat = flatten(obj)
    union |= set(flat)
    for key in row:  # a key another row has is an empty cell here
        same(row[key], flat.get(key), f"whatif {key}")
if union != set(as_csv[0]):
    sys.exit(f"whatif --csv columns {sorted(union ^ set(as_csv[0]))} differ from --json")

# compare: two selections of one database; --csv is --json.
args = ["compare", "--db", db, "--where", "fabric=h100-ndr400", "--vs", "fabric=p5-efa", "--quiet"]
cj = json.loads(run(*args, "--json").stdout)
cc = list(csv.DictReader(io.StringIO(run(*args, "--csv").stdout)))
if not cj or len(cj) != len(cc):
    sys.exit("compare: --csv rows differ from --json (or none)")
for obj, row in zip(cj, cc):
    for key, v in obj.items():
        same(row[key], v, f"compare {key}")
    if obj["a"] is not None and obj["b"] is not None and obj["diff"] != obj["b"] - obj["a"]:
        sys.exit(f"compare: diff {obj['diff']} != b - a for {obj['metric']}")

# A SQLite file of another application is refused, exit 4, and left as it was.
other = os.path.join(work, "issue20-other.sqlite")
if os.path.exists(other):
    os.remove(other)
o = sqlite3.connect(other)
o.execute("CREATE TABLE customers (id INTEGER)")
o.commit()
o.close()
before = open(other, "rb").read()
p = run("export", "--db", other, code=4)
if "not a dionsim results database" not in p.stderr or open(other, "rb").read() != before:
    sys.exit("export of another application's SQLite file: " + p.stderr)
run("compare", db, other, code=4)
print(f"export round trip: {len(rows)} metrics bit-exact; whatif/compare --csv = --json")
