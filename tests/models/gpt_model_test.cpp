// GPTModel: TP = world size against TP = 1 built from the same seed (logits, loss, every gathered
// gradient), layout-independent initialisation across pipeline stages, activation recompute,
// state-dict names and round trip, config errors. Runs under mpirun -np 1, 2 and 4.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "error_of.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/transformer/attention.h"
#include "tensor_parallel/tp_test_util.h"

namespace tp = megatron::tensor_parallel;
namespace tr = megatron::transformer;
using megatron::models::gpt::GPTModel;
using megatron::models::gpt::GPTModelOptions;
using megatron::models::gpt::PositionEmbeddingType;
using megatron::testing::gather_shards;
using megatron::testing::rel_error;
using megatron::testing::world;
using megatron::testing::world_tp_group;

namespace {

constexpr double kTol = 1e-5;
constexpr int64_t kVocab = 100, kSeq = 8, kBatch = 2;

tr::TransformerConfig gpt2_config() {
  return tr::TransformerConfig(2, 32, 4).hidden_dropout(0.0).attention_dropout(0.0);
}

tr::TransformerConfig llama_config() {
  return tr::TransformerConfig(2, 32, 8)
      .num_query_groups(4)
      .ffn_hidden_size(48)
      .normalization(tr::Normalization::kRMSNorm)
      .gated_linear_unit(true)
      .activation(tr::Activation::kSilu)
      .add_bias_linear(false)
      .hidden_dropout(0.0)
      .attention_dropout(0.0);
}

GPTModelOptions gpt2_options(tr::TransformerConfig c) {
  return GPTModelOptions(std::move(c), kVocab, 16).make_vocab_size_divisible_by(8).seed(7);
}

GPTModelOptions llama_options(tr::TransformerConfig c) {
  return GPTModelOptions(std::move(c), kVocab, 16)
      .make_vocab_size_divisible_by(8)
      .position_embedding_type(PositionEmbeddingType::kRope)
      .rotary_percent(0.5)
      .share_embeddings_and_output_weights(false)
      .seed(7);
}

// The same options on TP = 1 (vocab padded to the TP model's multiple, so shapes agree).
GPTModelOptions single_rank(GPTModelOptions o, int tp_size) {
  auto c = o.config();
  c.tensor_model_parallel_size(1).tp_group(nullptr).sequence_parallel(false);
  return o.config(c).make_vocab_size_divisible_by(o.make_vocab_size_divisible_by() * tp_size);
}

GPTModelOptions on_world(GPTModelOptions o, bool sequence_parallel = false, bool domino = false) {
  auto g = world_tp_group();
  auto c = o.config();
  c.tensor_model_parallel_size(tp::group_size(g)).tp_group(g).sequence_parallel(sequence_parallel).domino(domino);
  return o.config(c);
}

at::Tensor input_ids() {
  return at::arange(kBatch * kSeq, at::kLong).mul(37).add(5).remainder(kVocab).view({kBatch, kSeq});
}
at::Tensor labels() {
  return input_ids().roll(-1, 1);
}

void compare_models(GPTModelOptions base, bool sequence_parallel, bool domino = false) {
  auto g = world_tp_group();
  const int n = tp::group_size(g);
  GPTModel ref(single_rank(base, n));
  GPTModel par(on_world(base, sequence_parallel, domino));
  ASSERT_EQ(ref->padded_vocab_size(), par->padded_vocab_size());

  // Same full weights at init.
  auto ref_params = ref->sharded_parameters();
  auto par_params = par->sharded_parameters();
  ASSERT_EQ(ref_params.size(), par_params.size());
  for (size_t i = 0; i < ref_params.size(); ++i) {
    ASSERT_EQ(ref_params[i].name, par_params[i].name);
    EXPECT_TRUE(at::equal(gather_shards(par_params[i].param, par_params[i].init.layout, g), ref_params[i].param))
        << par_params[i].name;
  }

  // Logits (gathered).
  at::Tensor logits_ref = ref->forward(input_ids());
  at::Tensor logits = par->forward(input_ids());
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{kBatch, kSeq, ref->padded_vocab_size()}));
  EXPECT_REL_CLOSE(logits, logits_ref, kTol);

  // Loss and gradients.
  at::Tensor loss_ref = ref->forward(input_ids(), {}, {}, labels());
  at::Tensor loss = par->forward(input_ids(), {}, {}, labels());
  EXPECT_EQ(loss.sizes(), (std::vector<int64_t>{kBatch, kSeq}));
  EXPECT_REL_CLOSE(loss, loss_ref, kTol);
  loss_ref.mean().backward();
  loss.mean().backward();
  par->allreduce_sequence_parallel_grads();
  for (size_t i = 0; i < ref_params.size(); ++i) {
    SCOPED_TRACE(par_params[i].name);
    ASSERT_TRUE(par_params[i].param.grad().defined());
    EXPECT_REL_CLOSE(gather_shards(par_params[i].param.grad(), par_params[i].init.layout, g),
                     ref_params[i].param.grad(), kTol);
  }
}

