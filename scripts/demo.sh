#!/usr/bin/env bash
# The default study `make demo` runs. Grows as subcommands land.
set -euo pipefail
exe=${1:-build/dionsim}
"$exe" --help
