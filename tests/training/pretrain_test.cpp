// pretrain() with pretrain_gpt's own callbacks, under mpirun on 4 ranks: every layout of
// tensor x data parallelism (with and without sequence parallelism and the distributed
// optimizer) reproduces the single-rank loss curve, the loss goes down, a NaN loss stops
// training with the iteration named, --overlap-grad-reduce launches the data-parallel reduce
// during the backward pass and --overlap-param-gather the parameter gather under the next
// forward, both with bit-identical results, and --domino gives plain tensor
// parallelism's losses. Every rank asserts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "distributed_test.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/readback.h"
#include "megatron/transformer/param_gather.h"
#include "megatron/transformer/transformer_layer.h"
#include "optimizer/wrapped_optimizer.h"
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

// The single-rank run's (rank 0's) losses, gradient norms and evaluation losses, on every rank:
// {iterations, evaluations, loss..., norm..., evaluation loss...}.
std::vector<double> broadcast_reference(const training::TrainingResult& reference) {
  at::Tensor t = at::zeros({64}, at::kDouble);
  if (megatron::testing::world()->rank() == 0) {
    std::vector<double> v{static_cast<double>(reference.iterations.size()),
                          static_cast<double>(reference.evaluations.size())};
    for (const auto& r : reference.iterations) v.push_back(r.metrics.at("lm loss"));
    for (const auto& r : reference.iterations) v.push_back(r.grad_norm);
    for (const auto& e : reference.evaluations) v.push_back(e.metrics.at("lm loss"));
    EXPECT_LE(v.size(), 64u);
    t.narrow(0, 0, static_cast<int64_t>(v.size())).copy_(at::tensor(v, at::kDouble));
  }
  megatron::testing::world()->broadcast(t, 0);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + 64);
}

TEST(Pretrain, EveryTensorAndDataParallelLayoutGivesTheSameLosses) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  const auto want = broadcast_reference(run_layout(tiny_args(), 1, 1));
  const auto iterations = static_cast<size_t>(want[0]), evaluations = static_cast<size_t>(want[1]);
  ASSERT_EQ(iterations, 12u) << "rank " << megatron::testing::world()->rank();
  const double* loss = &want[2];
  const double* norm = loss + iterations;
  const double* eval = norm + iterations;
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
    if (megatron::testing::world()->rank() >= l.ranks()) continue;  // not in this layout
    SCOPED_TRACE(l.name() + ", rank " + std::to_string(megatron::testing::world()->rank()));
    ASSERT_EQ(run.iterations.size(), iterations);
    for (size_t i = 0; i < iterations; ++i) {
      EXPECT_NEAR(run.iterations[i].metrics.at("lm loss"), loss[i], 1e-5 * std::abs(loss[i])) << "iteration " << i + 1;
      EXPECT_NEAR(run.iterations[i].grad_norm, norm[i], 1e-4 * norm[i]) << "iteration " << i + 1;
    }
    ASSERT_EQ(run.evaluations.size(), evaluations);
    for (size_t i = 0; i < evaluations; ++i)
      EXPECT_NEAR(run.evaluations[i].metrics.at("lm loss"), eval[i], 1e-5 * eval[i]) << "evaluation " << i + 1;
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

