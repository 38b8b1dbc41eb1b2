// The schedules on their own, at 4 ranks (4 stages, or 2 stages x 2 data-parallel): a stage
// keeps at most (stages - its rank) micro-batches in flight under 1F1B whatever the number of
// micro-batches, so its peak host memory does not grow with them; evaluation keeps none; the
// interleaved schedule's bound does not grow either; bad calls are clear errors; forward_step
// draws from any batch iterator, not only the library's; after_last_loss comes before the last
// backward. Every rank asserts.
#define PRETRAIN_GPT_NO_MAIN
#include "../../examples/pretrain_gpt.cpp"

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "distributed_test.h"
#include "error_of.h"
#include "megatron/memory.h"
#include "megatron/pipeline_parallel/schedules.h"

namespace {

namespace pp = megatron::pipeline_parallel;
using megatron::models::gpt::GPTModel;

constexpr int64_t kSeq = 64, kMicroBatch = 4, kHidden = 64, kVocab = 128;

struct Stage {
  ParallelState ps;
  std::vector<GPTModel> chunks;
  std::vector<std::unique_ptr<datasets::DataIterator>> iterators;

  std::vector<torch::nn::Module*> model() const {
    std::vector<torch::nn::Module*> out;
    for (const auto& c : chunks) out.push_back(c.ptr().get());
    return out;
  }
  std::vector<datasets::BatchIterator*> data() const {
    std::vector<datasets::BatchIterator*> out;
    for (const auto& it : iterators) out.push_back(it.get());
    return out;
  }
};

Stage build_stage(int pipeline_size, std::optional<int> virtual_size, int64_t num_layers) {
  Stage s{ParallelState::initialize_model_parallel(megatron::testing::world(), 1, pipeline_size, virtual_size), {}, {}};
  transformer::TransformerConfig config(num_layers, kHidden, 4);
  config.hidden_dropout(0).attention_dropout(0);
  datasets::GPTDatasetConfig data;
  data.sequence_length = kSeq;
  auto mock = datasets::build_mock_gpt_datasets(kVocab, kVocab - 1, {100000, 0, 0}, data);
  for (int v = 0; v < virtual_size.value_or(1); ++v) {
    std::optional<int> vr = virtual_size ? std::optional<int>(v) : std::nullopt;
    s.chunks.emplace_back(models::gpt::gpt_model_options_for_rank(s.ps, config, kVocab, kSeq, vr));
    auto sampler = std::make_unique<datasets::MegatronPretrainingSampler>(
        mock[0]->size(), 0, kMicroBatch, s.ps.get_data_parallel_rank(), s.ps.get_data_parallel_world_size());
    datasets::BatchOptions options;
    options.sequence_length = kSeq;
    s.iterators.push_back(std::make_unique<datasets::DataIterator>(mock[0], std::move(sampler), options, 0));
  }
  return s;
}

pp::ScheduleOptions options(int64_t num_microbatches, bool forward_only = false) {
  pp::ScheduleOptions o;
  o.num_microbatches = num_microbatches;
  o.seq_length = kSeq;
  o.micro_batch_size = kMicroBatch;
  o.hidden_size = kHidden;
  o.forward_only = forward_only;
  return o;
}

struct Peak {
  int64_t inflight, bytes;
};

// One schedule run after a first one has allocated the gradients: the most micro-batches in
// flight and the most host memory allocated above what was live before it.
Peak measure(Stage& s, int64_t num_microbatches) {
  auto run = pp::get_forward_backward_func(s.ps);
  run(forward_step, s.data(), s.model(), options(s.ps.get_pipeline_model_parallel_world_size()));
  megatron::HostMemoryTracker tracker;
  auto result = run(forward_step, s.data(), s.model(), options(num_microbatches));
  return {result.peak_inflight_microbatches, tracker.peak_bytes()};
}

TEST(Schedules, OneFOneBKeepsAtMostStagesMinusRankMicroBatches) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  Stage s = build_stage(4, std::nullopt, 4);
  const int64_t rank = s.ps.get_pipeline_model_parallel_rank();
  std::map<int64_t, Peak> peaks;
  for (int64_t m : {1, 4, 8, 16}) {
    peaks[m] = measure(s, m);
    EXPECT_EQ(peaks[m].inflight, std::min<int64_t>(4 - rank, m)) << m << " micro-batches";
  }
  // What one micro-batch keeps on this stage: a 16-micro-batch run holds no more than the
  // 4-micro-batch one, though it would hold four times as much if forwards ran ahead.
  const int64_t one = peaks[1].bytes, four = peaks[4].bytes, sixteen = peaks[16].bytes;
  EXPECT_GT(one, 0);
  EXPECT_LE(sixteen, four + four / 10) << "peak bytes: 1 mb " << one << ", 4 mb " << four << ", 16 mb " << sixteen;
  if (rank < 3) EXPECT_GT(four, one + one / 2) << "peak bytes: 1 mb " << one << ", 4 mb " << four;
}

