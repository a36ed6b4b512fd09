# MPI is optional, like CUDA: it only bootstraps one-process-per-GPU runs started by mpirun / srun
# (the NCCL unique id is broadcast over MPI, as nccl-tests does). AUTO uses it whenever
# find_package(MPI COMPONENTS C) succeeds (Debian: libopenmpi-dev); nothing but common/launch.cpp
# includes <mpi.h>.
set(DIONSIM_HAVE_MPI OFF)
if(NOT DIONSIM_WITH_MPI MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DIONSIM_WITH_MPI: got '${DIONSIM_WITH_MPI}', expected AUTO, ON or OFF")
endif()
if(NOT DIONSIM_WITH_MPI STREQUAL "OFF")
  # FindMPI probes the C bindings with the C compiler (the project itself is C++ only).
  include(CheckLanguage)
  check_language(C)
  if(CMAKE_C_COMPILER)
    enable_language(C)
    find_package(MPI COMPONENTS C QUIET)
  endif()
  if(MPI_C_FOUND)
    set(DIONSIM_HAVE_MPI ON)
    # The launcher's first line ("mpirun (Open MPI) 4.1.4") for the summary; tests/mpi adds Open MPI's
    # --oversubscribe --allow-run-as-root only when the launcher is Open MPI's.
    set(DIONSIM_MPIEXEC_VERSION "")
    if(MPIEXEC_EXECUTABLE)
      execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _out ERROR_QUIET TIMEOUT 10)
      string(REGEX REPLACE "\n.*" "" DIONSIM_MPIEXEC_VERSION "${_out}")
    endif()
  elseif(DIONSIM_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "DIONSIM_WITH_MPI=ON but MPI (C bindings) was not found: install the Debian packages "
                        "'libopenmpi-dev openmpi-bin' (scripts/install-deps.sh does it for you)")
  endif()
endif()
