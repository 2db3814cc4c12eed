# test_cuda_emu: the CUDA backend's kernels (src/backend/cuda/*.cu) compiled by the host C++
# compiler against the CPU emulation of CUDA's execution model (src/backend/cuda/emu/) and run
# against the CPU backend. Needs neither nvcc nor a GPU nor the CUDA headers: built wherever
# GCC's C++ compiler is found (the shared-memory checks use GCC's -fsanitize=kernel-address
# hooks). Not in the sanitizer tree: the fibers switch stacks behind ASan's back (its stack
# bookkeeping reports false errors), and -fsanitize=address cannot be combined with the
# kernel-address instrumentation the race check uses.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER AND NOT LC_SANITIZE)
  enable_language(CXX)
endif()
if(CMAKE_CXX_COMPILER AND NOT LC_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(LC_EMU_DIR ${CMAKE_SOURCE_DIR}/src/backend/cuda/emu)
  # -ffp-contract=off: the _rn intrinsics stay separate IEEE operations (GNU C++ would fuse)
  set(LC_EMU_FLAGS -std=c++17 -O2 -g -ffp-contract=off -Wall -Wextra -Wno-unknown-pragmas)
  add_library(lc_cuda_emu_kern OBJECT ${LC_EMU_DIR}/kern_elem.cpp ${LC_EMU_DIR}/kern_xent.cpp
              ${LC_EMU_DIR}/kern_flash.cpp ${LC_EMU_DIR}/kern_flash_ref.cpp ${LC_EMU_DIR}/kern_flash_simt.cpp
              ${LC_EMU_DIR}/kern_flash_mma.cpp ${CMAKE_SOURCE_DIR}/tests/cuda_emu_selftest.cpp)
  # every load and store of the kernels calls the emulation's shared-memory checks
  target_compile_options(lc_cuda_emu_kern PRIVATE ${LC_EMU_FLAGS} -fsanitize=kernel-address
    --param=asan-instrumentation-with-call-threshold=0 --param=asan-stack=0 --param=asan-globals=0)
  target_compile_definitions(lc_cuda_emu_kern PRIVATE LCC_EMU=1)
  target_include_directories(lc_cuda_emu_kern BEFORE PRIVATE ${LC_EMU_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  add_executable(test_cuda_emu ${CMAKE_SOURCE_DIR}/tests/test_cuda_emu.c ${LC_EMU_DIR}/cuda_emu.cpp
                 $<TARGET_OBJECTS:lc_cuda_emu_kern>)
  target_compile_options(test_cuda_emu PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${LC_EMU_FLAGS}>")
  target_compile_definitions(test_cuda_emu PRIVATE LCC_EMU=1)
  target_include_directories(test_cuda_emu BEFORE PRIVATE ${LC_EMU_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(test_cuda_emu PRIVATE longctx_lib OpenMP::OpenMP_C)
  set_target_properties(test_cuda_emu PROPERTIES LINKER_LANGUAGE CXX)
  add_test(NAME test_cuda_emu COMMAND test_cuda_emu)
  set_tests_properties(test_cuda_emu PROPERTIES LABELS emu TIMEOUT 300)
else()
  message(STATUS "longctx: test_cuda_emu not built (needs GCC's C++ compiler, and not the sanitizer tree)")
endif()
