#!/usr/bin/env python3
"""The per-channel rate of NCCL's p2p sends (sim/collective_model.cpp, kP2pChannelGBps).

NCCL runs every part of a send on one p2p channel (one thread block), so a single-peer
send/recv that NCCL splits into k parts moves at k x one channel's rate until the NVLink is
full. On one 8-GPU H100 node nccl-tests' sendrecv_perf climbs in steps as the part count doubles
(4 parts: ~80 GB/s, 8: ~160, 16: ~300). Between two sizes that NCCL splits into the same number of
parts, the time's slope is that many channels' rate, free of the fixed latency.

This reads the 20 single-node logs of xxrjun/nccl-tests-cluster example-cluster01 (NCCL 2.29.2;
their send/recv rows are in no set validate-collectives scores) and prints every such slope per
channel and their median.

Usage: scripts/p2p_channel_rate.py CHECKOUT
  CHECKOUT: a clone of github.com/xxrjun/nccl-tests-cluster (checked at 455de4f) or a bare git
  directory of it.
"""
import os
import sys

from cluster01_logs import print_median, single_node_rows

# One H100 node as NCCL 2.29 sets up p2p (sim/nccl_tuning.cpp nccl_p2p_plan): 32 p2p channels,
# 32 channels per peer (2 per NVLink, 18 NVLinks, pow2Up, capped at the p2p channels).
P2P_CHANNELS = 32
CHANNELS_PER_PEER = 32
NVL_CHUNK = 512 * 1024  # NCCL_P2P_NVL_CHUNKSIZE
NVLINK_GBPS = 18 * 20.6  # NCCL's NVLink rate on sm90 (topo.h): slopes near it are link-bound


def div_up(a, b):
    return -(-a // b)


def parts(ranks, bytes_per_peer):
    """addP2pToPlan's part count for one peer inside one node."""
    channels_min = CHANNELS_PER_PEER
    while channels_min * ranks > P2P_CHANNELS and channels_min > 1:
        channels_min //= 2
    min_part, max_part = NVL_CHUNK // 8, NVL_CHUNK * 32
    k = min(channels_min, div_up(bytes_per_peer, min_part))
    part = max(min_part, div_up(bytes_per_peer, k))
    while part > max_part and k <= CHANNELS_PER_PEER // 2:
        k *= 2
        part = div_up(bytes_per_peer, k)
    return k


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    slopes = []
    for path, ranks, rows in single_node_rows(sys.argv[1], "[48]", "sendrecv_perf"):
        for (s1, out1, in1), (s2, out2, in2) in zip(rows, rows[1:]):
            k = parts(ranks, s1)
            if k != parts(ranks, s2) or k * 25 > NVLINK_GBPS:
                continue
            for t1, t2 in ((out1, out2), (in1, in2)):
                per_channel = (s2 - s1) / (t2 - t1) / 1e3 / k
                slopes.append(per_channel)
                print(f"{os.path.basename(path)} {ranks} ranks {s1 >> 20}->{s2 >> 20} MiB, {k} parts: "
                      f"{per_channel:.2f} GB/s per channel")
    print_median(slopes, "slopes of send/recv size pairs with equal part counts", "GB/s per channel", 1)


if __name__ == "__main__":
    main()
