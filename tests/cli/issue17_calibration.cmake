# Issue 17, calibration breadth (docs/calibration.md): every GPU of a measurement file, the NS
# variant as a configuration key, a calibration's fabric, bad calibration files.
set(seed ${DIONSIM_SHARED_DIR}/data/seed-measurements.csv)
set(i17 ${PROJECT_SOURCE_DIR}/tests/calibration/data)
# No --where: one calibration per GPU whose runs name a known inventory (H100: the 5 training
# steps and the 12 opt.step() benchmarks); the B200 rows are listed as skipped with the reason.
dionsim_cli_test(calibrate_no_filter EXIT 0
                 MATCH "# calibration 'seed-measurements.csv-h100-sxm' \\(H100 SXM\\).*host_launch_us@gram\\+triton +1[0-9]\\.[0-9]+.*# skipped: 6 configurations not fitted.*b200-real-step/mixformer-1b/nordion2/global/f=0.5/w=8 +B200 +.*model: got 'mixformer-1b', expected a model dionsim knows"
                 ARGS calibrate --measured ${seed})
# The opt.step() benchmarks (ns gram+triton) fit on their own: a variant, not a refusal.
dionsim_cli_test(calibrate_gram_triton EXIT 0 MATCH "host_launch_us +1[0-9]\\.[0-9]+ .*gpt-1b/nordion2/local/f=0.25/w=8 opt_step_ms +26\\.79"
                 ARGS calibrate --measured ${seed} --where run=isolated-opt-step-pooled)
dionsim_cli_test(calibrate_json_skipped EXIT 0 MATCH "skipped.: .*hardware.: .B200.*reason.: .*mixformer-1b"
                 ARGS calibrate --measured ${seed} --where model=mixformer-1b --where model=gpt-1b --json)
# Two GPUs fitted (the H100 benchmark rows and a synthetic copy labelled H200): --out is a folder.
dionsim_cli_test(calibrate_two_gpus_out_file EXIT 2 MATCH "--out: got 'two.json', expected a folder: the selection gives 2 calibrations"
                 ARGS calibrate --measured ${i17}/two_gpus.csv --out two.json)
dionsim_cli_test(calibrate_two_gpus_out_folder EXIT 0
                 MATCH "wrote calibration 'two_gpus.csv-h100-sxm' to two-gpus/h100-sxm.json.*wrote calibration 'two_gpus.csv-h200' to two-gpus/h200.json"
                 ARGS calibrate --measured ${i17}/two_gpus.csv --out two-gpus/)
dionsim_cli_test(calibrate_bad_ns EXIT 3 MATCH "bad_ns.csv:2: ns: got 'gramm', expected polar_express, newton_schulz5 or gram, optionally followed by"
                 ARGS calibrate --measured ${i17}/bad_ns.csv)
dionsim_cli_test(calibrate_only_b200 EXIT 3 MATCH "model: got 'mixformer-1b', expected a model dionsim knows.*\\(6 selected configurations skipped, none can be fitted\\)"
                 ARGS calibrate --measured ${seed} --where hardware=B200)
# Leave-one-out on the 12 opt.step() benchmarks (8 x H100, gram+triton), refused before issue 17.
dionsim_cli_test(validate_gram_triton EXIT 0 MATCH "# leave-one-out summary.*opt_step_ms +12 "
                 ARGS validate --measured ${seed} --where run=isolated-opt-step-pooled)
# ~11 s (the no-filter fit of 17 configurations) and ~25 s (12 leave-one-out fits) on 2 busy cores.
set_tests_properties(cli:calibrate_no_filter cli:validate_gram_triton PROPERTIES LABELS "cli;slow")
dionsim_cli_test(validate_two_gpus EXIT 2 MATCH "--where: got '', expected conditions that select the runs of one GPU"
                 ARGS validate --measured ${i17}/two_gpus.csv)
# A calibration applies on the fabric it was fitted on only: p5-efa keeps its preset NIC efficiency.
dionsim_cli_test(whatif_calibration_other_fabric EXIT 0
                 MATCH "calibration 'ib-fitted' was fitted on h100-ndr400: on p5-efa its fabric parameters do not apply"
                 ARGS whatif --model seed-5120x8 --nodes 2 --scope global --fabric h100-ndr400,p5-efa --calibration ${i17}/calibration_ib.json)