TEST(GPTModel, Gpt2MatchesSingleRank) {
  compare_models(gpt2_options(gpt2_config()), false);
}
TEST(GPTModel, LlamaMatchesSingleRank) {
  compare_models(llama_options(llama_config()), false);
}
TEST(GPTModel, SequenceParallelMatchesSingleRank) {
  compare_models(gpt2_options(gpt2_config()), true);
  compare_models(llama_options(llama_config()), true);
}

// --domino (the embedding's all-reduce split by half, the layers on the two halves): the same
// logits, loss and gradients.
TEST(GPTModel, DominoMatchesSingleRank) {
  compare_models(gpt2_options(gpt2_config()), false, true);
  compare_models(llama_options(llama_config()), false, true);
}

// --domino on halves of two sequences each, with position ids [1, s] shared by every sequence.
TEST(GPTModel, DominoOnHalvesOfSeveralSequencesMatchesSingleRank) {
  auto g = world_tp_group();
  const GPTModelOptions base = gpt2_options(gpt2_config());
  GPTModel ref(single_rank(base, tp::group_size(g)));
  GPTModel par(on_world(base, false, true));
  const at::Tensor ids = at::arange(4 * kSeq, at::kLong).mul(29).add(3).remainder(kVocab).view({4, kSeq});
  const at::Tensor positions = at::arange(kSeq, at::kLong).unsqueeze(0);
  at::Tensor want = ref->forward(ids, positions, {}, ids.roll(-1, 1));
  at::Tensor got = par->forward(ids, positions, {}, ids.roll(-1, 1));
  EXPECT_REL_CLOSE(got, want, kTol);
  want.mean().backward();
  got.mean().backward();
  auto ref_params = ref->sharded_parameters();
  auto par_params = par->sharded_parameters();
  ASSERT_EQ(ref_params.size(), par_params.size());
  for (size_t i = 0; i < ref_params.size(); ++i) {
    SCOPED_TRACE(par_params[i].name);
    EXPECT_REL_CLOSE(gather_shards(par_params[i].param.grad(), par_params[i].init.layout, g),
                     ref_params[i].param.grad(), kTol);
  }
}

// --domino: the embedding launches one all-reduce per half, and half 1's is waited for only once
// half 0's first attention has run (its all-reduce issued), so that it is hidden under it.
TEST(GPTModel, DominoEmbeddingReduceOfHalfOneRunsUnderHalfZerosAttention) {
  auto g = world_tp_group();
  GPTModel par(on_world(gpt2_options(gpt2_config()), false, true));
  if (!g) return;  // TP 1: no collectives (the numbers are DominoMatchesSingleRank's)
  std::vector<std::string> events;
  g->set_issue_observer([&](const std::string& e) { events.push_back(e); });
  par->forward(input_ids());
  g->set_issue_observer(nullptr);
  const std::string half = "all_reduce(sum) [8, 1, 32]";  // [s, b/2, h]
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0], half) << "rank " << g->rank();
  EXPECT_EQ(events[1], half) << "rank " << g->rank();
  // Issues are numbered from 0; the third (number 2) is half 0's first attention all-reduce.
  const auto at = [&](const std::string& e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
  size_t issued = 0, third_issue = events.size();
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].rfind("wait ", 0) != 0 && ++issued == 3) third_issue = i;
  EXPECT_LT(at("wait 0"), static_cast<std::ptrdiff_t>(third_issue)) << "rank " << g->rank();
  EXPECT_GT(at("wait 1"), static_cast<std::ptrdiff_t>(third_issue)) << "rank " << g->rank();
}

