#!/usr/bin/env bash
# Sourced on the H200 machine: puts the carried libraries and the machine's own CUDA 13 / cuBLAS /
# NCCL (the nvidia-nccl-cu13 Python package; NCCL is too large to carry) on LD_LIBRARY_PATH.
# Usage: source scripts/device-env.sh CARRY_DIR
carry=${1:-.carry}
libs="$carry/lib"
for mod in nccl cublas cuda_runtime; do
  d=$(python3 -c "import importlib,os; m=importlib.import_module('nvidia.$mod'); print(os.path.join(list(m.__path__)[0],'lib'))" 2>/dev/null)
  [ -n "$d" ] && [ -d "$d" ] && libs="$libs:$d"
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0   # leave NVLink multicast off (device KINDS.md)
