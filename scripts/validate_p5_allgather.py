#!/usr/bin/env python3
"""Out-of-sample check on AWS p5 (EFA): the all-gather sweep that measurements.csv leaves out.

crazyguitar/aws-gpu-communication-benchmark published three nccl-tests summaries of one p5.48xlarge
cluster (SageMaker HyperPod EKS, NCCL 2.27.7, aws-ofi-nccl v1.16.3, 2 to 32 nodes of 8 H100s):
all-reduce and all-to-all are scored rows of ../shared/data/nccl-published/measurements.csv, the
all-gather (data/nccl_all_gather.csv, 35 lines, out-of-place and in-place) is not. This script turns
that file into rows of the published format — the cluster's description (GPU, fabric, NIC, NCCL
version) taken from the same author's all-to-all rows in measurements.csv, the env of the repository's
k8s/nccl_all_gather_perf.yaml, sizes in MiB (the author's "size(MB)" is MB * 2^20, as the published
file's notes say of the sibling CSVs) and the time derived as size / algbw (the summary prints no
time) — and predicts them nominally with `dionsim validate-collectives --published`.

Nothing in dionsim was fitted to these rows. The data are that repository's, not committed here.

Usage: scripts/validate_p5_allgather.py CHECKOUT [--dionsim build/dionsim] [validate-collectives flags...]
  CHECKOUT: a clone of github.com/crazyguitar/aws-gpu-communication-benchmark (read at a77f70d and
  fd167f9; the file has not changed since a77f70d) or a bare git directory of it; read from HEAD.
"""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "..", "..", "shared", "data", "nccl-published", "measurements.csv")
DATA_PATH = "data/nccl_all_gather.csv"
EXPECTED_HEADER = ["Nodes", "GPUs", "size(MB)", "iterations", "blocking", "out algbw(GB/s)",
                   "out busbw(GB/s)", "in algbw(GB/s)", "in busbw(GB/s)"]
# k8s/nccl_all_gather_perf.yaml's mpirun -x flags and nccl-tests arguments.
ENV = ("NCCL_BUFFSIZE=8388608 NCCL_P2P_NET_CHUNKSIZE=524288 NCCL_TUNER_PLUGIN=libnccl-ofi-tuner.so "
       "FI_PROVIDER=efa; -n 1000 -w 10 --blocking 0")


def fail(message):
    print(f"validate_p5_allgather.py: {message}", file=sys.stderr)
    sys.exit(2)


def git_dir_of(checkout):
    dot_git = os.path.join(checkout, ".git")
    return dot_git if os.path.isdir(dot_git) else checkout


def read_summary(checkout):
    try:
        text = subprocess.run(["git", "--git-dir", git_dir_of(checkout), "show", f"HEAD:{DATA_PATH}"],
                              check=True, capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as e:
        fail(f"{checkout}: cannot read {DATA_PATH} at HEAD ({e.stderr.strip()}); expected a clone of "
             "crazyguitar/aws-gpu-communication-benchmark")
    lines = list(csv.reader(text.splitlines()))
    if not lines or [c.strip() for c in lines[0]] != EXPECTED_HEADER:
        fail(f"{checkout}:{DATA_PATH}: header {lines[0] if lines else '(empty)'}; expected {EXPECTED_HEADER}")
    rows = []
    for number, cells in enumerate(lines[1:], start=2):
        cells = [c.strip() for c in cells]
        if len(cells) != len(EXPECTED_HEADER):
            fail(f"{checkout}:{DATA_PATH}:{number}: {len(cells)} fields; expected {len(EXPECTED_HEADER)}")
        try:
            nodes, gpus, mib = int(cells[0]), int(cells[1]), int(cells[2])
            out_algbw, in_algbw = float(cells[5]), float(cells[7])
        except ValueError:
            fail(f"{checkout}:{DATA_PATH}:{number}: {cells}: expected integer Nodes, GPUs, size(MB) and numeric algbw")
        if nodes < 1 or gpus % nodes or mib < 1 or not (out_algbw > 0 and in_algbw > 0):
            fail(f"{checkout}:{DATA_PATH}:{number}: {cells}: expected GPUs a multiple of Nodes, size >= 1 MB, algbw > 0")
        rows.append((number, nodes, gpus, mib, out_algbw, in_algbw, cells[6], cells[8]))
    return rows


def cluster_template():
    with open(PUBLISHED, newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            if "crazyguitar/aws-gpu-communication-benchmark" in row["source"] and row["collective"] == "alltoall":
                return reader.fieldnames, row
    fail(f"{PUBLISHED}: no crazyguitar all-to-all row to take the cluster's description from")


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    checkout, rest = argv[1], argv[2:]
    dionsim = os.path.join(HERE, "..", "build", "dionsim")
    if rest[:1] == ["--dionsim"]:
        if len(rest) < 2:
            fail("--dionsim needs a path")
        dionsim, rest = rest[1], rest[2:]
    fields, template = cluster_template()
    summary = read_summary(checkout)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "p5_allgather.csv")
        with open(path, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=fields)
            out.writeheader()
            for number, nodes, gpus, mib, out_algbw, in_algbw, out_busbw, in_busbw in summary:
                size = mib * 2**20
                for placement, algbw, busbw in (("out-of-place", out_algbw, out_busbw), ("in-place", in_algbw, in_busbw)):
                    row = dict(template)
                    row.update(source=f"github.com/crazyguitar/aws-gpu-communication-benchmark {DATA_PATH} line {number}",
                               gpus_per_node=gpus // nodes, nodes=nodes, world=gpus, env=ENV, collective="allgather",
                               placement=placement, size_bytes=size, count="", time_us=f"{size / algbw / 1e3:.2f}",
                               algbw_GBps=algbw, busbw_GBps=busbw,
                               notes="summary CSV (algbw/busbw only): time_us = size / algbw; size = MB * 2^20")
                    out.writerow(row)
        print(f"# {2 * len(summary)} all-gather rows of {checkout}:{DATA_PATH} (none in measurements.csv)",
              file=sys.stderr)
        return subprocess.run([dionsim, "validate-collectives", "--published", path, *rest]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
