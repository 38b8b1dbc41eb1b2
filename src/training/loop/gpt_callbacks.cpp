#include "megatron/training/gpt_callbacks.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include "megatron/comm/process_group.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/training/config.h"
#include "megatron/transformer/context_parallel.h"
#include "training/arguments/data_blends.h"

namespace megatron::training {

std::unique_ptr<tokenizer::Tokenizer> build_tokenizer(const Arguments& args) {
  tokenizer::TokenizerOptions t;
  t.tokenizer_type = args.tokenizer_type.empty() ? "NullTokenizer" : args.tokenizer_type;
  t.vocab_file = args.vocab_file;
  t.merge_file = args.merge_file;
  t.tokenizer_model = args.tokenizer_model;
  t.include_special_tokens = !args.tokenizer_hf_no_include_special_tokens;
  if (!args.tiktoken_pattern.empty()) t.tiktoken_pattern = args.tiktoken_pattern;
  t.tiktoken_num_special_tokens = args.tiktoken_num_special_tokens;
  t.special_tokens = args.tokenizer_special_tokens;
  t.vocab_size = args.vocab_size.value_or(0);
  return tokenizer::build_tokenizer(t);
}

std::shared_ptr<torch::nn::Module> gpt_model_provider(const TrainingContext& ctx, bool pre_process, bool post_process,
                                                      int64_t vocab_size) {
  log_rank_0(LogLevel::kInfo, "building GPT model ...");
  const auto& args = ctx.args;
  models::gpt::GPTModelOptions options(core_transformer_config_from_args(ctx), vocab_size,
                                       args.max_position_embeddings);
  options.make_vocab_size_divisible_by(args.make_vocab_size_divisible_by)
      .pad_vocab_size_to(args.pad_vocab_size_to)
      .pre_process(pre_process)
      .post_process(post_process)
      .pipeline_model_parallel_rank(ctx.parallel_state.get_pipeline_model_parallel_rank())
      .virtual_pipeline_model_parallel_rank(ctx.virtual_pipeline_model_parallel_rank.value_or(0))
      .share_embeddings_and_output_weights(!args.untie_embeddings_and_output_weights)
      .position_embedding_type(models::common::parse_position_embedding_type(args.position_embedding_type))
      .rotary_percent(args.rotary_percent)
      .rotary_base(args.rotary_base)
      .embed_layernorm(args.embed_layernorm)
      .seed(args.seed);
  if (args.use_rope_scaling)
    options.rope_scaling(models::common::RopeScaling{args.rope_scaling_factor, args.rope_scaling_low_freq_factor,
                                                     args.rope_scaling_high_freq_factor,
                                                     args.rope_scaling_original_max_position_embeddings});
  return models::gpt::GPTModel(options).ptr();
}

Datasets gpt_datasets_provider(const TrainingContext& ctx, const std::array<int64_t, 3>& num_samples,
                               const tokenizer::Tokenizer& tokenizer) {
  const auto& args = ctx.args;
  datasets::GPTDatasetConfig config;
  config.random_seed = static_cast<uint32_t>(args.seed);
  config.sequence_length = args.seq_length;
  config.split = args.split;
  config.path_to_cache = args.data_cache_path;
  config.mmap_bin_files = !args.no_mmap_bin_files;
  config.vocab_size = tokenizer.vocab_size();
  const std::array<std::optional<int64_t>, 3> sizes = {num_samples[0], num_samples[1], num_samples[2]};
  // Rank 0 builds the index caches, the others load them after it (a failure on rank 0 reaches
  // every rank through the barrier).
  auto& world = ctx.parallel_state.get_world_group();
  auto barrier = [&world] { world.barrier(); };
  const auto blends = detail::data_blends_from_args(args);
  auto ds = args.mock_data ? datasets::build_mock_gpt_datasets(tokenizer.vocab_size(), tokenizer.eod(), sizes, config)
            : blends.blend ? datasets::build_gpt_datasets_on_ranks(*blends.blend, sizes, config, world.rank(), barrier)
                           : datasets::build_gpt_datasets_per_split_on_ranks(blends.per_split, sizes, config,
                                                                             world.rank(), barrier);
  return {ds[0], ds[1], ds[2], tokenizer.eod()};
}

datasets::Batch get_batch(datasets::BatchIterator& data_iterator, c10::Device device) {
  auto batch = data_iterator.next();
  TORCH_CHECK(batch, "[pretrain_gpt] the data iterator ran out of samples");
  for (auto& [name, t] : *batch)
    if (t.defined() && t.device() != device) t = t.to(device, /*non_blocking=*/true);
  return std::move(*batch);
}

datasets::Batch get_batch_on_this_cp_rank(datasets::Batch batch, int cp_size, int cp_rank) {
  if (cp_size == 1) return batch;
  // The GPT micro-batch's tensors; others (the raw "text" of s + 1 tokens) pass through.
  for (const char* name : {"tokens", "labels", "loss_mask", "position_ids", "attention_mask"}) {
    auto it = batch.find(name);
    if (it == batch.end() || !it->second.defined()) continue;
    it->second = transformer::slice_for_context_parallel_rank(it->second, it->first == "attention_mask" ? 2 : 1,
                                                              cp_size, cp_rank);
  }
  return batch;
}

std::pair<at::Tensor, at::Tensor> gpt_loss_sum(const at::Tensor& loss_mask, const at::Tensor& output_tensor) {
  auto losses =
      (output_tensor.scalar_type() == at::kFloat ? output_tensor : output_tensor.to(at::kFloat)).reshape({-1});
  auto mask = loss_mask.reshape({-1});
  return {(losses * mask).sum(), mask.sum()};
}

LossResult gpt_loss_func(const at::Tensor& loss_mask, const at::Tensor& output_tensor) {
  auto [sum, num_tokens] = gpt_loss_sum(loss_mask, output_tensor);
  auto loss = sum / num_tokens;
  return {loss, {{"lm loss", loss.detach()}}, num_tokens.detach()};
}

std::pair<at::Tensor, LossFunc> gpt_forward_step(datasets::BatchIterator& data_iterator, torch::nn::Module& model) {
  auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(&model);
  TORCH_CHECK(gpt, "[pretrain_gpt] forward_step expects a GPTModel, found ", model.name());
  auto device = gpt->parameters().front().device();
  auto batch = get_batch_on_this_cp_rank(get_batch(data_iterator, device), gpt->config.context_parallel_size(),
                                         gpt->config.context_parallel_rank());
  auto field = [&](const char* name, bool required) {
    auto it = batch.find(name);
    TORCH_CHECK(!required || (it != batch.end() && it->second.defined()),
                "[pretrain_gpt] forward_step: the batch has no '", name,
                "' tensor (a GPT batch holds tokens, labels, loss_mask, position_ids, attention_mask)");
    return it == batch.end() ? at::Tensor() : it->second;
  };
  auto output = gpt->forward(field("tokens", true), field("position_ids", false), field("attention_mask", false),
                             field("labels", true));
  auto loss_mask = field("loss_mask", true);
  return {output, [loss_mask](const at::Tensor& out) { return gpt_loss_func(loss_mask, out); }};
}

GPTCallbacks gpt_callbacks(std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  TORCH_CHECK(tokenizer, "[pretrain_gpt] gpt_callbacks needs a tokenizer, found none");
  GPTCallbacks callbacks;
  callbacks.model_builder = [tokenizer](const TrainingContext& ctx, bool pre_process, bool post_process) {
    return gpt_model_provider(ctx, pre_process, post_process, tokenizer->vocab_size());
  };
  callbacks.dataset_builder = [tokenizer](const TrainingContext& ctx, const std::array<int64_t, 3>& num_samples) {
    return gpt_datasets_provider(ctx, num_samples, *tokenizer);
  };
  callbacks.forward_step = gpt_forward_step;
  return callbacks;
}

}  // namespace megatron::training
