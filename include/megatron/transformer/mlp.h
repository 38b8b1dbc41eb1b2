// MLP (Megatron's MLP): column-parallel linear_fc1, activation (GELU, or SwiGLU when
// gated_linear_unit with silu), row-parallel linear_fc2. With a gated unit linear_fc1's full
// weight is [gate; up] (2·ffn rows); each TP rank holds its slice of both halves.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

class MEGATRON_API MLPImpl : public torch::nn::Cloneable<MLPImpl> {
 public:
  explicit MLPImpl(const TransformerConfig& config);
  void reset() override;
  // [s, b, h] -> [s, b, h]
  at::Tensor forward(const at::Tensor& hidden);
  // The activation of linear_fc1's output (without its bias under skip_bias_add, which the fused
  // bias-GELU adds): [s, b, ffn/tp] or [s, b, 2 * ffn/tp] (gated) -> [s, b, ffn/tp].
  at::Tensor activation(const at::Tensor& fc1_output);

  TransformerConfig config;
  tensor_parallel::ColumnParallelLinear linear_fc1{nullptr};
  tensor_parallel::RowParallelLinear linear_fc2{nullptr};
};
TORCH_MODULE(MLP);

}  // namespace megatron::transformer
