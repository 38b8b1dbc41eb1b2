// The fused kernels' path off the GPU (the reference tests/gpu compares the CUDA kernels with)
// against ATen's own LayerNorm, RMSNorm and GELU with their autograd gradients.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <vector>

#include "error_of.h"
#include "megatron/fusions/fused_bias_gelu.h"
#include "megatron/fusions/fused_layer_norm.h"

namespace megatron::fusions {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct Inputs {
  at::Tensor r, x, w, b, dy, ds;
};

Inputs inputs(int64_t hidden) {
  at::manual_seed(11);
  return {at::randn({3, 5, hidden}).requires_grad_(),
          (at::randn({3, 5, hidden}) * 2 + 0.3).requires_grad_(),
          (at::rand({hidden}) + 0.5).requires_grad_(),
          at::randn({hidden}).requires_grad_(),
          at::randn({3, 5, hidden}),
          at::randn({3, 5, hidden})};
}

// Gradients of the inputs that need them, the outputs given their gradients.
std::vector<at::Tensor> grads(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& out_grads,
                              const std::vector<at::Tensor>& wrt) {
  return torch::autograd::grad(outputs, wrt, out_grads);
}

TEST(FusedNorm, OffTheGpuGivesAtensLayerNormAndRmsNormWithTheirGradients) {
  for (bool rms : {false, true}) {
    auto in = inputs(48);
    const at::Tensor bias = rms ? at::Tensor() : in.b;
    std::vector<at::Tensor> wrt{in.x, in.w};
    if (!rms) wrt.push_back(in.b);
    const at::Tensor ours = fused_layer_norm(in.x, in.w, bias, 1e-5, rms);
    const at::Tensor aten = rms ? at::rms_norm(in.x, {48}, in.w, 1e-5) : at::layer_norm(in.x, {48}, in.w, in.b, 1e-5);
    EXPECT_LT(max_diff(ours, aten), 1e-5) << (rms ? "RMSNorm" : "LayerNorm");
    const auto g_ours = grads({ours}, {in.dy}, wrt), g_aten = grads({aten}, {in.dy}, wrt);
    for (size_t i = 0; i < wrt.size(); ++i) {
      EXPECT_LT(max_diff(g_ours[i], g_aten[i]), 1e-4) << (rms ? "RMSNorm" : "LayerNorm") << " gradient " << i;
    }
  }
}

// The sum and the norm of it, with gradients reaching both (the residual stream and the MLP).
TEST(FusedNorm, AddNormGivesTheSumAndItsNormWithBothGradients) {
  for (bool rms : {false, true}) {
    auto in = inputs(40);
    const at::Tensor bias = rms ? at::Tensor() : in.b;
    std::vector<at::Tensor> wrt{in.r, in.x, in.w};
    if (!rms) wrt.push_back(in.b);
    auto [sum, normed] = fused_add_layer_norm(in.r, in.x, in.w, bias, 1e-5, rms);
    const at::Tensor s = in.r + in.x;
    const at::Tensor n = rms ? at::rms_norm(s, {40}, in.w, 1e-5) : at::layer_norm(s, {40}, in.w, in.b, 1e-5);
    EXPECT_TRUE(at::equal(sum, s));
    EXPECT_LT(max_diff(normed, n), 1e-5);
    const auto g_ours = grads({normed, sum}, {in.dy, in.ds}, wrt), g_aten = grads({n, s}, {in.dy, in.ds}, wrt);
    for (size_t i = 0; i < wrt.size(); ++i) {
      EXPECT_LT(max_diff(g_ours[i], g_aten[i]), 1e-4) << (rms ? "RMSNorm" : "LayerNorm") << " gradient " << i;
    }
  }
}

TEST(FusedNorm, TheKernelsAreNotClaimedOffTheGpu) {
  EXPECT_FALSE(fused_norm_supported(at::randn({2, 64}), at::ones({64})));
  EXPECT_FALSE(fused_bias_gelu_supported(at::randn({2, 64}), at::ones({64})));
}

TEST(FusedNorm, ShapeErrorsNameTheFunction) {
  EXPECT_NE(testing::error_of([] {
              fused_layer_norm(at::randn({2, 8}), at::ones({7}), {}, 1e-5, true);
            }).find("[fused_layer_norm] weight [7] must be [h] for input [2, 8]"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              fused_add_layer_norm(at::randn({2, 4}), at::randn({2, 8}), at::ones({8}), {}, 1e-5, true);
            }).find("[fused_add_layer_norm] residual [2, 4]"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              bias_gelu(at::randn({2, 8}), at::ones({3}), false);
            }).find("[bias_gelu] bias [3] must be [f] for input [2, 8]"),
            std::string::npos);
}

}  // namespace
}  // namespace megatron::fusions
