// pretrain() with pipeline parallelism under mpirun on 8 ranks: 1F1B at 2 and 4 stages, the
// interleaved schedule with 2 model chunks per stage, and TP2 x PP2 x DP2 reproduce the
// single-rank loss curve and gradient norms (fp32, 1e-5 relative) over 12 iterations, bf16 and fp16
// runs within half-precision tolerance with the same skipped iterations; the tied word embedding
// is bit-identical on the first and last stage after training. Every rank asserts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "distributed_test.h"
#include "megatron/models/common/language_module.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/parallel_state.h"
#include "subgroup_pretrain.h"
#include "tiny_gpt_args.h"

namespace {

using namespace megatron;
constexpr int kIterations = 12;

// Four layers, so that they split over 4 stages or 2 stages x 2 chunks.
training::Arguments tiny_args(int64_t global_batch_size) {
  auto a = megatron::testing::tiny_gpt_args();
  a.num_layers = 4;
  a.global_batch_size = global_batch_size;
  a.train_iters = kIterations;
  a.clip_grad = 0.5;  // clipping needs the norm over every stage
  return a;
}

using megatron::testing::Layout;

struct LayoutRun : megatron::testing::SubgroupRun {
  std::optional<ParallelState> ps;
};

// Runs pretrain on the first tp * pp * dp ranks of the world.
LayoutRun run_layout(training::Arguments a, const Layout& l) {
  LayoutRun run;
  static_cast<megatron::testing::SubgroupRun&>(run) = megatron::testing::pretrain_layout(a, l, "pipeline");
  if (!run.member) return run;
  l.apply(a);
  a.validate(l.ranks());  // for the virtual size it derives
  run.ps = ParallelState::initialize_model_parallel(run.group, l.tp, l.pp,
                                                    a.virtual_pipeline_model_parallel_size
                                                        ? std::optional<int>(*a.virtual_pipeline_model_parallel_size)
                                                        : std::nullopt);
  return run;
}

// Per-iteration loss and grad norm, then the evaluation losses, of the single-rank run on rank
// 0, sent to every rank.
at::Tensor single_rank_reference(int64_t global_batch_size) {
  LayoutRun ref = run_layout(tiny_args(global_batch_size), {1, 1, 1, std::nullopt});
  auto values = at::zeros({2 * kIterations + 2}, at::kDouble);
  if (ref.member) {
    EXPECT_EQ(ref.result.iterations.size(), static_cast<size_t>(kIterations));
    EXPECT_EQ(ref.result.evaluations.size(), 3u);  // valid at 6 and 12, test at 12
    for (int i = 0; i < kIterations; ++i) {
      values[2 * i] = ref.result.iterations[i].metrics.at("lm loss");
      values[2 * i + 1] = ref.result.iterations[i].grad_norm;
    }
    values[2 * kIterations] = ref.result.evaluations[0].metrics.at("lm loss");
    values[2 * kIterations + 1] = ref.result.evaluations[2].metrics.at("lm loss");
  }
  megatron::testing::world()->broadcast(values, 0);
  return values;
}

void expect_same_as_reference(const LayoutRun& run, const at::Tensor& reference, int64_t global_batch_size) {
  if (!run.member) return;
  const auto& r = run.result;
  ASSERT_EQ(r.iterations.size(), static_cast<size_t>(kIterations));
  const bool last = run.ps->is_pipeline_last_stage();
  for (int i = 0; i < kIterations; ++i) {
    const auto& it = r.iterations[i];
    // The norm is taken over every stage, so every rank has it.
    const double want_norm = reference[2 * i + 1].item<double>();
    EXPECT_NEAR(it.grad_norm, want_norm, 1e-5 * want_norm) << "iteration " << i + 1;
    // The loss exists on the last stage only.
    ASSERT_EQ(it.metrics.count("lm loss"), last ? 1u : 0u) << "iteration " << i + 1;
    if (!last) continue;
    const double want = reference[2 * i].item<double>();
    EXPECT_NEAR(it.metrics.at("lm loss"), want, 1e-5 * want) << "iteration " << i + 1;
  }
  ASSERT_EQ(r.evaluations.size(), 3u);
  if (last) {
    const double valid = reference[2 * kIterations].item<double>();
    const double test = reference[2 * kIterations + 1].item<double>();
    EXPECT_NEAR(r.evaluations[0].metrics.at("lm loss"), valid, 1e-5 * valid);
    EXPECT_NEAR(r.evaluations[2].metrics.at("lm loss"), test, 1e-5 * test);
  }
  EXPECT_EQ(r.consumed_train_samples, kIterations * global_batch_size);
}

// The first stage's word embedding and the last stage's output weight, compared bit for bit
// over the embedding group.
void expect_tied_weights_identical(const LayoutRun& run) {
  if (!run.member || !run.ps->is_rank_in_embedding_group()) return;
  at::Tensor weight, initial;
  for (size_t chunk = 0; chunk < run.built.size(); ++chunk) {
    auto& gpt = dynamic_cast<models::gpt::GPTModelImpl&>(*run.built[chunk]);
    if (!gpt.pre_process() && !gpt.post_process()) continue;
    weight = gpt.shared_embedding_or_output_weight();
    initial = run.initial[chunk].at(gpt.pre_process() ? "embedding.word_embeddings.weight" : "output_layer.weight");
  }
  ASSERT_TRUE(weight.defined());
  auto group = run.ps->get_embedding_group();
  ASSERT_EQ(group->size(), 2);
  auto hi = weight.detach().clone(), lo = weight.detach().clone();
  group->all_reduce(hi, comm::ReduceOp::kMax);
  group->all_reduce(lo, comm::ReduceOp::kMin);
  EXPECT_TRUE(at::equal(hi, lo)) << "max difference " << (hi - lo).abs().max().item<float>();
  // And training moved it away from its initial value on both stages alike.
  ASSERT_EQ(initial.sizes(), weight.sizes());
  EXPECT_FALSE(at::equal(weight.detach().to(initial.dtype()), initial)) << "the tied weight did not train";
}

TEST(PipelinePretrain, EveryPipelineLayoutGivesTheSingleRankLosses) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  const auto reference = single_rank_reference(8);  // 4 micro-batches without data parallelism
  const std::vector<Layout> layouts = {
      {1, 2, 1, std::nullopt},              // 1F1B, 4 micro-batches
      {1, 4, 1, std::nullopt},              // 1F1B, one layer per stage
      {1, 2, 1, 1},                         // interleaved: 2 stages x 2 chunks of 1 layer
      {1, 2, 2, 1},                         // interleaved with as many micro-batches as stages
      {2, 2, 2, std::nullopt},              // 3D
      {2, 2, 2, std::nullopt, true, true},  // 3D with sequence parallelism and ZeRO-1
      {1, 4, 2, std::nullopt, false, true},
  };
  for (const auto& l : layouts) {
    SCOPED_TRACE(l.name());
    LayoutRun run = run_layout(tiny_args(8), l);
    expect_same_as_reference(run, reference, 8);
    expect_tied_weights_identical(run);
  }
}

