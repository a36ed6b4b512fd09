#!/usr/bin/env bash
# The default what-if study of issue 5 (`make demo` runs `bash scripts/demo.sh build/dionsim`):
# seed-5120x8, NorDion2, fraction 0.25, the three scopes, 1 to 64 nodes of 8 H100s on an NDR400
# fat tree and on EFA, plus a NIC-bandwidth sweep at 16 nodes (for the exposed-communication
# plot). Kernel times use the calibration fitted on the seed's 1-node run (docs/whatif.md);
# forward/backward = the seed's measured 456.6 ms per step at 16384 tokens per GPU. Then the
# Blackwell what-if of issue 17: HGX B200 nodes vs GB200 NVL72 racks at 64..1024 GPUs.
# Writes results/demo.db (re-runs resume), prints the table, writes results/report/ and one trace.
set -euo pipefail
exe=${1:-build/dionsim}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${DEMO_OUT:-results}
mkdir -p "$out"
common=(--model seed-5120x8 --optimizer nordion2 --ns gram --fraction 0.25 --gpus-per-node 8
        --hardware h100-sxm --calibration "$root/docs/whatif-seed-h100-calibration.json"
        --fwd-bwd-ms 456.6 --db "$out/demo.db")

echo "== dionsim whatif: 3 scopes x 1..64 nodes x {NDR400, EFA}" >&2
"$exe" whatif "${common[@]}" --scope local,global,global_capped --nodes 1..64 --fabric h100-ndr400,p5-efa
echo "== dionsim whatif: NIC bandwidth sweep at 16 nodes (NDR400 fat tree)" >&2
"$exe" whatif "${common[@]}" --scope local,global,global_capped --nodes 16 --fabric h100-ndr400 \
  --nic-GBps 6.25,12.5,25,100,200
echo "== one trace: global_capped at 16 nodes on NDR400 (4 ranks)" >&2
"$exe" whatif --model seed-5120x8 --optimizer nordion2 --ns gram --fraction 0.25 --gpus-per-node 8 \
  --hardware h100-sxm --calibration "$root/docs/whatif-seed-h100-calibration.json" --fwd-bwd-ms 456.6 \
  --scope global_capped --nodes 16 --fabric h100-ndr400 --trace-out "$out/traces" --quiet > /dev/null
ls "$out"/traces/*.json >&2
echo "== dionsim whatif: HGX B200 (8 x 400G IB) vs GB200 NVL72 racks (64 GPUs per rack in the job), 64..1024 GPUs" >&2
# gpt-8192x48 (38.7 B parameters in the Dion2 matrices, 48 FSDP layers), NorDion2 f = 0.25, MFU 0.4
# of each GPU's dense bf16 peak, 4M tokens per step over the world; FSDP over the world and HSDP
# with the shard group = one NVLink domain (8 on HGX, 64 on the racks). Nominal presets: nothing
# here is calibrated on Blackwell (docs/whatif.md says which parameters are carried over).
blackwell=(--model gpt-8192x48 --optimizer nordion2 --ns gram --fraction 0.25 --scope local,global,global_capped
           --mfu 0.4 --global-batch-tokens 4194304 --gpus 64,128,256,512,1024 --db "$out/demo.db")
"$exe" whatif "${blackwell[@]}" --hardware b200 --fabric b200-ndr400 --shard-group 0,8
"$exe" whatif "${blackwell[@]}" --hardware gb200 --fabric "$root/docs/gb200-nvl72-64.toml" --shard-group 0,64
echo "== dionsim report" >&2
"$exe" report --db "$out/demo.db" --out "$out/report"
