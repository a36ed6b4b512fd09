#!/usr/bin/env bash
# Here (the build machine): copy the CUDA build's binaries and the Debian libraries they link that
# the H200 machine lacks into DEST/.carry (ignored by git), with the device scripts.
# Usage: scripts/device-carry.sh BUILD_DIR DEST_REPO
set -euo pipefail
build=${1:-build/cuda-release}
dest=${2:-/work/main}/.carry
rm -rf "$dest"; mkdir -p "$dest/bin" "$dest/lib" "$dest/scripts"
for exe in "$build/tests/gpu/tests_gpu" "$build/dionsim" "$build/bench/kernels/bench_kernels" \
           "$build/tests/mpi/gpu_transport_mpi" "$build/tests/mpi/mpi_bootstrap"; do
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
# An MPI build: the machine has no MPI, so Debian's Open MPI runtime travels too (~20 MB: the
# packages' files and the libraries their plugins link), relocated there with OPAL_PREFIX
# (device-env.sh).
if ldd "$dest/bin/dionsim" | grep -q 'libmpi\.so'; then
  pkgs="openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
        libucx0 libfabric1 libpsm2-2 libpsm-infinipath1 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
        libnuma1 libmunge2"
  # shellcheck disable=SC2086
  dpkg -L $pkgs | while read -r f; do [ -f "$f" ] && echo "$f"; done | grep -v -E '/(man|doc|locale)/|lintian' |
    tar -cf - -T - 2>/dev/null | (mkdir -p "$dest/mpi" && tar -xf - -C "$dest/mpi")
fi
du -sh "$dest"
