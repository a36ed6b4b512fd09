# Issue 20: the report of a database with two what-if studies (one a capacity-factor x fraction x
# fabric x nodes sweep, the other a NIC-bandwidth sweep) and deferral runs. Its dumped series are
# checked against the database by check_series.py: no line joins configurations that differ in a
# key the panel does not show, every key has a role, values and bands are the stored ones. Then a
# failing report (--extrapolate without a calibration) leaves the previous report whole.
set(db ${WORKDIR}/issue20.db)
set(out ${WORKDIR}/issue20-report)
file(REMOVE ${db} ${db}-wal ${db}-shm)
file(REMOVE_RECURSE ${out})
function(run)
  execute_process(COMMAND ${EXE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dionsim ${ARGN}: exit ${rc}\n${o}\n${e}")
  endif()
endfunction()
run(whatif --model gpt-1b --nodes 1..16 --fabric h100-ndr400,p5-efa --fraction 0.125,0.25
    --capacity-factor 1.0,1.5,auto --mfu 0.45 --db ${db} --quiet)
run(whatif --model seed-5120x8 --nodes 16 --fabric h100-ndr400 --nic-GBps 12.5,25,50,100 --fwd-bwd-ms 456.6
    --db ${db} --quiet)
run(deferral --model gpt-128x2 --world 4,8 --capacity-factor 1.0,1.25,auto --steps 5 --db ${db} --quiet)
run(report --db ${db} --out ${out} --dump-series ${out}/series.json --quiet)
execute_process(COMMAND ${PYTHON} ${CHECKER} ${db} ${out}/series.json --expect-studies 2
                --expect-panel 1:step_wall_ms:nodes 1:opt_wall_ms:nodes 1:a2a_payload_MB:world
                               2:exposed_comm_ms:nic_effective_GBps
                --expect-deferral deferral_vs_world.png deferral_vs_capacity.png deferral_waits.png
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_series: exit ${rc}\n${o}\n${e}")
endif()
message(STATUS "${o}")
file(READ ${out}/report.md md)
foreach(want "## Study 1: gpt-1b" "## Study 2: seed-5120x8" "Held fixed: " "One line per scope, capacity_factor"
        "## Deferral \\(6 " "Recommended capacity factor per world")
  if(NOT md MATCHES "${want}")
    message(FATAL_ERROR "report.md lacks '${want}'")
  endif()
endforeach()
foreach(f report.html study1_step_wall_ms_vs_nodes.png study2_exposed_comm_ms_vs_nic_effective_GBps.png deferral_waits.png)
  if(NOT EXISTS ${out}/${f})
    message(FATAL_ERROR "report did not write ${f}")
  endif()
endforeach()

# Outputs are renamed into place: a report that fails leaves the previous one as it was, no temporaries.
file(SHA256 ${out}/report.html before)
execute_process(COMMAND ${EXE} report --db ${db} --out ${out} --extrapolate model=gpt-1b
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(NOT rc EQUAL 3 OR NOT e MATCHES "--extrapolate needs a step-model calibration")
  message(FATAL_ERROR "--extrapolate without a calibration: exit ${rc}\n${o}\n${e}")
endif()
file(SHA256 ${out}/report.html after)
file(GLOB temporaries ${out}/.*.tmp)
if(NOT before STREQUAL after OR temporaries)
  message(FATAL_ERROR "a failed report changed report.html or left temporaries: ${temporaries}")
endif()
