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

# Open MPI carried by device-carry.sh for an MPI build (the machine has none): relocated prefix,
# its plugin paths (Open MPI's and PMIx's), and root allowed (commands run as root there).
if [ -d "$carry/mpi/usr" ]; then
  mpi=$(cd "$carry/mpi" && pwd)
  export OPAL_PREFIX="$mpi/usr" PATH="$mpi/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$mpi/usr/lib/x86_64-linux-gnu/openmpi/lib:$mpi/usr/lib/x86_64-linux-gnu:$mpi/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
  export OMPI_MCA_mca_base_component_path="$mpi/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
  export PMIX_MCA_mca_base_component_path="$mpi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1   # one host: shared memory, no fabric plugins
fi
