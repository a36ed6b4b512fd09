#!/usr/bin/env bash
# The out-of-sample check of docs/simulator.md ("Out of sample: the 10-node cluster's other logs"):
# the nccl-tests logs of xxrjun/nccl-tests-cluster's example-cluster01 (10 nodes of 8 H100s over
# InfiniBand, NCCL 2.29.2) that ../shared/data/nccl-published/measurements.csv does not hold —
# its 45 node pairs at 1/2/4/8 GPUs per node, the single-node runs of its other nodes and the
# send/recv blocks of its 10-node logs — predicted nominally on h100-ndr400 by
# `validate-collectives --nccl-tests`. The single-node send/recv blocks are left out: the model's
# p2p channel copy rate was measured on them (scripts/p2p_channel_rate.py); so are the 8-GPU
# single-node all-reduce blocks, on which NVLS's step cost was (scripts/nvls_step_overhead.py).
# Usage: scripts/validate_unpublished_logs.sh CHECKOUT [DIONSIM] [extra validate-collectives flags…]
#   CHECKOUT: a clone of github.com/xxrjun/nccl-tests-cluster (checked at 455de4f) or a bare git
#   directory of it; the logs are read from its HEAD. Not committed here: the data are that
#   repository's.
set -euo pipefail
checkout=${1:?usage: $0 CHECKOUT [DIONSIM] [flags…]}
exe=${2:-build/dionsim}
shift $(( $# >= 2 ? 2 : 1 ))
published=$(cd "$(dirname "$0")/.." && pwd)/../shared/data/nccl-published/measurements.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git_dir=$checkout
[ -d "$checkout/.git" ] && git_dir=$checkout/.git
logs=()
# Keeps (keep=1) or drops (keep=0) the nccl-tests blocks of one test (sendrecv_perf) in a log.
blocks() {
  awk -v test="$1" -v keep="$2" '
    /# Collective test starting: / { inside = index($0, "starting: " test) > 0 }
    (inside == keep) { print }
    /# Collective test concluded: / { inside = 0 }'
}
while IFS= read -r path; do
  out="$work/$(echo "$path" | tr '/' '_')"
  if [[ "$path" == */single-node/* ]] && grep -qF "$path" "$published"; then
    continue  # its four collectives are in measurements.csv, its send/recv measured the channel rate
  elif grep -qF "$path" "$published"; then
    # measurements.csv holds this log's four collectives, not its send/recv: only that is out of
    # sample.
    git --git-dir="$git_dir" show "HEAD:$path" | blocks sendrecv_perf 1 > "$out"
  elif [[ "$path" == */single-node/*_G8_* ]]; then
    # The single-node send/recv rows are what the p2p channel copy rate was measured on
    # (scripts/p2p_channel_rate.py), the 8-GPU all-reduce rows what NVLS's step cost was
    # (scripts/nvls_step_overhead.py): not predictions.
    git --git-dir="$git_dir" show "HEAD:$path" | blocks sendrecv_perf 0 | blocks all_reduce_perf 0 > "$out"
  elif [[ "$path" == */single-node/* ]]; then
    git --git-dir="$git_dir" show "HEAD:$path" | blocks sendrecv_perf 0 > "$out"
  else
    git --git-dir="$git_dir" show "HEAD:$path" > "$out"
  fi
  grep -q "Collective test starting" "$out" && logs+=("$out")
done < <(git --git-dir="$git_dir" ls-tree -r --name-only HEAD |
         grep -E '^benchmarks/example-cluster01/nccl-benchmark-results/(pairwise|single-node|multi-node)/.*\.log$')
[ ${#logs[@]} -gt 0 ] || { echo "$0: no example-cluster01 logs under $checkout" >&2; exit 2; }
echo "# ${#logs[@]} logs of example-cluster01: the rows measurements.csv does not hold, less the single-node send/recv and 8-GPU all-reduce" >&2
"$exe" validate-collectives --nccl-tests "$(IFS=,; echo "${logs[*]}")" --fabric h100-ndr400 "$@"
