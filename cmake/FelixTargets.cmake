# Helpers that keep each subsystem's CMakeLists.txt to a few lines.

# felix_library(NAME <name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# Defines target felix_<name>; headers are included as "<name>/file.h" (src/ is on the path).
function(felix_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(felix_${ARG_NAME} STATIC ${ARG_SOURCES})
  target_include_directories(felix_${ARG_NAME} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
  target_link_libraries(felix_${ARG_NAME} PUBLIC ${ARG_DEPS} PRIVATE felix_flags ${ARG_PRIVATE_DEPS})
endfunction()

# felix_test(NAME <name> SOURCES ... [DEPS ...] [LABELS ...])
# One GoogleTest binary registered as one ctest test (keeps discovery cheap under ASan).
function(felix_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE felix_flags ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  set_tests_properties(${ARG_NAME} PROPERTIES
    ENVIRONMENT "FELIX_BINARY_DIR=${PROJECT_BINARY_DIR};FELIX_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
    LABELS "${ARG_LABELS}" TIMEOUT 600)
endfunction()

# felix_fuzzer(NAME <name> SOURCES ... [DEPS ...])
# A libFuzzer target plus a ctest smoke run (label "fuzz") over its seed corpus fuzz/corpus/<name>.
function(felix_fuzzer)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE felix_flags ${ARG_DEPS})
  target_link_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer)
  set(corpus ${PROJECT_SOURCE_DIR}/fuzz/corpus/${ARG_NAME})
  set(work ${PROJECT_BINARY_DIR}/fuzz-work/${ARG_NAME})
  file(MAKE_DIRECTORY ${work})
  if(NOT DEFINED FELIX_FUZZ_SMOKE_SECONDS)
    set(FELIX_FUZZ_SMOKE_SECONDS 5)
  endif()
  add_test(NAME fuzz_smoke_${ARG_NAME}
    COMMAND ${ARG_NAME} -max_total_time=${FELIX_FUZZ_SMOKE_SECONDS} -print_final_stats=1
            -rss_limit_mb=2048 -artifact_prefix=${work}/ ${work} ${corpus})
  set_tests_properties(fuzz_smoke_${ARG_NAME} PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()

# felix_benchmark(NAME <name> SOURCES ... [DEPS ...]): a Google Benchmark binary (never a test).
function(felix_benchmark)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE felix_flags ${ARG_DEPS} benchmark::benchmark)
endfunction()
