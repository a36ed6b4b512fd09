"""The single-node nccl-tests logs of xxrjun/nccl-tests-cluster example-cluster01 (NCCL 2.29.2,
H100 nodes), read from a clone or a bare git directory at its HEAD: what
scripts/p2p_channel_rate.py and scripts/nvls_step_overhead.py measure the model's constants on."""
import os
import re
import statistics
import subprocess
import sys


def single_node_rows(checkout, gpus, test, skip=None):
    """Yields (log path, GPUs, rows) for each single-node log with `gpus` GPUs (a regex: "8",
    "[48]") holding a `test` block (e.g. "sendrecv_perf"), less those whose path contains `skip`.
    rows: (size, out-of-place time us, in-place time us) per size row."""
    git_dir = os.path.join(checkout, ".git") if os.path.isdir(os.path.join(checkout, ".git")) else checkout
    git = ["git", "--git-dir", git_dir]
    paths = subprocess.run(git + ["ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.split()
    logs = [p for p in paths if re.search(r"example-cluster01/.*/nccl_N1_G" + gpus + r"_[^/]*\.log$", p)
            and not (skip and skip in p)]
    if not logs:
        sys.exit(f"{sys.argv[0]}: no example-cluster01 single-node logs with {gpus} GPUs under {checkout}")
    for path in logs:
        text = subprocess.run(git + ["show", "HEAD:" + path], capture_output=True, text=True, check=True).stdout
        block = re.search(r"starting: " + test + r"(.*?)concluded", text, re.S)
        if not block:
            continue
        # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        rows = [l.split() for l in block.group(1).splitlines() if re.match(r"\s+\d", l)]
        yield path, int(re.search(r"_G(\d+)_", path).group(1)), [(int(r[0]), float(r[5]), float(r[9])) for r in rows]


def print_median(values, what, unit, digits):
    """The closing line: the median and range of `values`, or exit naming what was not found."""
    if not values:
        sys.exit(f"{sys.argv[0]}: no {what} in the logs")
    lo, mid, hi = min(values), statistics.median(values), max(values)
    print(f"# {len(values)} {what}: median {mid:.2f} {unit}, range {lo:.{digits}f}-{hi:.{digits}f}")
