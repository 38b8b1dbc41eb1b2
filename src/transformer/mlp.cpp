// The MLP: fc1, activation (GELU or SwiGLU), fc2.
#include "megatron/transformer/mlp.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "megatron/fusions/fused_bias_gelu.h"
#include "output_projection.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

MLPImpl::MLPImpl(const TransformerConfig& config_, std::optional<int64_t> ffn, bool gate_, bool is_expert_)
    : config(config_.finalize()), ffn_hidden_size(ffn.value_or(config.ffn_size())), gate(gate_), is_expert(is_expert_) {
  TORCH_CHECK(ffn_hidden_size > 0 && ffn_hidden_size % config.tensor_model_parallel_size() == 0,
              "[mlp] ffn_hidden_size (", ffn_hidden_size,
              ") must be positive and divisible by the tensor-parallel size");
  reset();
}

void MLPImpl::reset() {
  const int64_t ffn = ffn_hidden_size;
  const int64_t chunks = config.gated_linear_unit() ? 2 : 1;
  // --bias-gelu-fusion (Megatron-LM's default): fc1's bias is added with the GELU, not in the GEMM.
  const bool bias_gelu = config.bias_gelu_fusion() && config.add_bias_linear() && !config.gated_linear_unit() &&
                         (config.activation() == Activation::kGelu || config.activation() == Activation::kGeluTanh);
  linear_fc1 = register_module(
      "linear_fc1", tp::ColumnParallelLinear(tp::ColumnParallelLinearOptions(config.hidden_size(), ffn * chunks)
                                                 .bias(config.add_bias_linear())
                                                 .skip_bias_add(bias_gelu)
                                                 .num_chunks(chunks)
                                                 .sequence_parallel(config.sequence_parallel())
                                                 .init_method_std(config.init_method_std())
                                                 .perform_initialization(config.perform_initialization())
                                                 .tp_group(config.tp_group())
                                                 .fp8(config.fp8())
                                                 .is_expert(is_expert)));
  linear_fc2 = register_module(
      "linear_fc2", tp::RowParallelLinear(detail::output_projection_options(config, ffn).is_expert(is_expert)));
  if (gate) {
    gate_weight = register_parameter("gate_weight", at::empty({1, config.hidden_size()}, at::kFloat));
    if (config.perform_initialization())
      tp::init_sharded_param_from_default_generator(gate_weight, param_inits()[0].second);
  }
}

std::vector<std::pair<std::string, tp::ParamInit>> MLPImpl::param_inits() const {
  if (!gate) return {};
  return {{"gate_weight", {tp::ParamInit::kNormal, config.init_method_std(), {}}}};
}

namespace {
at::Tensor activate(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGelu: return at::gelu(x);
    case Activation::kGeluTanh: return at::gelu(x, "tanh");
    case Activation::kSilu: return at::silu(x);
    case Activation::kSquaredRelu: return at::relu(x).square();
  }
  TORCH_INTERNAL_ASSERT(false);
}
}  // namespace

at::Tensor MLPImpl::forward(const at::Tensor& hidden) {
  at::Tensor out = linear_fc2(activation(linear_fc1(hidden)));
  if (gate) out = out * at::sigmoid(at::linear(hidden, gate_weight.to(hidden.scalar_type())));
  return out;
}

at::Tensor MLPImpl::forward_weighted(const at::Tensor& tokens, const at::Tensor& probs) {
  const at::Tensor h = activation(linear_fc1(tokens));
  const at::Tensor weighted = (h * probs).to(h.scalar_type());
  if (!linear_fc2->bias.defined()) return linear_fc2(weighted);
  // As Megatron-Core's experts: fc2's bias is scaled by the token's probability too, so that the
  // expert's whole output is weighted. (Biased experts are not tensor-parallel: the GEMM is whole.)
  return at::linear(weighted, linear_fc2->weight) + linear_fc2->bias * probs;
}

at::Tensor MLPImpl::activation(const at::Tensor& h) {
  if (linear_fc1->options.skip_bias_add())
    return fusions::bias_gelu(h, linear_fc1->bias, config.activation() == Activation::kGeluTanh);
  return mlp_activation(config, h);
}

at::Tensor mlp_activation(const TransformerConfig& config, const at::Tensor& h) {
  if (!config.gated_linear_unit()) return activate(h, config.activation());
  auto gate_up = h.chunk(2, -1);
  return activate(gate_up[0], config.activation()) * gate_up[1];
}

}  // namespace megatron::transformer
