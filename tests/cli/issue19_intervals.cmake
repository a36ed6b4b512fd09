# Issue 19: predictions with 90 % intervals (analysis/calibration/intervals.hpp). Included from
# tests/cli/CMakeLists.txt.
set(seed19 ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv)
set(cal19 ${PROJECT_SOURCE_DIR}/docs/calibration-seed-h100.json)
# validate --extrapolate on the seed: fitted on 1 node, the 2-node runs with coverage and the
# global - global_capped difference (+38.1 ms measured).
dionsim_cli_test(validate_extrapolate_seed EXIT 0
                 MATCH "fitted on 1 node count\\(s\\) up to 1, predicted 2 nodes.*\\| step_wall_ms \\| 2 \\| 2 \\(.*\\| all \\| 16 \\| 13 \\(.*\\| 2 \\| global − global_capped \\| step_wall_ms \\| \\+38\\.1 \\| \\+9\\.2 ± 28\\.9 \\| [^|]+ \\| yes"
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate)
dionsim_cli_test(validate_extrapolate_json EXIT 0 MATCH "\"coverage_summary\".*\"predicted_lo\""
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate --json)
dionsim_cli_test(validate_extrapolate_one_node_count EXIT 3
                 MATCH "validate --extrapolate: nodes: got '1', expected selected runs of at least two node counts"
                 ARGS validate --measured ${seed19} --where run=1node-real-step --extrapolate)
dionsim_cli_test(validate_extrapolate_with_calibration EXIT 2 MATCH "--extrapolate fits its own calibration"
                 ARGS validate --measured ${seed19} --where run=2node-real-step --extrapolate --calibration ${cal19})
dionsim_cli_test(validate_extrapolate_bad_spread EXIT 2 MATCH "--fabric-spread: got '-0.1', expected a relative spread in \\[0, 1\\]"
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate --fabric-spread -0.1)
dionsim_cli_test(validate_extrapolate_bad_inter_node_prior EXIT 2 MATCH "--inter-node-prior: got '3,1', expected LO,HI"
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate --inter-node-prior 3,1)
# The link prior narrowed by hand: fewer of the 2-node cells covered (the seed's link is slow).
dionsim_cli_test(validate_extrapolate_inter_node_prior EXIT 0 MATCH "\\| all \\| 16 \\| [0-9] \\("
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate --inter-node-prior 0.9,1.2)
dionsim_cli_test(whatif_bad_inter_node_prior EXIT 2 MATCH "--inter-node-prior: got '1,x', expected LO,HI"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --fwd-bwd-ms 450 --inter-node-prior 1,x)
# The network step's prior (session 21): a reversed, out-of-bounds or non-numeric range is a usage
# error naming the flag (its effect: tests/calibration/test_intervals.cpp).
dionsim_cli_test(whatif_bad_net_step_prior EXIT 2 MATCH "--net-step-prior: got '10,1', expected LO,HI with -2.5 <= LO <= HI <= 1000"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --fwd-bwd-ms 450 --net-step-prior 10,1)
dionsim_cli_test(whatif_net_step_prior_below_bound EXIT 2 MATCH "--net-step-prior: got '-3,1', expected LO,HI with -2.5"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --fwd-bwd-ms 450 --net-step-prior -3,1)
dionsim_cli_test(recommend_net_step_prior_nan EXIT 2 MATCH "--net-step-prior: got '0,nan', expected LO,HI: two numbers"
                 ARGS recommend --model seed-5120x8 --gpus-per-node 4 --nodes 2 --fwd-bwd-ms 450 --net-step-prior 0,nan)
dionsim_cli_test(validate_bad_net_step_prior EXIT 2 MATCH "--net-step-prior: got '1', expected LO,HI: two numbers"
                 ARGS validate --measured ${seed19} --where run=1node-real-step --where run=2node-real-step --extrapolate --net-step-prior 1)
# whatif: every time metric with _lo/_hi in --json, "value ± half" in the table, a note without a
# calibration, --fabric-spread checked.
dionsim_cli_test(whatif_interval_json EXIT 0 MATCH "\"step_wall_ms\": 582\\.7[0-9]*,.*\"step_wall_ms_hi\": 6[0-9][0-9]\\.[0-9]+,\n *\"step_wall_ms_lo\": 5[0-7][0-9]\\.[0-9]+"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --scope global --calibration ${cal19} --json)
# The stress bounds beside the intervals: the step and the optimizer wall with every collective at
# the published record's ends (session 21), in --json (and --db) only.
dionsim_cli_test(whatif_collective_record_stress EXIT 0
                 MATCH "\"opt_wall_ms_collectives_at_record_high\": [0-9.]+,\n *\"opt_wall_ms_collectives_at_record_low\": [0-9.]+,.*\"step_wall_ms_collectives_at_record_high\": [0-9.]+,\n *\"step_wall_ms_collectives_at_record_low\": [0-9.]+"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --scope global --calibration ${cal19} --json)
dionsim_cli_test(whatif_interval_table EXIT 0 MATCH " +step_ms +opt_ms .*\n.* 582\\.7[0-9] ± [0-9]+\\.[0-9][0-9] "
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --scope global --calibration ${cal19})
dionsim_cli_test(whatif_interval_uncalibrated EXIT 0 MATCH "intervals: no step calibration: every step-model parameter takes its prior range"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 1 --scope local --fwd-bwd-ms 450)
dionsim_cli_test(whatif_fabric_spread_nan EXIT 2 MATCH "--fabric-spread: got 'nan', expected a finite number"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 2 --fwd-bwd-ms 450 --fabric-spread nan)
# A calibration's model_error is read strictly like the rest of the file.
dionsim_cli_test(whatif_calibration_bad_model_error EXIT 3
                 MATCH "calibration_bad_model_error.json: model_error.relative_rms: step_wall_ms: got '-1', expected a relative error in \\[0, 100\\]"
                 ARGS whatif --model seed-5120x8 --gpus-per-node 4 --nodes 1 --calibration ${PROJECT_SOURCE_DIR}/tests/calibration/data/calibration_bad_model_error.json)
