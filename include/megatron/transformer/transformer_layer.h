// One pre-norm transformer layer (Megatron's TransformerLayer):
//   x = x + dropout(self_attention(input_layernorm(x)));  x = x + dropout(mlp(pre_mlp_layernorm(x)))
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <memory>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/transformer/attention.h"
#include "megatron/transformer/domino_half.h"
#include "megatron/transformer/mlp.h"
#include "megatron/transformer/norm.h"
#include "megatron/transformer/param_gather.h"

namespace megatron::transformer {

class MEGATRON_API TransformerLayerImpl : public torch::nn::Cloneable<TransformerLayerImpl> {
 public:
  explicit TransformerLayerImpl(const TransformerConfig& config);
  void reset() override;
  // [s, b, h] -> [s, b, h]
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& attention_mask = {},
                     const at::Tensor& rotary_pos_emb = {});
  // Domino's schedule over the two halves of a micro-batch (attention_masks: each half's, or
  // undefined): each half's attention and MLP all-reduces are launched as soon as their partial
  // sums exist and waited where the result is needed, so that they run under the other half's
  // compute; in backward, the column-parallel layers' input-gradient all-reduces are waited just
  // before the LayerNorm backward, in `chain`'s order (one chain per forward pass of the block).
  // Half 1 comes back pending unless domino_intra_layer_overlap.
  DominoHalves forward_domino(const DominoHalves& halves, const std::array<at::Tensor, 2>& attention_masks,
                              const at::Tensor& rotary_pos_emb, tensor_parallel::GradWaitChain& chain);

  TransformerConfig config;
  // Set under ZeRO-2/3: the block calls it around the layer's forward (parameters gathered under
  // ZeRO-3, the whole gradient allocated as the layer's backward begins).
  std::shared_ptr<ParamGather> param_gather;
  Norm input_layernorm{nullptr};
  SelfAttention self_attention{nullptr};
  Norm pre_mlp_layernorm{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(TransformerLayer);

}  // namespace megatron::transformer