// A TP = 1 state dict loads into the TP model (each rank keeps its shards) and the TP model's
// gathered state dict is the TP = 1 one.
TEST(GPTModel, FullStateDictReshards) {
  for (bool llama : {false, true}) {
    const int n = tp::group_size(world_tp_group());
    auto base = llama ? llama_options(llama_config()) : gpt2_options(gpt2_config());
    GPTModel ref(single_rank(base, n));
    GPTModel par(on_world(base).seed(1000));
    auto ref_sd = ref->state_dict();
    par->load_full_state_dict(ref_sd);
    auto full = par->full_state_dict();
    ASSERT_EQ(full.size(), ref_sd.size());
    for (const auto& [k, v] : ref_sd) EXPECT_TRUE(at::equal(full.at(k), v)) << k;
    EXPECT_REL_CLOSE(par->forward(input_ids()), ref->forward(input_ids()), kTol);
  }
}

// The tied weight's gradient is dense (the lookup's sparse part is summed into the output
// layer's dense part) and accumulates over micro-batches.
TEST(GPTModel, TiedEmbeddingGradIsDenseAndAccumulates) {
  GPTModel model(gpt2_options(gpt2_config()));
  at::Tensor w = model->shared_embedding_or_output_weight();
  model->forward(input_ids(), {}, {}, labels()).mean().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_FALSE(w.grad().is_sparse());
  at::Tensor once = w.grad().clone();
  model->forward(input_ids(), {}, {}, labels()).mean().backward();
  EXPECT_FALSE(w.grad().is_sparse());
  EXPECT_REL_CLOSE(w.grad(), once * 2, 1e-6);
}

TEST(GPTModel, ParallelOutputKeepsVocabShard) {
  auto g = world_tp_group();
  GPTModel par(on_world(gpt2_options(gpt2_config())).parallel_output(true));
  at::Tensor logits = par->forward(input_ids());
  EXPECT_EQ(logits.size(2), par->padded_vocab_size() / tp::group_size(g));
}

// Pipeline stages hold the same weights as the whole model: layer i of stage k is global layer
// k * layers_per_stage + i, and the last stage's output weight starts equal to the embedding.
TEST(GPTModel, PipelineStagesInitialiseLikeTheWholeModel) {
  auto cfg = gpt2_config().num_layers(4);
  GPTModel whole(gpt2_options(cfg));
  auto staged = cfg;
  staged.pipeline_model_parallel_size(2);
  GPTModel first(gpt2_options(staged).post_process(false).pipeline_model_parallel_rank(0));
  GPTModel last(gpt2_options(staged).pre_process(false).pipeline_model_parallel_rank(1));
  auto w = whole->state_dict();
  auto f = first->state_dict();
  auto l = last->state_dict();
  EXPECT_TRUE(f.count("embedding.word_embeddings.weight"));
  EXPECT_FALSE(f.count("output_layer.weight"));
  EXPECT_FALSE(f.count("decoder.final_layernorm.weight"));
  EXPECT_FALSE(l.count("embedding.word_embeddings.weight"));
  EXPECT_TRUE(l.count("decoder.final_layernorm.weight"));
  EXPECT_FALSE(w.count("output_layer.weight"));  // tied: the embedding is the output weight
  EXPECT_TRUE(at::equal(l.at("output_layer.weight"), w.at("embedding.word_embeddings.weight")));
  const std::string qkv = ".self_attention.linear_qkv.weight";
  EXPECT_TRUE(at::equal(f.at("decoder.layers.1" + qkv), w.at("decoder.layers.1" + qkv)));
  EXPECT_TRUE(at::equal(l.at("decoder.layers.0" + qkv), w.at("decoder.layers.2" + qkv)));
  EXPECT_TRUE(at::equal(l.at("decoder.layers.1" + qkv), w.at("decoder.layers.3" + qkv)));
  EXPECT_FALSE(at::equal(l.at("decoder.layers.0" + qkv), w.at("decoder.layers.0" + qkv)));

  // Running the two stages one after the other gives the whole model's loss.
  at::Tensor loss = whole->forward(input_ids(), {}, {}, labels());
  at::Tensor hidden = first->forward(input_ids());
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{kSeq, kBatch, 32}));
  last->set_input_tensor(hidden);
  EXPECT_REL_CLOSE(last->forward(input_ids(), {}, {}, labels()), loss, kTol);
}

