// The stack of layers of one pipeline stage, with activation recompute.
#include "megatron/transformer/transformer_block.h"

#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <string>

#include "megatron/tensor_parallel/random.h"

namespace megatron::transformer {

TransformerBlockImpl::TransformerBlockImpl(const TransformerConfig& config_, bool pre_process_, bool post_process_,
                                           std::optional<int64_t> num_local)
    : config(config_.finalize()),
      pre_process(pre_process_),
      post_process(post_process_),
      num_local_layers(num_local.value_or(config.num_layers())) {
  TORCH_CHECK(num_local_layers >= 0 && num_local_layers <= config.num_layers(),
              "[transformer_block] num_local_layers (", num_local_layers, ") must be in [0, ", config.num_layers(),
              "]");
  reset();
}

void TransformerBlockImpl::reset() {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_local_layers; ++i) layers->push_back(TransformerLayer(config));
  if (post_process) final_layernorm = register_module("final_layernorm", Norm(config));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& hidden_in, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor hidden = hidden_in;
  if (!pre_process) {
    TORCH_CHECK(input_tensor_.defined(),
                "[transformer_block] this stage has no embedding "
                "(pre_process=false): call set_input_tensor() before forward()");
    hidden = input_tensor_;
  }
  // Captures by value: a checkpointed chunk reruns in backward, after forward() has returned.
  auto run_layers = [this, attention_mask, rotary_pos_emb](at::Tensor h, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RECORD_USER_SCOPE("decoder.layers." + std::to_string(i));  // a named range in --profile traces
      auto layer = layers->ptr<TransformerLayerImpl>(i);
      if (layer->param_gather) layer->param_gather->before_forward();
      h = layer->forward(h, attention_mask, rotary_pos_emb);
      if (layer->param_gather) layer->param_gather->after_forward(h);
    }
    return h;
  };
  auto checkpointed = [&](const at::Tensor& h, int64_t begin, int64_t end) {
    auto outs = tensor_parallel::checkpoint(
        [run_layers, begin, end](const std::vector<at::Tensor>& in) {
          return std::vector<at::Tensor>{run_layers(in[0], begin, end)};
        },
        {h}, config.rng_tracker(), h.device());
    return outs[0];
  };
  const bool recompute = is_training() && config.recompute_granularity() == RecomputeGranularity::kFull;
  if (config.domino()) {
    hidden = run_domino(split_in_halves(hidden), attention_mask, rotary_pos_emb);
  } else if (!recompute) {
    hidden = run_layers(hidden, 0, num_local_layers);
  } else if (config.recompute_method() == RecomputeMethod::kUniform) {
    // Checkpoint chunks of recompute_num_layers layers (Megatron's "uniform").
    for (int64_t l = 0; l < num_local_layers; l += config.recompute_num_layers())
      hidden = checkpointed(hidden, l, std::min(l + config.recompute_num_layers(), num_local_layers));
  } else {
    // Checkpoint the first recompute_num_layers layers one by one, run the rest ("block").
    for (int64_t l = 0; l < num_local_layers; ++l)
      hidden = l < config.recompute_num_layers() ? checkpointed(hidden, l, l + 1) : run_layers(hidden, l, l + 1);
  }
  if (post_process) hidden = final_layernorm(hidden);
  return hidden;
}

at::Tensor TransformerBlockImpl::forward_domino(const DominoHalves& halves, const at::Tensor& attention_mask,
                                                const at::Tensor& rotary_pos_emb) {
  TORCH_CHECK(config.domino() && pre_process,
              "[transformer_block] halves are the embedding's, for the first stage under --domino");
  at::Tensor hidden = run_domino(halves, attention_mask, rotary_pos_emb);
  return post_process ? final_layernorm(hidden) : hidden;
}

// Domino: the layers run on the two halves of the micro-batch, rejoined before the final norm.
at::Tensor TransformerBlockImpl::run_domino(const DominoHalves& halves_in, const at::Tensor& attention_mask,
                                            const at::Tensor& rotary_pos_emb) {
  TORCH_CHECK(!(is_training() && config.recompute_granularity() == RecomputeGranularity::kFull),
              "[domino] --domino does not support --recompute-granularity full");
  DominoHalves halves = halves_in;
  std::array<at::Tensor, 2> masks{attention_mask, attention_mask};
  if (attention_mask.defined() && attention_mask.size(0) > 1) {
    auto m = attention_mask.chunk(2, 0);
    masks = {m[0], m[1]};
  }
  tensor_parallel::GradWaitChain chain;
  for (int64_t i = 0; i < num_local_layers; ++i) {
    RECORD_USER_SCOPE("decoder.layers." + std::to_string(i));
    auto layer = layers->ptr<TransformerLayerImpl>(i);
    // Only the wait before the forward: sharded parameters (released after it) refuse --domino.
    if (layer->param_gather) layer->param_gather->before_forward();
    halves = layer->forward_domino(halves, masks, rotary_pos_emb, chain);
  }
  return at::cat({halves[0].resolve(config, is_training()), halves[1].resolve(config, is_training())}, 1);
}

}  // namespace megatron::transformer
