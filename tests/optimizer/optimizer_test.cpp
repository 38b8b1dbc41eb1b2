// MegatronOptimizer on a single rank: AdamW against its update rule written out here, no weight
// decay on biases and norms, clipping by the global norm, fp16 overflow skipping and the
// dynamic loss scale.
#include "megatron/optimizer/optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "megatron/optimizer/grad_scaler.h"

namespace megatron::optimizer {
namespace {

at::Tensor leaf(at::Tensor t) {
  return t.set_requires_grad(true);
}

// Plain SGD with learning rate 1: a parameter moves by exactly its (clipped) gradient.
OptimizerConfig unit_sgd(double clip_grad) {
  OptimizerConfig c;
  c.optimizer = "sgd";
  c.sgd_momentum = 0;
  c.lr = 1.0;
  c.weight_decay = 0;
  c.clip_grad = clip_grad;
  return c;
}

TEST(MegatronOptimizer, AdamWStepMatchesTheUpdateRule) {
  auto w = leaf(at::tensor({1.0, -2.0, 3.0, 0.5}, at::kFloat).view({2, 2}));
  auto b = leaf(at::tensor({0.1, 0.2}, at::kFloat));
  OptimizerConfig c;
  c.lr = 0.1;
  c.weight_decay = 0.5;
  c.clip_grad = 0;
  MegatronOptimizer opt({{"layer.weight", w}, {"layer.bias", b}}, c, nullptr, nullptr);
  auto w0 = w.detach().clone(), b0 = b.detach().clone();
  w.mutable_grad() = at::tensor({0.5, -1.0, 2.0, 0.0}, at::kFloat).view({2, 2});
  b.mutable_grad() = at::tensor({1.0, -1.0}, at::kFloat);
  auto gw = w.grad().clone(), gb = b.grad().clone();
  auto result = opt.step();
  EXPECT_TRUE(result.update_successful);
  EXPECT_NEAR(result.grad_norm, std::sqrt(0.25 + 1 + 4 + 0 + 1 + 1), 1e-6);

  // First Adam step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected m/(sqrt(v)+eps) = g/(|g|+eps').
  auto adam = [&](const at::Tensor& p0, const at::Tensor& g, double wd) {
    auto m_hat = g, v_hat = g * g;
    return p0 * (1 - c.lr * wd) - c.lr * m_hat / (v_hat.sqrt() + c.adam_eps);
  };
  EXPECT_TRUE(at::allclose(w.detach(), adam(w0, gw, 0.5), 1e-6, 1e-6)) << w;
  EXPECT_TRUE(at::allclose(b.detach(), adam(b0, gb, 0.0), 1e-6, 1e-6)) << b;  // no decay on bias
}

TEST(MegatronOptimizer, ClipsToTheGlobalNorm) {
  auto w = leaf(at::zeros({3}));
  MegatronOptimizer opt({{"w", w}}, unit_sgd(1.0), nullptr, nullptr);
  w.mutable_grad() = at::tensor({3.0f, 0.0f, 4.0f});
  auto result = opt.step();
  EXPECT_NEAR(result.grad_norm, 5.0, 1e-6);
  // SGD with lr 1 moves by the clipped gradient: g * 1 / 5.
  EXPECT_TRUE(at::allclose(w.detach(), at::tensor({-0.6f, 0.0f, -0.8f}), 1e-5, 1e-6)) << w;
}

TEST(MegatronOptimizer, Fp16OverflowSkipsTheStepAndShrinksTheScale) {
  auto w = leaf(at::ones({4}, at::kHalf));
  OptimizerConfig c;
  c.lr = 0.1;
  GradScalerConfig sc;
  sc.initial_scale = 1024;
  sc.hysteresis = 2;
  sc.growth_interval = 3;
  c.grad_scaler = sc;
  MegatronOptimizer opt({{"w", w}}, c, nullptr, nullptr);
  EXPECT_EQ(opt.loss_scale(), 1024);

  for (int i = 0; i < 2; ++i) {  // two overflows: the second one exhausts the hysteresis
    w.mutable_grad() = at::tensor({1.0f, INFINITY, 1.0f, 1.0f}).to(at::kHalf);
    auto r = opt.step();
    EXPECT_FALSE(r.update_successful);
    EXPECT_TRUE(std::isnan(r.grad_norm));
    EXPECT_TRUE(at::equal(w.detach(), at::ones({4}, at::kHalf))) << "a skipped step must not move weights";
  }
  EXPECT_EQ(opt.loss_scale(), 512);

  // Clean steps: the gradient is unscaled (1024 * 0.5 / 512 = 1) and the weights move.
  for (int i = 0; i < 3; ++i) {
    w.mutable_grad() = at::full({4}, 512.0, at::kHalf);
    EXPECT_TRUE(opt.step().update_successful);
  }
  EXPECT_LT(w.detach()[0].item<float>(), 1.0f);
  EXPECT_EQ(opt.loss_scale(), 1024);  // grew after growth_interval clean steps
  EXPECT_EQ(w.scalar_type(), at::kHalf);
  EXPECT_EQ(opt.main_params()[0].scalar_type(), at::kFloat);
}

// 64 micro-batches of bf16 gradients near 1: summed in bf16 (8 significant bits) the total near
// 64 would keep steps of 0.25-0.5; in the fp32 buffer zero_grad() provides it is exact.
TEST(MegatronOptimizer, HalfPrecisionGradientsAccumulateInFp32) {
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    auto w = leaf(at::ones({3}, dtype));
    MegatronOptimizer opt({{"w", w}}, unit_sgd(0), nullptr, nullptr);
    opt.zero_grad();
    ASSERT_EQ(w.grad().scalar_type(), at::kFloat);
    double want = 0, in_half = 0;
    for (int m = 0; m < 64; ++m) {
      const double cm = 1.0 + m / 128.0;
      (w * cm).sum().backward();  // each micro-batch's gradient is cm rounded to the model dtype
      const double rounded = at::scalar_tensor(cm, dtype).item<double>();
      want += rounded;
      in_half = at::scalar_tensor(in_half + rounded, dtype).item<double>();
    }
    ASSERT_GT(std::abs(in_half - want), 0.1) << "the test needs a sum that half precision gets wrong";
    EXPECT_EQ(w.grad().scalar_type(), at::kFloat);
    EXPECT_NEAR(w.grad()[0].item<double>(), want, 1e-4) << dtype;
    // The update uses the fp32 sum (SGD, lr 1: the main weight moves by exactly it).
    EXPECT_TRUE(opt.step().update_successful);
    EXPECT_NEAR(opt.main_params()[0][0].item<double>(), 1.0 - want, 1e-4) << dtype;
  }
}

TEST(GradScaler, FixedScaleNeverMoves) {
  GradScalerConfig sc;
  sc.initial_scale = 128;
  sc.dynamic = false;
  GradScaler s(sc);
  s.update(true);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 128);
}

TEST(GradScaler, ScaleNeverFallsBelowMinimum) {
  GradScalerConfig sc;
  sc.initial_scale = 4;
  sc.min_scale = 2;
  sc.hysteresis = 1;
  GradScaler s(sc);
  for (int i = 0; i < 5; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 2);
}

}  // namespace
}  // namespace megatron::optimizer
