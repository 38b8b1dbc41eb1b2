// DistributedDataParallel at DP 2 on two linear layers driven by hand: no_sync() holds the
// buckets whose gradients are complete until it ends; finish_grad_sync() leaves the average of the
// ranks' gradients, computed apart here, and does nothing more when called again.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed_test.h"
#include "megatron/distributed/distributed_data_parallel.h"

namespace megatron::distributed {
namespace {

TEST(DistributedDataParallel, NoSyncHoldsCompleteBucketsUntilItEnds) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto dp = testing::world();
  const std::string rank = "rank " + std::to_string(dp->rank());
  at::manual_seed(5);  // the same weights on both ranks
  at::Tensor w1 = at::randn({64, 64}).requires_grad_(), w2 = at::randn({64, 64}).requires_grad_();
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 4096;  // one bucket per weight
  DistributedDataParallel ddp({{"first.weight", w1}, {"last.weight", w2}}, config, dp);
  ASSERT_EQ(ddp.grad_bucket_count(), 2) << rank;

  at::manual_seed(100 + dp->rank());  // each rank its own data
  const at::Tensor x = at::randn({8, 64});
  auto loss = [&](const at::Tensor& a, const at::Tensor& b) { return at::mm(at::mm(x, a.t()).tanh(), b.t()).sum(); };
  // This rank's gradients, apart from the wrapper, then their average over the ranks.
  at::Tensor c1 = w1.detach().clone().requires_grad_(), c2 = w2.detach().clone().requires_grad_();
  loss(c1, c2).backward();
  at::Tensor want1 = c1.grad().clone(), want2 = c2.grad().clone();
  dp->all_reduce(want1, comm::ReduceOp::kAvg);
  dp->all_reduce(want2, comm::ReduceOp::kAvg);

  ddp.zero_grad_buffer();
  ddp.start_grad_sync(1);  // this backward pass completes every gradient
  {
    auto hold = ddp.no_sync();
    loss(w1, w2).backward();
    EXPECT_EQ(ddp.grad_buckets_launched(), 0) << "launched under no_sync, " << rank;
  }
  EXPECT_EQ(ddp.grad_buckets_launched(), 2) << "not launched when no_sync ended, " << rank;
  ddp.finish_grad_sync();
  EXPECT_TRUE(at::allclose(w1.grad(), want1, 1e-6, 1e-7)) << rank;
  EXPECT_TRUE(at::allclose(w2.grad(), want2, 1e-6, 1e-7)) << rank;
  const at::Tensor averaged = w1.grad().clone();
  ddp.finish_grad_sync();  // already synced: no second average
  EXPECT_TRUE(at::equal(w1.grad(), averaged)) << rank;
}

}  // namespace
}  // namespace megatron::distributed
