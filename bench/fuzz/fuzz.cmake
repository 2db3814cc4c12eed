# The libFuzzer targets (bench/fuzz/fuzz_*.c, one per reader): in a clang tree configured
# with LC_FUZZ=ON, the library's own objects are compiled with the fuzzer's coverage
# instrumentation and ASan/UBSan, and each target links them with libFuzzer. No source
# list here: whatever the library holds, the targets link. `cmake --build . --target fuzz`.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "LC_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
endif()
set(LC_FUZZ_SAN -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# Every library source is instrumented but the kernels' folders (no reader lives there, and
# ASan makes clang take minutes over each flash-attention variant): they are linked as they are.
get_target_property(LC_FUZZ_LIB_SOURCES longctx_lib SOURCES)
list(FILTER LC_FUZZ_LIB_SOURCES EXCLUDE REGEX "(^|/)src/(ops|attn|backend|comm)/")
set_property(SOURCE ${LC_FUZZ_LIB_SOURCES} APPEND PROPERTY COMPILE_OPTIONS -fsanitize=fuzzer-no-link ${LC_FUZZ_SAN})
target_link_options(longctx_lib PUBLIC -fsanitize=address,undefined)
file(GLOB LC_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.c)
add_custom_target(fuzz)
foreach(src ${LC_FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(${name} PRIVATE -Wno-missing-field-initializers)
  target_compile_definitions(${name} PRIVATE _POSIX_C_SOURCE=200809L LC_FUZZ_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer ${LC_FUZZ_SAN})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE longctx_lib)
  add_dependencies(fuzz ${name})
endforeach()
