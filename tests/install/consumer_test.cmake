# Script mode: install, build the consumer against the install, run it.
set(work ${PW_BINARY_DIR}/install-test)
file(REMOVE_RECURSE ${work})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "failed (${code}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${PW_BINARY_DIR} --prefix ${work}/prefix)
run(${CMAKE_COMMAND} -S ${PW_SOURCE_DIR}/examples/consumer -B ${work}/build -G ${PW_GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix "-DCMAKE_CXX_FLAGS=${PW_CXX_FLAGS}")
run(${CMAKE_COMMAND} --build ${work}/build)
run(${work}/build/consumer)
# The embedding example: trains in-process, tunes a plan (pipeweave::search) and A/Bs it
# against 1F1B (pipeweave::ab), simulated and measured on rank processes of the installed
# pipeweave program.
run(${CMAKE_COMMAND} -S ${PW_SOURCE_DIR}/examples/embed -B ${work}/build-embed -G ${PW_GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix "-DCMAKE_CXX_FLAGS=${PW_CXX_FLAGS}")
run(${CMAKE_COMMAND} --build ${work}/build-embed)
run(${work}/build-embed/embed_example 8 ${work}/prefix/bin/pipeweave)
