// LayerNorm / RMSNorm over the hidden dimension.
#include "megatron/transformer/norm.h"

#include <torch/nn/module.h>

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

NormImpl::NormImpl(const TransformerConfig& config, int64_t hidden)
    : normalization(config.normalization()),
      hidden_size(hidden > 0 ? hidden : config.hidden_size()),
      eps(config.layernorm_epsilon()),
      zero_centered_gamma(config.layernorm_zero_centered_gamma()) {
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
      {"weight", {zero_centered_gamma ? tp::ParamInit::kZeros : tp::ParamInit::kOnes, 0.0, {}}}};
  if (bias.defined()) out.push_back({"bias", {tp::ParamInit::kZeros, 0.0, {}}});
  return out;
}

at::Tensor NormImpl::forward(const at::Tensor& x) {
  const at::Tensor gamma = zero_centered_gamma ? weight + 1 : weight;
  if (normalization == Normalization::kLayerNorm) return at::layer_norm(x, {hidden_size}, gamma, bias, eps);
  return at::rms_norm(x, {hidden_size}, gamma, eps);
}

}  // namespace megatron::transformer