dionsim_cli_test(whatif_calibration_other_fabric_json EXIT 0
                 MATCH "\"calibration\": \"[^\"]*calibration_ib.json \\(ib-fitted\\); not on h100-ndr400: GPU parameters only\""
                 ARGS whatif --model seed-5120x8 --nodes 2 --scope global --fabric p5-efa --calibration ${i17}/calibration_ib.json --json)
# Bad calibration files: file, field, value, expected (exit 3).
dionsim_cli_test(calibration_no_fabric EXIT 3 MATCH "calibration_no_fabric.json: fabric: got '\\(missing\\)'"
                 ARGS whatif --model seed-5120x8 --nodes 1 --fwd-bwd-ms 100 --calibration ${i17}/calibration_no_fabric.json)
dionsim_cli_test(calibration_bad_fabric EXIT 3 MATCH "calibration_bad_fabric.json: fabric: got 'h100-ndr999', expected the fabric preset it was fitted on"
                 ARGS whatif --model seed-5120x8 --nodes 1 --fwd-bwd-ms 100 --calibration ${i17}/calibration_bad_fabric.json)
dionsim_cli_test(calibration_unknown_gpu EXIT 3 MATCH "calibration_unknown_gpu.json: hardware: got 'TPU v5', expected a GPU with a preset"
                 ARGS whatif --model seed-5120x8 --nodes 1 --fwd-bwd-ms 100 --calibration ${i17}/calibration_unknown_gpu.json)
dionsim_cli_test(calibration_wrong_gpu EXIT 3 MATCH "calibration_ib.json: calibration 'ib-fitted': ib-fitted: hardware: got 'H100 SXM', expected the GPU of --hardware \\(h200\\)"
                 ARGS whatif --model seed-5120x8 --nodes 1 --hardware h200 --fabric h200-ndr400 --calibration ${i17}/calibration_ib.json)
dionsim_cli_test(validate_calibration_other_fabric EXIT 3 MATCH "calibration_b200.json: hardware: got 'B200', expected the GPU of the selected runs"
                 ARGS validate --measured ${seed} --where run=isolated-opt-step-pooled --calibration ${i17}/calibration_b200.json)
# A measurement CSV and an nccl-tests log in one invocation: one fit, the log's parameters held at
# their measured values and written beside the fitted ones (its GPU must be a selected run's).
dionsim_cli_test(calibrate_csv_and_nccl_tests EXIT 0
                 MATCH "nccl_all_to_all_w16_n2_algbw_GBps +44\\.8[0-9]+ .*nic_efficiency +0\\.39[0-9]+.*more inputs held"
                 ARGS calibrate --measured ${seed} --where run=1node-real-step --where run=2node-real-step
                      --measured ${PROJECT_SOURCE_DIR}/tests/measured/data/alltoall_perf_synthetic_2x8.txt)
dionsim_cli_test(calibrate_csv_and_trace_other_gpu EXIT 3 MATCH "trace_local_rank0.json.gz: hardware: got 'NVIDIA H200', expected the GPU of a selected measured run"
                 ARGS calibrate --measured ${seed} --where run=1node-real-step --where run=2node-real-step
                      --measured ${DIONSIM_SHARED_DIR}/data/traces/trace_local_rank0.json.gz)
# whatif --ns gram+triton: gram's plan with the calibration's gram+triton rates (the no-filter seed
# calibration, calibration_seed_h100_all.json, written by `calibrate --measured seed-measurements.csv`).
dionsim_cli_test(whatif_ns_variant EXIT 0 MATCH "\"calibration\": \"[^\"]*; ns gram\\+triton\".*\"host_launch_us\": 10\\.95"
                 ARGS whatif --model gpt-1b --nodes 1 --scope local --ns gram+triton --json
                      --calibration ${i17}/calibration_seed_h100_all.json)
dionsim_cli_test(whatif_ns_variant_gram EXIT 0 MATCH "\"host_launch_us\": 16\\.34"
                 ARGS whatif --model gpt-1b --nodes 1 --scope local --ns gram --json
                      --calibration ${i17}/calibration_seed_h100_all.json)
dionsim_cli_test(whatif_bad_ns_variant EXIT 2 MATCH "ns: got 'gram\\+', expected polar_express"
                 ARGS whatif --model gpt-1b --nodes 1 --fwd-bwd-ms 100 --ns gram+)