TEST(Schedules, EvaluationKeepsNothing) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  Stage s = build_stage(4, std::nullopt, 4);
  at::NoGradGuard no_grad;
  auto result = pp::get_forward_backward_func(s.ps)(forward_step, s.data(), s.model(), options(6, true));
  EXPECT_EQ(result.peak_inflight_microbatches, 0);
  EXPECT_EQ(result.losses_reduced.size(), s.ps.is_pipeline_last_stage() ? 6u : 0u);
  for (const auto& m : result.losses_reduced) EXPECT_GT(m.at("lm loss").item<double>(), 0);
}

TEST(Schedules, InterleavedBoundDoesNotGrowWithMicroBatches) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  Stage s = build_stage(4, 2, 8);
  const int64_t rank = s.ps.get_pipeline_model_parallel_rank();
  // Megatron-LM's warm-up: 2 (stages - rank - 1) + (chunks - 1) stages forwards, then 1F1B.
  const int64_t bound = 2 * (4 - rank - 1) + 4 + 1;
  std::map<int64_t, Peak> peaks;
  for (int64_t m : {8, 16}) {
    peaks[m] = measure(s, m);
    EXPECT_EQ(peaks[m].inflight, bound) << m << " micro-batches";
  }
  EXPECT_LE(peaks[16].bytes, peaks[8].bytes + peaks[8].bytes / 10);
}

// after_last_loss (where the train step launches the losses' data-parallel average) runs once,
// on the last stage only, with every micro-batch's loss and the finiteness flag, before the last
// micro-batch's backward: without pipelining, with 1F1B and interleaved.
TEST(Schedules, AfterLastLossRunsOnceBeforeTheLastBackward) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  struct Layout {
    int stages;
    std::optional<int> virtual_size;
  };
  for (const Layout& layout : {Layout{1, std::nullopt}, Layout{4, std::nullopt}, Layout{4, 2}}) {
    SCOPED_TRACE(std::to_string(layout.stages) + " stages, " + std::to_string(layout.virtual_size.value_or(1)) +
                 " chunks");
    Stage s = build_stage(layout.stages, layout.virtual_size, 8);
    constexpr int64_t kMicroBatches = 8;
    // Backward passes through the last chunk so far: its last parameter's gradient hook.
    int64_t backwards = 0;
    auto last = s.chunks.back()->parameters().back();
    last.register_hook([&](const at::Tensor& g) {
      ++backwards;
      return g;
    });
    struct Call {
      size_t losses;
      int64_t backwards;
      bool finite;
    };
    std::vector<Call> calls;
    auto o = options(kMicroBatches);
    o.after_last_loss = [&](const pp::ForwardBackwardResult& r) {
      calls.push_back({r.losses_reduced.size(), backwards, r.loss_finite.defined() && r.loss_finite.item<bool>()});
    };
    pp::get_forward_backward_func(s.ps)(forward_step, s.data(), s.model(), o);
    const int rank = megatron::testing::world()->rank();
    EXPECT_EQ(backwards, kMicroBatches) << "rank " << rank;
    if (!s.ps.is_pipeline_last_stage()) {
      EXPECT_TRUE(calls.empty()) << "rank " << rank;
      continue;
    }
    ASSERT_EQ(calls.size(), 1u) << "rank " << rank;
    EXPECT_EQ(calls[0].losses, static_cast<size_t>(kMicroBatches)) << "rank " << rank;
    EXPECT_LT(calls[0].backwards, kMicroBatches) << "rank " << rank;
    if (!layout.virtual_size) EXPECT_EQ(calls[0].backwards, kMicroBatches - 1) << "rank " << rank;
    EXPECT_TRUE(calls[0].finite) << "rank " << rank;
  }
}

