// The top-k router, step by step as Megatron-Core's TopKRouter.routing() (router.py, moe_utils.py).
#include "megatron/transformer/moe/router.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cmath>
#include <limits>

#include "megatron/comm/process_group.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/transformer/moe/moe_utils.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

TopKRouterImpl::TopKRouterImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  TORCH_CHECK(config.num_moe_experts(), "[router] the config has no num_moe_experts");
  reset();
}

void TopKRouterImpl::reset() {
  weight = register_parameter("weight", at::empty({*config.num_moe_experts(), config.hidden_size()}, at::kFloat));
  if (config.perform_initialization()) tp::init_sharded_param_from_default_generator(weight, param_inits()[0].second);
  if (config.moe_router_enable_expert_bias()) {
    expert_bias = register_buffer("expert_bias", at::zeros({*config.num_moe_experts()}, at::kFloat));
    local_tokens_per_expert = at::zeros({*config.num_moe_experts()}, at::kFloat);
  }
}

std::vector<std::pair<std::string, tp::ParamInit>> TopKRouterImpl::param_inits() const {
  return {{"weight", {tp::ParamInit::kNormal, config.init_method_std(), {}}}};
}

namespace {

// The top-k experts of each row of `scores` [T, E], or, with group-limited routing, the top-k
// among the experts of each row's best groups (a group scored by the sum of its top k/group_topk).
at::Tensor topk_indices(const at::Tensor& scores, const TransformerConfig& c, bool sorted) {
  const int64_t k = c.moe_router_topk();
  if (!c.moe_router_group_topk()) return std::get<1>(at::topk(scores, k, -1, true, sorted));
  const int64_t tokens = scores.size(0), groups = *c.moe_router_num_groups(), group_topk = *c.moe_router_group_topk();
  const int64_t per_group = scores.size(1) / groups;
  const at::Tensor group_scores =
      std::get<0>(scores.view({tokens, groups, per_group}).topk(k / group_topk, -1)).sum(-1);
  const at::Tensor chosen = std::get<1>(at::topk(group_scores, group_topk, -1, true, /*sorted=*/false));
  const at::Tensor group_mask = at::zeros_like(group_scores).scatter(1, chosen, 1.0);
  const at::Tensor expert_mask = group_mask.unsqueeze(-1).expand({tokens, groups, per_group}).reshape({tokens, -1});
  const at::Tensor masked = scores.masked_fill(expert_mask.logical_not(), -std::numeric_limits<double>::infinity());
  return std::get<1>(at::topk(masked, k, -1, true, sorted));
}

// The scores the load-balancing loss is computed from, and their plain top-k (no groups, no
// capacity): Megatron-Core's compute_routing_scores_for_aux_loss.
std::pair<at::Tensor, at::Tensor> aux_loss_scores(const at::Tensor& logits, const TransformerConfig& c) {
  at::Tensor scores;
  if (c.moe_router_score_function() == "softmax") {
    scores = at::softmax(logits, -1, at::kFloat);
  } else {
    scores = at::sigmoid(logits.to(at::kFloat));
    scores = scores / (scores.sum(-1, true) + 1e-20);
  }
  const at::Tensor idx = std::get<1>(at::topk(scores, c.moe_router_topk(), -1));
  return {scores, at::zeros_like(scores).scatter(1, idx, 1.0)};
}

}  // namespace

