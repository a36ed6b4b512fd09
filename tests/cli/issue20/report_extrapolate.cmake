# Issue 20: the extrapolation study predicts what the database's what-if runs describe (their model,
# GPUs per node, fabric) unless --extrapolate says otherwise; the dumped spec and bands are checked.
set(db ${WORKDIR}/issue20-extrapolate.db)
file(REMOVE ${db} ${db}-wal ${db}-shm)
file(REMOVE_RECURSE ${WORKDIR}/issue20-ex1 ${WORKDIR}/issue20-ex2)
function(run)
  execute_process(COMMAND ${EXE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dionsim ${ARGN}: exit ${rc}\n${o}\n${e}")
  endif()
endfunction()
function(check series expect)
  execute_process(COMMAND ${PYTHON} ${CHECKER} ${db} ${series} --expect-extrapolation ${expect}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_series ${series}: exit ${rc}\n${o}\n${e}")
  endif()
endfunction()
run(calibrate --measured ${CSV} --where run=1node-real-step --where run=2node-real-step --name seed --db ${db} --quiet)
run(whatif --model seed-5120x8 --gpus-per-node 4 --nodes 1,2 --fabric p5-efa --mfu 0.5 --db ${db} --quiet)
run(report --db ${db} --out ${WORKDIR}/issue20-ex1 --dump-series ${WORKDIR}/issue20-ex1/s.json --quiet)
check(${WORKDIR}/issue20-ex1/s.json
      [[{"model":"seed-5120x8","gpus_per_node":4,"columns":[{"fabric":"p5-efa","nic":null}],"nodes":[1,2,4,8,16,32,64,128]}]])
run(report --db ${db} --out ${WORKDIR}/issue20-ex2 --dump-series ${WORKDIR}/issue20-ex2/s.json --quiet
    --extrapolate fabric=h100-ndr400,nic=50,nic=100,nodes=1..4)
check(${WORKDIR}/issue20-ex2/s.json
      [[{"model":"seed-5120x8","gpus_per_node":4,"columns":[{"fabric":"h100-ndr400","nic":50.0},{"fabric":"h100-ndr400","nic":100.0}],"nodes":[1,2,4]}]])
