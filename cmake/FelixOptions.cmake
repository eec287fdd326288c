# Compiler flags shared by every Felix target (through the felix_flags interface target).
add_library(felix_flags INTERFACE)
target_compile_options(felix_flags INTERFACE -Wall -Wextra -Werror -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # g++ 12 warns inside <functional>/<variant>/<string> on valid code at -O2 (known false
  # positives of its middle-end: maybe-uninitialized, stringop-overflow, restrict).
  target_compile_options(felix_flags INTERFACE -Wno-maybe-uninitialized -Wno-stringop-overflow
                                               -Wno-restrict)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Lock annotations (common/mutex.h: GUARDED_BY, REQUIRES) are checked by every clang build.
  target_compile_options(felix_flags INTERFACE -Wthread-safety)
endif()
if(FELIX_FAULT_INJECTION)
  target_compile_definitions(felix_flags INTERFACE FELIX_FAULT_INJECTION=1)
endif()

if(FELIX_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(FELIX_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FELIX_FUZZ needs clang (use the 'fuzz' preset)")
  endif()
  # Everything is instrumented for coverage; only fuzz targets link the libFuzzer main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
