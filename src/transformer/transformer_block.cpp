// The stack of layers of one pipeline stage, with activation recompute.
#include "megatron/transformer/transformer_block.h"

#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <string>

#include "megatron/tensor_parallel/random.h"
#include "megatron/transformer/domino.h"

namespace megatron::transformer {

TransformerBlockImpl::TransformerBlockImpl(const TransformerConfig& config_, bool pre_process_, bool post_process_,
                                           std::optional<int64_t> num_local, int64_t layer_offset_)
    : config(config_.finalize()),
      pre_process(pre_process_),
      post_process(post_process_),
      num_local_layers(num_local.value_or(config.num_layers())),
      layer_offset(layer_offset_) {
  TORCH_CHECK(num_local_layers >= 0 && num_local_layers <= config.num_layers(),
              "[transformer_block] num_local_layers (", num_local_layers, ") must be in [0, ", config.num_layers(),
              "]");
  reset();
}

void TransformerBlockImpl::reset() {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_local_layers; ++i) layers->push_back(TransformerLayer(config, layer_offset + i));
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
  if (config.domino()) return domino_block_forward(*this, split_in_halves(hidden), attention_mask, rotary_pos_emb);
  if (!recompute) {
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

}  // namespace megatron::transformer
