// LayerNorm / RMSNorm over the hidden dimension.
#include "megatron/transformer/norm.h"

#include <torch/nn/module.h>

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

NormImpl::NormImpl(const TransformerConfig& config, int64_t hidden)
    : normalization(config.normalization()),
      hidden_size(hidden > 0 ? hidden : config.hidden_size()),
      eps(config.layernorm_epsilon()) {
  reset();
}

void NormImpl::reset() {
  weight = register_parameter("weight", at::ones({hidden_size}, at::kFloat));
  bias = normalization == Normalization::kLayerNorm ? register_parameter("bias", at::zeros({hidden_size}, at::kFloat))
                                                    : at::Tensor();
}

std::vector<std::pair<std::string, tp::ParamInit>> NormImpl::param_inits() const {
  std::vector<std::pair<std::string, tp::ParamInit>> out{{"weight", {tp::ParamInit::kOnes, 0.0, {}}}};
  if (bias.defined()) out.push_back({"bias", {tp::ParamInit::kZeros, 0.0, {}}});
  return out;
}

at::Tensor NormImpl::forward(const at::Tensor& x) {
  if (normalization == Normalization::kLayerNorm) return at::layer_norm(x, {hidden_size}, weight, bias, eps);
  return at::rms_norm(x, {hidden_size}, weight, eps);
}

}  // namespace megatron::transformer
