// OptimizerParamScheduler (Megatron-LM's learning-rate schedule): linear warm-up from
// lr_warmup_init to max_lr, then constant | linear | cosine | inverse-square-root | WSD decay to
// min_lr. Steps count samples, as in Megatron-LM (each iteration adds the global batch size).
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megatron::optimizer {

struct MEGATRON_API ParamSchedulerConfig {
  double init_lr = 0.0;  // lr_warmup_init
  double max_lr = 0.0;
  double min_lr = 0.0;
  int64_t lr_warmup_steps = 0;
  int64_t lr_decay_steps = 1;
  std::string lr_decay_style = "linear";
  int64_t wsd_decay_steps = 0;
  std::string lr_wsd_decay_style = "exponential";
  // --decoupled-lr / --decoupled-min-lr: the same schedule between these, for the embedding and
  // output layer (Megatron-LM's param groups with their own max_lr and min_lr).
  std::optional<double> decoupled_max_lr, decoupled_min_lr;
};

class MEGATRON_API OptimizerParamScheduler {
 public:
  // Checks the configuration (clear errors for unknown styles or inconsistent step counts).
  explicit OptimizerParamScheduler(ParamSchedulerConfig config);

  // The learning rate after `num_steps` samples, between max_lr and min_lr (default: the config's).
  double get_lr(int64_t num_steps) const { return get_lr(num_steps, config_.max_lr, config_.min_lr); }
  double get_lr(int64_t num_steps, double max_lr, double min_lr) const;
  // The embedding and output layer's rate now; nullopt without --decoupled-lr.
  std::optional<double> decoupled_lr() const;
  // Advances by `increment` samples and returns the new learning rate.
  double step(int64_t increment);
  double lr() const { return get_lr(num_steps_); }
  int64_t num_steps() const { return num_steps_; }
  void set_num_steps(int64_t steps) { num_steps_ = steps; }
  const ParamSchedulerConfig& config() const { return config_; }

 private:
  ParamSchedulerConfig config_;
  int64_t num_steps_ = 0;
};

}  // namespace megatron::optimizer
