# megatron_add_test(name SOURCES ... LABELS ... [MPI_RANKS n ...] [TORCHRUN_RANKS n ...])
#   Builds a gtest binary. Without MPI_RANKS it is one CTest test; with it the binary runs as one
#   CTest test per rank count under mpirun, every rank asserting (n = 0: one process started
#   without any launcher). TORCHRUN_RANKS: the same under `torchrun --no-python` (Gloo builds).
set(MEGATRON_MPIEXEC_FLAGS --allow-run-as-root --oversubscribe --bind-to none
    CACHE STRING "Flags for mpirun in the distributed tests")

# Sanitized builds (MEGATRON_SANITIZE, or MEGATRON_FUZZ, unoptimised) run several times slower.
if(MEGATRON_SANITIZE OR MEGATRON_FUZZ)
  set(MEGATRON_SINGLE_TEST_TIMEOUT 900)
else()
  set(MEGATRON_SINGLE_TEST_TIMEOUT 120)
endif()

function(megatron_add_test name)
  cmake_parse_arguments(arg "" "" "SOURCES;LABELS;MPI_RANKS;TORCHRUN_RANKS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE megatron::megatron GTest::gtest GTest::gmock)
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests")
  megatron_use_library_pch(${name})
  if(NOT arg_MPI_RANKS)
    # One CTest test per binary: every process start loads LibTorch, so per-case processes
    # (gtest_discover_tests) would cost more than the tests themselves.
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
    add_test(NAME ${name} COMMAND ${name} --gtest_color=no)
    set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}" TIMEOUT 300)
    if(MEGATRON_SANITIZE OR MEGATRON_FUZZ)
      set_tests_properties(${name} PROPERTIES TIMEOUT 900)
    endif()
    return()
  endif()
  target_sources(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests/distributed_main.cpp")
  if(MEGATRON_WITH_GLOO)
    foreach(n IN LISTS arg_TORCHRUN_RANKS)
      # --standalone: a free port per run, so that tests running side by side do not meet.
      add_test(NAME ${name}.torchrun${n}
               COMMAND "${MEGATRON_PYTHON_EXECUTABLE}" -m torch.distributed.run --standalone --nproc-per-node ${n}
                       --no-python $<TARGET_FILE:${name}>)
      # TMPDIR: torchrun's own folders (torchelastic_*) stay in the build tree, not in /tmp.
      set(_tmp "${CMAKE_CURRENT_BINARY_DIR}/${name}.torchrun${n}.tmp")
      file(MAKE_DIRECTORY "${_tmp}")
      set_tests_properties(${name}.torchrun${n} PROPERTIES LABELS "distributed;${arg_LABELS}" TIMEOUT 180
                           PROCESSORS 2 ENVIRONMENT "TMPDIR=${_tmp}")
    endforeach()
  endif()
  foreach(n IN LISTS arg_MPI_RANKS)
    # Without mpirun, a one-rank run is the launcher-less single process (unless that is listed
    # too); runs of more ranks need mpirun.
    set(_single OFF)
    if(n EQUAL 0 OR (n EQUAL 1 AND NOT MEGATRON_WITH_MPI AND NOT "0" IN_LIST arg_MPI_RANKS))
      set(_single ON)
    endif()
    if(NOT MEGATRON_WITH_MPI AND NOT _single)
      continue()
    endif()
    if(_single)
      add_test(NAME ${name}.single COMMAND $<TARGET_FILE:${name}>)
      set_tests_properties(${name}.single PROPERTIES LABELS "unit;${arg_LABELS}" TIMEOUT ${MEGATRON_SINGLE_TEST_TIMEOUT})
      continue()
    endif()
    add_test(NAME ${name}.np${n}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MEGATRON_MPIEXEC_FLAGS} -np ${n} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}.np${n} PROPERTIES LABELS "distributed;${arg_LABELS}" TIMEOUT 180
                         PROCESSORS 2)
  endforeach()
endfunction()