// Two linear layers, two micro-batches of different data per rank, one bucket per weight: the
// buckets launched when the first layer's backward begins (each micro-batch), and the weights
// after the step.
std::tuple<std::vector<int64_t>, at::Tensor, at::Tensor> two_layer_step(bool distributed, bool overlap) {
  auto dp = megatron::testing::world();
  at::manual_seed(7);
  at::Tensor w1 = at::randn({64, 64}).requires_grad_(), w2 = at::randn({64, 64}).requires_grad_();
  megatron::distributed::DistributedDataParallelConfig c;
  c.overlap_grad_reduce = overlap;
  c.use_distributed_optimizer = distributed;
  c.bucket_size = 4096;  // one bucket per weight; with ZeRO-1 the region splits over both ranks
  auto wrapped = megatron::testing::wrap({{"first.weight", w1}, {"last.weight", w2}}, {}, c, dp);
  auto& ddp = *wrapped.ddp;
  ddp.zero_grad_buffer();
  ddp.start_grad_sync(2);
  std::vector<int64_t> launched_before_first_layer;
  for (int micro = 0; micro < 2; ++micro) {
    at::manual_seed(100 * dp->rank() + micro);  // different data on every rank
    at::Tensor x = at::randn({8, 64}).requires_grad_();
    x.register_hook([&](const at::Tensor& g) {
      launched_before_first_layer.push_back(ddp.grad_buckets_launched());
      return g;
    });
    const at::Tensor hidden = at::mm(x, w1.t()).tanh();  // the first layer's nodes come first
    at::mm(hidden, w2.t()).sum().backward();
  }
  ddp.finish_grad_sync();
  EXPECT_EQ(ddp.grad_buckets_launched(), 2) << "rank " << dp->rank();
  wrapped.optimizer->step();
  return {launched_before_first_layer, w1.detach().clone(), w2.detach().clone()};
}

// --overlap-grad-reduce: the bucket of the last layer's weight is averaged (all-reduced, or with
// the distributed optimizer reduced to its shards' ranks) while autograd is still computing the
// first layer's gradients, and only in the step's last backward pass; the step gives the weights
// of the reduce after backward, bit for bit, the same on every rank.
TEST(Pretrain, OverlappedGradReduceLaunchesBucketsDuringTheLastBackwardPass) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto dp = megatron::testing::world();
  for (bool distributed : {false, true}) {
    SCOPED_TRACE(distributed ? "distributed optimizer" : "all-reduce");
    auto [overlapped_launches, w1_overlapped, w2_overlapped] = two_layer_step(distributed, true);
    auto [serial_launches, w1_serial, w2_serial] = two_layer_step(distributed, false);
    EXPECT_EQ(overlapped_launches, (std::vector<int64_t>{0, 1})) << "rank " << dp->rank();
    EXPECT_EQ(serial_launches, (std::vector<int64_t>{0, 0})) << "rank " << dp->rank();
    EXPECT_TRUE(at::equal(w1_overlapped, w1_serial)) << "rank " << dp->rank();
    EXPECT_TRUE(at::equal(w2_overlapped, w2_serial)) << "rank " << dp->rank();
    at::Tensor max = w2_overlapped.clone();
    dp->all_reduce(max, comm::ReduceOp::kMax);
    EXPECT_TRUE(at::equal(max, w2_overlapped)) << "rank " << dp->rank();
  }
}

// Two layers of `dtype`, each its own unit and bucket, after one distributed-optimizer step with
// (or without) --overlap-param-gather; `hooks`: the layers asked for their waits.
struct TwoLayerStep {
  at::Tensor w0, w1;
  megatron::testing::WrappedOptimizer opt;
  std::shared_ptr<transformer::ParamGather> wait0, wait1;

  TwoLayerStep(at::ScalarType dtype, bool overlap, bool hooks) {
    auto dp = megatron::testing::world();
    at::manual_seed(7);
    w0 = at::randn({64, 64}).to(dtype).requires_grad_();
    w1 = at::randn({64, 64}).to(dtype).requires_grad_();
    megatron::distributed::DistributedDataParallelConfig c;
    c.use_distributed_optimizer = true;
    c.overlap_grad_reduce = c.overlap_param_gather = overlap;
    c.bucket_size = 4096;  // one bucket per weight, split over the ranks' shards
    std::vector<megatron::distributed::ModelParam> params = {{"decoder.layers.0.weight", w0},
                                                             {"decoder.layers.1.weight", w1}};
    params[0].fsdp_unit = "decoder.layers.0";
    params[1].fsdp_unit = "decoder.layers.1";
    opt = megatron::testing::wrap(params, {}, c, dp);
    if (hooks) {
      wait0 = opt.ddp->param_gather("decoder.layers.0");
      wait1 = opt.ddp->param_gather("decoder.layers.1");
    }
    opt.ddp->zero_grad_buffer();
    opt.ddp->start_grad_sync(1);
    at::manual_seed(100 + dp->rank());  // different data on every rank
    at::Tensor x = at::randn({8, 64}).to(dtype);
    at::mm(at::mm(x, w0.t()).tanh(), w1.t()).to(at::kFloat).sum().backward();
    opt.optimizer->step();
  }
};

