// Shared by the distributed test binaries (tests/distributed_main.cpp starts the runtime):
// every rank runs every test and asserts; failures on any rank fail the mpirun job.
#pragma once

#include <memory>

#include "megatron/comm/process_group.h"

namespace megatron::testing {

// The world group of this test process (rank 0 of 1 when not under mpirun).
std::shared_ptr<comm::ProcessGroup> world();

}  // namespace megatron::testing

// Skips the current test unless the world has at least n ranks (or exactly n with _EQ).
#define MEGATRON_REQUIRE_WORLD_SIZE(n)            \
  if (::megatron::testing::world()->size() < (n)) \
  GTEST_SKIP() << "needs " << (n) << " ranks, have " << ::megatron::testing::world()->size()
