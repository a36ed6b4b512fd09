# Issue 19 items 4, 5, 7 on the command line: dionsim recommend, one deferral estimate, loud routing.
# Included by tests/cli/CMakeLists.txt; run with -P (CMAKE_SCRIPT_MODE_FILE) it is the --db check.
if(CMAKE_SCRIPT_MODE_FILE)
  # recommend --db twice: one `recommend` run per cluster, atomically; the second run shows the
  # table again and stores nothing.
  set(db ${WORKDIR}/recommend.db)
  file(REMOVE ${db} ${db}-wal ${db}-shm)
  set(args recommend --model seed-5120x8 --nodes 1,2 --mfu 0.45 --db ${db})
  execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT err MATCHES "recommend: 2 cluster\\(s\\) recorded" OR NOT out MATCHES "h100-ndr400 +2 +16 +local")
    message(FATAL_ERROR "first run: exit ${rc}\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT err MATCHES "recommend: 0 cluster\\(s\\) recorded" OR NOT out MATCHES "h100-ndr400 +2 +16 +local")
    message(FATAL_ERROR "second run stored again or showed nothing: exit ${rc}\n${out}\n${err}")
  endif()
  return()
endif()

# The deferral estimates agree: gpt-14b, world 512, auto c. whatif's deferral_fraction is the
# deferral engine's analytic figure (4.388e-4; before issue 19 whatif printed 0.0554 %, its own
# formula), and with --deferral-estimate simulated the engine's simulated one (6.654e-4, 20 steps).
dionsim_cli_test(issue19_whatif_deferral_analytic EXIT 0 MATCH "\"deferral_estimate\": \"analytic\",[^}]*\"deferral_fraction\": 0\\.00043882"
                 ARGS whatif --model gpt-14b --gpus 512 --scope global_capped --mfu 0.45 --json -q)
dionsim_cli_test(issue19_deferral_analytic EXIT 0 MATCH "\"analytic_deferred_fraction\": 0\\.00043882"
                 ARGS deferral --model gpt-14b --world 512 --steps 1 --mode reduced --json -q)
dionsim_cli_test(issue19_whatif_defer_percent EXIT 0 MATCH "global_capped +0.25 +auto +64 +512 [^\n]* 0\\.0439 "
                 ARGS whatif --model gpt-14b --gpus 512 --scope global_capped --mfu 0.45 -q)
dionsim_cli_test(issue19_whatif_deferral_simulated EXIT 0 MATCH "\"deferral_fraction\": 0\\.0006654[^}]*\"deferral_mode\": \"reduced\""
                 ARGS whatif --model gpt-14b --gpus 512 --scope global_capped --mfu 0.45 --deferral-estimate simulated --json -q)
set_tests_properties(cli:issue19_whatif_deferral_simulated PROPERTIES LABELS "cli;slow")  # 20 steps: ~4 s, 11 s loaded

# Loud routing at 8192 GPUs (the issue's case): auto c routes all 3 capped groups of gpt-14b to
# exact global (resolved c 2.9999), local selects 8192 of 5120 rows; each said once on stderr.
dionsim_cli_test(issue19_routing_table EXIT 0 MATCH "global_capped +0.25 +auto +1024 +8192 [^\n]* 0/3/0 +2\\.9999"
                 ARGS whatif --model gpt-14b --gpus 8192 --scope global_capped --mfu 0.45)
dionsim_cli_test(issue19_routing_warning EXIT 0 MATCH "warning: global_capped \\(fraction 0.25, c auto\\) at world 8192: every one of the 3 capped groups is routed"
                 ARGS whatif --model gpt-14b --gpus 8192 --scope global_capped --capacity-factor auto,1 --mfu 0.45)
dionsim_cli_test(issue19_routing_c1_packs EXIT 0 MATCH "global_capped +0.25 +1 +1024 +8192 [^\n]* 1/2/0 +1\\.0000"
                 ARGS whatif --model gpt-14b --gpus 8192 --scope global_capped --capacity-factor 1 --mfu 0.45 -q)
dionsim_cli_test(issue19_local_degenerate EXIT 0 MATCH "warning: local \\(fraction 0.25\\) at world 8192: 2 of 3 groups select k·w >= rows \\(e.g. 8192 of 5120 rows"
                 ARGS whatif --model gpt-14b --gpus 8192 --scope local --mfu 0.45)
dionsim_cli_test(issue19_routing_json EXIT 0
                 MATCH "\"capacity_factor_resolved_min\": 2\\.999[^}]*\"groups_exact_global\": 3,[^}]*\"groups_packed\": 0,.*\"routing\": {[^}]*\"exact_global\": 3,[^}]*\"packed\": 0"
                 ARGS whatif --model gpt-14b --gpus 8192 --scope global_capped --mfu 0.45 --json -q)

# recommend: table, JSON, bad input before any work.
dionsim_cli_test(issue19_recommend_table EXIT 0 MATCH "pick +cap +step_ms +defer% +p/g/l +c_used +quality +runner_up[^\n]*margin_ms +P\\(win\\) +margin@record\nh100-ndr400 +1 +8 +local +- +[0-9.]+ ± [0-9.]+ +0\\.0000 +0/0/2 [^\n]* [-+][0-9.]+ / [-+][0-9.]+\n"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 -q)
dionsim_cli_test(issue19_recommend_json EXIT 0
                 MATCH "\"margin_ms\": [0-9.]+,\n *\"margin_ms_collectives_at_record_high\": [-0-9.e]+,\n *\"margin_ms_collectives_at_record_low\": [-0-9.e]+,\n *\"margin_ms_hi\": [-0-9.e]+,\n *\"margin_ms_lo\": [-0-9.e]+,\n[^#]*\"p_pick_wins\": 0\\.[0-9]+,\n *\"pick\": {.*\"pick_holds_at_record_ends\": (true|false)"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --json -q)
dionsim_cli_test(issue19_recommend_json_quality EXIT 0
                 MATCH "\"routing\": {\n[^}]*\"local\": 2,[^}]*},\n *\"scope\": \"local\",\n *\"selection_quality\": {"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --json -q)
# At 8192 GPUs the pick is global; global_capped at auto routes every group (it is global, so it is
# not the runner-up), local selects every row (never picked); c = 1 still packs and, under a loose
# target, is the runner-up.
dionsim_cli_test(issue19_recommend_8192 EXIT 0 MATCH "h100-ndr400 +1024 +8192 +global +- [^\n]* 0/3/0 [^\n]* global_capped +1 "
                 ARGS recommend --model gpt-14b --gpus 8192 --mfu 0.45 --capacity-factor auto,1 --target-deferral 0.5 --steps 2 -q)
dionsim_cli_test(issue19_recommend_target EXIT 2 MATCH "--target-deferral: got '0', expected a fraction of winner rows in \\(0, 1\\)"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --target-deferral 0)
dionsim_cli_test(issue19_recommend_target_nan EXIT 2 MATCH "--target-deferral"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --target-deferral nan)
dionsim_cli_test(issue19_recommend_fractions EXIT 2 MATCH "--fraction: got '2 values', expected one fraction"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --fraction 0.25,0.5)
dionsim_cli_test(issue19_recommend_bad_estimate EXIT 2 MATCH "--deferral-estimate: got 'montecarlo', expected analytic or simulated"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --deferral-estimate montecarlo)
dionsim_cli_test(issue19_recommend_bad_steps EXIT 2 MATCH "--steps: got '0', expected an integer in \\[1, 100000\\]"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --steps 0)
dionsim_cli_test(issue19_recommend_bad_norms EXIT 2 MATCH "--norms: got 'gaussian'"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --norms gaussian)
dionsim_cli_test(issue19_recommend_needs_model EXIT 2 MATCH "--model"
                 ARGS recommend --nodes 1 --mfu 0.45)
dionsim_cli_test(issue19_recommend_bad_db EXIT 4 MATCH "README.md: file header: got '# dionsim[^']*', expected 'SQLite format 3'"
                 ARGS recommend --model seed-5120x8 --nodes 1 --mfu 0.45 --db ${PROJECT_SOURCE_DIR}/README.md)
dionsim_cli_test(issue19_whatif_norms_needs_dynamics EXIT 2 MATCH "--norms applies to --deferral-estimate simulated only"
                 ARGS whatif --model seed-5120x8 --nodes 1 --mfu 0.45 --norms skew:rank=0,factor=2)
add_test(NAME cli:issue19_recommend_db
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:dionsim> -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}
                 -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(cli:issue19_recommend_db PROPERTIES LABELS "cli")
