// main() of the distributed test binaries: starts MPI, runs every test on every rank, lets only
// rank 0 print progress (other ranks print failures), and exits non-zero if any rank failed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "distributed_test.h"
#include "megatron/logging.h"

namespace megatron::testing {
namespace {
std::shared_ptr<comm::ProcessGroup> g_world;
}
std::shared_ptr<comm::ProcessGroup> world() {
  return g_world;
}
}  // namespace megatron::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto env = megatron::comm::LauncherEnv::from_environment();
  megatron::init_logging({env.rank, env.world_size, "warn"});
  megatron::comm::DistributedOptions options;
  // A test that leaves a peer waiting should fail in seconds, not in ten minutes.
  if (!std::getenv("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS")) options.timeout = std::chrono::seconds(60);
  megatron::testing::g_world = megatron::comm::init_distributed(env, options);

  if (env.rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Keep the failure messages of non-zero ranks, drop their progress lines.
    listeners.Release(listeners.default_result_printer());
    struct FailurePrinter : ::testing::EmptyTestEventListener {
      int rank;
      explicit FailurePrinter(int r) : rank(r) {}
      void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed())
          std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank, r.file_name(), r.line_number(), r.summary());
      }
    };
    listeners.Append(new FailurePrinter(env.rank));
  }
  int failed = RUN_ALL_TESTS();
  // Every rank reports its own result; mpirun exits non-zero if any rank does.
  int any_failed = failed;
  {
    auto flag = at::full({1}, failed ? 1 : 0, at::kInt);
    megatron::testing::g_world->all_reduce(flag, megatron::comm::ReduceOp::kMax);
    any_failed = flag.item<int>();
  }
  if (env.rank == 0 && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  megatron::testing::g_world.reset();
  return failed ? 1 : 0;
}