// --overlap-param-gather: the step launches both buckets' gathers and returns; each layer's
// wait (what it calls before its forward) completes its own bucket, after which its weight is
// the gathering step's, bit for bit. Without the waits asked for, the step gathers itself.
TEST(Pretrain, OverlappedParamGatherIsWaitedForByEachLayer) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  const int rank = megatron::testing::world()->rank();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    TwoLayerStep serial(dtype, false, false), overlapped(dtype, true, true), unhooked(dtype, true, false);
    EXPECT_EQ(serial.opt.ddp->param_syncs_pending(), 0) << "rank " << rank;
    EXPECT_FALSE(unhooked.opt.ddp->param_sync_overlapped()) << "rank " << rank;
    EXPECT_EQ(unhooked.opt.ddp->param_syncs_pending(), 0) << "rank " << rank;
    EXPECT_TRUE(at::equal(unhooked.w0, serial.w0) && at::equal(unhooked.w1, serial.w1)) << "rank " << rank;
    ASSERT_TRUE(overlapped.opt.ddp->param_sync_overlapped()) << "rank " << rank;
    EXPECT_EQ(overlapped.opt.ddp->param_syncs_pending(), 2) << "rank " << rank;
    overlapped.wait0->before_forward();
    EXPECT_EQ(overlapped.opt.ddp->param_syncs_pending(), 1) << "rank " << rank;
    EXPECT_TRUE(at::equal(overlapped.w0, serial.w0)) << "rank " << rank;
    overlapped.wait1->before_forward();
    EXPECT_EQ(overlapped.opt.ddp->param_syncs_pending(), 0) << "rank " << rank;
    EXPECT_TRUE(at::equal(overlapped.w1, serial.w1)) << "rank " << rank;
    at::manual_seed(7);
    EXPECT_FALSE(at::equal(serial.w0, at::randn({64, 64}).to(dtype))) << "the step changed nothing, rank " << rank;
  }
}

// A run stopped by a NaN loss under --overlap-param-gather hands back its model (the caller's)
// without hooks into the optimizer that dies with the run; the gather the last step launched
// into its parameters is finished first. Every rank.
TEST(Pretrain, NanStopDetachesTheOverlappedParamGather) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto group = megatron::testing::world()->new_group({0, 1}, "nan_stop_gather");
  if (!group) return;
  auto a = tiny_args();
  a.lr = 1e30;  // diverges within a few iterations
  a.clip_grad = 0;
  a.use_distributed_optimizer = a.overlap_grad_reduce = a.overlap_param_gather = true;
  a.validate(2);
  auto callbacks = training::gpt_callbacks(training::build_tokenizer(a));
  std::vector<std::shared_ptr<torch::nn::Module>> built;
  auto builder = [&](const training::TrainingContext& ctx, bool pre, bool post) {
    built.push_back(callbacks.model_builder(ctx, pre, post));
    return built.back();
  };
  EXPECT_THROW(training::pretrain(a, builder, callbacks.dataset_builder, callbacks.forward_step, group), c10::Error)
      << "rank " << group->rank();
  ASSERT_EQ(built.size(), 1u);
  auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(built[0].get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->param_gather, nullptr) << "rank " << group->rank();
  for (size_t i = 0; i < gpt->decoder->layers->size(); ++i)
    EXPECT_EQ(gpt->decoder->layers->ptr<transformer::TransformerLayerImpl>(i)->param_gather, nullptr)
        << "layer " << i << ", rank " << group->rank();
}

