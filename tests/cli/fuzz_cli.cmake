# Defects found by scripts/fuzz_cli.py (black-box fuzzing of the command line), one test each:
# each input was accepted, hung or ended in "internal error" before its fix.
# Included by tests/cli/CMakeLists.txt.
set(fz_good_gpu ${PROJECT_SOURCE_DIR}/tests/whatif/data/gpu_good.toml)
string(REPEAT "x" 300 fz_long_name)

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
