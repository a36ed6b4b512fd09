#!/usr/bin/env bash
# Runs every benchmark program built under BUILD_DIR/bench (Google Benchmark), one after another.
set -euo pipefail
build=${1:-build}
shopt -s nullglob
found=0
for b in "$build"/bench/*/bench_*; do
  [ -x "$b" ] || continue
  found=1
  echo "== $(basename "$b")" >&2
  "$b"
done
[ $found -eq 1 ] || echo "bench: no benchmark programs in $build/bench" >&2
