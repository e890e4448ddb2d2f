# Bad inputs and faults by class: each gives one error line, an exit code 1..127 and no
# output, leaves its input untouched and never hangs. Included by CMakeLists.txt (pw,
# bad, out, pw_expect_error).
set(plan ${bad}/plan_good.pbtxt)
add_test(NAME cli.plan_good_checks COMMAND ${pw} check ${plan})
add_test(NAME cli.plan_good_simulates COMMAND ${pw} sim ${plan})
set_tests_properties(cli.plan_good_checks cli.plan_good_simulates PROPERTIES LABELS cli)

# --- Numbers: one parser for flags and pass options; range-checked, no NaN or inf, no
# silent truncation to int32.
pw_expect_error(number_micro_batches_wraps_int32
  "flag --micro-batches: expected an integer in [1, 65536], got '4294967297' (out of range)"
  - run ${bad}/train_good.pbtxt --reference --steps 1 --micro-batches 4294967297)
pw_expect_error(number_micro_batches_int32_min
  "flag --micro-batches: expected an integer in [1, 65536], got '2147483648'"
  - run ${bad}/train_good.pbtxt --reference --steps 1 --micro-batches 2147483648)
pw_expect_error(number_micro_batches_endless
  "flag --micro-batches: expected an integer in [1, 65536], got '99999999999'"
  - run ${bad}/train_good.pbtxt --reference --steps 1 --micro-batches 99999999999)
pw_expect_error(number_mem_limit_nan "flag --mem-limit: expected a finite number >= 0, got 'nan'"
  - check ${plan} --mem-limit nan)
pw_expect_error(number_w_mem_inf "flag --w-mem: expected a finite number in [0, 1], got 'inf'"
  - check ${plan} --w-mem inf)
pw_expect_error(number_negative_steps "flag --steps: expected an integer in [0, 2147483647], got '-1'"
  - run ${bad}/train_good.pbtxt --reference --steps -1)
pw_expect_error(trace_cpu_without_trace
  "--trace-cpu adds CPU times to the traces --trace DIR writes: pass --trace DIR too"
  - run ${bad}/train_good.pbtxt --nproc 1 --steps 1 --trace-cpu)
pw_expect_error(number_hex_seed "flag --seed: expected an integer >= 0, got '0x10'"
  - run ${bad}/train_good.pbtxt --reference --steps 1 --seed 0x10)
pw_expect_error(number_schedule_costs_nan "bad --costs entry 'F=nan'" -
  schedule --kind 1f1b --stages 2 --micro-batches 4 --costs F=nan,B=2)
pw_expect_error(number_sim_micro_batches_float
  "flag --micro-batches: expected an integer in [1, 65536], got '2.5'" -
  sim ${bad}/train_good.pbtxt --micro-batches 2.5)
pw_expect_error(number_layers_huge "flag --layers: expected an integer in [1, 4096]" ${out}/h1.pb
  build-model gpt --layers 99999999999 --hidden 64 --heads 4 --seq 16 --vocab 128 -o ${out}/h1.pb)
pw_expect_error(number_mp_zero "flag --mp: expected an integer in [1, 65536], got '0'" ${out}/h2.pb
  build-model gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --mp 0 -o ${out}/h2.pb)
pw_expect_error(build_model_bias_fusion_value "flag --bias-fusion takes on or off, got 'yes'"
  ${out}/h5.pb build-model gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128
  --bias-fusion yes -o ${out}/h5.pb)
pw_expect_error(build_model_bias_fusion_llama "flag --bias-fusion applies to gpt, not llama"
  ${out}/h6.pb build-model llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --seq 16
  --vocab 128 --bias-fusion on -o ${out}/h6.pb)
pw_expect_error(number_option_lr_nan "expected a finite number, got 'nan'" ${out}/h3.pb
  opt ${bad}/train_good.pbtxt -p "append-backward{lr=nan}" -o ${out}/h3.pb)
pw_expect_error(number_option_micro_batches_wraps
  "expected an integer in [-2147483648, 2147483647], got '4294967298'" ${out}/h4.pb
  opt ${bad}/train_good.pbtxt -p "schedule{kind=fthenb,micro-batches=4294967298}" -o ${out}/h4.pb)
# Costs that sum to infinity: zb-auto took them for its "never" and wrote past its arrays
# (SIGSEGV from the command, a double free from the pass); 1f1b printed "makespan inf".
pw_expect_error(number_schedule_costs_overflow "cost F=1e+308 is not a finite number in [0, 1e+12]"
  - schedule --kind zb-auto --stages 2 --micro-batches 4 --costs F=1e308,B=1e308)
