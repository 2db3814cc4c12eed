# Every tests/test_*.c is one test binary. Single-process tests carry the label "unit"
# (run under the sanitizer build too); MPI tests are registered in tests/mpi.cmake.
file(GLOB LC_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.c)
# (test_cuda_emu is built by tests/cuda_emu.cmake: it needs the host C++ compiler.)
list(FILTER LC_TEST_SOURCES EXCLUDE REGEX "/test_cuda_emu\\.c$")
# (test_memplan, the heaviest, shrinks its shapes in unoptimised builds to stay quick.)
foreach(src ${LC_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE longctx_lib)
  target_compile_definitions(${name} PRIVATE LC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 900
    ENVIRONMENT "OMP_NUM_THREADS=2")
endforeach()
include(${CMAKE_SOURCE_DIR}/tests/mpi.cmake)
include(${CMAKE_SOURCE_DIR}/tests/cuda_emu.cmake)
if(EXISTS ${CMAKE_SOURCE_DIR}/tests/cli.cmake)
  include(${CMAKE_SOURCE_DIR}/tests/cli.cmake)
endif()
# test_gemm exits 77 on a CPU without AVX512_BF16: reported as skipped, not passed.
set_tests_properties(test_gemm PROPERTIES SKIP_RETURN_CODE 77)
# test_cuda (label gpu): the CUDA backend against the CPU; exits 77 (skipped) without a
# CUDA backend or device, so it is never counted as passed where it did not run.
set_tests_properties(test_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
# The layer order of DESIGN.md: no include under src/ points to a folder above its own.
add_test(NAME check_layers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_layers.sh ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(check_layers PROPERTIES LABELS unit)
# test_arena sees the arena's system allocations (header + payload must fit each block).
target_link_options(test_arena PRIVATE "-Wl,--wrap=posix_memalign")
