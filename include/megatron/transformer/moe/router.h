// TopKRouter (megatron/core/transformer/moe/router.py): scores each token against every expert
// and picks its top-k, with Megatron-Core's score functions (softmax after or before the top-k,
// sigmoid), group-limited routing, capacity dropping, and the load-balancing and z losses joined
// to the gradient (moe_utils.h).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <utility>
#include <vector>

#include "megatron/tensor_parallel/sharding.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::comm {
class ProcessGroup;
}

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
  // With moe_router_enable_expert_bias: the bias [E] (float32, a buffer saved with the model,
  // Megatron-Core's expert_bias) and the tokens each expert took since the last update (not saved).
  at::Tensor expert_bias;
  at::Tensor local_tokens_per_expert;
};
TORCH_MODULE(TopKRouter);

// The expert bias's step, once an iteration after the last backward (Megatron-Core's
// _update_router_expert_bias): every training router's token counts in `chunks` summed over each
// of `groups` (TP, then DP x CP: every rank that routed this iteration's tokens) in one collective
// each, bias += rate * sign(mean count - count), the counts restarted.
MEGATRON_API void update_router_expert_bias(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                                            const std::vector<comm::ProcessGroup*>& groups);

}  // namespace megatron::transformer
