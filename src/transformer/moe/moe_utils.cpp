#include "megatron/transformer/moe/moe_utils.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <utility>

namespace megatron::transformer {
namespace {

// Megatron-Core's MoEAuxLossAutoScaler: forward is the identity on the output; backward hands
// the auxiliary loss ones x the scale, whatever the output's gradient.
class AutoScaler : public torch::autograd::Function<AutoScaler> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& output, const at::Tensor& aux_loss,
                            const at::Tensor& scale) {
    ctx->save_for_backward({aux_loss});
    ctx->saved_data["scale"] = scale;
    return output;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor aux_loss = ctx->get_saved_variables()[0];
    const at::Tensor scale = ctx->saved_data["scale"].toTensor();
    return {grads[0], at::ones_like(aux_loss) * scale.to(aux_loss.scalar_type()), at::Tensor()};
  }
};

}  // namespace

void MoEAuxLossState::record(const std::string& name, const at::Tensor& value) {
  auto& sum = recorded[name];
  sum = sum.defined() ? sum + value.detach().to(at::kFloat) : value.detach().to(at::kFloat);
}

std::map<std::string, at::Tensor> MoEAuxLossState::take() {
  return std::exchange(recorded, {});
}

at::Tensor moe_aux_loss_auto_scaler(const at::Tensor& output, const at::Tensor& aux_loss,
                                    const MoEAuxLossState* state) {
  const bool scaled = state && state->backward_scale.defined();
  return AutoScaler::apply(output, aux_loss, scaled ? state->backward_scale : at::ones({}, aux_loss.options()));
}

at::Tensor switch_load_balancing_loss(const at::Tensor& probs, const at::Tensor& tokens_per_expert,
                                      int64_t total_tokens, int64_t experts, int64_t topk, double coeff) {
  const double t = static_cast<double>(total_tokens);
  return (probs.sum(0) * tokens_per_expert).sum() * (static_cast<double>(experts) * coeff / (topk * t * t));
}

at::Tensor sinkhorn(const at::Tensor& cost_in, double tol) {
  const at::Tensor cost = at::exp(cost_in);
  at::Tensor d0 = at::ones({cost.size(0)}, cost.options()), d1 = at::ones({cost.size(1)}, cost.options());
  const double eps = 1e-8, rows = static_cast<double>(cost.size(0)), cols = static_cast<double>(cost.size(1));
  // One read-back per round, as the reference's loop condition; a NaN error ends it as there.
  for (double error = 1e9; error > tol;) {
    d0 = (1.0 / rows) / ((d1 * cost).sum(1) + eps);
    const at::Tensor next = (1.0 / cols) / ((d0.unsqueeze(1) * cost).sum(0) + eps);
    error = (d1 - next).abs().mean().item<double>();
    d1 = next;
  }
  return d1 * cost * d0.unsqueeze(1);
}

at::Tensor z_loss(const at::Tensor& logits, double coeff) {
  return at::logsumexp(logits, -1).square().mean() * coeff;
}

}  // namespace megatron::transformer
