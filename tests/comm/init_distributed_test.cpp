// init_distributed outside mpirun: the single-process world, and the launches it must refuse.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "error_of.h"
#include "megatron/comm/process_group.h"

namespace megatron::comm {
namespace {

using testing::error_of;

TEST(InitDistributed, SingleProcessWorld) {
  auto world = init_distributed(LauncherEnv{});
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->rank(), 0);
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(world->timeout(), std::chrono::minutes(10));
  auto t = at::arange(4, at::kFloat);
  world->all_reduce(t, ReduceOp::kAvg);
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kFloat)));
  auto sub = world->new_group({0}, "self");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->size(), 1);
  world->barrier();
}

TEST(InitDistributed, TorchrunStyleCpuJobIsSentToMpirun) {
  LauncherEnv env;
  env.launcher = Launcher::kTorchrun;
  env.rank = 0;
  env.world_size = 4;
  env.master_addr = "localhost";
  env.master_port = 29500;
  auto msg = error_of([&] { init_distributed(env); });
  EXPECT_NE(msg.find("torchrun-style launch with WORLD_SIZE=4 for a CPU job"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mpirun -np 4"), std::string::npos) << msg;
}

TEST(InitDistributed, TimeoutFromEnvironment) {
  ::setenv("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS", "2.5", 1);
  auto world = init_distributed(LauncherEnv{});
  EXPECT_EQ(world->timeout(), std::chrono::milliseconds(2500));
  ::setenv("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS", "soon", 1);
  auto msg = error_of([] { init_distributed(LauncherEnv{}); });
  ::unsetenv("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS");
  EXPECT_NE(msg.find("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS='soon' is not a positive number"), std::string::npos) << msg;
}

}  // namespace
}  // namespace megatron::comm