pw_expect_error(number_schedule_pass_costs_overflow "pass 'schedule' failed: cost F=1e+308" ${out}/h11.pb
  opt ${bad}/train_pp2_unplanned.pbtxt -p
  "append-backward,split-program{split-backward=true},schedule{kind=zb-auto,micro-batches=4,F=1e308,B=1e308},insert-p2p"
  -o ${out}/h11.pb)
pw_expect_error(number_order_comm_costs_overflow "pass 'order-comm' failed: cost F=1e+308" ${out}/h12.pb
  opt ${bad}/train_pp2_unplanned.pbtxt -p
  "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},order-comm{F=1e308,B=1e308,W=1,comm=0.5}"
  -o ${out}/h12.pb)
pw_expect_error(number_order_comm_negative_evals "max-evals must be >= 0, got -5" ${out}/h13.pb
  opt ${bad}/train_pp2_unplanned.pbtxt -p
  "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},order-comm{max-evals=-5,F=1,B=1,W=1,comm=0.5}"
  -o ${out}/h13.pb)
pw_expect_error(number_schedule_costs_twice "bad --costs entry 'F=2': F is given twice" -
  schedule --kind 1f1b --stages 2 --micro-batches 4 --costs F=1,F=2)
pw_expect_error(number_check_w_mem_above_one
  "flag --w-mem: expected a number in [0, 1], got '5' (out of range)" - check ${PROJECT_SOURCE_DIR}/tests/planning/data/send_recv_2rank.csv --w-mem 5)
# Counts that would measure for days.
pw_expect_error(number_profile_repeat_endless
  "flag --repeat: expected an integer in [1, 1000000], got '2000000000'" ${out}/h14.pbtxt
  profile ${bad}/train_good.pbtxt -o ${out}/h14.pbtxt --repeat 2000000000)
pw_expect_error(number_profile_blas_threads_huge
  "flag --threads: expected an integer in [1, 4096], got '99999999'" ${out}/h15.pbtxt
  profile ${bad}/train_good.pbtxt -o ${out}/h15.pbtxt --blas-threads 99999999)

# --- Sizes: refused before anything is allocated for them, naming the limit.
# A file with no end (here /dev/zero under a name each reader accepts) is read up to the
# input limit, not until the memory runs out; a folder given as a file says so.
foreach(ext csv pb)
  file(CREATE_LINK /dev/zero ${out}/endless.${ext} SYMBOLIC)
endforeach()
pw_expect_error(size_endless_schedule_csv "is larger than 512 MiB, the limit for an input file" -
  schedule --kind csv --file ${out}/endless.csv)
pw_expect_error(size_endless_module "is larger than 512 MiB, the limit for an input file" -
  inspect ${out}/endless.pb)
pw_expect_error(size_folder_as_schedule "is a folder, not a file" -
  schedule --kind csv --file ${out})
# Finite figures out of scale: the simulated step is refused above 1e15 s instead of
# printing "inf ms" or 1e302 ms.
pw_expect_error(size_sim_cost_out_of_scale "more than 1e+15 s" ${out}/h16.json
  sim ${bad}/train_good.pbtxt --costs ${bad}/costs_out_of_scale.pbtxt --threads 1
  --trace ${out}/h16.json)
pw_expect_error(size_sim_device_out_of_scale "more than 1e+15 s" -
  sim ${bad}/train_good.pbtxt --device ${bad}/device_out_of_scale.pbtxt)
# 8192 parameters of 1 PiB each (every one within the tensor limit): their byte count
# overflowed int64 in inspect ("parameters: 2.53 E (-8313644912125935616 B)").
set(pib_vars "")
foreach(i RANGE 8191)
  string(APPEND pib_vars "  vars { name: \"p${i}\" dtype: FLOAT32 shape: 281474976710656 "
    "persistable: true is_parameter: true }\n")
endforeach()
file(WRITE ${out}/module_bytes_overflow.pbtxt "programs {\n  name: \"main\"\n${pib_vars}}\n")
pw_expect_error(size_module_bytes_overflow "the module's vars add up to more than 2^52 bytes" -
  inspect ${out}/module_bytes_overflow.pbtxt --no-verify)
pw_expect_error(size_schedule_cells
  "4096 stages x 65536 micro-batches is more than 16777216 stage micro-batches" -
  schedule --kind zb-auto --stages 4096 --micro-batches 65536)
pw_expect_error(size_parameter_overflows_int64 "var 'w' is too large" -
  inspect ${bad}/huge_parameter.pbtxt)
