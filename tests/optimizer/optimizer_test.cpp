// MegatronOptimizer on a single rank: AdamW and SGD against their update rules written out here
// and against LibTorch's torch::optim::AdamW, no weight decay on biases and norms, clipping by
// the global norm, skipped updates (fp16 overflow, non-finite gradients, a caller's skip flag)
// and the dynamic loss scale.
#include "megatron/optimizer/optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/optim/adamw.h>

#include <cmath>
#include <vector>

#include "megatron/optimizer/grad_scaler.h"
#include "wrapped_optimizer.h"

namespace megatron::optimizer {
namespace {

at::Tensor leaf(at::Tensor t) {
  return t.set_requires_grad(true);
}

// step() and the readback a train loop makes after it.
struct Outcome {
  bool skipped;
  double grad_norm;
};
Outcome step_and_read(MegatronOptimizer& opt, const at::Tensor& skip = {}) {
  auto r = opt.step(skip);
  const bool found_inf = r.found_inf.item<float>() > 0;
  opt.update_loss_scale(found_inf);
  return {found_inf, r.grad_norm.item<double>()};
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
  auto opt_wrapped = testing::wrap({{"layer.weight", w}, {"layer.bias", b}}, c);
  auto& opt = *opt_wrapped.optimizer;
  auto w0 = w.detach().clone(), b0 = b.detach().clone();
  w.mutable_grad() = at::tensor({0.5, -1.0, 2.0, 0.0}, at::kFloat).view({2, 2});
  b.mutable_grad() = at::tensor({1.0, -1.0}, at::kFloat);
  auto gw = w.grad().clone(), gb = b.grad().clone();
  auto result = step_and_read(opt);
  EXPECT_FALSE(result.skipped);
  EXPECT_NEAR(result.grad_norm, std::sqrt(0.25 + 1 + 4 + 0 + 1 + 1), 1e-6);

  // First Adam step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected m/(sqrt(v)+eps) = g/(|g|+eps').
  auto adam = [&](const at::Tensor& p0, const at::Tensor& g, double wd) {
    auto m_hat = g, v_hat = g * g;
    return p0 * (1 - c.lr * wd) - c.lr * m_hat / (v_hat.sqrt() + c.adam_eps);
  };
  EXPECT_TRUE(at::allclose(w.detach(), adam(w0, gw, 0.5), 1e-6, 1e-6)) << w;
  EXPECT_TRUE(at::allclose(b.detach(), adam(b0, gb, 0.0), 1e-6, 1e-6)) << b;  // no decay on bias
}

TEST(MegatronOptimizer, DecoupledLrUpdatesTheEmbeddingAndOutputLayerAtTheirOwnRate) {
  auto c = unit_sgd(0);
  auto embedding = leaf(at::zeros({4, 2})), hidden = leaf(at::zeros({2, 2})), output = leaf(at::zeros({2, 2}));
  std::vector<distributed::ModelParam> params = {{"embedding.word_embeddings.weight", embedding},
                                                 {"decoder.layers.0.mlp.weight", hidden},
                                                 {"output_layer.weight", output}};
  // Without --decoupled-lr the flag changes nothing: one rate, the usual two groups.
  auto together_wrapped = testing::wrap(params, c);
  auto& together = *together_wrapped.optimizer;
  EXPECT_EQ(together.param_group_sizes(), std::vector<int64_t>({3}));
  c.decoupled_lr = true;
  auto opt_wrapped = testing::wrap(params, c);
  auto& opt = *opt_wrapped.optimizer;
  EXPECT_EQ(opt.param_group_sizes(), std::vector<int64_t>({1, 2}));  // the hidden weight, then the decoupled two
  opt.set_lr(0.1, 0.5);
  EXPECT_EQ(opt.param_group_lrs(), std::vector<double>({0.1, 0.5}));
  for (auto& p : {embedding, hidden, output}) p.mutable_grad() = at::ones_like(p);
  step_and_read(opt);
  // SGD without momentum or decay: p -= lr * g.
  EXPECT_TRUE(at::allclose(embedding.detach(), at::full({4, 2}, -0.5f))) << embedding;
  EXPECT_TRUE(at::allclose(output.detach(), at::full({2, 2}, -0.5f))) << output;
  EXPECT_TRUE(at::allclose(hidden.detach(), at::full({2, 2}, -0.1f))) << hidden;
}

TEST(MegatronOptimizer, ClipsToTheGlobalNorm) {
  auto w = leaf(at::zeros({3}));
  auto opt_wrapped = testing::wrap({{"w", w}}, unit_sgd(1.0));
  auto& opt = *opt_wrapped.optimizer;
  w.mutable_grad() = at::tensor({3.0f, 0.0f, 4.0f});
  auto result = step_and_read(opt);
  EXPECT_NEAR(result.grad_norm, 5.0, 1e-6);
  // SGD with lr 1 moves by the clipped gradient: g * 1 / 5.
  EXPECT_TRUE(at::allclose(w.detach(), at::tensor({-0.6f, 0.0f, -0.8f}), 1e-5, 1e-6)) << w;
}

// --log-num-zeros-in-grad and --log-params-norm: the zeros of the clipped gradients and the norm
// of the updated parameters, against the same counts taken here on the tensors themselves (a
// bf16 parameter's norm is its fp32 main parameter's).
TEST(MegatronOptimizer, CountsZeroGradientsAndTakesTheUpdatedParametersNorm) {
  auto w = leaf(at::tensor({1.0f, 2.0f, 0.5f, -1.0f}).view({2, 2}));
  auto b = leaf(at::tensor({0.25f, 0.0f, 3.0f}));
  auto h = leaf(at::tensor({1.5f, -2.5f}).to(at::kBFloat16));
  auto c = unit_sgd(1.0);
  c.log_num_zeros_in_grad = c.log_params_norm = true;
  auto opt_wrapped = testing::wrap({{"w", w}, {"layer.bias", b}, {"h", h}}, c);
  auto& opt = *opt_wrapped.optimizer;
  w.mutable_grad() = at::tensor({0.0f, 3.0f, 0.0f, 0.0f}).view({2, 2});
  b.mutable_grad() = at::tensor({4.0f, 0.0f, 0.0f});
  h.mutable_grad() = at::tensor({0.0f, 1.0f}).to(at::kBFloat16);
  const auto r = opt.step();
  EXPECT_EQ(r.num_zeros.item<double>(), 6.0);  // 3 + 2 + 1
  const at::Tensor all = at::cat({w.detach().reshape({-1}), b.detach(), opt.main_params()[2].reshape({-1})});
  EXPECT_NEAR(r.params_norm.item<double>(), all.norm().item<double>(), 1e-6);
  auto v = leaf(at::ones({2}));
  v.mutable_grad() = at::ones({2});
  EXPECT_FALSE(testing::wrap({{"v", v}}, unit_sgd(1.0)).optimizer->step().params_norm.defined());
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
  auto opt_wrapped = testing::wrap({{"w", w}}, c);
  auto& opt = *opt_wrapped.optimizer;
  EXPECT_EQ(opt.loss_scale(), 1024);

  for (int i = 0; i < 2; ++i) {  // two overflows: the second one exhausts the hysteresis
    w.mutable_grad() = at::tensor({1.0f, INFINITY, 1.0f, 1.0f}).to(at::kHalf);
    auto r = step_and_read(opt);
    EXPECT_TRUE(r.skipped);
    EXPECT_FALSE(std::isfinite(r.grad_norm));
    EXPECT_TRUE(at::equal(w.detach(), at::ones({4}, at::kHalf))) << "a skipped step must not move weights";
  }
  EXPECT_EQ(opt.loss_scale(), 512);

  // Clean steps: the gradient is unscaled (1024 * 0.5 / 512 = 1) and the weights move.
  for (int i = 0; i < 3; ++i) {
    w.mutable_grad() = at::full({4}, 512.0, at::kHalf);
    EXPECT_FALSE(step_and_read(opt).skipped);
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
    auto opt_wrapped = testing::wrap({{"w", w}}, unit_sgd(0));
    auto& opt = *opt_wrapped.optimizer;
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
    EXPECT_FALSE(step_and_read(opt).skipped);
    EXPECT_NEAR(opt.main_params()[0][0].item<double>(), 1.0 - want, 1e-4) << dtype;
  }
}

// Six AdamW steps with a changing learning rate and fresh gradients each time, against the rule
// written out in double: decoupled decay, moments, bias correction (Loshchilov & Hutter; PyTorch's
// AdamW documentation). A bf16 parameter updates its fp32 main copy by the same rule.
TEST(MegatronOptimizer, AdamWOverManyStepsMatchesTheWrittenOutRule) {
  at::manual_seed(3);
  auto w = leaf(at::randn({4, 3}));
  auto b = leaf(at::randn({3}));
  auto h = leaf(at::randn({5, 2}).to(at::kBFloat16));
  OptimizerConfig c;
  c.weight_decay = 0.1;
  c.adam_beta1 = 0.9;
  c.adam_beta2 = 0.95;
  c.adam_eps = 1e-8;
  c.clip_grad = 0;
  auto opt_wrapped = testing::wrap({{"w", w}, {"layer.bias", b}, {"h", h}}, c);
  auto& opt = *opt_wrapped.optimizer;
  struct Ref {
    at::Tensor p, m, v;
    double wd;
  };
  std::vector<Ref> ref = {{w.detach().to(at::kDouble), {}, {}, 0.1},
                          {b.detach().to(at::kDouble), {}, {}, 0.0},
                          {h.detach().to(at::kDouble), {}, {}, 0.1}};
  for (auto& r : ref) r.m = at::zeros_like(r.p), r.v = at::zeros_like(r.p);
  for (int t = 1; t <= 6; ++t) {
    const double lr = 1e-2 * t;
    opt.set_lr(lr);
    opt.zero_grad();
    std::vector<at::Tensor> grads = {at::randn({4, 3}), at::randn({3}), at::randn({5, 2})};
    w.mutable_grad() = grads[0].clone();
    b.mutable_grad() = grads[1].clone();
    h.mutable_grad().copy_(grads[2]);  // the fp32 buffer zero_grad() made
    ASSERT_FALSE(step_and_read(opt).skipped);
    for (size_t i = 0; i < ref.size(); ++i) {
      auto& r = ref[i];
      const at::Tensor g = grads[i].to(at::kDouble);
      r.p = r.p * (1 - lr * r.wd);
      r.m = c.adam_beta1 * r.m + (1 - c.adam_beta1) * g;
      r.v = c.adam_beta2 * r.v + (1 - c.adam_beta2) * g * g;
      const at::Tensor m_hat = r.m / (1 - std::pow(c.adam_beta1, t));
      const at::Tensor v_hat = r.v / (1 - std::pow(c.adam_beta2, t));
      r.p = r.p - lr * m_hat / (v_hat.sqrt() + c.adam_eps);
    }
    EXPECT_TRUE(at::allclose(w.detach().to(at::kDouble), ref[0].p, 1e-5, 1e-6)) << "step " << t;
    EXPECT_TRUE(at::allclose(b.detach().to(at::kDouble), ref[1].p, 1e-5, 1e-6)) << "step " << t;
    EXPECT_TRUE(at::allclose(opt.main_params()[2].to(at::kDouble), ref[2].p, 1e-5, 1e-6)) << "step " << t;
    EXPECT_TRUE(at::equal(h.detach(), opt.main_params()[2].to(at::kBFloat16))) << "the model copy is the rounded main";
  }
  EXPECT_EQ(opt.param_state().at("w").at("step").item<int64_t>(), 6);
}

// The fused update against LibTorch's torch::optim::AdamW, which this optimizer used before.
TEST(MegatronOptimizer, AdamWMatchesLibTorchAdamW) {
  at::manual_seed(4);
  auto w = leaf(at::randn({16, 8}));
  auto theirs = leaf(w.detach().clone());
  OptimizerConfig c;
  c.lr = 3e-3;
  c.weight_decay = 0.05;
  c.clip_grad = 0;
  auto opt_wrapped = testing::wrap({{"w", w}}, c);
  auto& opt = *opt_wrapped.optimizer;
  torch::optim::AdamW reference(
      {theirs},
      torch::optim::AdamWOptions(c.lr).betas({c.adam_beta1, c.adam_beta2}).eps(c.adam_eps).weight_decay(0.05));
  for (int t = 0; t < 10; ++t) {
    const at::Tensor g = at::randn({16, 8});
    w.mutable_grad() = g.clone();
    theirs.mutable_grad() = g.clone();
    step_and_read(opt);
    reference.step();
  }
  EXPECT_TRUE(at::allclose(w.detach(), theirs.detach(), 1e-6, 1e-7)) << (w - theirs).abs().max();
}

// SGD with momentum and coupled weight decay (torch.optim.SGD's rule): buf = m buf + (g + wd p),
// the first buffer being the gradient itself; p -= lr buf.
TEST(MegatronOptimizer, SgdMomentumMatchesTheWrittenOutRule) {
  auto w = leaf(at::tensor({1.0f, -2.0f}).view({1, 2}));
  OptimizerConfig c;
  c.optimizer = "sgd";
  c.lr = 0.5;
  c.sgd_momentum = 0.9;
  c.weight_decay = 0.1;
  c.clip_grad = 0;
  auto opt_wrapped = testing::wrap({{"w", w}}, c);
  auto& opt = *opt_wrapped.optimizer;
  at::Tensor p = w.detach().to(at::kDouble).clone(), buf;
  for (int t = 0; t < 3; ++t) {
    const at::Tensor g = at::tensor({0.5f * (t + 1), -0.25f}).view({1, 2});
    w.mutable_grad() = g.clone();
    step_and_read(opt);
    const at::Tensor d = g.to(at::kDouble) + 0.1 * p;
    buf = t == 0 ? d : 0.9 * buf + d;
    p = p - 0.5 * buf;
    EXPECT_TRUE(at::allclose(w.detach().to(at::kDouble), p, 1e-6, 1e-7)) << "step " << t << ": " << w;
  }
}

// A caller's skip flag (a non-finite loss) and a non-finite gradient without loss scaling both
// leave the weights, the moments and the step count as they were.
TEST(MegatronOptimizer, SkippedUpdatesChangeNothing) {
  auto w = leaf(at::tensor({1.0f, 2.0f}));
  OptimizerConfig c;
  c.lr = 0.1;
  auto opt_wrapped = testing::wrap({{"w", w}}, c);
  auto& opt = *opt_wrapped.optimizer;
  w.mutable_grad() = at::tensor({0.5f, -0.5f});
  ASSERT_FALSE(step_and_read(opt).skipped);
  const auto before = opt.param_state().at("w");
  const at::Tensor weights = w.detach().clone();

  w.mutable_grad() = at::tensor({0.5f, -0.5f});
  auto r = opt.step(at::ones({}));
  EXPECT_EQ(r.found_inf.item<float>(), 1.0f);
  EXPECT_EQ(r.skip_requested.item<float>(), 1.0f);
  w.mutable_grad() = at::tensor({NAN, 1.0f});
  auto nan_grad = step_and_read(opt);
  EXPECT_TRUE(nan_grad.skipped);

  EXPECT_TRUE(at::equal(w.detach(), weights));
  const auto after = opt.param_state().at("w");
  for (const char* key : {"exp_avg", "exp_avg_sq", "step"})
    EXPECT_TRUE(at::equal(after.at(key), before.at(key))) << key;
  EXPECT_EQ(after.at("step").item<int64_t>(), 1);
}

// param_state() into a new optimizer, then more steps: the same bits as never stopping.
TEST(MegatronOptimizer, ResumingFromParamStateIsBitIdentical) {
  for (const char* kind : {"adam", "sgd"}) {
    OptimizerConfig c;
    c.optimizer = kind;
    c.lr = 1e-2;
    at::manual_seed(5);
    const at::Tensor init = at::randn({6, 4}).to(at::kBFloat16);
    std::vector<at::Tensor> grads;
    for (int t = 0; t < 6; ++t) grads.push_back(at::randn({6, 4}));
    auto run = [&](MegatronOptimizer& opt, at::Tensor& w, int from, int to) {
      for (int t = from; t < to; ++t) {
        opt.zero_grad();
        w.mutable_grad().copy_(grads[t]);
        step_and_read(opt);
      }
    };
    auto straight = leaf(init.clone());
    auto whole_wrapped = testing::wrap({{"w", straight}}, c);
    auto& whole = *whole_wrapped.optimizer;
    run(whole, straight, 0, 6);

    auto first = leaf(init.clone());
    auto before_wrapped = testing::wrap({{"w", first}}, c);
    auto& before = *before_wrapped.optimizer;
    run(before, first, 0, 3);
    auto resumed = leaf(first.detach().clone());
    auto after_wrapped = testing::wrap({{"w", resumed}}, c);
    auto& after = *after_wrapped.optimizer;
    after.load_param_state(before.param_state());
    run(after, resumed, 3, 6);
    EXPECT_TRUE(at::equal(resumed.detach(), straight.detach())) << kind;
    EXPECT_TRUE(at::equal(after.main_params()[0], whole.main_params()[0])) << kind;
  }
}

// Megatron-LM's ParamAndGradBuffer: the parameters of a dtype share one storage and their
// gradients another (fp32), keeping their values; autograd accumulates micro-batches into it; a
// .grad replaced by hand still reaches the update.
TEST(MegatronOptimizer, ParametersAndGradientsLiveInFlatBuffers) {
  auto w = leaf(at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({2, 2}));
  auto b = leaf(at::tensor({0.5f, -0.5f}));
  auto h = leaf(at::tensor({1.0f, 2.0f}).to(at::kBFloat16).view({1, 2}));
  auto opt_wrapped = testing::wrap({{"w", w}, {"layer.bias", b}, {"h", h}}, unit_sgd(0));
  auto& opt = *opt_wrapped.optimizer;
  EXPECT_TRUE(at::equal(w.detach(), at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({2, 2})));
  EXPECT_TRUE(at::equal(b.detach(), at::tensor({0.5f, -0.5f})));
  EXPECT_TRUE(w.storage().is_alias_of(b.storage())) << "fp32 parameters share one buffer";
  EXPECT_FALSE(w.storage().is_alias_of(h.storage())) << "bf16 ones have their own";
  opt.zero_grad();
  EXPECT_TRUE(w.grad().storage().is_alias_of(b.grad().storage()));
  EXPECT_EQ(h.grad().scalar_type(), at::kFloat);

  auto x = at::tensor({1.0f, 1.0f});
  for (int micro = 0; micro < 2; ++micro) ((w.matmul(x) + b).sum() + h.sum()).backward();
  EXPECT_TRUE(at::equal(w.grad(), at::full({2, 2}, 2.0f)));  // two micro-batches summed in place
  EXPECT_TRUE(at::equal(b.grad(), at::full({2}, 2.0f)));
  b.mutable_grad() = at::full({2}, 10.0f);  // replaced: the update still sees it
  step_and_read(opt);                       // SGD, lr 1
  EXPECT_TRUE(at::equal(w.detach(), at::tensor({-1.0f, 0.0f, 1.0f, 2.0f}).view({2, 2})));
  EXPECT_TRUE(at::equal(b.detach(), at::tensor({-9.5f, -10.5f})));
  EXPECT_TRUE(at::equal(h.detach(), at::tensor({-1.0f, 0.0f}).to(at::kBFloat16).view({1, 2})));
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
