// One transformer layer: norm, attention, residual; norm, MLP, residual.
#include "megatron/transformer/transformer_layer.h"

#include <torch/nn/module.h>

#include "megatron/tensor_parallel/random.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

TransformerLayerImpl::TransformerLayerImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  reset();
}

void TransformerLayerImpl::reset() {
  input_layernorm = register_module("input_layernorm", Norm(config));
  self_attention = register_module("self_attention", SelfAttention(config));
  pre_mlp_layernorm = register_module("pre_mlp_layernorm", Norm(config));
  mlp = register_module("mlp", MLP(config));
}

namespace {
// Dropout of a sequence-sharded tensor differs per TP rank (tracker state); of a replicated one
// it is the same on every rank (default generator).
at::Tensor hidden_dropout(const at::Tensor& x, const TransformerConfig& c, bool train) {
  const double p = c.hidden_dropout();
  if (!train || p == 0.0) return x;
  if (c.sequence_parallel() && c.rng_tracker()) {
    at::Tensor out;
    c.rng_tracker()->fork([&] { out = tp::dropout(x, p, true); });
    return out;
  }
  return tp::dropout(x, p, true);
}
}  // namespace

at::Tensor TransformerLayerImpl::forward(const at::Tensor& hidden, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor attn = self_attention(input_layernorm(hidden), attention_mask, rotary_pos_emb);
  at::Tensor x = hidden + hidden_dropout(attn, config, is_training());
  at::Tensor out = mlp(pre_mlp_layernorm(x));
  return x + hidden_dropout(out, config, is_training());
}

}  // namespace megatron::transformer
