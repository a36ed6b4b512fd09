#!/usr/bin/env bash
# Here (the build machine): copy the CUDA build's binaries and the Debian libraries they link that
# the H200 machine lacks into DEST/.carry (ignored by git), with the device scripts.
# Usage: scripts/device-carry.sh BUILD_DIR DEST_REPO
set -euo pipefail
build=${1:-build/cuda-release}
dest=${2:-/work/main}/.carry
rm -rf "$dest"; mkdir -p "$dest/bin" "$dest/lib" "$dest/scripts"
for exe in "$build/tests/gpu/tests_gpu" "$build/dionsim" "$build/bench/kernels/bench_kernels"; do
  [ -x "$exe" ] && cp "$exe" "$dest/bin/"
done
cp scripts/device-*.sh "$dest/scripts/"
mkdir -p "$dest/shared/fixtures" && cp -r ../shared/fixtures/numerics "$dest/shared/fixtures/"  # the GPU tests read them
# Libraries not on an Ubuntu 24.04 + CUDA 13 image: Boost, and anything from /usr/lib we link.
for exe in "$dest"/bin/*; do
  ldd "$exe" | awk '/=> \//{print $3}' | grep -E 'boost|sqlite|tomlplus|libz\.|cudart' | while read -r lib; do
    cp -L "$lib" "$dest/lib/"
  done
done
du -sh "$dest"
