#include "megatron/fusions/fused_bias_gelu.h"

#include "build_config.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#if MEGATRON_WITH_CUDA
#include "fused_bias_gelu_cuda.h"
#endif

namespace megatron::fusions {
namespace {

#if MEGATRON_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saves x and the bias, not their sum: backward recomputes it.
struct FusedBiasGelu : torch::autograd::Function<FusedBiasGelu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias, bool tanh) {
    const int64_t f = x.size(-1);
    ctx->save_for_backward({x, bias});
    ctx->saved_data["tanh"] = tanh;
    return detail::bias_gelu_forward_cuda(x.reshape({-1, f}), bias, tanh).view(x.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t f = saved[0].size(-1);
    auto [dx, dbias] = detail::bias_gelu_backward_cuda(grads[0].reshape({-1, f}), saved[0].reshape({-1, f}), saved[1],
                                                       ctx->saved_data["tanh"].toBool());
    return {dx.view(saved[0].sizes()), dbias, at::Tensor()};
  }
};
#endif

}  // namespace

bool fused_bias_gelu_supported(const at::Tensor& x, const at::Tensor& bias) {
#if MEGATRON_WITH_CUDA
  return detail::bias_gelu_cuda_supported(x, bias);
#else
  return false;
#endif
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh) {
  TORCH_CHECK(bias.dim() == 1 && x.dim() >= 1 && bias.size(0) == x.size(-1), "[bias_gelu] bias ", bias.sizes(),
              " must be [f] for input ", x.sizes());
#if MEGATRON_WITH_CUDA
  if (detail::bias_gelu_cuda_supported(x, bias)) return FusedBiasGelu::apply(x, bias, tanh);
#endif
  return at::gelu(x + bias, tanh ? "tanh" : "none");
}

}  // namespace megatron::fusions
