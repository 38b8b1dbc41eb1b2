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
  // Domino: linear_fc2's partial product, neither reduced nor biased; linear_fc1's backward
  // leaves its input-gradient all-reduce in `fc1_grad_reduce`.
  at::Tensor forward_partial(const at::Tensor& hidden, const tensor_parallel::PendingPtr& fc1_grad_reduce);
  // fc1 and the activation: [s, b, h] -> [s, b, ffn/tp].
  at::Tensor activation(const at::Tensor& hidden, const tensor_parallel::PendingPtr& fc1_grad_reduce);

  TransformerConfig config;
  tensor_parallel::ColumnParallelLinear linear_fc1{nullptr};
  tensor_parallel::RowParallelLinear linear_fc2{nullptr};
};
TORCH_MODULE(MLP);

}  // namespace megatron::transformer
