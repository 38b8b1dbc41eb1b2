// The MLP: fc1, activation (GELU or SwiGLU), fc2.
#include "megatron/transformer/mlp.h"

#include <torch/nn/module.h>

#include "megatron/fusions/fused_bias_gelu.h"
#include "output_projection.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

MLPImpl::MLPImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  reset();
}

void MLPImpl::reset() {
  const int64_t ffn = config.ffn_size();
  const int64_t chunks = config.gated_linear_unit() ? 2 : 1;
  // --bias-gelu-fusion (Megatron-LM's default): fc1's bias is added with the GELU, not in the GEMM.
  const bool bias_gelu = config.bias_gelu_fusion() && config.add_bias_linear() && !config.gated_linear_unit() &&
                         config.activation() != Activation::kSilu;
  linear_fc1 = register_module(
      "linear_fc1", tp::ColumnParallelLinear(tp::ColumnParallelLinearOptions(config.hidden_size(), ffn * chunks)
                                                 .bias(config.add_bias_linear())
                                                 .skip_bias_add(bias_gelu)
                                                 .num_chunks(chunks)
                                                 .sequence_parallel(config.sequence_parallel())
                                                 .init_method_std(config.init_method_std())
                                                 .perform_initialization(config.perform_initialization())
                                                 .tp_group(config.tp_group())));
  linear_fc2 = register_module("linear_fc2", tp::RowParallelLinear(detail::output_projection_options(config, ffn)));
}

namespace {
at::Tensor activate(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGelu: return at::gelu(x);
    case Activation::kGeluTanh: return at::gelu(x, "tanh");
    case Activation::kSilu: return at::silu(x);
  }
  TORCH_INTERNAL_ASSERT(false);
}
}  // namespace

at::Tensor MLPImpl::forward(const at::Tensor& hidden) {
  return linear_fc2(activation(linear_fc1(hidden)));
}

at::Tensor MLPImpl::activation(const at::Tensor& h) {
  if (linear_fc1->options.skip_bias_add())
    return fusions::bias_gelu(h, linear_fc1->bias, config.activation() == Activation::kGeluTanh);
  if (!config.gated_linear_unit()) return activate(h, config.activation());
  auto gate_up = h.chunk(2, -1);
  return activate(gate_up[0], config.activation()) * gate_up[1];
}

}  // namespace megatron::transformer
