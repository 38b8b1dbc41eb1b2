// One transformer layer: norm, attention, residual; norm, MLP, residual. Domino's schedule of it
// over two half-batches is domino.cpp's.
#include "megatron/transformer/transformer_layer.h"

#include <torch/nn/module.h>

#include "megatron/tensor_parallel/random.h"

#include "hidden_dropout.h"

namespace megatron::transformer {

TransformerLayerImpl::TransformerLayerImpl(const TransformerConfig& config_, int64_t layer_number_)
    : config(config_.finalize()), layer_number(layer_number_) {
  reset();
}

void TransformerLayerImpl::reset() {
  // This layer's FP8 GEMMs, if any (the first and last may keep the model's precision); the
  // experts keep it always.
  TransformerConfig own = config;
  own.fp8(config.fp8_of(layer_number));
  TransformerConfig no_fp8 = config;
  no_fp8.fp8(nullptr);
  input_layernorm = register_module("input_layernorm", Norm(config));
  self_attention = register_module("self_attention", SelfAttention(own, layer_number));
  pre_mlp_layernorm = register_module("pre_mlp_layernorm", Norm(config));
  if (config.is_moe_layer(layer_number))
    moe_mlp = register_module("mlp", MoELayer(no_fp8));
  else
    mlp = register_module("mlp", MLP(own));
}

at::Tensor TransformerLayerImpl::forward(const at::Tensor& hidden, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor attn = self_attention(input_layernorm(hidden), attention_mask, rotary_pos_emb);
  auto [x, normed] = pre_mlp_layernorm->forward_add(hidden, detail::hidden_dropout(attn, config, is_training()));
  at::Tensor out;
  if (mlp && config.recomputes("mlp") && is_training()) {
    out = tensor_parallel::checkpoint([this](const std::vector<at::Tensor>& in) { return std::vector{mlp(in[0])}; },
                                      {normed}, config.rng_tracker(), normed.device())[0];
  } else {
    out = moe_mlp ? moe_mlp(normed) : mlp(normed);
  }
  return x + detail::hidden_dropout(out, config, is_training());
}

}  // namespace megatron::transformer
