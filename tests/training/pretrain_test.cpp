// pretrain() with pretrain_gpt's own callbacks, under mpirun on 4 ranks: every layout of
// tensor x data parallelism (with and without sequence parallelism and the distributed
// optimizer) reproduces the single-rank loss curve, the loss goes down, and a NaN
// loss stops training with the iteration named. Every rank asserts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "distributed_test.h"
#include "megatron/readback.h"
#include "subgroup_pretrain.h"
#include "tiny_gpt_args.h"

namespace {

using namespace megatron;

training::Arguments tiny_args() {
  return megatron::testing::tiny_gpt_args();
}

using megatron::testing::Layout;

// Runs pretrain on the first tp * dp ranks of the world; the others return an empty result.
training::TrainingResult run_layout(training::Arguments a, int tp, int dp, bool sequence_parallel = false,
                                    bool distributed_optimizer = false) {
  return megatron::testing::pretrain_layout(
             a, Layout{tp, 1, dp, std::nullopt, sequence_parallel, distributed_optimizer}, "layout")
      .result;
}

TEST(Pretrain, EveryTensorAndDataParallelLayoutGivesTheSameLosses) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  auto reference = run_layout(tiny_args(), 1, 1);
  const std::vector<Layout> layouts = {{1, 1, 2},
                                       {2, 1, 1},
                                       {1, 1, 4},
                                       {2, 1, 2},
                                       {4, 1, 1},
                                       {2, 1, 2, std::nullopt, true},
                                       {4, 1, 1, std::nullopt, true},
                                       {1, 1, 2, std::nullopt, false, true},
                                       {1, 1, 4, std::nullopt, false, true},
                                       {2, 1, 2, std::nullopt, true, true}};
  for (const auto& l : layouts) {
    auto run = megatron::testing::pretrain_layout(tiny_args(), l, "layout").result;
    if (megatron::testing::world()->rank() >= l.ranks()) continue;
    SCOPED_TRACE(l.name());
    ASSERT_EQ(run.iterations.size(), 12u);
    if (megatron::testing::world()->rank() == 0) ASSERT_EQ(reference.iterations.size(), 12u);
    if (megatron::testing::world()->rank() != 0) continue;  // rank 0 holds the single-rank reference
    for (size_t i = 0; i < run.iterations.size(); ++i) {
      double want = reference.iterations[i].metrics.at("lm loss");
      double got = run.iterations[i].metrics.at("lm loss");
      EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "iteration " << i + 1;
      EXPECT_NEAR(run.iterations[i].grad_norm, reference.iterations[i].grad_norm,
                  1e-4 * reference.iterations[i].grad_norm)
          << "iteration " << i + 1;
    }
    ASSERT_EQ(run.evaluations.size(), reference.evaluations.size());
    for (size_t i = 0; i < run.evaluations.size(); ++i) {
      EXPECT_NEAR(run.evaluations[i].metrics.at("lm loss"), reference.evaluations[i].metrics.at("lm loss"),
                  1e-5 * reference.evaluations[i].metrics.at("lm loss"));
    }
  }
}

TEST(Pretrain, EveryRankSeesTheSameLossAndItGoesDown) {
  auto a = tiny_args();
  a.train_iters = 30;
  a.lr = 5e-3;
  const int n = megatron::testing::world()->size();
  const int tp = n % 2 == 0 ? 2 : 1;
  auto run = run_layout(a, tp, n / tp);
  ASSERT_EQ(run.iterations.size(), 30u);
  double first = run.iterations.front().metrics.at("lm loss");
  double last = run.iterations.back().metrics.at("lm loss");
  EXPECT_LT(last, first - 0.3) << "first " << first << " last " << last;
  // The reported loss is averaged over data-parallel ranks: identical everywhere.
  auto mine = at::full({1}, last, at::kDouble);
  auto max = mine.clone();
  megatron::testing::world()->all_reduce(max, comm::ReduceOp::kMax);
  EXPECT_EQ(max.item<double>(), last);
  EXPECT_EQ(run.consumed_train_samples, 30 * 8);
}

// The train loop reads the device once per iteration (metrics, skip flag, norm together): the
// library's read-back helper counts it on every rank, whatever the rank holds (TP 2 x DP 2).
TEST(Pretrain, OneHostReadbackPerIterationOnEveryRank) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  auto a = tiny_args();
  a.log_interval = 1000;  // logs only the last iteration, in both runs
  a.eval_iters = 0;
  auto readbacks = [&](int64_t iters) {
    a.train_iters = iters;
    const int64_t before = host_readback_count();
    run_layout(a, 2, 2);
    return host_readback_count() - before;
  };
  const int64_t three = readbacks(3), seven = readbacks(7);
  EXPECT_EQ(seven - three, 4) << "rank " << megatron::testing::world()->rank();
}

TEST(Pretrain, NanLossStopsWithTheIterationNamed) {
  auto a = tiny_args();
  a.lr = 1e30;  // diverges within a few iterations
  a.clip_grad = 0;
  try {
    run_layout(a, 1, megatron::testing::world()->size());
    FAIL() << "expected a NaN/Inf loss error";
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("the loss is NaN or Inf at iteration "), std::string::npos) << msg;
  }
  a.skip_nan_iterations = true;
  auto run = run_layout(a, 1, megatron::testing::world()->size());
  int skipped = 0;
  for (size_t i = 0; i < run.iterations.size(); ++i) {
    skipped += run.iterations[i].skipped;
    // A skipped update leaves the learning rate where it was.
    if (i > 0 && run.iterations[i - 1].skipped)
      EXPECT_EQ(run.iterations[i].learning_rate, run.iterations[i - 1].learning_rate) << "iteration " << i + 1;
  }
  EXPECT_GT(skipped, 0);
}

}  // namespace