// --log-params-norm and --log-num-zeros-in-grad against the tensors. The single-rank run's values
// equal the norm of its parameters after training and the zeros of their last gradients; at
// TP 2 x PP 2 x DP 2 every rank logs the single-rank norms, and the zeros of that run's own
// gradients (each full tensor counted once: TP-sharded ones on every TP rank, replicated ones on
// TP rank 0, DP rank 0 only). Zeros are not compared across layouts: another summation order
// can leave a cancelling gradient entry a few ulps from zero. Untied embeddings, so that no
// parameter lives on two stages.
double zeros_in_grads(const megatron::testing::SubgroupRun& run, const ParallelState& ps) {
  double zeros = 0;
  if (ps.get_data_parallel_rank() != 0) return zeros;
  for (const auto& chunk : run.built) {
    const auto& model = dynamic_cast<const models::common::LanguageModule&>(*chunk);
    for (const auto& p : model.sharded_parameters())
      if (p.init.layout.is_sharded() || ps.get_tensor_model_parallel_rank() == 0)
        zeros += p.param.grad().eq(0).sum().item<double>();
  }
  return zeros;
}

TEST(PipelinePretrain, ParamsNormAndZeroCountOnEveryRank) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  auto args = tiny_args(8);
  args.untie_embeddings_and_output_weights = true;
  args.log_params_norm = args.log_num_zeros_in_grad = true;
  LayoutRun ref = run_layout(args, {1, 1, 1, std::nullopt});
  auto norms = at::zeros({kIterations}, at::kDouble);
  if (ref.member) {
    ASSERT_EQ(ref.result.iterations.size(), static_cast<size_t>(kIterations));
    for (int i = 0; i < kIterations; ++i) {
      ASSERT_TRUE(ref.result.iterations[i].params_norm && ref.result.iterations[i].num_zeros);
      norms[i] = *ref.result.iterations[i].params_norm;
    }
    double sum_sq = 0;
    for (const auto& p : ref.built[0]->parameters()) sum_sq += p.detach().to(at::kDouble).square().sum().item<double>();
    EXPECT_NEAR(norms[kIterations - 1].item<double>(), std::sqrt(sum_sq), 1e-6 * std::sqrt(sum_sq));
    const double zeros = zeros_in_grads(ref, *ref.ps);
    EXPECT_EQ(*ref.result.iterations.back().num_zeros, zeros);
    EXPECT_GT(zeros, 0) << "the tiny vocabulary's unused rows should have zero gradients";
  }
  megatron::testing::world()->broadcast(norms, 0);
  LayoutRun run = run_layout(args, {2, 2, 2, std::nullopt});
  if (!run.member) return;
  ASSERT_EQ(run.result.iterations.size(), static_cast<size_t>(kIterations));
  auto zeros = at::full({1}, zeros_in_grads(run, *run.ps), at::kDouble);
  run.group->all_reduce(zeros);
  for (int i = 0; i < kIterations; ++i) {
    const auto& it = run.result.iterations[i];
    ASSERT_TRUE(it.params_norm && it.num_zeros) << "iteration " << i + 1;
    const double norm = norms[i].item<double>();
    EXPECT_NEAR(*it.params_norm, norm, 1e-5 * norm) << "iteration " << i + 1;
  }
  EXPECT_EQ(*run.result.iterations.back().num_zeros, zeros.item<double>());
}