// A module that asks for its ParamGather hook and never calls it leaves its buckets of the
// overlapped gather pending into the next step: every rank warns, once, instead of letting code
// that reads those parameters see last step's values silently.
TEST(Pretrain, OverlappedParamGatherNotWaitedForIsReported) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto group = megatron::testing::world()->new_group({0, 1}, "unwaited_gather");
  if (!group) return;
  auto a = tiny_args();
  a.use_distributed_optimizer = a.overlap_grad_reduce = a.overlap_param_gather = true;
  a.ddp_bucket_size = 2000;  // layer 1 in buckets of its own
  a.train_iters = 3;
  a.validate(2);
  auto callbacks = training::gpt_callbacks(training::build_tokenizer(a));
  for (bool skip_layer_1 : {false, true}) {
    std::shared_ptr<torch::nn::Module> built;
    auto builder = [&](const training::TrainingContext& ctx, bool pre, bool post) {
      return built = callbacks.model_builder(ctx, pre, post);
    };
    // The hooks are attached once the optimizer exists; dropping layer 1's before each forward
    // is a module that asked for its hook and does not run it.
    auto forward_step = [&](datasets::BatchIterator& it, torch::nn::Module& model) {
      auto& layer =
          *dynamic_cast<models::gpt::GPTModelImpl&>(model).decoder->layers->ptr<transformer::TransformerLayerImpl>(1);
      if (skip_layer_1) layer.param_gather = nullptr;
      return callbacks.forward_step(it, model);
    };
    ::testing::internal::CaptureStdout();
    training::pretrain(a, builder, callbacks.dataset_builder, forward_step, group);
    const std::string out = ::testing::internal::GetCapturedStdout();
    const std::string warning = "parameter bucket(s) or layer unit(s) of the last step's gather were not waited for";
    size_t count = 0;
    for (size_t at = out.find(warning); at != std::string::npos; at = out.find(warning, at + 1)) ++count;
    EXPECT_EQ(count, skip_layer_1 ? 1u : 0u) << "rank " << group->rank() << ":\n" << out;
  }
}

// Whole training runs: with small buckets and two micro-batches per step (DP 2), the overlapped
// reduce gives exactly the losses, norms and weights of the reduce after backward, with TP and
// sequence parallelism too; with the distributed optimizer each bucket's pieces are reduced to
// their shards' ranks (the tied embedding's, summed across pipeline stages next, all-reduced),
// and the updated parameters gathered under the next forward (--overlap-param-gather), in bf16
// and with interleaved pipeline stages too.
TEST(Pretrain, OverlappedGradReduceTrainsBitIdentically) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  struct Case {
    Layout layout;
    bool bf16 = false;
    int64_t layers = 2;
  };
  const std::vector<Case> cases = {{{1, 1, 2}},
                                   {{1, 1, 4}},
                                   {{2, 1, 2, std::nullopt, true}},
                                   {{1, 1, 2, std::nullopt, false, true}},
                                   {{1, 1, 4, std::nullopt, false, true}},
                                   {{2, 1, 2, std::nullopt, true, true}},
                                   {{1, 2, 2, std::nullopt, false, true}},
                                   {{1, 1, 2, std::nullopt, false, true}, true},
                                   {{1, 2, 2, 1, false, true}, false, 4}};
  for (const auto& c : cases) {
    const auto& l = c.layout;
    SCOPED_TRACE(l.name() + (c.bf16 ? " bf16" : ""));
    auto run = [&](bool overlap) {
      auto a = tiny_args();
      a.train_iters = 6;  // bit-identical or not shows from the first step
      a.bf16 = c.bf16;
      a.num_layers = c.layers;
      a.overlap_grad_reduce = overlap;
      a.overlap_param_gather = overlap && l.distributed_optimizer;
      a.ddp_bucket_size = 2000;
      return megatron::testing::pretrain_layout(a, l, overlap ? "overlap" : "serial");
    };
    auto overlapped = run(true), serial = run(false);
    if (!overlapped.member) continue;
    ASSERT_EQ(overlapped.result.iterations.size(), serial.result.iterations.size());
    for (size_t i = 0; i < serial.result.iterations.size(); ++i) {
      EXPECT_EQ(overlapped.result.iterations[i].metrics, serial.result.iterations[i].metrics)  // the last stage's loss
          << "iteration " << i + 1 << ", rank " << megatron::testing::world()->rank();
      EXPECT_EQ(overlapped.result.iterations[i].grad_norm, serial.result.iterations[i].grad_norm)
          << "iteration " << i + 1 << ", rank " << megatron::testing::world()->rank();
    }
    for (size_t c = 0; c < serial.built.size(); ++c) {
      auto mine = overlapped.built[c]->named_parameters();
      for (const auto& p : serial.built[c]->named_parameters())
        EXPECT_TRUE(at::equal(mine[p.key()], p.value())) << p.key() << ", rank " << megatron::testing::world()->rank();
    }
  }
}

