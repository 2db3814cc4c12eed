# Distributed equivalence under mpirun (Open MPI; --oversubscribe: 8 ranks on 2 cores).
# Timeouts near 3x the measured time on a quiet machine (np 1/2/4/8: 1.4/15/27/~60 s on 2 cores
# of a Zen 4, with the Qwen2/Qwen3 cases and the QLoRA cases on both GEMM paths; np 8 took 90 s
# under a load of 20): a failed check aborts the job at once (tests/mpi_dist.c), so a timeout
# means a hang, found in minutes.
add_executable(mpi_dist ${CMAKE_SOURCE_DIR}/tests/mpi_dist.c)
target_link_libraries(mpi_dist PRIVATE longctx_lib)
foreach(np 1 2 4 8)
  add_test(NAME mpi_dist_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${np} $<TARGET_FILE:mpi_dist> ${np})
  if(np EQUAL 8)
    set(t 180)
  else()
    set(t 90)
  endif()
  set_tests_properties(mpi_dist_np${np} PROPERTIES LABELS mpi TIMEOUT ${t}
    ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
# The harness itself: the last of 2 ranks fails a check while rank 0 waits in a barrier;
# the job must end at once (MPI_Abort) naming the check, not at the timeout.
add_test(NAME mpi_dist_abort
  COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np 2 $<TARGET_FILE:mpi_dist> 2 --planted-failure)
set_tests_properties(mpi_dist_abort PROPERTIES LABELS mpi TIMEOUT 20
  PASS_REGULAR_EXPRESSION "FAIL [^\n]*mpi_dist.c:[0-9]+: planted failure[^\n]*\nmpi_dist: rank 1 of 2: the check at [^\n]*mpi_dist.c:[0-9]+ \\(above\\) failed; ending every rank now"
  ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1")
# 3 ranks (an odd world: sequence-parallel layouts skipped, tests/mpi_dist.c): only the ZeRO-3
# QLoRA cases with a zero group of 3, where a unit padded to 64 bytes alone does not split
# into whole shards (the layout pads units to 64 Z bytes), and the optimizer's segments at
# Z = 3 (~1.5 s; the whole program at 3 ranks takes ~10 s: MPI_DIST_ONLY= runs it all).
add_test(NAME mpi_dist_np3
  COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np 3 $<TARGET_FILE:mpi_dist> 3)
set_tests_properties(mpi_dist_np3 PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1;MPI_DIST_ONLY=qlora-z3,qlora-z3-bf16,qlora-z3-vocab,segments")
