# ctest driver for command-line tests: run EXE with ARGS (a ;-list), check exit code and output.
# EXPECT_TIMEOUT (seconds, optional) kills EXE if it runs longer (a hang fails, with its output).
set(timeout_args "")
if(EXPECT_TIMEOUT)
  set(timeout_args TIMEOUT ${EXPECT_TIMEOUT})
endif()
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err ${timeout_args})
if(NOT "${code}" STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECT_EXIT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(EXPECT_MATCH AND NOT "${out}${err}" MATCHES "${EXPECT_MATCH}")
  message(FATAL_ERROR "output does not match '${EXPECT_MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
