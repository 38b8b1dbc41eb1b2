// MLP (Megatron's MLP): column-parallel linear_fc1, activation (GELU, or SwiGLU when
// gated_linear_unit with silu), row-parallel linear_fc2. With a gated unit linear_fc1's full
// weight is [gate; up] (2·ffn rows); each TP rank holds its slice of both halves. MoE layers build
// their experts and shared expert from it, with their own hidden size (and the shared expert's
// sigmoid gate, gate_weight [1, h], Megatron-Core's SharedExpertMLP).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <optional>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/tensor_parallel/sharding.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

class MEGATRON_API MLPImpl : public torch::nn::Cloneable<MLPImpl>, public tensor_parallel::ShardedModule {
 public:
  // ffn_hidden_size: default config's; gate: the shared expert's output gate; is_expert: a routed
  // expert's, whose layers communicate nothing (the token dispatcher does).
  explicit MLPImpl(const TransformerConfig& config, std::optional<int64_t> ffn_hidden_size = std::nullopt,
                   bool gate = false, bool is_expert = false);
  void reset() override;
  // [s, b, h] -> [s, b, h]
  at::Tensor forward(const at::Tensor& hidden);
  // An expert's forward: the activation times the tokens' routing probabilities [n, 1] before
  // linear_fc2 (Megatron-Core's experts), in the probabilities' dtype, then back.
  at::Tensor forward_weighted(const at::Tensor& tokens, const at::Tensor& probs);
  std::vector<std::pair<std::string, tensor_parallel::ParamInit>> param_inits() const override;
  // The activation of linear_fc1's output (without its bias under skip_bias_add, which the fused
  // bias-GELU adds): [s, b, ffn/tp] or [s, b, 2 * ffn/tp] (gated) -> [s, b, ffn/tp].
  at::Tensor activation(const at::Tensor& fc1_output);

  TransformerConfig config;
  int64_t ffn_hidden_size;
  bool gate;
  bool is_expert;
  tensor_parallel::ColumnParallelLinear linear_fc1{nullptr};
  tensor_parallel::RowParallelLinear linear_fc2{nullptr};
  at::Tensor gate_weight;  // [1, h] with gate
};
TORCH_MODULE(MLP);

// The activation alone of a linear_fc1 output that already holds its bias: GELU, or (gated)
// activation(gate) * up; the grouped experts' (moe_layer.h), which add their biases per row.
MEGATRON_API at::Tensor mlp_activation(const TransformerConfig& config, const at::Tensor& fc1_output);

}  // namespace megatron::transformer
