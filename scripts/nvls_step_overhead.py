#!/usr/bin/env python3
"""The fixed cost of one NVLS pipeline step (sim/collective_model.cpp, kNvlsStepOverheadUs).

NCCL's NVLS all-reduce moves each channel's data in chunks, one head after the other, and shrinks
the chunk for smaller calls (enqueue.cc: 128 KiB from 64 x concurrentOps x 128 KiB up, 64 KiB from
8 x concurrentOps x 64 KiB, where concurrentOps = channels x heads). Every chunk step also pays a
fixed cost (the flag wait and post between the scatter, reduce and gather warps), so a channel
moves c / (c / r + o): the call's rate drops by a step where NCCL halves the chunk. Between two
sizes that run the same chunk the time's slope is that chunk's rate, free of the latency and the
pipeline's fill; two chunk sizes give the step's cost:

    o = channels x (1/rate(c1) - 1/rate(c2)) / (1/c1 - 1/c2)

This reads the single-node, 8-GPU H100 logs of xxrjun/nccl-tests-cluster example-cluster01
(NCCL 2.29.2, NVLS on 16 channels) but cnode3-002, whose all-reduce rows validate-collectives
scores, and prints each log's 64 KiB and 128 KiB rates, its step cost and their median.

Usage: scripts/nvls_step_overhead.py CHECKOUT
  CHECKOUT: a clone of github.com/xxrjun/nccl-tests-cluster (checked at 455de4f) or a bare git
  directory of it.
"""
import os
import statistics
import sys

from cluster01_logs import print_median, single_node_rows

CHANNELS = 16  # NVLS_NCHANNELS_SM90
HEADS = 8      # one node: every GPU is a head
SCORED = "cnode3-002"  # its all-reduce rows are in measurements.csv


def chunk(size):
    """enqueue.cc's NVLS chunk for one call of `size` bytes (one node)."""
    ops = CHANNELS * HEADS
    c = 128 * 1024
    if size < 64 * ops * c and c > 65536:
        c = 65536
    if size < 8 * ops * c and c > 32768:
        c = 32768
    if size < 2 * ops * c and c > 16384:
        c = 16384
    return c


def class_rate(rows, c):
    """Median slope (GB/s) between consecutive sizes that both run chunk c."""
    slopes = [(s2 - s1) / (t2 - t1) / 1e3 for (s1, t1), (s2, t2) in zip(rows, rows[1:])
              if chunk(s1) == c and chunk(s2) == c]
    return statistics.median(slopes) if slopes else None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    costs = []
    for path, _, rows in single_node_rows(sys.argv[1], "8", "all_reduce_perf", skip=SCORED):
        for column, placement in ((1, "out-of-place"), (2, "in-place")):
            timed = [(r[0], r[column]) for r in rows]
            r64, r128 = class_rate(timed, 65536), class_rate(timed, 131072)
            if r64 is None or r128 is None:
                continue
            # GB/s = bytes per ns; o in us
            o_ns = CHANNELS * (1 / r64 - 1 / r128) / (1 / 65536 - 1 / 131072)
            costs.append(o_ns / 1e3)
            print(f"{os.path.basename(path)} {placement}: 64 KiB chunks {r64:.1f} GB/s, 128 KiB {r128:.1f} GB/s, "
                  f"step cost {o_ns / 1e3:.2f} us")
    print_median(costs, "step-cost estimates (all-reduces with both chunk sizes)", "us per step", 2)


if __name__ == "__main__":
    main()
