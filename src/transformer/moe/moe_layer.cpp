// The MoE layer at one expert-parallel rank: route, dispatch, this rank's experts, combine.
#include "megatron/transformer/moe/moe_layer.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

#include "megatron/tensor_parallel/random.h"
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

namespace {

// at::_grouped_mm takes float32, bfloat16 or float16 operands whose rows start 16 bytes apart
// (ATen's loop on CPUs and GPUs before Hopper, CUTLASS's grouped kernel on Hopper and later).
bool grouped_mm_fits(const at::Tensor& tokens, const MLPImpl& expert) {
  const auto dtype = tokens.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  if (expert.linear_fc1->weight.scalar_type() != dtype) return false;
  const int64_t bytes = tokens.element_size();
  for (int64_t width : {expert.linear_fc1->weight.size(0), expert.linear_fc1->weight.size(1),
                        expert.linear_fc2->weight.size(0), expert.linear_fc2->weight.size(1)})
    if (width * bytes % 16 != 0) return false;
  return true;
}

}  // namespace

at::Tensor SequentialMLPImpl::forward(const at::Tensor& tokens, const std::vector<int64_t>& tokens_per_expert,
                                      const at::Tensor& probs) {
  if (config.moe_grouped_gemm() && grouped_mm_fits(tokens, *local_experts->ptr<MLPImpl>(0)))
    return grouped_forward(tokens.contiguous(), tokens_per_expert, probs);
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

// What MLPImpl::forward_weighted computes per expert, for all of them at once: the experts'
// weights stacked [experts, out, in] (a copy a step, as the parameters stay one per expert), the
// tokens' rows split among them by offsets, each expert's biases added to its own rows.
at::Tensor SequentialMLPImpl::grouped_forward(const at::Tensor& tokens, const std::vector<int64_t>& tokens_per_expert,
                                              const at::Tensor& probs) {
  std::vector<at::Tensor> fc1, fc2, fc1_bias, fc2_bias;
  std::vector<int32_t> ends;
  int64_t end = 0;
  for (size_t i = 0; i < tokens_per_expert.size(); ++i) {
    const auto& expert = *local_experts->ptr<MLPImpl>(i);
    fc1.push_back(expert.linear_fc1->weight);
    fc2.push_back(expert.linear_fc2->weight);
    if (expert.linear_fc1->bias.defined()) fc1_bias.push_back(expert.linear_fc1->bias);
    if (expert.linear_fc2->bias.defined()) fc2_bias.push_back(expert.linear_fc2->bias);
    end += tokens_per_expert[i];
    ends.push_back(static_cast<int32_t>(end));
  }
  const at::Tensor offsets = at::tensor(ends, at::kInt).to(tokens.device(), /*non_blocking=*/true);
  // Row r's expert, for the biases: [n].
  const at::Tensor row_expert =
      fc1_bias.empty() && fc2_bias.empty()
          ? at::Tensor()
          : at::repeat_interleave(at::arange(static_cast<int64_t>(tokens_per_expert.size()), at::kLong),
                                  at::tensor(tokens_per_expert, at::kLong))
                .to(tokens.device());
  at::Tensor h = at::_grouped_mm(tokens, at::stack(fc1).transpose(1, 2), offsets);
  if (!fc1_bias.empty()) h = h + at::stack(fc1_bias).index_select(0, row_expert);
  h = mlp_activation(config, h);
  const at::Tensor p = probs.unsqueeze(-1);
  at::Tensor out = at::_grouped_mm((h * p).to(h.scalar_type()), at::stack(fc2).transpose(1, 2), offsets);
  // As forward_weighted: fc2's bias is weighted by the token's probability too.
  if (!fc2_bias.empty()) out = out + at::stack(fc2_bias).index_select(0, row_expert) * p;
  return out;
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
  at::Tensor shared;
  if (shared_experts && config.recomputes("shared_experts") && is_training()) {
    shared = tensor_parallel::checkpoint(
        [this](const std::vector<at::Tensor>& in) { return std::vector{shared_experts(in[0])}; }, {hidden},
        config.rng_tracker(), hidden.device())[0];
  } else if (shared_experts) {
    shared = shared_experts(hidden);
  }
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
