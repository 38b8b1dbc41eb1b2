// What Megatron-Core's moe_utils.py gives the MoE layer: the auxiliary losses (Switch
// Transformer's load balancing, ST-MoE's z-loss), MoEAuxLossAutoScaler, which joins them to the
// gradient without changing any value, and the state the layers of one model share for both.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace megatron::transformer {

struct MEGATRON_API MoEAuxLossState {
  // MoEAuxLossAutoScaler's main_loss_backward_scale: the gradient each auxiliary loss enters the
  // backward with, as the main loss does (the loss scale / the micro-batches); undefined means 1.
  at::Tensor backward_scale;
  // Each loss divided by its coefficient, summed over layers and micro-batches since the last
  // take(), by Megatron-LM's log names (load_balancing_loss, seq_load_balancing_loss, z_loss).
  std::map<std::string, at::Tensor> recorded;
  // Sets main_loss_backward_scale (MoEAuxLossAutoScaler.set_loss_scale).
  void set_loss_scale(const at::Tensor& scale) { backward_scale = scale; }
  void record(const std::string& name, const at::Tensor& value);
  // The recorded sums, cleared.
  std::map<std::string, at::Tensor> take();
};

// `output` unchanged, with `aux_loss` joined to its graph: the backward passes output's gradient
// through and gives aux_loss the gradient `state`'s backward scale (1 without a state).
MEGATRON_API at::Tensor moe_aux_loss_auto_scaler(const at::Tensor& output, const at::Tensor& aux_loss,
                                                 const MoEAuxLossState* state);

// sum_i (sum_t probs[t, i]) * tokens_per_expert[i] * experts * coeff / (topk * total_tokens^2), over the
// columns i of probs (experts, or batch x experts for the per-sequence loss).
MEGATRON_API at::Tensor switch_load_balancing_loss(const at::Tensor& probs, const at::Tensor& tokens_per_expert,
                                                   int64_t total_tokens, int64_t experts, int64_t topk, double coeff);

// S-BASE's balancing of cost [T, E] (Megatron-Core's moe_utils.sinkhorn): exp(cost) scaled by
// per-token and per-expert factors until the expert factors move by less than tol on average.
MEGATRON_API at::Tensor sinkhorn(const at::Tensor& cost, double tol = 1e-4);

// mean_t(logsumexp(logits[t])^2) * coeff.
MEGATRON_API at::Tensor z_loss(const at::Tensor& logits, double coeff);

}  // namespace megatron::transformer
