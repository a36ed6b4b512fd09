#!/usr/bin/env bash
# Speed of the collective model's calls as a user makes them, as ratios to a baseline binary
# measured in the same run (issue 16: "report them as ratios to today's times").
#
#   bench/sim/collective_speed.sh NEW_DIONSIM [BASELINE_DIONSIM] [REPEATS]
#
# BASELINE_DIONSIM is a `dionsim` built from the commit before the collective model (for
# example: git worktree add /tmp/base <commit> && build it there). Each command runs REPEATS
# times (default 3) per binary, interleaved, and the best wall time counts. Targets: 1024-rank
# all-to-all and all-gather in Mode::fast <= 50 ms each, Mode::exact 1024-rank all-to-all <= 5 s,
# the 8192-GPU what-if (3 scopes x 2 fabrics) <= 0.5 s. The *-partial cases are node counts that
# fill their last leaf partly (300 and 1000 H100 nodes on 32-host leaves, 1000 GB200 trays in
# 72-GPU racks): before flow classes they ran the exact per-flow path (2400 ranks: seconds and
# GBs) or were refused (8000 ranks); a refusal prints "refused".
set -euo pipefail
new=${1:?usage: collective_speed.sh NEW_DIONSIM [BASELINE_DIONSIM] [REPEATS]}
base=${2:-}
repeats=${3:-3}

best_s() {  # best wall seconds of "$@" over $repeats runs
  local best=""
  for _ in $(seq "$repeats"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null 2>&1 || { echo refused; return 0; }
    t1=$(date +%s.%N)
    best=$(awk -v a="$best" -v b="$(awk -v x="$t0" -v y="$t1" 'BEGIN{print y-x}')" 'BEGIN{print (a=="" || b<a) ? b : a}')
  done
  echo "$best"
}

cases=(
  "a2a-1024-fast-8K|collective -q --op alltoall --nodes 128 --gpus-per-node 8 --fabric h100-ndr400 --bytes 8K"
  "a2a-1024-fast-1G|collective -q --op alltoall --nodes 128 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1G"
  "ag-1024-fast-8K|collective -q --op allgather --nodes 128 --gpus-per-node 8 --fabric h100-ndr400 --bytes 8K"
  "ag-1024-fast-1G|collective -q --op allgather --nodes 128 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1G"
  "a2a-1024-exact-1G|collective -q --op alltoall --nodes 128 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1G --mode exact"
  "a2a-2400-partial|collective -q --op alltoall --nodes 300 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1G"
  "a2a-8000-partial|collective -q --op alltoall --nodes 1000 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1G"
  "a2a-4000-nvl72-part|collective -q --op alltoall --nodes 1000 --gpus-per-node 4 --fabric gb200-nvl72 --bytes 1G"
  "whatif-8192-3x2|whatif -q --json --model gpt-14b --scope local,global,global_capped --nodes 1024 --fabric h100-ndr400,p5-efa --mfu 0.45"
)
printf "%-20s %10s %10s %8s   (best of %d, seconds, whole process)\n" case new_s base_s new/base "$repeats"
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  # shellcheck disable=SC2086
  n=$(best_s "$new" $args)
  if [[ -n "$base" ]]; then
    # shellcheck disable=SC2086
    b=$(best_s "$base" $args)
    printf "%-20s %10s %10s %8s\n" "$name" "$n" "$b" "$(awk -v x="$n" -v y="$b" 'BEGIN{print (x+0 > 0 && y+0 > 0) ? x/y : "-"}')"
  else
    printf "%-20s %10s %10s %8s\n" "$name" "$n" - -
  fi
done