// A real two-stage pipeline on two ranks (ParallelState with PP = 2): stage 0 sends its hidden
// states to stage 1 and receives their gradient back; after the embedding-group all-reduce every
// gradient equals the single-stage model's.
TEST(GPTModel, TwoStagePipelineMatchesWholeModel) {
  if (world()->size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  auto ps = megatron::ParallelState::initialize_model_parallel(world(), 1, 2);
  auto cfg = gpt2_config().num_layers(4);
  GPTModel whole(gpt2_options(cfg));
  auto opts =
      megatron::models::gpt::gpt_model_options_for_rank(ps, cfg, kVocab, 16).make_vocab_size_divisible_by(8).seed(7);
  GPTModel stage(opts);
  const bool first = ps.is_pipeline_first_stage();
  EXPECT_EQ(first, ps.get_pipeline_model_parallel_rank() == 0);
  whole->forward(input_ids(), {}, {}, labels()).mean().backward();

  auto& pp = ps.get_pipeline_model_parallel_group();
  if (first) {
    at::Tensor hidden = stage->forward(input_ids());
    pp.send(hidden.detach().contiguous(), 1);
    at::Tensor grad = at::empty_like(hidden);
    pp.recv(grad, 1);
    hidden.backward(grad);
  } else {
    at::Tensor hidden = at::empty({kSeq, kBatch, 32});
    pp.recv(hidden, 0);
    hidden.requires_grad_(true);
    stage->set_input_tensor(hidden);
    stage->forward(input_ids(), {}, {}, labels()).mean().backward();
    pp.send(hidden.grad().contiguous(), 0);
  }
  stage->allreduce_word_embedding_grads(ps.get_embedding_group());

  std::map<std::string, at::Tensor> whole_grads;
  for (const auto& item : whole->named_parameters()) whole_grads[item.key()] = item.value().grad();
  for (const auto& sp : stage->sharded_parameters()) {
    SCOPED_TRACE(sp.name);
    ASSERT_TRUE(whole_grads.count(sp.init_name));  // the global name on the whole model
    EXPECT_REL_CLOSE(sp.param.grad(), whole_grads.at(sp.init_name), kTol);
  }
}

TEST(GPTModel, StateDictNamesAndRoundTrip) {
  GPTModel model(gpt2_options(gpt2_config().num_layers(1)));
  std::vector<std::string> names;
  for (const auto& [k, v] : model->state_dict()) names.push_back(k);
  std::vector<std::string> expected{"decoder.final_layernorm.bias",
                                    "decoder.final_layernorm.weight",
                                    "decoder.layers.0.input_layernorm.bias",
                                    "decoder.layers.0.input_layernorm.weight",
                                    "decoder.layers.0.mlp.linear_fc1.bias",
                                    "decoder.layers.0.mlp.linear_fc1.weight",
                                    "decoder.layers.0.mlp.linear_fc2.bias",
                                    "decoder.layers.0.mlp.linear_fc2.weight",
                                    "decoder.layers.0.pre_mlp_layernorm.bias",
                                    "decoder.layers.0.pre_mlp_layernorm.weight",
                                    "decoder.layers.0.self_attention.linear_proj.bias",
                                    "decoder.layers.0.self_attention.linear_proj.weight",
                                    "decoder.layers.0.self_attention.linear_qkv.bias",
                                    "decoder.layers.0.self_attention.linear_qkv.weight",
                                    "embedding.position_embeddings.weight",
                                    "embedding.word_embeddings.weight"};
  EXPECT_EQ(names, expected);
  auto sd = model->state_dict();
  EXPECT_EQ(sd.at("embedding.word_embeddings.weight").sizes(), (std::vector<int64_t>{104, 32}));
  EXPECT_EQ(sd.at("decoder.layers.0.self_attention.linear_qkv.weight").sizes(), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(sd.at("decoder.layers.0.mlp.linear_fc1.weight").sizes(), (std::vector<int64_t>{128, 32}));
  // Megatron init: std 0.02, output projections 0.02 / sqrt(2 * num_layers), biases 0, norms 1.
  EXPECT_NEAR(sd.at("decoder.layers.0.mlp.linear_fc1.weight").std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(sd.at("decoder.layers.0.mlp.linear_fc2.weight").std().item<double>(), 0.02 / std::sqrt(2.0), 0.002);
  EXPECT_TRUE(at::equal(sd.at("decoder.layers.0.mlp.linear_fc2.bias"), at::zeros({32})));
  EXPECT_TRUE(at::equal(sd.at("decoder.final_layernorm.weight"), at::ones({32})));

  // Round trip through a file into a model with another seed.
  const std::string path = ::testing::TempDir() + "gpt_state_" + std::to_string(world()->rank()) + ".pt";
  model->save_state_dict_file(path);
  GPTModel other(gpt2_options(gpt2_config().num_layers(1)).seed(99));
  EXPECT_FALSE(
      at::equal(other->state_dict().at("embedding.word_embeddings.weight"), sd.at("embedding.word_embeddings.weight")));
  other->load_state_dict_file(path);
  for (const auto& [k, v] : other->state_dict()) EXPECT_TRUE(at::equal(v, sd.at(k))) << k;
  std::remove(path.c_str());

  auto bad = sd;
  bad.erase("decoder.final_layernorm.bias");
  try {
    other->load_state_dict(bad);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("missing key 'decoder.final_layernorm.bias'"),
              std::string::npos)
        << e.what_without_backtrace();
  }
}

std::vector<at::Tensor> grads_with(tr::TransformerConfig cfg, bool llama) {
  auto g = world_tp_group();
  const int rank = tp::group_rank(g);
  cfg.hidden_dropout(0.2).attention_dropout(0.2);
  cfg.rng_tracker(tp::model_parallel_manual_seed(11, rank));
  auto opts = on_world(llama ? llama_options(cfg) : gpt2_options(cfg));
  GPTModel model(opts);
  model->train();
  model->forward(input_ids(), {}, {}, labels()).mean().backward();
  std::vector<at::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
  return out;
}

TEST(GPTModel, RecomputeGivesIdenticalGradients) {
  for (bool llama : {false, true}) {
    auto base = llama ? llama_config() : gpt2_config().num_layers(3);
    auto reference = grads_with(base, llama);
    std::vector<tr::TransformerConfig> variants{
        tr::TransformerConfig(base).recompute_granularity(tr::RecomputeGranularity::kSelective),
        tr::TransformerConfig(base).recompute_granularity(tr::RecomputeGranularity::kFull),
        tr::TransformerConfig(base).recompute_granularity(tr::RecomputeGranularity::kFull).recompute_num_layers(2),
        tr::TransformerConfig(base)
            .recompute_granularity(tr::RecomputeGranularity::kFull)
            .recompute_method(tr::RecomputeMethod::kBlock)};
    for (size_t v = 0; v < variants.size(); ++v) {
      SCOPED_TRACE(testing::Message() << "llama=" << llama << " variant " << v);
      auto grads = grads_with(variants[v], llama);
      ASSERT_EQ(grads.size(), reference.size());
      for (size_t i = 0; i < grads.size(); ++i) EXPECT_REL_CLOSE(grads[i], reference[i], 0.0);
    }
  }
}

// Megatron's explicit mask (bool [b, 1, s, s], true = masked out) and explicit position ids give
// what the implicit causal mask and positions 0..s-1 give; a mask that hides more changes logits.
TEST(GPTModel, ExplicitMaskAndPositions) {
  for (bool llama : {false, true}) {
    GPTModel model(llama ? llama_options(llama_config()) : gpt2_options(gpt2_config()));
    at::Tensor implicit = model->forward(input_ids());
    at::Tensor causal = at::ones({kSeq, kSeq}, at::kBool).triu(1).view({1, 1, kSeq, kSeq});
    at::Tensor positions = at::arange(kSeq, at::kLong).unsqueeze(0).expand({kBatch, kSeq});
    EXPECT_REL_CLOSE(model->forward(input_ids(), positions, causal.expand({kBatch, 1, kSeq, kSeq})), implicit, 1e-6);
    at::Tensor window = causal.logical_or(at::ones({kSeq, kSeq}, at::kBool).tril(-3));
    at::Tensor windowed = model->forward(input_ids(), positions, window);
    EXPECT_REL_CLOSE(windowed.narrow(1, 0, 3), implicit.narrow(1, 0, 3), 1e-6);
    EXPECT_GT(rel_error(windowed, implicit), 1e-3);
  }
}

TEST(GPTModel, DropoutIsActiveInTrainingOnly) {
  auto cfg = gpt2_config().hidden_dropout(0.3).attention_dropout(0.3);
  GPTModel model(gpt2_options(cfg));
  model->eval();
  at::Tensor a = model->forward(input_ids());
  EXPECT_TRUE(at::equal(a, model->forward(input_ids())));
  model->train();
  EXPECT_FALSE(at::equal(model->forward(input_ids()), model->forward(input_ids())));
}

using megatron::testing::error_of;

// Rotary angles reach the sequence length in radians; in bf16 they would be off by whole radians
// (spacing 4 at 1000). Written out here: x * cos + rotate_half(x) * sin, in fp64.
TEST(Rotary, HalfPrecisionAtLongPositionsStaysWithinItsRounding) {
  const int64_t s = 2048, d = 8;
  at::Tensor inv_freq = 1.0 / at::pow(10000.0, at::arange(0, d, 2, at::kDouble) / d);
  at::Tensor angles = at::outer(at::arange(s, at::kDouble), inv_freq);
  at::Tensor freqs = at::cat({angles, angles}, -1).view({s, 1, 1, d}).to(at::kFloat);
  at::manual_seed(0);
  at::Tensor x = at::randn({s, 1, 1, d}, at::kDouble);
  at::Tensor rotated = at::cat({-x.narrow(-1, d / 2, d / 2), x.narrow(-1, 0, d / 2)}, -1);
  at::Tensor f = freqs.to(at::kDouble);
  at::Tensor want = x * f.cos() + rotated * f.sin();
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    at::Tensor got = tr::apply_rotary_pos_emb(x.to(dtype), freqs).to(at::kDouble);
    // Rounding of x, of cos/sin and of the products and sum: a few units of 2^-8 (bf16).
    EXPECT_LT((got - want).abs().max().item<double>(), 0.05) << dtype;
  }
}

TEST(TransformerConfig, ErrorsNameTheProblem) {
  EXPECT_EQ(error_of([] { tr::TransformerConfig(2, 60, 12).tensor_model_parallel_size(5).finalize(); })
                .rfind("[transformer_config] num_attention_heads (12) must be divisible by "
                       "tensor_model_parallel_size (5)",
                       0),
            0u);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 30, 4).finalize();
            }).find("hidden_size (30) must be divisible by num_attention_heads (4)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 32, 8).num_query_groups(3).finalize();
            }).find("num_attention_heads (8) must be divisible by num_query_groups (3)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 32, 8).num_query_groups(2).tensor_model_parallel_size(4).finalize();
            }).find("num_query_groups (2) must be divisible by tensor_model_parallel_size (4)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 32, 4).tensor_model_parallel_size(2).finalize();
            }).find("no tp_group was given"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 32, 4).hidden_dropout(1.5).finalize();
            }).find("hidden_dropout must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              tr::TransformerConfig(2, 32, 4)
                  .recompute_granularity(tr::RecomputeGranularity::kFull)
                  .recompute_num_layers(3)
                  .finalize();
            }).find("recompute_num_layers (3) must be in [1, num_layers (2)]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              GPTModel(gpt2_options(gpt2_config().num_layers(3).pipeline_model_parallel_size(2)));
            }).find("--num-layers (3) is not divisible by --pipeline-model-parallel-size (2)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              GPTModel m(gpt2_options(gpt2_config()));
              m->forward(at::zeros({1, 20}, at::kLong));
            }).find("exceeds max_sequence_length (16)"),
            std::string::npos);
}

TEST(VocabPadding, MegatronRule) {
  using megatron::models::common::vocab_size_with_padding;
  EXPECT_EQ(vocab_size_with_padding(50257, 128, 1), 50304);
  EXPECT_EQ(vocab_size_with_padding(50257, 128, 8), 51200);
  EXPECT_EQ(vocab_size_with_padding(256, 128, 2), 256);
}

}  // namespace