std::pair<at::Tensor, at::Tensor> TopKRouterImpl::forward(const at::Tensor& hidden) {
  const TransformerConfig& c = config;
  const int64_t experts = *c.num_moe_experts(), k = c.moe_router_topk();
  const at::Tensor x = hidden.reshape({-1, hidden.size(-1)});  // [s*b, h]: token s*b_size + b
  const int64_t tokens = x.size(0);
  const at::ScalarType router_dtype = c.moe_router_dtype() == "fp64"   ? at::kDouble
                                      : c.moe_router_dtype() == "fp32" ? at::kFloat
                                                                       : x.scalar_type();
  at::Tensor logits = at::mm(x.to(router_dtype), weight.to(router_dtype).t());
  const bool training = is_training() && at::GradMode::is_enabled();
  MoEAuxLossState* state = c.moe_aux_loss_state().get();
  // With sequence parallelism each TP rank routes its share of the tokens, and the router's
  // gradient is summed over TP (as the norms'): the z-loss is each rank's mean over TP.
  const int tp_size = tp::group_size(c.tp_group());
  if (training && c.moe_z_loss_coeff()) {
    const double coeff = *c.moe_z_loss_coeff();
    const at::Tensor z = z_loss(logits, coeff / tp_size);
    logits = moe_aux_loss_auto_scaler(logits, z, state);
    if (coeff > 0) state->record("z_loss", z / coeff);
  }

  // Probabilities of the chosen experts, as the score function gives them.
  const bool sorted = at::GradMode::is_enabled();
  at::Tensor idx, chosen;
  if (c.moe_router_load_balancing_type() == "sinkhorn") {
    // S-BASE: in training the experts are chosen on the Sinkhorn-balanced scores (no gradient),
    // and weighted by the plain ones (sigmoid for top-1, else softmax).
    const at::Tensor scores =
        k == 1 ? at::sigmoid(logits) : at::softmax(logits, -1, at::kFloat).to(logits.scalar_type());
    if (is_training()) {
      at::NoGradGuard no_grad;
      idx = std::get<1>(at::topk(sinkhorn(logits.to(at::kFloat)), k, 1));
    } else {
      idx = std::get<1>(at::topk(scores, k, 1));
    }
    chosen = scores.gather(1, idx);
  } else if (c.moe_router_score_function() == "softmax") {
    if (c.moe_router_pre_softmax()) {
      const at::Tensor scores = at::softmax(logits, -1, at::kFloat);
      idx = topk_indices(scores, c, sorted);
      chosen = scores.gather(1, idx);
    } else {
      idx = topk_indices(logits, c, sorted);
      chosen = at::softmax(logits.gather(1, idx), -1, at::kFloat);
    }
  } else {
    const at::Tensor scores = at::sigmoid(logits.to(at::kFloat));
    // The expert bias moves the choice only; the weights stay the plain scores.
    idx = topk_indices(expert_bias.defined() ? scores + expert_bias.to(at::kFloat) : scores, c, sorted);
    chosen = scores.gather(1, idx);
    if (k > 1) chosen = chosen / (chosen.sum(-1, true) + 1e-20);
  }
  if (c.moe_router_topk_scaling_factor() && c.moe_router_load_balancing_type() != "sinkhorn")
    chosen = chosen * *c.moe_router_topk_scaling_factor();
  at::Tensor probs = at::zeros_like(logits).scatter(1, idx, chosen.to(logits.scalar_type()));
  at::Tensor routing_map = at::zeros({tokens, experts}, logits.options().dtype(at::kBool)).scatter(1, idx, true);

  // Past an expert's capacity, the tokens of lowest probability (or the latest) are dropped.
  if (c.moe_expert_capacity_factor()) {
    const auto capacity = static_cast<int64_t>(
        std::ceil(static_cast<double>(tokens * k) / static_cast<double>(experts) * *c.moe_expert_capacity_factor()));
    at::Tensor keep = at::ones_like(routing_map);
    if (capacity <= tokens) {
      // "position" ranks a routed token by how early it comes (ties among routed tokens would
      // leave the choice to topk's implementation).
      const at::Tensor by =
          c.moe_token_drop_policy() == "probs"
              ? probs.detach()
              : routing_map * (tokens - at::arange(tokens, logits.options().dtype(at::kLong))).unsqueeze(1);
      const at::Tensor kept = std::get<1>(at::topk(by, capacity, 0, true, /*sorted=*/false));
      keep = at::zeros_like(routing_map).scatter(0, kept, true);
    }
    routing_map = c.moe_pad_expert_input_to_capacity() ? keep : routing_map.logical_and(keep);
    probs = probs * routing_map;
  }

  // The expert bias counts the tokens each expert takes where gradients are recorded (training,
  // and a recomputed forward rather than the first one under no_grad).
  if (expert_bias.defined() && at::GradMode::is_enabled()) {
    if (local_tokens_per_expert.device() != routing_map.device())
      local_tokens_per_expert = local_tokens_per_expert.to(routing_map.device());
    local_tokens_per_expert.add_(routing_map.sum(0).to(at::kFloat));
  }

  // Load balancing, joined to the gradient through the probabilities. With sequence and context
  // parallelism a sequence's tokens are spread over the TP x CP ranks (Megatron-Core's tp_cp
  // reduce group): the tokens per expert are counted over all of them and each rank's loss is
  // its own tokens' share of the whole (summed over TP, as the router's gradient is); times CP,
  // since the gradients are averaged over the CP ranks (Megatron-Core scales the auxiliary
  // losses' backward by CP instead), and logged likewise.
  const auto& balancing = c.moe_router_load_balancing_type();
  const double coeff = c.moe_aux_loss_coeff();
  if (training && coeff > 0 && (balancing == "aux_loss" || balancing == "seq_aux_loss")) {
    auto [scores, map] = aux_loss_scores(logits, c);
    const int cp = c.context_parallel_size();
    auto counted = [&](at::Tensor per_expert) {
      if (tp_size > 1) c.tp_group()->all_reduce(per_expert);
      if (cp > 1) c.cp_group()->all_reduce(per_expert);
      return per_expert;
    };
    at::Tensor loss;
    if (balancing == "aux_loss") {
      loss = cp * switch_load_balancing_loss(scores, counted(map.sum(0).to(at::kFloat)), tokens * tp_size * cp, experts,
                                             k, coeff);
      state->record("load_balancing_loss", loss / coeff);
    } else {  // seq_aux_loss: each sequence balanced on its own, averaged over the batch
      const int64_t batch = hidden.size(1), seq = tokens / batch;
      loss = cp *
             switch_load_balancing_loss(scores.reshape({seq, batch * experts}),
                                        counted(map.reshape({seq, batch * experts}).sum(0).to(at::kFloat)),
                                        seq * tp_size * cp, experts, k, coeff) /
             static_cast<double>(batch);
      state->record("seq_load_balancing_loss", loss / coeff);
    }
    probs = moe_aux_loss_auto_scaler(probs, loss, state);
  }
  return {probs, routing_map};
}

void update_router_expert_bias(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                               const std::vector<comm::ProcessGroup*>& groups) {
  std::vector<TopKRouterImpl*> routers;
  for (const auto& chunk : chunks)
    for (const auto& m : chunk->modules()) {
      auto* r = dynamic_cast<TopKRouterImpl*>(m.get());
      if (r && r->expert_bias.defined() && r->is_training()) routers.push_back(r);
    }
  if (routers.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> counts;
  for (auto* r : routers) counts.push_back(r->local_tokens_per_expert.to(r->expert_bias.device()));
  at::Tensor all = at::stack(counts);  // [routers, E]: one collective per group for every layer
  for (comm::ProcessGroup* g : groups)
    if (g && g->size() > 1) g->all_reduce(all);
  const at::Tensor step = at::sign(all.mean(-1, /*keepdim=*/true) - all);
  for (size_t i = 0; i < routers.size(); ++i) {
    routers[i]->expert_bias.add_(step[static_cast<int64_t>(i)], routers[i]->config.moe_router_bias_update_rate());
    routers[i]->local_tokens_per_expert.zero_();
  }
}

}  // namespace megatron::transformer
