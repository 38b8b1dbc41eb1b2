// MoELayer (megatron/core/transformer/moe/moe_layer.py) in place of a layer's MLP: the router
// picks each token's experts; the token dispatcher (token_dispatcher.h) brings each token to the
// rank holding its expert, grouped expert by expert, each expert MLP scales its activation by the
// token's probability before linear_fc2, and the outputs are summed back per token; the shared
// expert (with its optional sigmoid gate) adds its output. Parameter names are Megatron-Core's
// SequentialMLP ones: mlp.router.weight, mlp.experts.local_experts.I.linear_fc1.weight, ...,
// mlp.shared_experts.linear_fc1.weight, mlp.shared_experts.gate_weight.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "megatron/transformer/mlp.h"
#include "megatron/transformer/moe/router.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

// This expert-parallel rank's experts (num_local_experts; local_experts.I is global expert
// local_expert_offset + I), run one after another on their tokens, or with moe_grouped_gemm as
// one grouped GEMM per linear layer over all of them (Megatron-Core's GroupedMLP computation
// under SequentialMLP's parameters).
class MEGATRON_API SequentialMLPImpl : public torch::nn::Cloneable<SequentialMLPImpl> {
 public:
  explicit SequentialMLPImpl(const TransformerConfig& config);
  void reset() override;
  // Tokens [n, h] grouped by expert (tokens_per_expert[i] rows each, in expert order) and their
  // probabilities [n] -> each expert's output [n, h].
  at::Tensor forward(const at::Tensor& tokens, const std::vector<int64_t>& tokens_per_expert, const at::Tensor& probs);

  TransformerConfig config;
  torch::nn::ModuleList local_experts{nullptr};

 private:
  at::Tensor grouped_forward(const at::Tensor& tokens, const std::vector<int64_t>& tokens_per_expert,
                             const at::Tensor& probs);
};
TORCH_MODULE(SequentialMLP);

class MEGATRON_API MoELayerImpl : public torch::nn::Cloneable<MoELayerImpl> {
 public:
  explicit MoELayerImpl(const TransformerConfig& config);
  void reset() override;
  // [s, b, h] -> [s, b, h]
  at::Tensor forward(const at::Tensor& hidden);

  TransformerConfig config;
  TopKRouter router{nullptr};
  SequentialMLP experts{nullptr};
  MLP shared_experts{nullptr};
};
TORCH_MODULE(MoELayer);

}  // namespace megatron::transformer
