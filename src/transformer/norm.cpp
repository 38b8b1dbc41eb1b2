// LayerNorm / RMSNorm over the hidden dimension.
#include "megatron/transformer/norm.h"

#include <torch/nn/module.h>

#include "megatron/fusions/fused_layer_norm.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

NormImpl::NormImpl(const TransformerConfig& config, int64_t hidden, tp::ShardLayout layout_)
    : normalization(config.normalization()),
      hidden_size(hidden > 0 ? hidden : config.hidden_size()),
      eps(config.layernorm_epsilon()),
      zero_centered_gamma(config.layernorm_zero_centered_gamma()),
      fused(config.persist_layer_norm()),
      layout(layout_) {
  reset();
}

void NormImpl::reset() {
  weight = register_parameter(
      "weight", zero_centered_gamma ? at::zeros({hidden_size}, at::kFloat) : at::ones({hidden_size}, at::kFloat));
  bias = normalization == Normalization::kLayerNorm ? register_parameter("bias", at::zeros({hidden_size}, at::kFloat))
                                                    : at::Tensor();
}

std::vector<std::pair<std::string, tp::ParamInit>> NormImpl::param_inits() const {
  std::vector<std::pair<std::string, tp::ParamInit>> out{
      {"weight", {zero_centered_gamma ? tp::ParamInit::kZeros : tp::ParamInit::kOnes, 0.0, layout}}};
  if (bias.defined()) out.push_back({"bias", {tp::ParamInit::kZeros, 0.0, layout}});
  return out;
}

at::Tensor NormImpl::forward(const at::Tensor& x) {
  const at::Tensor gamma = zero_centered_gamma ? weight + 1 : weight;
  const bool rms = normalization == Normalization::kRMSNorm;
  if (fused && fusions::fused_norm_supported(x, gamma)) return fusions::fused_layer_norm(x, gamma, bias, eps, rms);
  if (!rms) return at::layer_norm(x, {hidden_size}, gamma, bias, eps);
  return at::rms_norm(x, {hidden_size}, gamma, eps);
}

std::pair<at::Tensor, at::Tensor> NormImpl::forward_add(const at::Tensor& residual, const at::Tensor& x) {
  const at::Tensor gamma = zero_centered_gamma ? weight + 1 : weight;
  if (fused && fusions::fused_norm_supported(x, gamma) && residual.scalar_type() == x.scalar_type()) {
    return fusions::fused_add_layer_norm(residual, x, gamma, bias, eps, normalization == Normalization::kRMSNorm);
  }
  at::Tensor sum = residual + x;
  return {sum, forward(sum)};
}

}  // namespace megatron::transformer