pw_expect_error(size_parameter_overflows_int64_run "var 'w' is too large" -
  run ${bad}/huge_parameter.pbtxt --reference --steps 1)
pw_expect_error(size_mesh_overflows "is too large (at most 65536 ranks and chunks)" -
  inspect ${bad}/mesh_overflow.pbtxt)
pw_expect_error(size_plan_micro_batches "plan has 2000000000 micro-batches (at most 65536)" -
  check ${bad}/plan_huge_micro_batches.pbtxt)
pw_expect_error(size_schedule_micro_batches "at most 65536 micro-batches (got 8000000)" ${out}/h5.pb
  opt ${bad}/train_pp2_unplanned.pbtxt
  -p "append-backward,split-program,schedule{kind=1f1b,micro-batches=8000000},insert-p2p"
  -o ${out}/h5.pb)
# Fused jobs nested deeper than the loader allows: 40 levels (over its limit of 32) and
# 20000 (once a stack overflow in the text parser).
foreach(depth 40 20000)
  string(REPEAT "sub_jobs { kind: OVERLAP_F_B " ${depth} open)
  string(REPEAT "} " ${depth} close)
  file(WRITE ${out}/nested_${depth}.pbtxt
    "programs { name: \"main\" }\nmesh { pp: 1 }\nplan { num_micro_batches: 1 num_stages: 1 "
    "ranks { jobs { kind: OVERLAP_F_B ${open} ${close} } } }\n")
endforeach()
pw_expect_error(size_jobs_nested_40 "jobs nested more than 32 deep" ${out}/h6.pb
  opt ${out}/nested_40.pbtxt -p dce -o ${out}/h6.pb)
pw_expect_error(size_jobs_nested_20000 "malformed module text" - inspect ${out}/nested_20000.pbtxt)

# --- One validation: check, inspect, sim, run and opt accept and refuse the same modules.
set(plan_cases
  "missing_program|program 'stage0_forwards' does not exist"
  "zero_micro_batches|plan runs 0 micro-batches"
  "bad_peer|peer 99 is not another pipeline rank"
  "mesh_mismatch|plan has job lists for 2 pipeline ranks but the mesh has pp=3"
  "zero_stages|plan has 0 stages"
  "forward_runs_optimizer|runs program 'stage0_optimizer' of kind optimizer"
  "duplicated_job|1F0"
  "missing_backward|sends before its backward 1B1"
  "unknown_stream|unknown stream type 'gpu_copy'")
foreach(case ${plan_cases})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 text)
  set(file ${bad}/plan_${name}.pbtxt)
  pw_expect_error(plan_${name}_check "${text}" - check ${file})
  pw_expect_error(plan_${name}_inspect "${text}" - inspect ${file})
  pw_expect_error(plan_${name}_sim "${text}" ${out}/plan_${name}.json
    sim ${file} --trace ${out}/plan_${name}.json)
  pw_expect_error(plan_${name}_run "${text}" - run ${file} --nproc 2 --steps 1)
  pw_expect_error(plan_${name}_opt "${text}" ${out}/plan_${name}.pb
    opt ${file} -p dce -o ${out}/plan_${name}.pb)
endforeach()
# Stage numbers read from program names: negative (once SIGSEGV) or not a number (once an
# uncaught 'stoi').
pw_expect_error(stage_number_negative "program 'stage-7_forward' is not named stage<N>_<kind>"
  ${out}/h17.pb opt ${bad}/split_negative_stage.pbtxt -p "schedule{kind=1f1b,micro-batches=2}"
  -o ${out}/h17.pb)
pw_expect_error(stage_number_not_a_number "program 'stagex_forward' is not named stage<N>_<kind>"
  ${out}/h18.pb opt ${bad}/split_unnumbered_stage.pbtxt -p "schedule{kind=1f1b,micro-batches=2}"
  -o ${out}/h18.pb)
pw_expect_error(verify_reshape_overflow "has more elements than an int64 counts" -
  inspect ${bad}/reshape_overflow.pbtxt)
pw_expect_error(verify_duplicated_slot "input slot 'Y' is given twice" -
  inspect ${bad}/duplicated_slot.pbtxt)
pw_expect_error(verify_duplicated_slot_opt "input slot 'Y' is given twice" ${out}/h7.pb
  opt ${bad}/duplicated_slot.pbtxt -p dce -o ${out}/h7.pb)
pw_expect_error(verify_bad_event_ref "event reference 'ready@+x'" - inspect ${bad}/op_bad_event_ref.pbtxt)
pw_expect_error(verify_bad_event_ref_check "event reference 'ready@+x'" -
  check ${bad}/op_bad_event_ref.pbtxt)
