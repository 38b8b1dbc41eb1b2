// One pre-norm transformer layer (Megatron's TransformerLayer):
//   x = x + dropout(self_attention(input_layernorm(x)));  x = x + dropout(mlp(pre_mlp_layernorm(x)))
// where mlp is an MoE layer on the layers config.moe_layer_pattern marks.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <memory>

#include "megatron/transformer/attention.h"
#include "megatron/transformer/mlp.h"
#include "megatron/transformer/moe/moe_layer.h"
#include "megatron/transformer/norm.h"
#include "megatron/transformer/param_gather.h"

namespace megatron::transformer {

class MEGATRON_API TransformerLayerImpl : public torch::nn::Cloneable<TransformerLayerImpl> {
 public:
  // layer_number: 0-based, in the whole model (which layers are MoE).
  explicit TransformerLayerImpl(const TransformerConfig& config, int64_t layer_number = 0);
  void reset() override;
  // [s, b, h] -> [s, b, h]
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& attention_mask = {},
                     const at::Tensor& rotary_pos_emb = {});

  TransformerConfig config;
  int64_t layer_number;
  // Set under ZeRO-2/3: the block calls it around the layer's forward (parameters gathered under
  // ZeRO-3, the whole gradient allocated as the layer's backward begins).
  std::shared_ptr<ParamGather> param_gather;
  Norm input_layernorm{nullptr};
  SelfAttention self_attention{nullptr};
  Norm pre_mlp_layernorm{nullptr};
  MLP mlp{nullptr};           // a dense layer's, or
  MoELayer moe_mlp{nullptr};  // an MoE layer's (registered as "mlp" too)
};
TORCH_MODULE(TransformerLayer);

}  // namespace megatron::transformer
