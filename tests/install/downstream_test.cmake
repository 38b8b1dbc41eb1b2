# cmake -P script: install BUILD_DIR into WORK_DIR/prefix, build SOURCE_DIR against it, run it.
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "downstream test: ${step} failed (${rc}):\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(install ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
if(NOT EXISTS "${prefix}/lib/cmake/megatron_cpp/megatron_cppConfig.cmake" OR
   NOT EXISTS "${prefix}/lib/cmake/megatron_cpp/megatron_cppConfigVersion.cmake")
  message(FATAL_ERROR "downstream test: the install tree has no megatron_cppConfig.cmake + version file")
endif()
set(launcher "")
if(CCACHE)
  set(ENV{CCACHE_BASEDIR} "${WORK_DIR}")
  set(ENV{CCACHE_NOHASHDIR} "true")
  set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE}")
endif()
run(configure ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" ${launcher})
run(build ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
# The build tree is gone from the picture: the program must run from the installed library.
run(run "${WORK_DIR}/build/downstream")
if(NOT last_output MATCHES "megatron_cpp [0-9]+\\.[0-9]+\\.[0-9]+ on torch" OR
   NOT last_output MATCHES "sum of ones\\(3, 4\\) = 12")
  message(FATAL_ERROR "downstream test: unexpected output:\n${last_output}")
endif()
message(STATUS "downstream test passed:\n${last_output}")
