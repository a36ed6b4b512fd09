#!/usr/bin/env python3
"""The side-by-side table of bench/side_by_side/run.sh's output folder (stdlib only).

Usage: python3 bench/side_by_side/report.py RUN_DIR [--markdown]

Per (optimizer, fraction): the reference (capped branch, eager with its compiled helpers; main under
CudaGraphOptimizer, Dion2 only), dionsim eager / CUDA graph with Polar Express and Gram NS, the
ratios to the faster reference, and the floor of dionsim's executed work measured in the same call:
  floor = executed NS GEMM FLOPs / sustained bf16 GEMM rate (power_probe, 5120^3, median window)
        + memory-bound bytes / device-to-device copy rate (bytes read + written per second),
with the bytes counted as docs/gpu.md "Floor" says: 20 B per parameter element (read G, M, W;
write M, W; fp32), 10 B per selected element (gather: read M, write bf16, write decayed M), 2 B per
selected element read by the post, and the NS elementwise passes per NS element / Gram element.
"""
import json
import sys


def objects(path):
    """Every JSON value in a file of concatenated (possibly pretty-printed) JSON values."""
    try:
        text = open(path).read()
    except OSError:
        return []
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl + 1
            continue
        out.append(obj)
    return out


def gpt_params(model):
    h, layers = (int(x) for x in model[len("gpt-"):].split("x"))
    return layers * (4 * h * h + 2 * 4 * h * h)


def ns_shapes(run):
    for l in run["ns_layouts"]:
        b, m, n = (int(x) for x in l["ns_input"].split("x"))
        yield b, min(m, n), max(m, n)


def memory_bytes(run):
    """Bytes the memory-bound kernels must move (fp32 parameters and momentum)."""
    P = gpt_params(run["model"])
    sel = sum(b * m * n for b, m, n in ns_shapes(run))  # selected elements = NS input elements
    gram = run["ns"] == "gram"
    ns_elem = 0
    for b, m, n in ns_shapes(run):
        if gram:  # normalize (read bf16, fp16 out), convert back; Q = Z + aI twice
            ns_elem += b * (6 * m * n + 4 * m * n + 2 * 4 * m * m)
        else:  # norm + divide; per iteration X = aX + BX (read X, BX, write X), B update, A mirror
            ns_elem += b * (6 * m * n + 5 * (6 * m * n + 6 * m * m + 2 * m * m))
    return {"params_B": 20 * P, "gather_B": 10 * sel, "post_U_B": 2 * sel, "ns_elementwise_B": ns_elem}


def metrics(run):
    return {m["metric"]: m["value"] for m in run["metrics"]}