TEST(Schedules, BadCallsAreClearErrors) {
  MEGATRON_REQUIRE_WORLD_SIZE(4);
  Stage s = build_stage(4, 2, 8);
  auto run = pp::get_forward_backward_func(s.ps);
  EXPECT_NE(megatron::testing::error_of([&] {
              run(forward_step, s.data(), s.model(), options(6));
            }).find("needs num_microbatches (6) to be a multiple of the pipeline-parallel size (4)"),
            std::string::npos);
  auto one_iterator = s.data();
  one_iterator.pop_back();
  EXPECT_NE(megatron::testing::error_of([&] {
              run(forward_step, one_iterator, s.model(), options(4));
            }).find("expected one data iterator per model chunk, got 1 iterators for 2 chunks"),
            std::string::npos);
  auto o = options(4);
  o.hidden_size = 0;
  EXPECT_NE(megatron::testing::error_of([&] {
              run(forward_step, s.data(), s.model(), o);
            }).find("pipelining needs seq_length, micro_batch_size and hidden_size"),
            std::string::npos);
}

// A batch source of the user's own: a list of hand-made batches.
class ListIterator : public datasets::BatchIterator {
 public:
  explicit ListIterator(std::vector<datasets::Batch> batches) : batches_(std::move(batches)) {}
  std::optional<datasets::Batch> next() override {
    if (drawn_ == batches_.size()) return std::nullopt;
    return batches_[drawn_++];
  }
  size_t drawn() const { return drawn_; }

 private:
  std::vector<datasets::Batch> batches_;
  size_t drawn_ = 0;
};

TEST(Schedules, ForwardStepDrawsFromAnyBatchIterator) {
  auto ps = ParallelState::initialize_model_parallel(megatron::testing::world(), 1, 1, std::nullopt);
  transformer::TransformerConfig config(2, kHidden, 4);
  config.hidden_dropout(0).attention_dropout(0);
  GPTModel model(models::gpt::gpt_model_options_for_rank(ps, config, kVocab, kSeq, std::nullopt));
  // Only what the GPT step needs: no position ids, no attention mask.
  std::vector<datasets::Batch> batches;
  for (int i = 0; i < 3; ++i) {
    auto tokens = at::randint(kVocab, {kMicroBatch, kSeq}, at::kLong);
    batches.push_back(
        {{"tokens", tokens}, {"labels", tokens.roll(-1, 1)}, {"loss_mask", at::ones({kMicroBatch, kSeq})}});
  }
  ListIterator it(batches);
  at::NoGradGuard no_grad;
  auto result = pp::forward_backward_no_pipelining(ps, forward_step, {&it}, {model.ptr().get()}, options(3, true));
  EXPECT_EQ(it.drawn(), 3u);
  ASSERT_EQ(result.losses_reduced.size(), 3u);
  for (size_t i = 0; i < batches.size(); ++i) {
    // Reference: the model called directly, the mean over a mask of ones.
    auto expected = model->forward(batches[i].at("tokens"), {}, {}, batches[i].at("labels")).mean().item<double>();
    EXPECT_NEAR(result.losses_reduced[i].at("lm loss").item<double>(), expected, 1e-6) << "micro-batch " << i;
  }
  ListIterator unlabelled({{{"tokens", batches[0].at("tokens")}}});
  EXPECT_NE(megatron::testing::error_of([&] {
              pp::forward_backward_no_pipelining(ps, forward_step, {&unlabelled}, {model.ptr().get()},
                                                 options(1, true));
            }).find("forward_step: the batch has no 'labels' tensor"),
            std::string::npos);
}

}  // namespace
