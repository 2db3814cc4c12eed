# End-to-end tests of the longctx program (exit codes, messages, log files).
add_test(NAME cli_train COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_test.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_train PROPERTIES LABELS cli TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
add_test(NAME cli_checkpoint COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_checkpoint.sh $<TARGET_FILE:longctx>)
set_tests_properties(cli_checkpoint PROPERTIES LABELS cli TIMEOUT 600)
