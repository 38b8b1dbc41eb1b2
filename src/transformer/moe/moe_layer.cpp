// The MoE layer at one expert-parallel rank: route, dispatch, this rank's experts, combine.
#include "megatron/transformer/moe/moe_layer.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "megatron/transformer/moe/token_dispatcher.h"

namespace megatron::transformer {

SequentialMLPImpl::SequentialMLPImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  reset();
}

void SequentialMLPImpl::reset() {
  local_experts = register_module("local_experts", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_local_experts(); ++i)
    local_experts->push_back(MLP(config.expert_mlp_config(), config.moe_ffn_hidden_size(), false, /*is_expert=*/true));
}

at::Tensor SequentialMLPImpl::forward(const at::Tensor& tokens, const std::vector<int64_t>& tokens_per_expert,
                                      const at::Tensor& probs) {
  std::vector<at::Tensor> outputs;
  int64_t begin = 0;
  // Every expert runs, on no tokens too, so that each has a gradient (of zeros) every step.
  for (size_t i = 0; i < tokens_per_expert.size(); ++i) {
    const int64_t n = tokens_per_expert[i];
    outputs.push_back(local_experts->ptr<MLPImpl>(i)->forward_weighted(tokens.narrow(0, begin, n),
                                                                       probs.narrow(0, begin, n).unsqueeze(-1)));
    begin += n;
  }
  return at::cat(outputs);
}

MoELayerImpl::MoELayerImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  TORCH_CHECK(config.num_moe_experts(), "[moe_layer] the config has no num_moe_experts");
  reset();
}

void MoELayerImpl::reset() {
  router = register_module("router", TopKRouter(config));
  experts = register_module("experts", SequentialMLP(config));
  if (config.moe_shared_expert_intermediate_size())
    shared_experts = register_module(
        "shared_experts", MLP(config, config.moe_shared_expert_intermediate_size(), config.moe_shared_expert_gate()));
}

at::Tensor MoELayerImpl::forward(const at::Tensor& hidden) {
  const at::Tensor shared = shared_experts ? shared_experts(hidden) : at::Tensor();
  auto [probs, routing_map] = router(hidden);
  const auto dispatcher = make_token_dispatcher(config);
  const auto in = dispatcher->token_dispatch(hidden.reshape({-1, hidden.size(-1)}), probs, routing_map);
  const at::Tensor out =
      dispatcher->token_combine(experts(in.tokens, in.tokens_per_expert, in.probs)).view(hidden.sizes());
  // Each token's expert outputs are summed in the experts' output dtype.
  const at::Tensor routed = out.to(hidden.scalar_type());
  return shared.defined() ? routed + shared : routed;
}

}  // namespace megatron::transformer
