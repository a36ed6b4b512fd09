# Issue 20: --csv on the table-printing subcommands, export, compare, deferral's progress.
# A small database made once (fixture issue20_exports_db) for the export and compare refusals.
set(i20db ${CMAKE_CURRENT_BINARY_DIR}/issue20-exports-a.db)
set(i20db_b ${CMAKE_CURRENT_BINARY_DIR}/issue20-exports-b.db)
dionsim_cli_test(issue20_make_db EXIT 0 ARGS whatif --model seed-5120x8 --nodes 1,2 --scope local,global --mfu 0.45 --quiet --force --db ${i20db})
dionsim_cli_test(issue20_make_db_b EXIT 0 ARGS whatif --model seed-5120x8 --nodes 1,2 --scope local,global --mfu 0.5 --quiet --force --db ${i20db_b})
set_tests_properties(cli:issue20_make_db cli:issue20_make_db_b PROPERTIES FIXTURES_SETUP issue20_exports_db)
set(i20_uses_db "")
# A function, not a macro: a macro's ${ARGN} would unescape the regexes once more.
function(issue20_db_test name)
  dionsim_cli_test(${name} ${ARGN})
  set(i20_uses_db ${i20_uses_db} cli:${name} PARENT_SCOPE)
endfunction()

# --csv: the --json result's columns, RFC 4180; one of --json / --csv.
dionsim_cli_test(issue20_whatif_csv EXIT 0 MATCH "^a2a_ms,a2a_ms_hi,a2a_ms_lo,a2a_payload_bytes,.*,world\n[0-9.]+,[0-9.]+,[0-9.]+,[0-9]+,"
                 ARGS whatif --model seed-5120x8 --nodes 1 --scope local --mfu 0.45 --quiet --csv)
dionsim_cli_test(issue20_json_and_csv EXIT 2 MATCH "whatif: --json and --csv are exclusive"
                 ARGS whatif --model seed-5120x8 --nodes 1 --mfu 0.45 --json --csv)
dionsim_cli_test(issue20_plan_csv EXIT 0 MATCH "^B,N,Np,.*config.scope,.*\n0,33,36,"
                 ARGS plan --model seed-5120x8 --world 4 --csv)
dionsim_cli_test(issue20_collective_csv EXIT 0 MATCH "algbw_GBps,.*size_bytes,time_us.*\n.*,1048576,"
                 ARGS collective --op alltoall --nodes 2 --gpus-per-node 8 --fabric h100-ndr400 --bytes 1M --quiet --csv)
dionsim_cli_test(issue20_deferral_csv EXIT 0 MATCH "a2a_payload_bytes,.*deferred_fraction,.*world\n[0-9]+,"
                 ARGS deferral --model seed-5120x8 --world 16 --steps 2 --quiet --csv)
dionsim_cli_test(issue20_validate_csv EXIT 0 MATCH "^table,configuration,covered,error_pct,.*\nleave_one_out,1node-real-step/.*\nleave_one_out_summary,"
                 ARGS validate --measured ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv --where run=1node-real-step --quiet --csv)
dionsim_cli_test(issue20_calibrate_csv EXIT 0 MATCH "^table,parameter,stderr,units,value,.*\nparameters,alltoall_intra_efficiency,.*\nin_sample,"
                 ARGS calibrate --measured ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv --where run=1node-real-step --quiet --csv)
dionsim_cli_test(issue20_validate_collectives_csv EXIT 0 MATCH "^table,.*regime,rows,skipped,.*\nregimes,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,latency \\(<= 64 KiB\\),288,72,"
                 ARGS validate-collectives --published ${DIONSIM_SHARED_DIR}/data/nccl-published/measurements.csv --csv)
# Subcommands that print no table have no --csv.
dionsim_cli_test(issue20_step_no_csv EXIT 2 MATCH "step: unrecognised option '--csv'"
                 ARGS step ${DIONSIM_SHARED_DIR}/fixtures/numerics/d2_capped_w2_pool --out ${CMAKE_CURRENT_BINARY_DIR}/i20step --csv)

# export
issue20_db_test(issue20_export_csv EXIT 0 MATCH "^run_id,kind,mode,seed,.*,world,metric,value,unit,rank,step\n[0-9]+,whatif,simulated,0,"
                ARGS export --db ${i20db} --quiet)
issue20_db_test(issue20_export_json EXIT 0 MATCH "\"metric\": \"step_wall_ms\",.*\"value\": [0-9.]+"
                ARGS export --db ${i20db} --format json --metric step_wall_ms --where scope=local --quiet)