pw_expect_error(verify_unknown_stream_op "unknown stream type 'gpu_copy'" -
  check ${bad}/op_unknown_stream.pbtxt)
pw_expect_error(verify_empty_costs "the cost table is empty" ${out}/h8.json
  sim ${bad}/train_good.pbtxt --costs ${bad}/empty_costs.pbtxt --trace ${out}/h8.json)

# --- Outputs: never one of the inputs (also through a link), several committed together.
configure_file(${bad}/train_good.pbtxt ${out}/own_input.pbtxt COPYONLY)
pw_expect_error(output_profile_over_its_module "is the input" ${out}/own_input.pbtxt
  profile ${out}/own_input.pbtxt -o ${out}/own_input.pbtxt --repeat 1)
pw_expect_error(output_opt_over_its_module "is the input" ${out}/own_input.pbtxt
  opt ${out}/own_input.pbtxt -p dce -o ${out}/own_input.pbtxt)
file(CREATE_LINK ${out}/own_input.pbtxt ${out}/own_input_link.pbtxt SYMBOLIC)
pw_expect_error(output_opt_through_a_link "is the input" ${out}/own_input.pbtxt
  opt ${out}/own_input.pbtxt -p dce -o ${out}/own_input_link.pbtxt)
pw_expect_error(output_sim_over_its_costs "is the input" ${bad}/costs_cpu.pbtxt
  sim ${bad}/train_good.pbtxt --costs ${bad}/costs_cpu.pbtxt --trace ${bad}/costs_cpu.pbtxt)
pw_expect_error(output_sim_second_output_missing_folder "does not exist" ${out}/h9.json
  sim ${bad}/train_good.pbtxt --trace ${out}/h9.json --svg ${out}/missing/x.svg)
pw_expect_error(output_sim_same_file_twice "is written twice" ${out}/h10.json
  sim ${bad}/train_good.pbtxt --trace ${out}/h10.json --svg ${out}/h10.json)
configure_file(${PROJECT_SOURCE_DIR}/tests/planning/data/send_recv_2rank.csv
  ${out}/own_schedule.csv COPYONLY)
pw_expect_error(output_schedule_over_its_csv "is the input" ${out}/own_schedule.csv
  schedule --kind csv --file ${out}/own_schedule.csv --format csv -o ${out}/own_schedule.csv)
configure_file(${bad}/train_pp2_unplanned.pbtxt ${out}/own_model.pbtxt COPYONLY)
pw_expect_error(output_schedule_over_its_model "is the input" ${out}/own_model.pbtxt
  schedule --kind 1f1b --stages 2 --micro-batches 4 --model ${out}/own_model.pbtxt
  -o ${out}/own_model.pbtxt)
file(MAKE_DIRECTORY ${out}/a_folder.pb)
pw_expect_error(output_is_a_folder "is a folder" - opt ${bad}/good.pbtxt -p dce -o ${out}/a_folder.pb)

# --- Exceptions and run directories: a file where a folder belongs is one line, exit 1.
file(WRITE ${out}/a_file "not a folder\n")
pw_expect_error(run_dir_is_a_file "run directory ${out}/a_file cannot be created" -
  run ${plan} --nproc 2 --steps 1 --run-dir ${out}/a_file)
pw_expect_error(save_params_under_a_file "filesystem error" -
  run ${plan} --nproc 2 --steps 1 --save-params ${out}/a_file/params)
# A run directory belongs to one run: while another process holds it, a run is refused
# at once (flock(1) holds the lock here as a running launcher would).
file(MAKE_DIRECTORY ${out}/busy_run_dir)
add_test(NAME cli.run_dir_in_use COMMAND flock ${out}/busy_run_dir/lock ${expect}
  "run directory ${out}/busy_run_dir is in use by another run" - --
  ${pw} run ${plan} --nproc 2 --steps 1 --run-dir ${out}/busy_run_dir)
set_tests_properties(cli.run_dir_in_use PROPERTIES LABELS cli TIMEOUT 30)
# A store belongs to one run: a rank started by hand (run-parallel --rank) in the store of
# a failed run is refused instead of repeating that run's abort notice, and one started in
# the store of a finished run instead of joining its stale entries. train_good cannot train
# on the executor (no token input), which makes the failed run; a tiny GPT the finished one.
add_test(NAME cli.hand_rank_failed_run COMMAND sh -c
  "rm -rf ${out}/failed_store && exec ${pw} run-parallel ${bad}/train_good.pbtxt --rank 0 --world-size 1 --store ${out}/failed_store")
