// Sharded data parallelism (distributed/fsdp.h through DistributedDataParallel) on a small stack of
// units driven by hand as a model drives them: the steps of optim_grads and optim_grads_params
// against the unsharded optimizer on the same data, and when each unit's parameters and
// gradients exist.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed_test.h"
#include "megatron/optimizer/optimizer.h"
#include "wrapped_optimizer.h"

namespace opt = megatron::optimizer;
namespace distributed = megatron::distributed;
using megatron::testing::world;

namespace {

constexpr int kUnits = 3;
constexpr int64_t kWidth = 12, kBatch = 5, kMicroBatches = 2;

// A root parameter used at both ends (as a tied embedding is) around kUnits layers.
struct Net {
  at::Tensor root;
  std::vector<at::Tensor> weights;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  std::unique_ptr<opt::MegatronOptimizer> optimizer;
  std::shared_ptr<megatron::transformer::ParamGather> root_hooks;
  std::vector<std::shared_ptr<megatron::transformer::ParamGather>> hooks;

  // hooked: the stack calls the units' hooks, as a GPT model does.
  Net(bool shard_grads, bool shard_params, bool prefetch, bool hooked = true, bool overlap_param_gather = false) {
    at::manual_seed(11);  // the same initial weights on every rank and in every configuration
    root = (at::rand({kWidth}) + 0.5).requires_grad_(true);
    for (int i = 0; i < kUnits; ++i) weights.push_back((at::randn({kWidth, kWidth}) / 3).requires_grad_(true));
    std::vector<distributed::ModelParam> params{{"embedding.weight", root}};
    for (int i = 0; i < kUnits; ++i) {
      const std::string unit = "decoder.layers." + std::to_string(i);
      params.push_back({unit + ".weight", weights[i]});
      params.back().fsdp_unit = unit;
    }
    opt::OptimizerConfig config;
    config.optimizer = "sgd";
    config.lr = 0.1;
    distributed::DistributedDataParallelConfig ddp_config;
    ddp_config.use_distributed_optimizer = shard_grads || shard_params;
    ddp_config.data_parallel_sharding_strategy = shard_params  ? distributed::ShardingStrategy::kOptimGradsParams
                                                 : shard_grads ? distributed::ShardingStrategy::kOptimGrads
                                                               : distributed::ShardingStrategy::kNoShard;
    ddp_config.fsdp_prefetch = prefetch;
    ddp_config.overlap_grad_reduce = ddp_config.overlap_param_gather = overlap_param_gather;
    auto wrapped = megatron::testing::wrap(params, config, ddp_config, world());
    ddp = std::move(wrapped.ddp);
    optimizer = std::move(wrapped.optimizer);
    root_hooks = ddp->param_gather("");
    for (int i = 0; i < kUnits; ++i)
      hooks.push_back(hooked ? ddp->param_gather("decoder.layers." + std::to_string(i)) : nullptr);
  }

  // `inspect(i)` runs once unit i's parameters have been gathered for its forward.
  at::Tensor loss(const at::Tensor& x, const std::function<void(int)>& inspect = {}) {
    if (root_hooks) root_hooks->before_forward();
    at::Tensor h = x * root;
    for (int i = 0; i < kUnits; ++i) {
      if (hooks[i]) hooks[i]->before_forward();
      if (inspect) inspect(i);
      h = at::tanh(at::matmul(h, weights[i]));
      if (hooks[i]) hooks[i]->after_forward(h);
    }
    return (h * root).sum();
  }

  void step(int64_t iteration, const std::function<void(int)>& inspect = {}) {
    ddp->zero_grad_buffer();
    ddp->start_grad_sync(kMicroBatches);
    for (int64_t m = 0; m < kMicroBatches; ++m) {
      at::manual_seed(1000 * iteration + 10 * world()->rank() + m);  // each rank its own data
      torch::autograd::backward({loss(at::randn({kBatch, kWidth}), inspect) / kMicroBatches});
    }
    optimizer->step();
  }

