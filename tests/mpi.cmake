# Distributed equivalence under mpirun (Open MPI; --oversubscribe: 8 ranks on 2 cores).
add_executable(mpi_dist ${CMAKE_SOURCE_DIR}/tests/mpi_dist.c)
target_link_libraries(mpi_dist PRIVATE longctx_lib)
foreach(np 1 2 4 8)
  add_test(NAME mpi_dist_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${np} $<TARGET_FILE:mpi_dist> ${np})
  set_tests_properties(mpi_dist_np${np} PROPERTIES LABELS mpi TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
