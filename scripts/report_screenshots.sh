#!/usr/bin/env bash
# Regenerates the report screenshots in docs/report/ (issue 20): the report of the issue's sweep
# (gpt-14b, 1..1024 nodes, two fabrics, three fractions, c = 1.0, 1.5, auto), of a capacity-factor
# sweep with its deferral runs (gpt-1b), and of the demo's database (`make demo` first, or give it).
#   scripts/report_screenshots.sh [build/dionsim] [results/demo.db]
set -euo pipefail
exe=${1:-build/dionsim}
demo_db=${2:-results/demo.db}
root=$(cd "$(dirname "$0")/.." && pwd)
docs="$root/docs/report"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$docs"

"$exe" whatif --model gpt-14b --nodes 1..1024 --fabric h100-ndr400,p5-efa --fraction 0.125,0.25,0.5 \
  --capacity-factor 1.0,1.5,auto --mfu 0.45 --db "$work/big.db" --quiet > /dev/null
"$exe" report --db "$work/big.db" --out "$work/big" --quiet > /dev/null
for f in step_wall_ms_vs_nodes opt_wall_ms_vs_nodes; do cp "$work/big/study1_$f.png" "$docs/big_$f.png"; done

"$exe" whatif --model gpt-1b --scope local,global,global_capped --nodes 4..256:x4 \
  --capacity-factor 1.0,1.1,1.25,1.5,2.0,auto --fabric h100-ndr400 --mfu 0.45 --db "$work/cap.db" --quiet > /dev/null
"$exe" deferral --model gpt-1b --world 16,64,256 --capacity-factor 1.0,1.1,1.25,1.5,2.0,auto --steps 10 \
  --mode reduced --db "$work/cap.db" --quiet > /dev/null
"$exe" report --db "$work/cap.db" --out "$work/cap" --quiet > /dev/null
for f in study1_opt_wall_ms_vs_nodes study1_opt_wall_ms_vs_capacity_factor deferral_vs_capacity deferral_waits; do
  cp "$work/cap/$f.png" "$docs/capacity_${f#study1_}.png"
done

"$exe" report --db "$demo_db" --out "$work/demo" --quiet > /dev/null
cp "$work/demo/study1_step_wall_ms_vs_nodes.png" "$docs/demo_step_wall_ms_vs_nodes.png"
cp "$work/demo/study1_exposed_comm_ms_vs_nic_effective_GBps.png" "$docs/demo_exposed_comm_ms_vs_nic.png"
cp "$work/demo/study2_step_wall_ms_vs_world.png" "$docs/demo_step_wall_ms_vs_world.png"
ls -l "$docs" >&2