  // Every parameter as it is now (gathered first under ZeRO-3).
  std::vector<at::Tensor> snapshot() {
    ddp->gather_params();
    std::vector<at::Tensor> out{root.detach().clone()};
    for (const auto& w : weights) out.push_back(w.detach().clone());
    ddp->release_params();
    return out;
  }
};

bool allocated(const at::Tensor& t) {
  return t.storage().nbytes() > 0;
}

void expect_same_training(bool shard_params) {
  Net plain(false, false, false), sharded(true, shard_params, true), unprefetched(true, shard_params, false);
  for (int64_t it = 0; it < 3; ++it) {
    plain.step(it);
    sharded.step(it);
    unprefetched.step(it);
  }
  const auto want = plain.snapshot(), got = sharded.snapshot(), got_unprefetched = unprefetched.snapshot();
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_TRUE(at::allclose(got[k], want[k], 1e-5, 1e-6)) << "parameter " << k << " on rank " << world()->rank();
    EXPECT_TRUE(at::equal(got_unprefetched[k], got[k])) << "parameter " << k << ": the prefetch changed a value";
  }
}

TEST(Fsdp, OptimGradsTrainsAsUnshardedDataParallelism) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  expect_same_training(false);
}

TEST(Fsdp, OptimGradsParamsTrainsAsUnshardedDataParallelism) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  expect_same_training(true);
}

TEST(Fsdp, ParametersExistOnlyAroundTheirUseAndTheNextIsGatheredAhead) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  for (bool prefetch : {true, false}) {
    Net net(true, true, prefetch);
    for (const auto& w : net.weights) EXPECT_FALSE(allocated(w)) << "a unit is whole before its first use";
    EXPECT_FALSE(allocated(net.root));
    EXPECT_EQ(net.optimizer->memory_report().params, 0);
    std::vector<std::vector<bool>> seen;  // per unit's forward: which units were whole
    std::vector<int64_t> gathers;         // and the gathers launched by then
    net.step(0, [&](int) {
      gathers.push_back(net.ddp->param_gathers());
      std::vector<bool> whole;
      for (const auto& w : net.weights) whole.push_back(allocated(w));
      seen.push_back(whole);
    });
    ASSERT_EQ(seen.size(), static_cast<size_t>(kUnits * kMicroBatches));
    for (int m = 0; m < kMicroBatches; ++m) {
      for (int i = 0; i < kUnits; ++i) {
        const auto& whole = seen[m * kUnits + i];
        EXPECT_TRUE(whole[i]) << "unit " << i << " runs its forward sharded";
        for (int j = 0; j < i; ++j) EXPECT_FALSE(whole[j]) << "unit " << j << " kept after its forward";
        if (i == 0) EXPECT_FALSE(whole[kUnits - 1]) << "the last unit kept after its backward";
        if (i == 0 && m == 0) EXPECT_EQ(gathers[0], prefetch ? 3 : 2) << "the root, unit 0 and (ahead) unit 1";
        if (i + 1 < kUnits) EXPECT_EQ(whole[i + 1], prefetch) << "unit " << i + 1 << " during unit " << i;
        for (int j = i + 2; j < kUnits; ++j) EXPECT_FALSE(whole[j]) << "unit " << j << " gathered too early";
      }
    }
    // Per micro-batch each unit is gathered for its forward and its backward, but the last one,
    // whose backward follows its forward; the root once a step.
    EXPECT_EQ(net.ddp->param_gathers(), (2 * kUnits - 1) * kMicroBatches + 1);
    for (const auto& w : net.weights) {
      EXPECT_FALSE(allocated(w)) << "a unit stays whole after the step";
      EXPECT_FALSE(allocated(w.grad())) << "a unit's whole gradient outlives the step";
    }
    EXPECT_FALSE(allocated(net.root));
    const auto report = net.optimizer->memory_report();
    EXPECT_EQ(report.params, 0);
    // What stays: this rank's fp32 shard of each gradient (each unit padded to a multiple of DP).
    const int64_t dp = world()->size();
    const int64_t unit_shard = (kWidth * kWidth + dp - 1) / dp, root_shard = (kWidth + dp - 1) / dp;
    EXPECT_EQ(report.grads, 4 * kUnits * unit_shard);
    EXPECT_EQ(report.main_params, 4 * (kUnits * unit_shard + root_shard));
  }
}

