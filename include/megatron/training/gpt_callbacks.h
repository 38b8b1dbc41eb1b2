// pretrain_gpt's callbacks (Megatron-LM's pretrain_gpt.py: model_provider, the datasets
// provider, get_batch, loss_func, forward_step). examples/pretrain_gpt.cpp's callbacks call them,
// and the Python package uses them when a callback is not given from Python.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "megatron/datasets/data_iterator.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/training/arguments.h"
#include "megatron/training/training.h"

namespace megatron::training {

// The tokenizer the flags name: --tokenizer-type (NullTokenizer when empty, as for --mock-data),
// --vocab-file, --merge-file, --vocab-size.
MEGATRON_API std::unique_ptr<tokenizer::Tokenizer> build_tokenizer(const Arguments& args);

// GPTModel for this rank's pipeline stage (and model chunk, with virtual stages) as the flags
// describe it (Megatron's model_provider); vocab_size is the tokenizer's, before padding.
MEGATRON_API std::shared_ptr<torch::nn::Module> gpt_model_provider(const TrainingContext& ctx, bool pre_process,
                                                                   bool post_process, int64_t vocab_size);

// Train/valid/test GPT datasets of the requested sample counts from --data-path (rank 0 builds
// the index caches, the others load them after a barrier) or --mock-data.
MEGATRON_API Datasets gpt_datasets_provider(const TrainingContext& ctx, const std::array<int64_t, 3>& num_samples,
                                            const tokenizer::Tokenizer& tokenizer);

// The next micro-batch with its tensors on `device`; running out of samples is an error.
MEGATRON_API datasets::Batch get_batch(datasets::BatchIterator& data_iterator, c10::Device device);

// Megatron-LM's get_batch_on_this_cp_rank: tokens, labels, loss_mask, position_ids and
// attention_mask cut along the sequence (dimension 1; the mask's query dimension 2) to
// context-parallel rank cp_rank's two of 2 x cp_size chunks, chunks cp_rank and
// 2 x cp_size - 1 - cp_rank; other tensors pass through. cp_size 1: the batch as is.
MEGATRON_API datasets::Batch get_batch_on_this_cp_rank(datasets::Batch batch, int cp_size, int cp_rank);

// (the per-token losses summed where loss_mask is 1, the number of those tokens).
MEGATRON_API std::pair<at::Tensor, at::Tensor> gpt_loss_sum(const at::Tensor& loss_mask,
                                                            const at::Tensor& output_tensor);
// Their mean, reported as "lm loss", with the number of tokens.
MEGATRON_API LossResult gpt_loss_func(const at::Tensor& loss_mask, const at::Tensor& output_tensor);

// One micro-batch through a GPTModel: (per-token loss [b, s], loss_func bound to its loss mask).
// The batch needs "tokens", "labels" and "loss_mask"; "position_ids" and "attention_mask" are
// used when present. With context parallelism (the model's cp_group) each rank keeps its chunks
// of the sequence (get_batch_on_this_cp_rank) and its loss is the mean over its own tokens, as in
// Megatron-LM: the gradients' average over the context-parallel ranks makes the whole mean.
MEGATRON_API std::pair<at::Tensor, LossFunc> gpt_forward_step(datasets::BatchIterator& data_iterator,
                                                              torch::nn::Module& model);

// The three callbacks as pretrain() takes them, bound to one tokenizer.
struct MEGATRON_API GPTCallbacks {
  ModelBuilder model_builder;
  DatasetBuilder dataset_builder;
  ForwardStepFunc forward_step;
};
MEGATRON_API GPTCallbacks gpt_callbacks(std::shared_ptr<const tokenizer::Tokenizer> tokenizer);

}  // namespace megatron::training
