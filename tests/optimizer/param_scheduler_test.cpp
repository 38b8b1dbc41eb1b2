// The learning-rate schedule against its closed forms, written out here independently.
#include "megatron/optimizer/param_scheduler.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>

namespace megatron::optimizer {
namespace {

ParamSchedulerConfig config(const std::string& style) {
  ParamSchedulerConfig c;
  c.init_lr = 0.0;
  c.max_lr = 1e-3;
  c.min_lr = 1e-5;
  c.lr_warmup_steps = 100;
  c.lr_decay_steps = 1000;
  c.lr_decay_style = style;
  return c;
}

TEST(ParamScheduler, WarmupIsLinearFromInitLr) {
  auto c = config("cosine");
  c.init_lr = 1e-4;
  OptimizerParamScheduler s(c);
  EXPECT_DOUBLE_EQ(s.get_lr(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.get_lr(50), 1e-4 + (1e-3 - 1e-4) * 0.5);
  EXPECT_DOUBLE_EQ(s.get_lr(100), 1e-3);
}

TEST(ParamScheduler, DecayStyles) {
  const double max = 1e-3, min = 1e-5;
  for (int64_t step : {100, 250, 550, 999, 1000}) {
    const double ratio = (step - 100) / 900.0;
    EXPECT_NEAR(OptimizerParamScheduler(config("linear")).get_lr(step), min + (max - min) * (1 - ratio), 1e-15);
    EXPECT_NEAR(OptimizerParamScheduler(config("cosine")).get_lr(step),
                min + (max - min) * 0.5 * (1 + std::cos(M_PI * ratio)), 1e-15);
    EXPECT_DOUBLE_EQ(OptimizerParamScheduler(config("constant")).get_lr(step), max);
    EXPECT_NEAR(OptimizerParamScheduler(config("inverse-square-root")).get_lr(step),
                std::max(min, max * std::sqrt(100.0) / std::sqrt(static_cast<double>(step))), 1e-15);
  }
  // Past the decay: min_lr (constant stays at max).
  EXPECT_DOUBLE_EQ(OptimizerParamScheduler(config("linear")).get_lr(5000), min);
  EXPECT_DOUBLE_EQ(OptimizerParamScheduler(config("cosine")).get_lr(1001), min);
  EXPECT_DOUBLE_EQ(OptimizerParamScheduler(config("constant")).get_lr(5000), max);
}

TEST(ParamScheduler, DecoupledRateFollowsTheScheduleBetweenItsOwnBounds) {
  auto c = config("cosine");
  OptimizerParamScheduler plain(c);
  EXPECT_FALSE(plain.decoupled_lr());
  c.decoupled_max_lr = 5e-3;
  OptimizerParamScheduler s(c);
  // Warm-up from init_lr to 5e-3, then cosine down to min_lr (no --decoupled-min-lr).
  s.set_num_steps(50);
  EXPECT_DOUBLE_EQ(*s.decoupled_lr(), 5e-3 * 0.5);
  EXPECT_DOUBLE_EQ(s.lr(), 1e-3 * 0.5);  // the other groups keep their schedule
  s.set_num_steps(550);
  EXPECT_NEAR(*s.decoupled_lr(), 1e-5 + (5e-3 - 1e-5) * 0.5 * (1 + std::cos(M_PI * 0.5)), 1e-15);
  c.decoupled_min_lr = 1e-4;
  OptimizerParamScheduler floor(c);
  floor.set_num_steps(2000);
  EXPECT_DOUBLE_EQ(*floor.decoupled_lr(), 1e-4);
  EXPECT_DOUBLE_EQ(floor.lr(), 1e-5);
}

TEST(ParamScheduler, WarmupStableDecay) {
  const double max = 1e-3, min = 1e-5;
  for (const char* style : {"exponential", "linear", "cosine"}) {
    auto c = config("WSD");
    c.wsd_decay_steps = 200;  // anneal over steps 800..1000
    c.lr_wsd_decay_style = style;
    OptimizerParamScheduler s(c);
    EXPECT_DOUBLE_EQ(s.get_lr(500), max) << style;
    EXPECT_DOUBLE_EQ(s.get_lr(800), max) << style;
    for (int64_t step : {850, 900, 1000}) {
      const double r = (step - 800) / 200.0;
      double coeff = std::string(style) == "linear"   ? 1 - r
                     : std::string(style) == "cosine" ? 0.5 * (std::cos(M_PI * r) + 1)
                                                      : 2 * std::pow(0.5, r) - 1;
      EXPECT_NEAR(s.get_lr(step), min + coeff * (max - min), 1e-15) << style << " " << step;
    }
  }
}

TEST(ParamScheduler, StepAdvancesBySamples) {
  OptimizerParamScheduler s(config("linear"));
  EXPECT_DOUBLE_EQ(s.lr(), 0.0);
  EXPECT_DOUBLE_EQ(s.step(32), s.get_lr(32));
  EXPECT_EQ(s.num_steps(), 32);
}

TEST(ParamScheduler, BadConfigurationsAreClear) {
  auto c = config("triangular");
  try {
    OptimizerParamScheduler s(c);
    FAIL();
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("unknown lr_decay_style 'triangular'"), std::string::npos);
  }
  c = config("linear");
  c.lr_warmup_steps = 1000;
  EXPECT_THROW(OptimizerParamScheduler{c}, c10::Error);
  c = config("linear");
  c.min_lr = 1.0;
  EXPECT_THROW(OptimizerParamScheduler{c}, c10::Error);
}

}  // namespace
}  // namespace megatron::optimizer