issue20_db_test(issue20_export_bad_format EXIT 2 MATCH "--format: got 'xml', expected csv or json"
                ARGS export --db ${i20db} --format xml)
issue20_db_test(issue20_export_bad_where_key EXIT 2 MATCH "--where: got 'wrold=16', expected a configuration key of the runs in .*issue20-exports-a.db \\(.*scope.*world\\)"
                ARGS export --db ${i20db} --where wrold=16)
issue20_db_test(issue20_export_bad_where EXIT 2 MATCH "--where: got 'world', expected key=value"
                ARGS export --db ${i20db} --where world)
issue20_db_test(issue20_export_bad_kind EXIT 2 MATCH "--kind: got 'measure', expected a kind of run stored in .*\\(whatif\\)"
                ARGS export --db ${i20db} --kind measure)
issue20_db_test(issue20_export_bad_metric EXIT 2 MATCH "--metric: got 'step_ms', expected a metric stored in"
                ARGS export --db ${i20db} --metric step_ms)
issue20_db_test(issue20_export_out_is_db EXIT 2 MATCH "--out: got .*issue20-exports-a.db., expected an output file other than the input"
                ARGS export --db ${i20db} --out ${i20db})
dionsim_cli_test(issue20_export_no_db EXIT 2 MATCH "--db: got '', expected the results database to export" ARGS export)
dionsim_cli_test(issue20_export_missing_db EXIT 4 MATCH "nope.db: does not exist, expected an existing dionsim results database"
                 ARGS export --db ${CMAKE_CURRENT_BINARY_DIR}/nope.db)
dionsim_cli_test(issue20_export_not_sqlite EXIT 4 MATCH "file header: got .*expected 'SQLite format 3'"
                 ARGS export --db ${PROJECT_SOURCE_DIR}/tests/cli/issue20_exports.cmake)

# compare
issue20_db_test(issue20_compare EXIT 0 MATCH "# A = .*issue20-exports-a.db, B = .*issue20-exports-b.db; mfu 0.45 vs 0.5;.*\nnodes +scope +world +metric +unit +a +b +diff +diff_pct\n.*step_wall_ms +ms +578.109 +521.965 +-56.1434 +-9.71"
                ARGS compare ${i20db} ${i20db_b} --metric step_wall_ms)
issue20_db_test(issue20_compare_csv EXIT 0 MATCH "^kind,.*metric,unit,rank,step,a,b,diff,diff_pct,a_lo,a_hi,b_lo,b_hi,overlap,run_a,run_b\nwhatif,"
                ARGS compare ${i20db} ${i20db_b} --csv --quiet)
issue20_db_test(issue20_compare_where_vs EXIT 0 MATCH "scope local vs global.*a2a_payload_bytes +bytes +3.40787e\\+08 +1.36315e\\+09"
                ARGS compare --db ${i20db} --where scope=local --vs scope=global)
issue20_db_test(issue20_compare_one_db EXIT 2 MATCH "compare: give two databases" ARGS compare ${i20db})
issue20_db_test(issue20_compare_no_vs EXIT 2 MATCH "compare --db: give both --where \\(side A\\) and --vs \\(side B\\)"
                ARGS compare --db ${i20db} --where scope=local)
issue20_db_test(issue20_compare_bad_vs_key EXIT 2 MATCH "--vs: got 'scoop=global', expected a configuration key"
                ARGS compare --db ${i20db} --where scope=local --vs scoop=global)
issue20_db_test(issue20_compare_bad_ignore EXIT 2 MATCH "--ignore: got 'nope', expected a configuration key of the compared runs"
                ARGS compare ${i20db} ${i20db_b} --ignore nope)
issue20_db_test(issue20_compare_missing EXIT 4 MATCH "nope.db: does not exist"
                ARGS compare ${i20db} ${CMAKE_CURRENT_BINARY_DIR}/nope.db)
set_tests_properties(${i20_uses_db} PROPERTIES FIXTURES_REQUIRED issue20_exports_db)

# export read back by Python's csv and sqlite3 (bit-exact doubles), --csv = --json for export,
# whatif and compare, another application's SQLite file refused unchanged.
find_program(DIONSIM_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(DIONSIM_SYSTEM_PYTHON)
  add_test(NAME cli:issue20_export_roundtrip
           COMMAND ${DIONSIM_SYSTEM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/issue20_roundtrip.py $<TARGET_FILE:dionsim>
                   ${CMAKE_CURRENT_BINARY_DIR}/issue20-roundtrip)
  set_tests_properties(cli:issue20_export_roundtrip PROPERTIES LABELS "cli")
endif()
