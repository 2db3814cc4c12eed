# Every tests/test_*.c is one test binary. Single-process tests carry the label "unit"
# (run under the sanitizer build too); MPI tests are registered in tests/mpi.cmake.
file(GLOB LC_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.c)
# Heavy measurement tests may be listed here to run in the release tree only (label
# "slow", not "unit"). test_memplan shrinks its shapes in unoptimised builds instead.
set(LC_RELEASE_ONLY "")
foreach(src ${LC_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE longctx_lib)
  target_compile_definitions(${name} PRIVATE LC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(name IN_LIST LC_RELEASE_ONLY)
    set(lc_label slow)
  else()
    set(lc_label unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${lc_label} TIMEOUT 900
    ENVIRONMENT "OMP_NUM_THREADS=2")
endforeach()
include(${CMAKE_SOURCE_DIR}/tests/mpi.cmake)
if(EXISTS ${CMAKE_SOURCE_DIR}/tests/cli.cmake)
  include(${CMAKE_SOURCE_DIR}/tests/cli.cmake)
endif()
