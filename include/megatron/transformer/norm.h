// The normalisation of a transformer layer: LayerNorm (weight, bias) or RMSNorm (weight), chosen
// by TransformerConfig::normalization. Parameters are replicated on every TP rank, unless a
// layout says they are this rank's shard (the query and key norms across heads).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <utility>

#include "megatron/tensor_parallel/sharding.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

class MEGATRON_API NormImpl : public torch::nn::Cloneable<NormImpl>, public tensor_parallel::ShardedModule {
 public:
  explicit NormImpl(const TransformerConfig& config, int64_t hidden_size = 0, tensor_parallel::ShardLayout layout = {});
  void reset() override;
  // [*, h] -> [*, h]
  at::Tensor forward(const at::Tensor& x);
  // (residual + x, forward(residual + x)), in one kernel each way on CUDA (fusions/fused_layer_norm.h).
  std::pair<at::Tensor, at::Tensor> forward_add(const at::Tensor& residual, const at::Tensor& x);
  std::vector<std::pair<std::string, tensor_parallel::ParamInit>> param_inits() const override;

  Normalization normalization;
  int64_t hidden_size;
  double eps;
  bool zero_centered_gamma;  // weight holds gamma - 1
  bool fused;                // TransformerConfig::persist_layer_norm: the fused kernels where they apply
  tensor_parallel::ShardLayout layout;
  at::Tensor weight, bias;
};
TORCH_MODULE(Norm);

}  // namespace megatron::transformer