def main():
    d = sys.argv[1]
    probes = objects(f"{d}/probes.jsonl")
    copy = next((p for p in probes if p.get("kind") == "d2d_copy"), None)
    gemm = [p for p in probes if p.get("kind") == "sustained_gemm"]
    rate = next((g["tflops_median"] for g in gemm if g["shape"] == [5120, 5120, 5120]), None)
    smi = next((p for p in probes if p.get("kind") == "smi_samples"), None)
    runs = [r for r in objects(f"{d}/dionsim.jsonl") if r.get("mode") == "step"]
    after = [r for r in objects(f"{d}/dionsim_after.jsonl") if r.get("mode") == "step"]
    ref = objects(f"{d}/reference.jsonl") + objects(f"{d}/anchors.jsonl") + objects(f"{d}/anchors_main.jsonl")
    print(f"# side by side ({d})")
    if copy:
        print(f"d2d copy: {copy['rw_GBps']:.0f} GB/s read+written ({copy['bytes'] / 2**30:.0f} GiB, median of 20)")
    for g in gemm:
        print(f"sustained bf16 GEMM {g['shape']}: median {g['tflops_median']:.1f} TF/s (min {g['tflops_min']:.1f}, max {g['tflops_max']:.1f}, {g['windows']} windows)")
    if smi:
        print("nvidia-smi during the probe (sm MHz, W, reasons, C):", "; ".join(smi["samples"][:8]))
    rows = []
    for opt in ("dion2", "nordion2"):
        for f in (0.25, 0.5):
            ref_branch = next((r["ms_median"] for r in ref if r.get("kind") == "opt_step" and r["opt"].lower() == opt
                               and r["fraction"] == f and r["scope"] == "local"), None)
            ref_graph = next((r["ms_median"] for r in ref if r.get("kind") == "opt_step_main" and r["mode"] == "graph"
                              and opt == "dion2" and r["fraction"] == f), None)
            ref_main = next((r["ms_median"] for r in ref if r.get("kind") == "opt_step_main" and r["mode"] == "eager"
                             and opt == "dion2" and r["fraction"] == f), None)
            refs = [x for x in (ref_branch, ref_graph, ref_main) if x]
            best_ref = min(refs) if refs else None
            for ns in ("polar_express", "gram"):
                run = next((r for r in runs if r["optimizer"] == opt and r["fraction"] == f and r["ns"] == ns), None)
                if run is None:
                    continue
                m = metrics(run)
                # (first run of this session's code: these were metrics; now results beside them)
                eager = run.get("eager", {})
                m.setdefault("eager_step_ms", eager.get("opt_step_ms"))
                m.setdefault("eager_host_step_ms", eager.get("opt_cpu_span_ms"))
                m.setdefault("host_step_ms", m.get("opt_cpu_span_ms"))
                flops = m.get("ns_executed_flops", run.get("ns_executed", {}).get("flops", 0.0))
                mem = memory_bytes(run)
                t_gemm = flops / (rate * 1e9) if rate else None
                t_mem = sum(mem.values()) / (copy["rw_GBps"] * 1e6) if copy else None
                floor = t_gemm + t_mem if t_gemm is not None and t_mem is not None else None
                rows.append(dict(opt=opt, f=f, ns=ns, ref_branch=ref_branch, ref_main=ref_main, ref_graph=ref_graph,
                                 eager=m.get("eager_step_ms"), graph=m["opt_step_ms"], host_eager=m.get("eager_host_step_ms"),
                                 host_graph=m["host_step_ms"], ns_ms=m["ns_gemm_ms"], flops=flops,
                                 nominal=sum(l.get("ns_nominal_flops", 0) for l in run["ns_layouts"]),
                                 t_gemm=t_gemm, t_mem=t_mem, floor=floor, best_ref=best_ref, mem=mem,
                                 groups=run["ns_layouts"]))
    hdr = ("| optimizer | f | NS | reference branch / main / main+graph (ms) | dionsim eager (ms) | dionsim graph (ms) "
           "| graph / best ref | host ms/step eager → graph | NS ms | NS executed TFLOP | floor (GEMM + mem) ms | graph / floor |")
    print()
    print(hdr)
    print("|---" * (hdr.count("|") - 1) + "|")
    fmt = lambda x, p=2: "–" if x is None else f"{x:.{p}f}"
    for r in rows:
        ratio = r["graph"] / r["best_ref"] if r["best_ref"] else None
        print(f"| {r['opt']} | {r['f']} | {r['ns']} | {fmt(r['ref_branch'])} / {fmt(r['ref_main'])} / {fmt(r['ref_graph'])} "
              f"| {fmt(r['eager'])} | {fmt(r['graph'])} | {fmt(ratio, 3)} | {fmt(r['host_eager'], 3)} → {fmt(r['host_graph'], 3)} "
              f"| {fmt(r['ns_ms'])} | {r['flops'] / 1e12:.2f} (nominal {r['nominal'] / 1e12:.2f}) "
              f"| {fmt(r['floor'])} ({fmt(r['t_gemm'])} + {fmt(r['t_mem'])}) | {fmt(r['graph'] / r['floor'] if r['floor'] else None, 3)} |")
    # Gram against Polar Express on the same shapes (per group) and against the PE reference.
    print("\nNS per group (Dion2, f = 0.25): ns_input, ms, executed TFLOP, TF/s")
    for r in rows:
        if r["opt"] == "dion2" and r["f"] == 0.25:
            for g in r["groups"]:
                print(f"  {r['ns']:14} {g['ns_input']:16} {g.get('ns_ms', 0):8.3f} ms {g.get('ns_executed_flops', 0) / 1e12:8.3f} TFLOP "
                      f"{g.get('ns_executed_tflops', 0):7.1f} TF/s  ({g['layout']})")
            print(f"  {r['ns']:14} memory-bound bytes: " + ", ".join(f"{k} {v / 1e9:.1f} GB" for k, v in r["mem"].items()))
    print("\nclocks per stage (nvidia-smi every 0.5 s; reason 0x4 = software power cap):")
    clocks(d)
    for r in after:
        m = metrics(r)
        eager = m.get("eager_step_ms", r.get("eager", {}).get("opt_step_ms", 0))
        print(f"after the reference: {r['optimizer']} f={r['fraction']} {r['ns']}: graph {m['opt_step_ms']:.2f} ms, "
              f"eager {eager:.2f} ms")


def clocks(d):
    """Median SM clock / power per stage of bench.log, from smi.csv (sampled every 0.5 s)."""
    import re
    try:
        stages = [(m.group(1), m.group(2)) for m in re.finditer(r"^== (\d\d:\d\d:\d\d) (\S+)", open(f"{d}/bench.log").read(), re.M)]
        samples = []
        for line in open(f"{d}/smi.csv"):
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 4 and f[1].endswith("MHz"):
                samples.append((f[0].split()[1][:8], int(f[1].split()[0]), float(f[2].split()[0]), f[4] if len(f) > 4 else ""))
    except OSError:
        return
    for (t0, name), nxt in zip(stages, stages[1:] + [("99:99:99", "")]):
        sel = [x for x in samples if t0 <= x[0] < nxt[0]]
        if not sel:
            continue
        mhz = sorted(x[1] for x in sel)
        w = sorted(x[2] for x in sel)
        capped = sum(1 for x in sel if x[3].endswith("4")) / len(sel)
        print(f"  {name:18} SM clock median {mhz[len(mhz) // 2]} MHz (min {mhz[0]}, max {mhz[-1]}), power median {w[len(w) // 2]:.0f} W, "
              f"power-cap reason in {100 * capped:.0f} % of {len(sel)} samples")


if __name__ == "__main__":
    main()
