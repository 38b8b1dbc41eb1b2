// A 2-rank job in which rank 1 misbehaves (argv[1]: "dies" exits abruptly, "hangs" never joins)
// while rank 0 waits in an all_reduce. fault_scenario_test.cmake checks that the job ends with
// a clear message instead of hanging.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "megatron/comm/process_group.h"

int main(int argc, char** argv) {
  using namespace megatron::comm;
  const bool dies = argc > 1 && std::strcmp(argv[1], "dies") == 0;
  auto world = init_distributed(LauncherEnv::from_environment());
  if (world->rank() == 1) {
    if (dies) std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::minutes(10));
    return 0;
  }
  try {
    auto t = at::ones({16});
    world->all_reduce(t);
    std::printf("rank 0: all_reduce unexpectedly completed\n");
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s\n", e.what_without_backtrace());
    std::fflush(stderr);
    abort_job(2);
    return 2;
  }
}
