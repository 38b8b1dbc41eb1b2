#include "megatron/optimizer/grad_scaler.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace megatron::optimizer {

GradScaler::GradScaler(GradScalerConfig config)
    : config_(config), scale_(config.initial_scale), hysteresis_tracker_(config.hysteresis) {
  TORCH_CHECK(config.initial_scale > 0 && config.min_scale > 0 && config.min_scale <= config.initial_scale,
              "[grad_scaler] need 0 < min_scale (", config.min_scale, ") <= initial_scale (", config.initial_scale,
              ")");
  TORCH_CHECK(config.growth_interval > 0 && config.hysteresis > 0,
              "[grad_scaler] growth_interval and hysteresis must be positive");
}

void GradScaler::update(bool found_inf) {
  if (!config_.dynamic) return;
  if (found_inf) {
    growth_tracker_ = 0;
    if (--hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
    return;
  }
  if (++growth_tracker_ == config_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= config_.growth_factor;
  }
}

void GradScaler::load_state(const State& s) {
  scale_ = s.scale;
  growth_tracker_ = s.growth_tracker;
  hysteresis_tracker_ = s.hysteresis_tracker;
}

}  // namespace megatron::optimizer
