#include "megatron/fusions/fused_layer_norm.h"

#include "build_config.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>

#if MEGATRON_WITH_CUDA
#include "fused_layer_norm_cuda.h"
#endif

namespace megatron::fusions {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The kernels' arithmetic in fp32 ATen operators: the path off the GPU, and the GPU tests' reference.
struct NormStats {
  at::Tensor y, mean, rstd;  // mean undefined for RMSNorm
};

NormStats norm_forward_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                                 bool rms) {
  const at::Tensor xf = x.to(at::kFloat);
  NormStats s;
  if (!rms) s.mean = xf.mean(-1);
  const at::Tensor centered = rms ? xf : xf - s.mean.unsqueeze(-1);
  s.rstd = centered.square().mean(-1).add_(eps).rsqrt_();
  at::Tensor y = centered * s.rstd.unsqueeze(-1) * weight.to(at::kFloat);
  if (bias.defined()) y.add_(bias.to(at::kFloat));
  s.y = y.to(x.scalar_type());
  return s;
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (RMSNorm: no mean(g)),
// plus grad_sum; dweight = sum over rows of dy * xhat, dbias = sum of dy.
std::array<at::Tensor, 3> norm_backward_reference(const at::Tensor& dy, const at::Tensor& grad_sum, const at::Tensor& x,
                                                  const at::Tensor& mean, const at::Tensor& rstd,
                                                  const at::Tensor& weight, bool with_bias, bool rms) {
  const int64_t h = x.size(-1);
  const at::Tensor xf = x.reshape({-1, h}).to(at::kFloat), dyf = dy.reshape({-1, h}).to(at::kFloat);
  const at::Tensor r = rstd.reshape({-1, 1});
  const at::Tensor xhat = (rms ? xf : xf - mean.reshape({-1, 1})) * r;
  const at::Tensor g = dyf * weight.to(at::kFloat);
  at::Tensor dx = g - xhat * (g * xhat).mean(-1, true);
  if (!rms) dx.sub_(g.mean(-1, true));
  dx.mul_(r);
  if (grad_sum.defined()) dx.add_(grad_sum.reshape({-1, h}).to(at::kFloat));
  return {dx.to(x.scalar_type()).view(x.sizes()), (dyf * xhat).sum(0).to(weight.scalar_type()),
          with_bias ? dyf.sum(0).to(weight.scalar_type()) : at::Tensor()};
}

// Inputs: residual (empty without one: a custom function takes no undefined tensor), x, weight,
// bias (empty without one). Outputs: the norm, and with a residual the sum it normalised.
struct FusedNorm : torch::autograd::Function<FusedNorm> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& residual, const at::Tensor& x,
                               const at::Tensor& weight, const at::Tensor& bias, double eps, bool rms,
                               bool has_residual, bool has_bias) {
    at::Tensor input, y, mean, rstd;
#if MEGATRON_WITH_CUDA
    if (detail::norm_cuda_supported(x, weight)) {
      const int64_t h = x.size(-1);
      auto f = detail::norm_forward_cuda(has_residual ? residual.reshape({-1, h}) : at::Tensor(), x.reshape({-1, h}),
                                         weight, has_bias ? bias : at::Tensor(), eps, rms);
      input = has_residual ? f.sum.view(x.sizes()) : x;
      y = f.y.view(x.sizes());
      mean = f.mean;
      rstd = f.rstd;
      ctx->saved_data["cuda"] = true;
    }
#endif
    if (!y.defined()) {
      input = has_residual ? residual + x : x;
      auto s = norm_forward_reference(input, weight, has_bias ? bias : at::Tensor(), eps, rms);
      y = s.y;
      mean = s.mean;
      rstd = s.rstd;
    }
    ctx->save_for_backward({input, weight, mean.defined() ? mean : at::empty({0}, rstd.options()), rstd});
    ctx->saved_data["rms"] = rms;
    ctx->saved_data["has_residual"] = has_residual;
    ctx->saved_data["has_bias"] = has_bias;
    if (has_residual) return {y, input};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool(), has_residual = ctx->saved_data["has_residual"].toBool();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const at::Tensor dy = grads[0].defined() ? grads[0] : at::zeros_like(input);
    const at::Tensor grad_sum = has_residual && grads[1].defined() ? grads[1] : at::Tensor();
    std::array<at::Tensor, 3> g;
#if MEGATRON_WITH_CUDA
    if (ctx->saved_data.count("cuda")) {
      const int64_t h = input.size(-1);
      auto b =
          detail::norm_backward_cuda(dy.reshape({-1, h}), grad_sum.defined() ? grad_sum.reshape({-1, h}) : grad_sum,
                                     input.reshape({-1, h}), rms ? at::Tensor() : mean, rstd, weight, has_bias, rms);
      g = {b.dx.view(input.sizes()), b.dweight, b.dbias};
    }
#endif
    if (!g[0].defined()) g = norm_backward_reference(dy, grad_sum, input, mean, rstd, weight, has_bias, rms);
    return {
        has_residual ? g[0] : at::Tensor(), g[0], g[1], g[2], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor none_like(const at::Tensor& x) {
  return at::empty({0}, x.options());
}

}  // namespace

bool fused_norm_supported(const at::Tensor& x, const at::Tensor& weight) {
#if MEGATRON_WITH_CUDA
  return detail::norm_cuda_supported(x, weight);
#else
  return false;
#endif
}

at::Tensor fused_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                            bool rms) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1), "[fused_layer_norm] weight ",
              weight.sizes(), " must be [h] for input ", x.sizes());
  return FusedNorm::apply(none_like(x), x, weight, bias.defined() ? bias : none_like(x), eps, rms, false,
                          bias.defined())[0];
}

std::pair<at::Tensor, at::Tensor> fused_add_layer_norm(const at::Tensor& residual, const at::Tensor& x,
                                                       const at::Tensor& weight, const at::Tensor& bias, double eps,
                                                       bool rms) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1), "[fused_add_layer_norm] weight ",
              weight.sizes(), " must be [h] for input ", x.sizes());
  TORCH_CHECK(residual.sizes() == x.sizes() && residual.scalar_type() == x.scalar_type(),
              "[fused_add_layer_norm] residual ", residual.sizes(), " ", residual.scalar_type(), " must match x ",
              x.sizes(), " ", x.scalar_type());
  auto out =
      FusedNorm::apply(residual, x, weight, bias.defined() ? bias : none_like(x), eps, rms, true, bias.defined());
  return {out[1], out[0]};
}

}  // namespace megatron::fusions
