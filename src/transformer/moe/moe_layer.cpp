// The MoE layer at one expert-parallel rank: route, permute, experts, unpermute (Megatron-Core's
// allgather and alltoall dispatchers do exactly this when expert parallelism is 1).
#include "megatron/transformer/moe/moe_layer.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "megatron/readback.h"

namespace megatron::transformer {

SequentialMLPImpl::SequentialMLPImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  reset();
}

void SequentialMLPImpl::reset() {
  local_experts = register_module("local_experts", torch::nn::ModuleList());
  for (int64_t i = 0; i < *config.num_moe_experts(); ++i)
    local_experts->push_back(MLP(config, config.moe_ffn_hidden_size()));
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
  const at::Tensor x = hidden.reshape({-1, hidden.size(-1)});
  const int64_t tokens = x.size(0);
  // Permute: the (expert, token) pairs of the routing map in expert-major order, tokens ascending.
  const at::Tensor pairs = routing_map.t().flatten().nonzero().squeeze(1);
  const at::Tensor token_of = pairs.remainder(tokens);
  // The host needs the split sizes (one device read per MoE layer and micro-batch, as
  // Megatron-Core's SequentialMLP; a grouped GEMM would not).
  const at::Tensor counts = read_to_host(routing_map.sum(0));
  const std::vector<int64_t> per_expert(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  const at::Tensor out_tokens =
      experts(x.index_select(0, token_of), per_expert, probs.t().flatten().index_select(0, pairs));
  // Unpermute: each token's expert outputs summed in the experts' output dtype.
  const at::Tensor routed = at::zeros({tokens, x.size(1)}, out_tokens.options()).index_add(0, token_of, out_tokens);
  at::Tensor out = routed.view(hidden.sizes()).to(hidden.scalar_type());
  return shared.defined() ? out + shared : out;
}

}  // namespace megatron::transformer
