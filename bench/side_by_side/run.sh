#!/usr/bin/env bash
# Side by side on one GPU (issue 21): dionsim's GPU step and the PyTorch reference (microsoft/dion
# 569b395 and 0a059a4 under its CudaGraphOptimizer) on the same GPU, inventory and fractions, in one
# device call, with the probes the floor needs (sustained bf16 GEMM rate, device-to-device copy rate,
# clocks sampled throughout). Usage, on the GPU machine:
#   bash bench/side_by_side/run.sh CARRY REFSRC OUT [MODEL]
# CARRY = scripts/device-carry.sh's folder; REFSRC holds jcl-dion-capped-pooled/, main/ (git archive
# of the two commits) and ../shared/ref's scripts. Writes OUT/{smi.csv, probes.jsonl, dionsim.jsonl,
# dionsim_after.jsonl, measure.db, reference.jsonl, bench.log} (8 files: what a device call returns);
# bench/side_by_side/report.py turns them into the table.
set -uo pipefail
carry=$1; ref=$2; out=$3; model=${4:-gpt-5120x8}
h=${model#gpt-}; h=${h%x*}; layers=${model##*x}
source "$carry/scripts/device-env.sh" "$carry"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 500 > "$out/smi.csv" 2>/dev/null &
smi=$!
stage() { echo "== $(date -u +%T) $*" | tee -a "$out/bench.log"; }
# 1. Probes: device-to-device copy rate (bytes read + written per second) and the sustained GEMM rate.
stage probes
python3 - > "$out/probes.jsonl" <<'PY'
import json, torch
n = 4 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record(); b.copy_(a); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
ts.sort()
print(json.dumps(dict(kind="d2d_copy", bytes=n, ms_median=ts[10], rw_GBps=2 * n / (ts[10] * 1e6))), flush=True)
PY
timeout 120 python3 "$ref/power_probe.py" >> "$out/probes.jsonl" 2>> "$out/bench.log"
# 2. dionsim: Dion2 / NorDion2, f = 0.25 / 0.5, Polar Express / Gram NS, eager then CUDA graph.
stage dionsim
for opt in dion2 nordion2; do for f in 0.25 0.5; do for ns in polar_express gram; do
  timeout 180 "$carry/bin/dionsim" measure --model "$model" --gpus 1 --optimizer $opt --scope local --fraction $f --ns $ns \
    --steps 10 --warmup 3 --cuda-graph --json --db "$out/measure.db" >> "$out/dionsim.jsonl" 2>> "$out/bench.log"
  echo "rc=$? dionsim $opt $f $ns"
done; done; done
# 3. The reference on the same GPU: the capped branch (Dion2 + NorDion2) and main under its CudaGraphOptimizer.
stage reference-branch
OUT=$out DION_REF="$ref/jcl-dion-capped-pooled" timeout 300 python3 "$ref/ref_bench.py" opt \
  "{\"n_embd\":$h,\"n_layer\":$layers,\"opts\":[\"Dion2\",\"NorDion2\"],\"fractions\":[0.25,0.5],\"scopes\":[\"local\"],\"reps\":10,\"skip_bw\":true}" \
  >> "$out/bench.log" 2>&1; echo "rc=$? reference branch"
stage reference-main
OUT=$out DION_REF="$ref/main" timeout 240 python3 "$ref/ref_bench_main.py" \
  "{\"n_embd\":$h,\"n_layer\":$layers,\"fractions\":[0.25,0.5],\"scopes\":[\"local\"],\"reps\":10}" >> "$out/bench.log" 2>&1
echo "rc=$? reference main"
cat "$out/anchors.jsonl" "$out/anchors_main.jsonl" > "$out/reference.jsonl" 2>/dev/null; rm -f "$out/anchors.jsonl" "$out/anchors_main.jsonl"
# 4. dionsim again after the reference (the GPU has been under load as long: the same clocks).
stage dionsim-after
for ns in polar_express gram; do
  timeout 180 "$carry/bin/dionsim" measure --model "$model" --gpus 1 --optimizer dion2 --scope local --fraction 0.25 --ns $ns \
    --steps 10 --warmup 3 --cuda-graph --json >> "$out/dionsim_after.jsonl" 2>> "$out/bench.log"
  echo "rc=$? dionsim-after $ns"
done
stage done
kill $smi 2>/dev/null
