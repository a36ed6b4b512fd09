#!/usr/bin/env bash
# The out-of-sample check of docs/simulator.md ("Out of sample: the 10-node cluster's other logs"):
# the nccl-tests logs of xxrjun/nccl-tests-cluster's example-cluster01 (10 nodes of 8 H100s over
# InfiniBand, NCCL 2.29.2) that ../shared/data/nccl-published/measurements.csv does not hold —
# its 45 node pairs at 1/2/4/8 GPUs per node and the single-node runs of its other nodes —
# predicted nominally on h100-ndr400 by `validate-collectives --nccl-tests`.
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
while IFS= read -r path; do
  # The logs measurements.csv already holds (its source column names them) are not out of sample.
  if grep -qF "$path" "$published"; then continue; fi
  out="$work/$(echo "$path" | tr '/' '_')"
  git --git-dir="$git_dir" show "HEAD:$path" > "$out"
  logs+=("$out")
done < <(git --git-dir="$git_dir" ls-tree -r --name-only HEAD |
         grep -E '^benchmarks/example-cluster01/nccl-benchmark-results/(pairwise|single-node)/.*\.log$')
[ ${#logs[@]} -gt 0 ] || { echo "$0: no example-cluster01 logs under $checkout" >&2; exit 2; }
echo "# ${#logs[@]} logs of example-cluster01 that measurements.csv does not hold" >&2
"$exe" validate-collectives --nccl-tests "$(IFS=,; echo "${logs[*]}")" --fabric h100-ndr400 "$@"
