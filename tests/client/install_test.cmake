# ctest script: install Felix's `client` component into a fresh prefix, then configure, build
# and run an outside project that uses find_package(Felix REQUIRED) and Felix::client.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component client)
if(NOT EXISTS ${prefix}/include/felix/client.h)
  message(FATAL_ERROR "felix/client.h was not installed")
endif()
if(EXISTS ${prefix}/include/transport OR EXISTS ${prefix}/include/wire)
  message(FATAL_ERROR "private headers were installed")
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_C_COMPILER=${CC}
  "-DCMAKE_CXX_FLAGS=${EXTRA_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/felix_consumer)
message(STATUS "consumer built and ran against ${prefix}")
