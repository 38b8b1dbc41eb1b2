// Pretrain GPT: Megatron-LM's pretrain_gpt.py in C++. This file only says how to build the
// model and the datasets and how one micro-batch goes through the model; pretrain() does the rest.
//   mpirun -np 2 build/bin/pretrain_gpt --num-layers 2 --hidden-size 64 ... (see --help)
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <memory>

#include "megatron/comm/process_group.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/training/config.h"
#include "megatron/training/training.h"

using namespace megatron;
using training::TrainingContext;

namespace {

std::unique_ptr<tokenizer::Tokenizer> g_tokenizer;  // built once from the flags, as in Megatron-LM

std::shared_ptr<torch::nn::Module> model_builder(const TrainingContext& ctx, bool pre_process,
                                                 bool post_process) {
  log_rank_0(LogLevel::kInfo, "building GPT model ...");
  const auto& args = ctx.args;
  models::gpt::GPTModelOptions options(training::core_transformer_config_from_args(ctx),
                                       g_tokenizer->vocab_size(), args.max_position_embeddings);
  options.make_vocab_size_divisible_by(args.make_vocab_size_divisible_by)
      .pre_process(pre_process)
      .post_process(post_process)
      .pipeline_model_parallel_rank(ctx.parallel_state.get_pipeline_model_parallel_rank())
      .virtual_pipeline_model_parallel_rank(ctx.virtual_pipeline_model_parallel_rank.value_or(0))
      .share_embeddings_and_output_weights(!args.untie_embeddings_and_output_weights)
      .position_embedding_type(args.position_embedding_type == "rope"
                                   ? models::gpt::PositionEmbeddingType::kRope
                                   : models::gpt::PositionEmbeddingType::kLearnedAbsolute)
      .rotary_percent(args.rotary_percent)
      .rotary_base(args.rotary_base)
      .seed(args.seed);
  return models::gpt::GPTModel(options).ptr();
}

training::Datasets dataset_builder(const TrainingContext& ctx, const std::array<int64_t, 3>& num_samples) {
  const auto& args = ctx.args;
  datasets::GPTDatasetConfig config;
  config.random_seed = static_cast<uint32_t>(args.seed);
  config.sequence_length = args.seq_length;
  config.split = args.split;
  config.path_to_cache = args.data_cache_path;
  const std::array<std::optional<int64_t>, 3> sizes = {num_samples[0], num_samples[1], num_samples[2]};
  // Rank 0 builds the index caches, the others load them after it (a failure on rank 0 reaches
  // every rank through the barrier).
  auto& world = ctx.parallel_state.get_world_group();
  auto ds = args.mock_data
                ? datasets::build_mock_gpt_datasets(g_tokenizer->vocab_size(), g_tokenizer->eod(), sizes, config)
                : datasets::build_gpt_datasets_on_ranks(datasets::parse_data_path(args.data_path), sizes,
                                                        config, world.rank(), [&] { world.barrier(); });
  return {ds[0], ds[1], ds[2], g_tokenizer->eod()};
}

datasets::GPTBatch get_batch(datasets::DataIterator& data_iterator, c10::Device device) {
  auto batch = data_iterator.next();
  TORCH_CHECK(batch, "[pretrain_gpt] the data iterator ran out of samples");
  auto to = [&](at::Tensor& t) {
    if (t.defined()) t = t.to(device, /*non_blocking=*/true);
  };
  to(batch->tokens);
  to(batch->labels);
  to(batch->loss_mask);
  to(batch->attention_mask);
  to(batch->position_ids);
  return *batch;
}

// Mean of the per-token losses where loss_mask is 1.
std::pair<at::Tensor, std::map<std::string, at::Tensor>> loss_func(const at::Tensor& loss_mask,
                                                                    const at::Tensor& output_tensor) {
  auto losses = output_tensor.to(at::kFloat).reshape({-1});
  auto mask = loss_mask.reshape({-1});
  auto loss = (losses * mask).sum() / mask.sum();
  return {loss, {{"lm loss", loss.detach()}}};
}

std::pair<at::Tensor, training::LossFunc> forward_step(datasets::DataIterator& data_iterator,
                                                       torch::nn::Module& model) {
  auto& gpt = dynamic_cast<models::gpt::GPTModelImpl&>(model);
  auto device = gpt.parameters().front().device();
  auto batch = get_batch(data_iterator, device);
  auto output = gpt.forward(batch.tokens, batch.position_ids, batch.attention_mask, batch.labels);
  auto loss_mask = batch.loss_mask;
  return {output, [loss_mask](const at::Tensor& out) { return loss_func(loss_mask, out); }};
}

}  // namespace

#ifndef PRETRAIN_GPT_NO_MAIN  // tests/training include this file for its callbacks
int main(int argc, char** argv) {
  const auto env = comm::LauncherEnv::from_environment();
  init_logging({env.rank, env.world_size, ""});
  std::optional<training::Arguments> args;
  try {
    args = training::parse_arguments({argv + 1, argv + argc}, env.world_size);
    if (!args) return 0;  // --help
    tokenizer::TokenizerOptions t;
    t.tokenizer_type = args->tokenizer_type.empty() ? "NullTokenizer" : args->tokenizer_type;
    t.vocab_file = args->vocab_file;
    t.merge_file = args->merge_file;
    t.vocab_size = args->vocab_size.value_or(0);
    g_tokenizer = tokenizer::build_tokenizer(t);
  } catch (const c10::Error& e) {
    // The same on every rank: say it once.
    if (env.rank == 0) std::fprintf(stderr, "pretrain_gpt: %s\n", e.what_without_backtrace());
    return 2;
  } catch (const std::exception& e) {
    if (env.rank == 0) std::fprintf(stderr, "pretrain_gpt: %s\n", e.what());
    return 2;
  }
  try {
    training::pretrain(*args, model_builder, dataset_builder, forward_step);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "pretrain_gpt: [rank %d] %s\n", env.rank, e.what_without_backtrace());
    comm::abort_job(1);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pretrain_gpt: [rank %d] %s\n", env.rank, e.what());
    comm::abort_job(1);
    return 1;
  }
  return 0;
}
#endif  // PRETRAIN_GPT_NO_MAIN
