#!/usr/bin/env bash
# On the H200 machine (device tool): GPU tests, kernel benchmark, collectives and the optimizer-step
# measurements of issue 9. Usage: bash .carry/scripts/device-run.sh .carry OUT_DIR [quick]
# At most 8 files come back: smi.txt, tests_gpu.log, bench_kernels.txt, collectives.txt, measure.jsonl,
# measure.txt, measure.err and measure.db (the SQLite results store: every run below is recorded).
set -uo pipefail
carry=${1:-.carry}; out=${2:-$OUT}; mode=${3:-full}
gpus=${GPUS:-2}   # GPUS=4 or 8 on the larger machines (issue 6)
source "$carry/scripts/device-env.sh" "$carry"
export DIONSIM_SHARED_DIR="$carry/shared"
bin="$carry/bin"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,memory.used,temperature.gpu --format=csv > "$out/smi.txt" 2>&1
echo "== tests_gpu"; timeout 300 "$bin/tests_gpu" --durations yes > "$out/tests_gpu.log" 2>&1; echo "tests_gpu rc=$?"
tail -4 "$out/tests_gpu.log"
[ "$mode" = tests ] && exit 0
echo "== bench_kernels"; timeout 120 "$bin/bench_kernels" > "$out/bench_kernels.txt" 2>&1; echo "rc=$?"; cat "$out/bench_kernels.txt"
echo "== collectives"
{ timeout 60 "$bin/dionsim" measure --collective alltoall -b 1M -e 1G -f 2 --gpus "$gpus" --db "$out/measure.db"
  timeout 60 "$bin/dionsim" measure --collective allgather -b 1M -e 1G -f 2 --gpus "$gpus" --db "$out/measure.db"; } > "$out/collectives.txt" 2>&1
cat "$out/collectives.txt"
echo "== optimizer step"
: > "$out/measure.jsonl"
run() {  # optimizer scope fraction [extra...]
  timeout 120 "$bin/dionsim" measure --model gpt-5120x8 --gpus "$gpus" --optimizer "$1" --scope "$2" --fraction "$3" "${@:4}" --steps 10 --warmup 3 --json --db "$out/measure.db" >> "$out/measure.jsonl" 2>> "$out/measure.err"
  echo "rc=$? $*"
}
for opt in dion2 nordion2; do for scope in global local global_capped; do run $opt $scope 0.25; done; done
if [ "$mode" = full ]; then
  for scope in global local global_capped; do run dion2 $scope 0.5; done
  run dion2 global_capped 0.25 --momentum-dtype bfloat16
  run dion2 local 0.25 --momentum-dtype bfloat16
  run nordion2 global 0.25 --momentum-dtype bfloat16
  for scope in global local global_capped; do run nordion2 $scope 0.5; done
  timeout 120 "$bin/dionsim" measure --model seed-5120x8 --gpus "$gpus" --optimizer nordion2 --scope global_capped --fraction 0.25 --steps 10 --json --db "$out/measure.db" >> "$out/measure.jsonl" 2>> "$out/measure.err"; echo "rc=$? seed"
fi
echo "== one process per GPU (torchrun-style environment, NCCL id over TCP)"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 timeout 120 "$bin/dionsim" measure \
    --model gpt-5120x8 --optimizer dion2 --scope local --fraction 0.25 --steps 10 --json >> "$out/measure.jsonl" 2>> "$out/measure.err" &
done
wait; echo "per-process done"
if [ -d "$carry/mpi" ]; then
  echo "== one process per GPU under mpirun (Open MPI carried; NCCL id broadcast over MPI)"
  timeout 60 orterun -np "$gpus" "$bin/mpi_bootstrap" checks "$gpus" 2>&1 | tail -3; echo "mpi_bootstrap rc=$?"
  timeout 120 orterun -np "$gpus" "$bin/gpu_transport_mpi" 2>&1 | tail -5; echo "gpu_transport_mpi rc=${PIPESTATUS[0]}"
  timeout 180 orterun -np "$gpus" "$bin/dionsim" measure --model gpt-5120x8 --optimizer dion2 --scope local --fraction 0.25 \
    --steps 10 --json >> "$out/measure.jsonl" 2>> "$out/measure.err"; echo "mpirun measure rc=$?"
fi
python3 - "$out/measure.jsonl" <<'PY' | tee "$out/measure.txt"
import json, sys
print(f"{'optimizer':9} {'scope':14} {'f':>5} {'dtype':9} {'opt_step_ms':>11} {'ns_gemm_ms':>10} {'ns_TF/s':>8} {'a2a_ms':>8} {'a2a_MB':>9} {'deferred':>9}")
dec = json.JSONDecoder(); text = open(sys.argv[1]).read(); i = 0
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    r, i = dec.raw_decode(text, i)
    m = {x['metric']: x['value'] for x in r['metrics']}
    print(f"{r['optimizer']:9} {r['scope']:14} {r['fraction']:5} {r['momentum_dtype']:9} {m['opt_step_ms']:11.2f} {m['ns_gemm_ms']:10.2f} {m['ns_tflops']:8.1f} {m['a2a_ms']:8.2f} {m['a2a_payload_MB']:9.1f} {m['deferred_rows']:9.0f}  {r['model']}")
PY
cat "$out/measure.err" | tail -20