// --domino at TP 2 and 4, with data and pipeline parallelism (1F1B and interleaved), the
// distributed optimizer and bf16: the losses and gradient norms of plain tensor parallelism
// within 1e-5 in fp32 (each weight gradient is the sum of two half-batch terms), 2e-3 in bf16
// (the half-batch GEMMs round differently).
TEST(Pretrain, DominoGivesThePlainTensorParallelLosses) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  struct Case {
    Layout layout;
    bool intra_layer = false, bf16 = false;
    int64_t layers = 2;
  };
  const std::vector<Case> runs = {{{2, 1, 1}},
                                  {{4, 1, 1}},
                                  {{2, 1, 2}},
                                  {{2, 2, 1}},
                                  {{2, 1, 2}, true},
                                  {{2, 1, 2, std::nullopt, false, true}},
                                  {{2, 2, 1, 1}, false, false, 4},
                                  {{2, 1, 2}, false, true}};
  for (const auto& c : runs) {
    const auto& l = c.layout;
    SCOPED_TRACE(l.name() + (c.intra_layer ? " intra-layer" : "") + (c.bf16 ? " bf16" : ""));
    auto a = tiny_args();
    a.train_iters = 6;  // a wrong overlap shows from the first step
    a.num_layers = c.layers;
    a.bf16 = c.bf16;
    auto plain = megatron::testing::pretrain_layout(a, l, "plain");
    a.domino = true;
    a.domino_intra_layer_overlap = c.intra_layer;
    auto domino = megatron::testing::pretrain_layout(a, l, "domino");
    if (!domino.member) continue;
    ASSERT_EQ(domino.result.iterations.size(), 6u);
    ASSERT_EQ(plain.result.iterations.size(), 6u);
    const double tolerance = c.bf16 ? 2e-3 : 1e-5;
    for (size_t i = 0; i < 6; ++i) {
      const auto& want = plain.result.iterations[i];
      const auto& got = domino.result.iterations[i];
      ASSERT_EQ(got.metrics.count("lm loss"), want.metrics.count("lm loss"));  // the last stage's
      if (want.metrics.count("lm loss"))
        EXPECT_NEAR(got.metrics.at("lm loss"), want.metrics.at("lm loss"), tolerance * want.metrics.at("lm loss"))
            << "iteration " << i + 1 << ", rank " << megatron::testing::world()->rank();
      EXPECT_NEAR(got.grad_norm, want.grad_norm, tolerance * want.grad_norm)
          << "iteration " << i + 1 << ", rank " << megatron::testing::world()->rank();
    }
  }
}

}  // namespace
