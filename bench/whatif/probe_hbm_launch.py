#!/usr/bin/env python3
"""Measures the two kernel-model constants the H200 preset needs (sim/kernel_model.cpp):

* hbm_efficiency: achieved / peak HBM bandwidth of streaming elementwise kernels of the
  optimizer's kind (fp32 M += G; bf16 copy; fp32 row L1 norms), large tensors, CUDA events,
  median of 20 after 5 warm-ups. Bytes = bytes read + written.
* launch_gap_us: GPU time per kernel of 2000 tiny kernels (one 1-element add each) replayed from
  a CUDA graph (device-side cost alone); also the same burst launched eagerly (bounded by the
  host) and the host's enqueue cost per eager op (perf_counter) for --host-launch-us.

Prints one CSV row per measurement: what,value,unit,notes.  Usage: python3 probe_hbm_launch.py [peak_GBps]
"""
import statistics
import sys
import time

import torch


def timed(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(out)


def main():
    peak = float(sys.argv[1]) if len(sys.argv) > 1 else 4800.0
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    n = 5120 * 102400  # 2 GiB of fp32, rows of 5120 for the norms
    M = torch.zeros(n, dtype=torch.float32, device=dev)
    G = torch.randn(n, dtype=torch.float32, device=dev)
    t = timed(lambda: M.add_(G))
    print(f"hbm_fp32_add_GBps,{3 * 4 * n / t / 1e9:.1f},GB/s,{name}: M.add_(G) fp32 {n} elements, 12 B/element")
    Mb = torch.empty(n, dtype=torch.bfloat16, device=dev)
    t = timed(lambda: Mb.copy_(G))
    print(f"hbm_bf16_copy_GBps,{(4 + 2) * n / t / 1e9:.1f},GB/s,{name}: fp32 -> bf16 copy, 6 B/element")
    R = G.view(-1, 5120)
    t = timed(lambda: R.abs().sum(dim=1))
    # abs materializes (read 4 + write 4), sum reads 4: 12 B/element, as eager PyTorch runs it
    print(f"hbm_rownorm_GBps,{12 * n / t / 1e9:.1f},GB/s,{name}: row L1 norms of [{R.shape[0]}, 5120] fp32, eager (abs + sum)")
    best = max(3 * 4 * n / timed(lambda: M.add_(G)), 6 * n / timed(lambda: Mb.copy_(G))) / 1e9
    print(f"hbm_efficiency,{best / peak:.3f},fraction,best streaming kernel / {peak:g} GB/s peak")

    x = torch.zeros(1, device=dev)
    for _ in range(100):
        x.add_(1.0)
    torch.cuda.synchronize()
    k = 2000
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    t0 = time.perf_counter()
    for _ in range(k):
        x.add_(1.0)
    host = time.perf_counter() - t0
    b.record()
    b.synchronize()
    gpu = a.elapsed_time(b) * 1e-3
    print(f"eager_launch_us,{gpu / k * 1e6:.2f},us,{name}: GPU time per kernel of {k} eager back-to-back 1-element adds")
    # Device-side gap alone: the same burst replayed from a CUDA graph (no host in the loop).
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                x.add_(1.0)
    torch.cuda.synchronize()
    t = timed(g.replay, reps=10, warm=2)
    print(f"launch_gap_us,{t / k * 1e6:.2f},us,{name}: GPU time per kernel of {k} 1-element adds replayed from a CUDA graph")
    print(f"host_launch_us,{host / k * 1e6:.2f},us,{name}: host enqueue time per eager torch op (x.add_)")


if __name__ == "__main__":
    main()
