# cmake -P script: runs fault_scenario under mpirun and checks the job ends, non-zero, in time,
# saying what went wrong. Arguments: MPIEXEC, FLAGS (;-list), PROGRAM, MODE (dies | hangs).
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS=3
          ${MPIEXEC} ${FLAGS} -np 2 ${PROGRAM} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
message(STATUS "mode ${MODE}: exit ${rc} after ${elapsed} s\n${out}")
if(rc EQUAL 0 OR rc MATCHES "timeout")
  message(FATAL_ERROR "the job did not fail cleanly (exit '${rc}')")
endif()
if(elapsed GREATER 60)
  message(FATAL_ERROR "the job took ${elapsed} s to end")
endif()
if(MODE STREQUAL "hangs" AND NOT out MATCHES
   "all_reduce\\(sum\\) on group 'world' timed out after 3 s at group rank 0 \\(world rank 0\\), waiting on world ranks \\[1\\]")
  message(FATAL_ERROR "the timeout message does not name the operation, group, rank and peers")
endif()
# The watchdog's MPI_Abort code (megatron/program.h's kCollectiveFailed) is what mpirun returns.
if(MODE STREQUAL "hangs" AND NOT rc EQUAL 3)
  message(FATAL_ERROR "a collective timeout should end the job with exit 3, got ${rc}")
endif()