TEST(Fsdp, OptimGradsKeepsTheWholeGradientFromTheUnitsFirstBackwardToTheStep) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  for (bool hooked : {true, false}) {
    Net net(true, false, true, hooked);
    net.ddp->zero_grad_buffer();
    net.ddp->start_grad_sync(kMicroBatches);
    // A unit whose module calls its hooks gets its gradient as its backward begins; one without,
    // before the step.
    for (const auto& w : net.weights) EXPECT_EQ(allocated(w.grad()), !hooked);
    at::manual_seed(world()->rank());
    torch::autograd::backward({net.loss(at::randn({kBatch, kWidth}))});
    for (const auto& w : net.weights) {
      EXPECT_TRUE(allocated(w)) << "optim_grads releases no parameters";
      EXPECT_TRUE(allocated(w.grad())) << "released before the last micro-batch";
    }
    torch::autograd::backward({net.loss(at::randn({kBatch, kWidth}))});
    net.optimizer->step();
    for (const auto& w : net.weights) EXPECT_FALSE(allocated(w.grad())) << "the whole gradient outlives the step";
    EXPECT_EQ(net.optimizer->memory_report().grads,
              4 * kUnits * ((kWidth * kWidth + world()->size() - 1) / world()->size()));
  }
}

// optim_grads with --overlap-param-gather: the step leaves each unit's parameter all-gather in
// flight; the unit's own wait before its forward completes it, after which its weight is the
// gathering step's, bit for bit; training goes on exactly as with the gather in the step.
// Without the hooks the step gathers itself. Every rank.
TEST(Fsdp, OptimGradsGathersEachUnitUnderItsForwardWithOverlapParamGather) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  const int rank = world()->rank();
  Net serial(true, false, true), overlapped(true, false, true, true, true), unhooked(true, false, true, false, true);
  serial.step(0);
  overlapped.step(0);
  unhooked.step(0);
  EXPECT_EQ(unhooked.ddp->param_syncs_pending(), 1) << "only the root's bucket (it is hooked), rank " << rank;
  for (int i = 0; i < kUnits; ++i)
    EXPECT_TRUE(at::equal(unhooked.weights[i], serial.weights[i])) << "unit " << i << ", rank " << rank;
  // Each unit's gather, and the root's bucket.
  const int64_t pending = overlapped.ddp->param_syncs_pending();
  EXPECT_EQ(pending, kUnits + 1) << "rank " << rank;
  overlapped.root_hooks->before_forward();
  for (int i = 0; i < kUnits; ++i) {
    overlapped.hooks[i]->before_forward();
    EXPECT_EQ(overlapped.ddp->param_syncs_pending(), pending - 2 - i) << "unit " << i << ", rank " << rank;
    EXPECT_TRUE(at::equal(overlapped.weights[i], serial.weights[i])) << "unit " << i << ", rank " << rank;
  }
  for (int64_t it = 1; it < 3; ++it) {
    serial.step(it);
    overlapped.step(it);
  }
  const auto want = serial.snapshot(), got = overlapped.snapshot();
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_TRUE(at::equal(got[k], want[k])) << "parameter " << k << ", rank " << rank;
  at::manual_seed(11);
  EXPECT_FALSE(at::equal(want[1], (at::randn({kWidth, kWidth}) / 3))) << "the steps changed nothing";
}

}  // namespace
