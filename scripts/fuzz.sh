#!/usr/bin/env bash
# make fuzz: runs every libFuzzer target (built by the "fuzz" preset: clang, ASan + UBSan) for
# FUZZ_SECONDS each, with an RSS limit and a per-input timeout, on a corpus seeded from ../shared
# and the regression inputs (fuzz/corpus/regression). Prints executions per target; exits 1 when
# any target found a crash, leak, timeout or out-of-memory (the input is kept under ARTIFACTS).
set -euo pipefail
BUILD=${1:-build/fuzz}
SECONDS_PER_TARGET=${2:-60}
RSS_MB=${3:-2048}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${DIONSIM_SHARED_DIR:-$ROOT/../shared}
TARGETS=${FUZZ_TARGETS:-"npy case_folder inventory topology measurement_csv nccl_tests kineto calibration database"}
WORK=$BUILD/fuzz-work
mkdir -p "$WORK"

seed() {  # seed TARGET: copies the shared data that fits the target into its corpus folder
  local t=$1 dir=$WORK/corpus/$t
  mkdir -p "$dir"
  cp -n "$ROOT"/fuzz/corpus/regression/"$t"/* "$dir"/ 2>/dev/null || true
  case $t in
    npy) find "$SHARED/fixtures/numerics" -name '*.npy' -size -64k -exec cp -n {} "$dir"/ \; ;;
    case_folder) for f in "$SHARED"/fixtures/numerics/*/case.json "$ROOT"/tests/optimizer/cases/*/case.json; do
                   cp -n "$f" "$dir/$(basename "$(dirname "$f")").json"; done ;;
    inventory) printf '[{"name":"a","rows":64,"cols":32,"count":2},{"name":"b","rows":32,"cols":64}]' > "$dir/small.json" ;;
    topology) cp -n "$ROOT"/tests/sim/data/*.toml "$ROOT"/docs/*.toml "$dir"/ ;;
    measurement_csv) cp -n "$SHARED"/data/*.csv "$dir"/ ;;
    nccl_tests) cp -n "$ROOT"/fuzz/seeds/nccl_tests/* "$dir"/ ;;
    kineto) cp -n "$SHARED"/data/traces/*.json.gz "$ROOT"/tests/measured/data/*.json "$dir"/ ;;
    calibration) cp -n "$ROOT"/docs/*calibration*.json "$ROOT"/tests/calibration/data/*.json "$dir"/ ;;
    database) [ -f "$dir/seed.db" ] || sqlite3 "$dir/seed.db" < "$ROOT"/fuzz/seeds/database.sql > /dev/null ;;
  esac
}

status=0
printf '%-16s %12s %8s %s\n' target executions seconds result
for t in $TARGETS; do
  seed "$t"
  mkdir -p "$WORK/artifacts/$t"
  log=$WORK/$t.log
  set +e
  "$BUILD/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb="$RSS_MB" -timeout=10 \
    -max_len=262144 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$t/" "$WORK/corpus/$t" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  found=$(ls "$WORK/artifacts/$t" | wc -l)
  result=ok
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then result="FOUND $found (see $log)"; status=1; fi
  printf '%-16s %12s %8s %s\n' "$t" "$execs" "$SECONDS_PER_TARGET" "$result"
done
exit $status
