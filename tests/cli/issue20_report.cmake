# Issue 20: the report follows the data. Included from tests/cli/CMakeLists.txt.
find_program(DIONSIM_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
set(issue20 ${CMAKE_CURRENT_SOURCE_DIR}/issue20)
if(DIONSIM_SYSTEM_PYTHON)
  # The panels' decisions on synthetic sweeps, and that the checker catches a zig-zag (no dionsim run).
  add_test(NAME report:series_unit COMMAND ${DIONSIM_SYSTEM_PYTHON} ${issue20}/test_report_series.py)
  set_tests_properties(report:series_unit PROPERTIES LABELS "cli")
  # Two studies and deferral runs in one database, reported, the dumped series checked against it.
  add_test(NAME cli:report_series_follow_the_data
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:dionsim> -DPYTHON=${DIONSIM_SYSTEM_PYTHON}
                   -DCHECKER=${issue20}/check_series.py -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}
                   -P ${issue20}/report_study.cmake)
  set_tests_properties(cli:report_series_follow_the_data PROPERTIES LABELS "cli")
  # The extrapolation predicts the database's own what-if configuration, or --extrapolate's.
  add_test(NAME cli:report_extrapolate_follows_the_db
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:dionsim> -DPYTHON=${DIONSIM_SYSTEM_PYTHON}
                   -DCHECKER=${issue20}/check_series.py -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}
                   -DCSV=${DIONSIM_SHARED_DIR}/data/seed-measurements.csv -P ${issue20}/report_extrapolate.cmake)
  set_tests_properties(cli:report_extrapolate_follows_the_db PROPERTIES LABELS "cli")
endif()
# --extrapolate and --deferral-target are checked before the database is opened.
set(nodb ${CMAKE_CURRENT_BINARY_DIR}/issue20-none.db)
dionsim_cli_test(report_extrapolate_bad_key EXIT 2 MATCH "--extrapolate: got 'gpus=4', expected one of the keys model=M"
                 ARGS report --db ${nodb} --out x --extrapolate model=gpt-1b,gpus=4)
dionsim_cli_test(report_extrapolate_not_key_value EXIT 2 MATCH "--extrapolate: got 'model', expected key=value"
                 ARGS report --db ${nodb} --out x --extrapolate model)
dionsim_cli_test(report_extrapolate_bad_model EXIT 2 MATCH "--extrapolate: got 'model=gpt-huge', expected model=seed-5120x8"
                 ARGS report --db ${nodb} --out x --extrapolate model=gpt-huge)
dionsim_cli_test(report_extrapolate_bad_fabric EXIT 2 MATCH "--extrapolate fabric: got 'ndr', expected one of a100-hdr200"
                 ARGS report --db ${nodb} --out x --extrapolate fabric=ndr)
dionsim_cli_test(report_extrapolate_bad_gpus EXIT 2 MATCH "--extrapolate: got 'gpus-per-node=0', expected gpus-per-node=an integer in \\[1, 1024\\]"
                 ARGS report --db ${nodb} --out x --extrapolate gpus-per-node=0)
dionsim_cli_test(report_extrapolate_bad_nic EXIT 2 MATCH "--extrapolate: got 'nic=0', expected nic=a bandwidth in \\[0.001, 1e6\\] GB/s"
                 ARGS report --db ${nodb} --out x --extrapolate fabric=h100-ndr400,nic=0)
dionsim_cli_test(report_extrapolate_bad_nodes EXIT 2 MATCH "--extrapolate nodes: got '1..100', expected a range"
                 ARGS report --db ${nodb} --out x --extrapolate nodes=1..100)
dionsim_cli_test(report_extrapolate_twice EXIT 2 MATCH "--extrapolate: got 'model=gpt-1b', expected model once"
                 ARGS report --db ${nodb} --out x --extrapolate model=gpt-14b,model=gpt-1b)
dionsim_cli_test(report_deferral_target EXIT 2 MATCH "--deferral-target: got '1.000000', expected a number in \\(0, 1\\)"
                 ARGS report --db ${nodb} --out x --deferral-target 1)
# collective --dump-topology is written through write_file_atomically; a folder is refused before any work.
dionsim_cli_test(collective_dump_topology_folder EXIT 2 MATCH "--dump-topology: got '.*', expected an output file, not an existing directory"
                 ARGS collective --op alltoall --nodes 2 --gpus-per-node 8 -b 1M -e 1M --fabric h100-ndr400
                      --dump-topology ${CMAKE_CURRENT_BINARY_DIR})
