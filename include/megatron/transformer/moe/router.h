// TopKRouter (megatron/core/transformer/moe/router.py): scores each token against every expert
// and picks its top-k, with Megatron-Core's score functions (softmax after or before the top-k,
// sigmoid), group-limited routing, capacity dropping, and the load-balancing and z losses joined
// to the gradient (moe_utils.h).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <utility>

#include "megatron/tensor_parallel/sharding.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

class MEGATRON_API TopKRouterImpl : public torch::nn::Cloneable<TopKRouterImpl>, public tensor_parallel::ShardedModule {
 public:
  explicit TopKRouterImpl(const TransformerConfig& config);
  void reset() override;
  // [s, b, h] -> (probs [s*b, E] in the logits' dtype, zero off the routed experts; routing_map
  // [s*b, E] bool), token t = s_index * b + b_index.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& hidden);
  std::vector<std::pair<std::string, tensor_parallel::ParamInit>> param_inits() const override;

  TransformerConfig config;
  at::Tensor weight;  // [E, h]
};
TORCH_MODULE(TopKRouter);

}  // namespace megatron::transformer