TEST(PipelinePretrain, FewerMicroBatchesThanStages) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  const auto reference = single_rank_reference(2);  // 1 micro-batch
  LayoutRun run = run_layout(tiny_args(2), {1, 4, 1, std::nullopt});
  expect_same_as_reference(run, reference, 2);
  expect_tied_weights_identical(run);
}

TEST(PipelinePretrain, UntiedEmbeddingsAndRecompute) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  auto base = tiny_args(8);
  base.untie_embeddings_and_output_weights = true;
  base.recompute_granularity = "full";
  LayoutRun ref = run_layout(base, {1, 1, 1, std::nullopt});
  auto values = at::zeros({kIterations}, at::kDouble);
  if (ref.member)
    for (int i = 0; i < kIterations; ++i) values[i] = ref.result.iterations[i].metrics.at("lm loss");
  megatron::testing::world()->broadcast(values, 0);
  LayoutRun run = run_layout(base, {1, 4, 2, std::nullopt});
  if (!run.member) return;
  ASSERT_EQ(run.result.iterations.size(), static_cast<size_t>(kIterations));
  if (!run.ps->is_pipeline_last_stage()) return;
  for (int i = 0; i < kIterations; ++i) {
    const double want = values[i].item<double>();
    EXPECT_NEAR(run.result.iterations[i].metrics.at("lm loss"), want, 1e-5 * want) << "iteration " << i + 1;
  }
}

}  // namespace

namespace {

// bf16 and fp16 (with its loss scale and skipped overflow iterations) through the interleaved
// schedule with the distributed optimizer: the same skips as the single-rank run and
// losses within half-precision tolerance.
TEST(PipelinePretrain, MixedPrecision) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  for (const std::string precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    auto base = tiny_args(8);
    base.bf16 = precision == "bf16";
    base.fp16 = precision == "fp16";  // the default initial scale 2^32 overflows at first
    LayoutRun ref = run_layout(base, {1, 1, 1, std::nullopt});
    auto values = at::zeros({2 * kIterations}, at::kDouble);
    if (ref.member) {
      for (int i = 0; i < kIterations; ++i) {
        const auto& it = ref.result.iterations[i];
        values[2 * i] = it.skipped ? 1.0 : 0.0;
        values[2 * i + 1] = it.skipped ? 0.0 : it.metrics.at("lm loss");
      }
    }
    megatron::testing::world()->broadcast(values, 0);
    if (base.fp16) EXPECT_GT(values.slice(0, 0, 2 * kIterations, 2).sum().item<double>(), 0) << "no overflow skipped";
    for (const Layout& l : {Layout{1, 2, 2, 1, false, true}}) {
      SCOPED_TRACE(l.name());
      LayoutRun run = run_layout(base, l);
      if (!run.member) continue;
      ASSERT_EQ(run.result.iterations.size(), static_cast<size_t>(kIterations));
      for (int i = 0; i < kIterations; ++i) {
        const auto& it = run.result.iterations[i];
        EXPECT_EQ(it.skipped, values[2 * i].item<double>() > 0) << "iteration " << i + 1;
        if (it.skipped || !run.ps->is_pipeline_last_stage()) continue;
        const double want = values[2 * i + 1].item<double>();
        EXPECT_NEAR(it.metrics.at("lm loss"), want, 1e-2 * want) << "iteration " << i + 1;
      }
    }
  }
}

}  // namespace
