// OptimizerParamScheduler (Megatron-LM's learning-rate schedule): linear warm-up from
// lr_warmup_init to max_lr, then constant | linear | cosine | inverse-square-root | WSD decay to
// min_lr. Steps count samples, as in Megatron-LM (each iteration adds the global batch size).
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// What a checkpoint keeps of the schedule (Megatron-LM's opt_param_scheduler state dict).
struct MEGATRON_API ParamSchedulerState {
  double max_lr = 0, min_lr = 0;
  int64_t lr_warmup_steps = 0, lr_decay_steps = 0;
  std::string lr_decay_style;
  int64_t num_steps = 0;
};

// On resume, a saved schedule that differs from this run's is an error (kMustMatch), unless this
// run's is kept (kOverride: --override-opt_param-scheduler) or the saved one taken
// (kUseCheckpoint: --use-checkpoint-opt_param-scheduler), as Megatron-LM's load_state_dict.
enum class SavedSchedule { kMustMatch, kOverride, kUseCheckpoint };

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

  ParamSchedulerState state_dict() const;
  // Takes the saved step count, and checks or takes the saved schedule as `how` says; returns
  // Megatron-LM's lines for the log (" > using checkpoint value 0.0001 for learning rate").
  std::vector<std::string> load_state_dict(const ParamSchedulerState& saved, SavedSchedule how);

 private:
  ParamSchedulerConfig config_;
  int64_t num_steps_ = 0;
};

}  // namespace megatron::optimizer
