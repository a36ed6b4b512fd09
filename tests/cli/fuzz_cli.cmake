# Defects found by scripts/fuzz_cli.py (black-box fuzzing of the command line), one test each:
# each input was accepted, hung or ended in "internal error" before its fix.
# Included by tests/cli/CMakeLists.txt; run with -P (CMAKE_SCRIPT_MODE_FILE) it is the database check.
if(CMAKE_SCRIPT_MODE_FILE)
  # A database another tool edited: report must name the run and key, not print a Python traceback
  # (before: "report.py exited with 1" after matplotlib's "no positive values", or a TypeError).
  set(db ${WORKDIR}/fuzz_report.db)
  function(edited_db_case sql expected)
    file(REMOVE ${db} ${db}-wal ${db}-shm)
    execute_process(COMMAND ${EXE} whatif --model seed-5120x8 --scope local --nodes 1,2 --mfu 0.5 --db ${db} -q
                    RESULT_VARIABLE rc OUTPUT_QUIET)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "whatif --db: exit ${rc}")
    endif()
    execute_process(COMMAND ${PYTHON} -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()"
                            ${db} "${sql}" RESULT_VARIABLE rc)
    execute_process(COMMAND ${EXE} report --db ${db} --out ${WORKDIR}/fuzz_report -q
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 3 OR NOT err MATCHES "fuzz_report.db: run [0-9]+: ${expected}")
      message(FATAL_ERROR "${sql}: exit ${rc}, expected 3 naming '${expected}'\n${out}\n${err}")
    endif()
  endfunction()
  edited_db_case("UPDATE metrics SET value = 9e999" "metric a2a_ms: got inf, expected a finite number")
  edited_db_case("UPDATE runs SET config_json = json_set(config_json, '$.nodes', 'x')"
                 "config_json.nodes: got \"x\", expected an integer")
  edited_db_case("UPDATE runs SET config_json = '[1,2]'" "config_json: got .1, 2., expected a JSON object")
  # A measured run's stored metric outside the measurement CSV's rule: -1e300 was skipped and the
  # fit said only "expected more fitted metrics than free parameters", naming no database.
  set(mdb ${WORKDIR}/fuzz_calibrate.db)
  file(REMOVE ${mdb} ${mdb}-wal ${mdb}-shm)
  execute_process(COMMAND ${EXE} calibrate --measured ${SEED} --where run=1node-real-step --db ${mdb} -q
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "calibrate --measured --db: exit ${rc}")
  endif()
  execute_process(COMMAND ${PYTHON} -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE metrics SET value = -1e300 WHERE name = 'a2a_ms'\"); c.commit()"
                          ${mdb})
  execute_process(COMMAND ${EXE} calibrate --db ${mdb} --where run=1node-real-step -q
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 3 OR NOT err MATCHES "fuzz_calibrate.db: run [0-9]+: metric a2a_ms: got '-1e\\+300', expected a non-negative number")
    message(FATAL_ERROR "stored -1e300: exit ${rc}\n${out}\n${err}")
  endif()
  # An empty --measured named no flag ("error: : cannot open for reading"); an empty argument
  # needs execute_process (a test's ARGS list drops it).
  execute_process(COMMAND ${EXE} calibrate --measured "" --where run=1node-real-step --dump-metrics
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--measured: got '', expected a file")
    message(FATAL_ERROR "calibrate --measured '': exit ${rc}\n${out}\n${err}")
  endif()
  # A --calibration name neither a file nor stored names the database it was looked up in.
  execute_process(COMMAND ${EXE} whatif --model seed-5120x8 --nodes 1 --mfu 0.5 --db ${mdb} --calibration nosuch -q
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--calibration: got 'nosuch', expected a calibration file or the name of a calibration stored in .*fuzz_calibrate.db")
    message(FATAL_ERROR "whatif --calibration nosuch: exit ${rc}\n${out}\n${err}")
  endif()
  return()
endif()
if(DIONSIM_SYSTEM_PYTHON)
  add_test(NAME cli:fuzz_report_edited_db
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:dionsim> -DPYTHON=${DIONSIM_SYSTEM_PYTHON}
                   -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR} -DSEED=${DIONSIM_SHARED_DIR}/data/seed-measurements.csv
                   -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(cli:fuzz_report_edited_db PROPERTIES LABELS "cli")
endif()
set(fz_good_gpu ${PROJECT_SOURCE_DIR}/tests/whatif/data/gpu_good.toml)
string(REPEAT "x" 300 fz_long_name)

# An optional-valued flag followed by a negative number: boost read the number as an option of its
# own ("unrecognised option '-1'", naming no flag).
dionsim_cli_test(fuzz_optional_value_negative EXIT 2 MATCH "--selection-quality: got '-1', expected --selection-quality=VALUE"
                 ARGS whatif --model seed-5120x8 --scope global_capped --nodes 2 --mfu 0.5 --selection-quality -1)
# --where that selects nothing names the file and what its keys hold.
dionsim_cli_test(fuzz_where_selects_nothing EXIT 3
                 MATCH "--where: got 'run=nope', expected conditions that select at least one measured configuration of .*seed-measurements.csv \\(run: 1node-real-step, 2node-real-step"
                 ARGS validate --measured ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv --where run=nope)
# A capacity factor of 1e300 passed the c >= 1 rule and overflowed B = ceil(c·pr·k) (UB).
dionsim_cli_test(fuzz_capacity_factor_1e300 EXIT 2 MATCH "--capacity-factor: got '1e\\+300', expected auto or a number in \\[1, 1e6\\]"
                 ARGS plan --model seed-5120x8 --world 16 --scope global_capped --capacity-factor 1e300)
dionsim_cli_test(fuzz_capacity_factor_list_1e300 EXIT 2 MATCH "--capacity-factor: got '1e\\+300'"
                 ARGS whatif --model seed-5120x8 --scope global_capped --nodes 2 --mfu 0.5 --capacity-factor 1.1,1e300)
# --layers 2^31: the FSDP schedule walked every layer (minutes); now bounded as an inventory's layers.
dionsim_cli_test(fuzz_layers_huge EXIT 2 MATCH "--layers: got '2147483648', expected an integer in \\[1, 100000\\]"
                 ARGS whatif --model seed-5120x8 --scope local --nodes 2 --mfu 0.5 --layers 2147483648)
# --hardware /dev/zero read forever; a folder was read as an empty GPU file.
dionsim_cli_test(fuzz_hardware_device EXIT 3 MATCH "/dev/zero: \\(file\\): got 'a character device', expected a GPU TOML file \\(--hardware\\)"
                 ARGS whatif --model seed-5120x8 --scope local --nodes 1 --mfu 0.5 --hardware /dev/zero)
dionsim_cli_test(fuzz_hardware_folder EXIT 3 MATCH "data/: \\(file\\): got 'a directory', expected a GPU TOML file \\(--hardware\\)"
                 ARGS whatif --model seed-5120x8 --scope local --nodes 1 --mfu 0.5 --hardware ${PROJECT_SOURCE_DIR}/tests/whatif/data/)
set_tests_properties(cli:fuzz_hardware_device PROPERTIES TIMEOUT 20)
# A file name longer than NAME_MAX ended in "internal error: filesystem error" (exit 1).
dionsim_cli_test(fuzz_long_input_name EXIT 4 MATCH "^dionsim: error: x+: \\(path\\): got 'File name too long'"
                 ARGS calibrate --measured ${fz_long_name})
dionsim_cli_test(fuzz_long_output_name EXIT 4 MATCH "dionsim: error: x+: \\(path\\): got 'File name too long'"
                 ARGS step ${DIONSIM_SHARED_DIR}/fixtures/numerics/d2_local_w2 --out ${fz_long_name})
# A measurement CSV's gpus_per_node 2^31 and world 2^32 became int INT_MIN and 0, and their product
# overflowed to "match": the configuration was read as world 0 (calibrate printed w=0).
dionsim_cli_test(fuzz_csv_count_2pow31 EXIT 3 MATCH "gpus_per_node_2pow31.csv:2: gpus_per_node: got '2147483648', expected an integer in \\[1, 1024\\]"
                 ARGS calibrate --measured ${PROJECT_SOURCE_DIR}/fuzz/corpus/regression/measurement_csv/gpus_per_node_2pow31.csv --dump-metrics)
# A calibration parameter out of its range was refused only by the step model ("fit: …"), not naming the file.
dionsim_cli_test(fuzz_calibration_parameter_range EXIT 3
                 MATCH "calibration_efficiency_negative.json: parameters.ns_gemm_efficiency.value: got '-1', expected an efficiency"
                 ARGS validate --measured ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv --where run=1node-real-step
                      --calibration ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_data/calibration_efficiency_negative.json)
# The published nccl-tests CSV: nan in count (a column validate-collectives does not use) was accepted.
dionsim_cli_test(fuzz_published_count_nan EXIT 3 MATCH "published_count_nan.csv:3: count: got 'nan', expected empty or a finite number"
                 ARGS validate-collectives --published ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_data/published_count_nan.csv)
# A Kineto kernel's "In msg nelems" of 1e300 was cast to int64 (undefined behaviour).
dionsim_cli_test(fuzz_kineto_nelems_1e300 EXIT 3 MATCH "nelems_1e300.json: traceEvents\\[[0-9]+\\]: In msg nelems: got '?1e\\+?300'?, expected an integer"
                 ARGS calibrate --measured ${PROJECT_SOURCE_DIR}/fuzz/corpus/regression/kineto/nelems_1e300.json --dump-metrics)
# A case folder's NaN gradient ran and wrote NaN weights (exit 0).
dionsim_cli_test(fuzz_case_nan_gradient EXIT 3 MATCH "G0_p0.npy: data\\[1\\]\\[1\\]: got 'nan', expected finite float32 values"
                 ARGS step ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_data/case_nan_grad --out ${CMAKE_CURRENT_BINARY_DIR}/fuzz_case_nan_out)