set_tests_properties(cli.hand_rank_failed_run PROPERTIES LABELS cli WILL_FAIL TRUE
  FIXTURES_SETUP failed_store)
pw_expect_error(store_of_a_failed_run
  "holds the abort notice of a run ('rank 0 failed: module input 'tokens' must be" -
  run-parallel ${bad}/train_good.pbtxt --rank 0 --world-size 1 --store ${out}/failed_store)
add_test(NAME cli.hand_rank_gpt COMMAND ${pw} build-model gpt --layers 1 --hidden 16 --heads 2
  --seq 8 --vocab 32 -o ${out}/hand_rank_gpt.pb)
add_test(NAME cli.hand_rank_finished_run COMMAND sh -c
  "rm -rf ${out}/finished_store && exec ${pw} run-parallel ${out}/hand_rank_gpt.pb --rank 0 --world-size 1 --store ${out}/finished_store")
set_tests_properties(cli.hand_rank_gpt PROPERTIES LABELS cli FIXTURES_SETUP hand_rank_gpt)
set_tests_properties(cli.hand_rank_finished_run PROPERTIES LABELS cli
  PASS_REGULAR_EXPRESSION "step 1 loss" FIXTURES_REQUIRED hand_rank_gpt
  FIXTURES_SETUP finished_store)
pw_expect_error(store_of_a_finished_run "already has a rank 0 (host and pid: " -
  run-parallel ${out}/hand_rank_gpt.pb --rank 0 --world-size 1 --store ${out}/finished_store)
set_tests_properties(cli.store_of_a_failed_run PROPERTIES FIXTURES_REQUIRED failed_store)
set_tests_properties(cli.store_of_a_finished_run PROPERTIES
  FIXTURES_REQUIRED "hand_rank_gpt;finished_store")

# --- Sizes the simulator meets: a 96 TiB parameter (below the 2^50-byte tensor limit) is
# refused in one line before anything is simulated, on a device with known memory (once it
# made a step of days, whose short ops after it never ended). A device spec without memory
# (capacity 0) still simulates it, within 30 s.
foreach(device cpu h100)
  pw_expect_error(sim_96tib_parameter_${device} "of parameters and optimizer state alone" -
    sim ${bad}/parameter_96tib.pbtxt --device ${device} --p2p rendezvous
    --pipeline "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p")
endforeach()
add_test(NAME cli.sim_96tib_parameter_unknown_memory COMMAND ${pw} sim
  ${bad}/parameter_96tib.pbtxt --device ${bad}/device_without_memory.pbtxt --p2p rendezvous
  --pipeline "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p")
set_tests_properties(cli.sim_96tib_parameter_unknown_memory PROPERTIES LABELS cli TIMEOUT 30
  PASS_REGULAR_EXPRESSION "step time +[0-9]+\\.[0-9]+ ms")

# --- Faults under `run --nproc 4`: a stopped rank is named by its peers' heartbeat watch
# (slow: it waits out the watch), a killed one by the launcher, each within 60 s.
add_test(NAME cli.fault_plan_gpt COMMAND ${pw} opt ${ab_gpt} -p ${ab_plan} -o ${out}/fault_gpt.pb)
set_tests_properties(cli.fault_plan_gpt PROPERTIES LABELS processes FIXTURES_REQUIRED ab_gpt
  FIXTURES_SETUP fault_gpt)
foreach(fault stop kill)
  add_test(NAME cli.rank_${fault}_named COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rank_fault_test.sh
    ${pw} ${out}/fault_gpt.pb ${out}/fault_${fault} ${fault} 2)
  set_tests_properties(cli.rank_${fault}_named PROPERTIES LABELS processes TIMEOUT 180
    FIXTURES_REQUIRED fault_gpt)
endforeach()
set_tests_properties(cli.rank_stop_named PROPERTIES LABELS slow)
# A run directory reused after a finished run: its old store is cleared, the run trains.
foreach(pass 1 2)
  add_test(NAME cli.run_dir_reused_${pass} COMMAND ${pw} run ${out}/fault_gpt.pb --nproc 4
    --steps 1 --run-dir ${out}/reused_run_dir)
  set_tests_properties(cli.run_dir_reused_${pass} PROPERTIES LABELS processes TIMEOUT 120
    FIXTURES_REQUIRED fault_gpt PASS_REGULAR_EXPRESSION "step 1 loss")
endforeach()
set_tests_properties(cli.run_dir_reused_1 PROPERTIES FIXTURES_SETUP reused_run_dir)
set_tests_properties(cli.run_dir_reused_2 PROPERTIES FIXTURES_REQUIRED "fault_gpt;reused_run_dir")
