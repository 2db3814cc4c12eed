# End-to-end tests of the longctx program (exit codes, messages, log files). Timeouts near
# 3x the measured time on 2 idle cores (cli_train 40 s, and 76-94 s on a Zen 3 with the
# copy-task checks: 240; cli_checkpoint 33 s, cli_robust 55 s; demo_passkey 150 s, but 372 s
# on cores busy with another build: 600); the MPI runs inside have their own `timeout`, so a
# hang fails in minutes.
add_test(NAME cli_train COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_test.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_train PROPERTIES LABELS cli TIMEOUT 240 ENVIRONMENT "OMP_NUM_THREADS=2")
add_test(NAME cli_checkpoint COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_checkpoint.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_checkpoint PROPERTIES LABELS cli TIMEOUT 100)
# The README's demo (tools/demo.sh): >= 90% held-out passkey accuracy on 2 ranks (~2 min).
add_test(NAME demo_passkey COMMAND bash ${CMAKE_SOURCE_DIR}/tests/demo_test.sh ${CMAKE_BINARY_DIR} ${MPIEXEC_EXECUTABLE})
set_tests_properties(demo_passkey PROPERTIES LABELS demo TIMEOUT 600
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# Long jobs: dead and stalled ranks, pre-emption, non-finite steps, damaged checkpoints,
# threads per rank (~1 min).
add_test(NAME cli_robust COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_robust.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_robust PROPERTIES LABELS cli TIMEOUT 180 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# Model families (Qwen2, Qwen3, RoPE scalings) and --rope-theta / --rope-scaling (~10 s).
add_test(NAME cli_families COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_families.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_families PROPERTIES LABELS cli TIMEOUT 90 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# Text in, text out: eval (and the tokenizer's commands as they land) (~5 s).
add_test(NAME cli_text COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_text.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_text PROPERTIES LABELS cli TIMEOUT 60)
# Head-chunked Ulysses on 2 ranks: losses = unchunked, auto, bad values on every rank, plan (~15 s).
add_test(NAME cli_head_chunk COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_head_chunk.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_head_chunk PROPERTIES LABELS cli TIMEOUT 90 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# The time model through the program: calibrate, train's prediction, plan --auto/--longest/--hardware (~30 s).
add_test(NAME cli_plan COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_plan.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_plan PROPERTIES LABELS cli TIMEOUT 180 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# LoRA through the program: PEFT files, resume (also on 2 ranks), --lora-from, merge, eval --adapter (~20 s).
add_test(NAME cli_lora COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_lora.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_lora PROPERTIES LABELS cli TIMEOUT 120 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# --offload-optimizer on the private device: the same bits as without on 1, 2 and 4 ranks,
# the device's peak, resume, plan, bad combinations on every rank (~40 s).
add_test(NAME cli_offload COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_offload.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_offload PROPERTIES LABELS cli TIMEOUT 180 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# The process keeps its name after the OpenBLAS core-type re-execution, under mpirun (~3 s).
add_test(NAME cli_procname COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_procname.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_procname PROPERTIES LABELS cli TIMEOUT 60 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME cli_chat COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_chat.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_chat PROPERTIES LABELS cli TIMEOUT 60 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
# plan --offload-optimizer's host side: bytes per rank and node against an independent
# count, layouts over the host memory dropped (~5 s).
add_test(NAME cli_plan_host COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_plan_host.sh $<TARGET_FILE:longctx> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_plan_host PROPERTIES LABELS cli TIMEOUT 120)
# tools/gpu_check.sh's stages dry-run on the private device: each within its budget, its rows
# printed as they come, one tarball of logs; a cut budget stops a stage in time (~45 s).
add_test(NAME gpu_check_dry COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu_check_dry.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(gpu_check_dry PROPERTIES LABELS cli TIMEOUT 400)
