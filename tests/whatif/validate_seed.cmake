# The README validation table stays reproducible: scripts/report.py validate on the seed's
# measured runs, with a bound on the median error of the predicted (not fitted) cells and exact
# payloads.
execute_process(COMMAND ${PYTHON} ${SCRIPT} validate --dionsim ${EXE} --csv ${CSV}
                        --calibration-out ${WORKDIR}/seed-calibration.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "validate: exit ${rc}\n${out}\n${err}")
endif()
if(NOT out MATCHES "median \\|error\\| of predicted cells ([0-9.]+) %")
  message(FATAL_ERROR "no median error in:\n${out}")
endif()
if(CMAKE_MATCH_1 GREATER 5.0)
  message(FATAL_ERROR "median |error| ${CMAKE_MATCH_1} % > 5 %:\n${out}")
endif()
foreach(row "global \\| a2a_payload_MB \\| 2621 \\| 2621 \\| \\+0.0" "global_capped \\| a2a_payload_MB \\| 361 \\| 360.6 \\| -0.1")
  if(NOT out MATCHES "${row}")
    message(FATAL_ERROR "missing row '${row}' in:\n${out}")
  endif()
endforeach()
