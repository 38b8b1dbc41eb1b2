// init_distributed outside mpirun: the single-process world, and a torchrun-style job whose peers never
// arrive.
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

TEST(InitDistributed, TorchrunStyleCpuJobWhosePeersNeverComeEndsWithOneLine) {
  LauncherEnv env;
  env.launcher = Launcher::kTorchrun;
  env.rank = 0;
  env.world_size = 4;
  env.master_addr = "127.0.0.1";
  env.master_port = 29561;
  DistributedOptions options;
  options.timeout = std::chrono::seconds(2);
  const auto start = std::chrono::steady_clock::now();
  auto msg = error_of([&] { init_distributed(env, options); });
  const auto waited = std::chrono::steady_clock::now() - start;
  // Gloo builds wait at the store for the other three ranks, then say where and who is missing;
  // builds without Gloo refuse at once and send the job to mpirun.
  const bool waited_at_store = msg.find(
                                   "[comm] rank 0 waited 2 s at 127.0.0.1:29561 (MASTER_ADDR:MASTER_PORT) for ranks "
                                   "1, 2, 3 of WORLD_SIZE=4, which never came") != std::string::npos;
  const bool sent_to_mpirun = msg.find("launch it as `mpirun -np 4 ...`") != std::string::npos;
  EXPECT_TRUE(waited_at_store || sent_to_mpirun) << msg;
  EXPECT_LT(waited, std::chrono::seconds(30)) << msg;
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
