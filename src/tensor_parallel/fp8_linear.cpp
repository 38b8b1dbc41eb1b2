// The FP8 GEMMs of a linear layer through at::_scaled_mm (fp8.h says what each computes).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "megatron/tensor_parallel/fp8.h"

namespace megatron::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kAlign = 16;  // _scaled_mm's rule for every dimension on CUDA

// Rows padded with zeros to a multiple of 16: they add nothing to a product or an amax.
at::Tensor pad_rows(const at::Tensor& x2d) {
  const int64_t pad = (kAlign - x2d.size(0) % kAlign) % kAlign;
  return pad ? at::constant_pad_nd(x2d, {0, 0, 0, pad}) : x2d;
}

// a [m, k] times b [k, n] from float8 operands and their inverse scales. _scaled_mm wants a
// row-major and b column-major.
// fast_accum: the forward GEMM accumulates in the tensor cores' own precision, the gradient GEMMs
// promote to fp32 (Transformer Engine's defaults).
at::Tensor scaled_mm(const at::Tensor& a, const at::Tensor& a_scale_inv, const at::Tensor& b,
                     const at::Tensor& b_scale_inv, at::ScalarType out, bool fast_accum = false) {
  const at::Tensor b_cm = b.stride(0) == 1 ? b : b.t().contiguous().t();
  return at::_scaled_mm(a.contiguous(), b_cm, a_scale_inv, b_scale_inv, std::nullopt, std::nullopt, out, fast_accum);
}

struct MetaHolder : torch::CustomClassHolder {
  explicit MetaHolder(std::shared_ptr<Fp8Meta> m) : meta(std::move(m)) {}
  std::shared_ptr<Fp8Meta> meta;
};

struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, std::shared_ptr<Fp8Meta> meta, bool record_amax) {
    const int64_t in = weight.size(1), out = weight.size(0);
    const at::Tensor x2d = input.reshape({-1, in});
    const int64_t rows = x2d.size(0);
    const at::Tensor padded = pad_rows(x2d);
    auto [xq, x_inv] = meta->quantize(padded, Fp8Meta::kInput, record_amax);
    auto [wq, w_inv] = meta->quantize(weight, Fp8Meta::kWeight, record_amax);
    at::Tensor y = scaled_mm(xq, x_inv, wq.t(), w_inv, input.scalar_type(), /*fast_accum=*/true).narrow(0, 0, rows);
    if (bias.numel()) y = y + bias;
    // The float8 copies are what backward needs (a quarter of bf16's memory for the input);
    // without FP8 weight gradients the input is kept as it came.
    const bool wgrad = meta->config().wgrad;
    ctx->save_for_backward({wgrad ? xq : x2d, x_inv, wq, w_inv});
    ctx->saved_data["meta"] = c10::IValue::make_capsule(c10::make_intrusive<MetaHolder>(meta));
    ctx->saved_data["rows"] = rows;
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    auto sizes = input.sizes().vec();
    sizes.back() = out;
    return y.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x_saved = saved[0], &x_inv = saved[1], &wq = saved[2], &w_inv = saved[3];
    auto meta = c10::static_intrusive_pointer_cast<MetaHolder>(ctx->saved_data["meta"].toCapsule())->meta;
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const int64_t out = wq.size(0), in = wq.size(1);
    const at::Tensor g2d = grads[0].reshape({-1, out});
    const at::ScalarType dtype = g2d.scalar_type();
    auto [gq, g_inv] = meta->quantize(pad_rows(g2d), Fp8Meta::kGradOutput);
    // dX [rows, in] = dY [rows, out] W [out, in]
    at::Tensor grad_input = scaled_mm(gq, g_inv, wq, w_inv, dtype).narrow(0, 0, rows);
    // dW [out, in] = dY^T [out, rows] X [rows, in]
    at::Tensor grad_weight =
        meta->config().wgrad ? scaled_mm(gq.t(), g_inv, x_saved, x_inv, dtype) : g2d.t().mm(x_saved.to(dtype));
    at::Tensor grad_bias = ctx->saved_data["has_bias"].toBool() ? g2d.sum(0) : at::Tensor();
    auto sizes = grads[0].sizes().vec();
    sizes.back() = in;
    return {grad_input.reshape(sizes), grad_weight, grad_bias, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                      const std::shared_ptr<Fp8Meta>& meta) {
  TORCH_CHECK(meta, "[fp8] fp8_linear needs an Fp8Meta");
  TORCH_CHECK(weight.dim() == 2 && input.size(-1) == weight.size(1), "[fp8] fp8_linear: input [..., ", input.size(-1),
              "] does not match weight ", weight.sizes());
  TORCH_CHECK(weight.size(0) % kAlign == 0 && weight.size(1) % kAlign == 0,
              "[fp8] at::_scaled_mm needs GEMM sizes that are multiples of 16; this layer's weight is ",
              weight.sizes());
  // apply() runs forward with autograd off: whether it records is decided here.
  return Fp8Linear::apply(input, weight, bias.defined() ? bias : at::empty({0}, weight.options()), meta,
                          at::GradMode::is_enabled());
}

}  // namespace megatron::tensor_parallel
