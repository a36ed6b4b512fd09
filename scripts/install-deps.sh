#!/usr/bin/env bash
# Installs the Debian packages dionsim builds and runs with, only those that are missing.
# Idempotent and non-interactive; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake make pkg-config
  libboost-graph-dev libboost-program-options-dev   # fabric graphs; command line
  libeigen3-dev                                     # CPU reference optimizer, least squares
  libsqlite3-dev                                    # results database
  catch2                                            # tests (Catch2 v2)
  nlohmann-json3-dev                                # JSON: case.json, plans, traces, --json output
  libtomlplusplus-dev                               # topology files with line numbers in errors
  zlib1g-dev                                        # gzipped PyTorch-profiler traces
  libbenchmark-dev                                  # bench/ (Google Benchmark)
  python3 python3-matplotlib                        # report plots
  libopenmpi-dev openmpi-bin                        # optional MPI launch of `dionsim measure` (mpirun, srun --mpi)
)
# `install-deps.sh fuzz` (make fuzz): clang and its libFuzzer/sanitizer runtimes (libclang_rt.fuzzer
# is in libclang-rt-14-dev; libfuzzer-14-dev is not needed), sqlite3 for the database seed.
if [ "${1:-}" = "fuzz" ]; then
  packages+=(clang-14 libclang-rt-14-dev sqlite3)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps: missing ${missing[*]} and not root (no sudo): install them as root" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
