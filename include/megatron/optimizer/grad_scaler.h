// Loss scaling for fp16 (Megatron's ConstantGradScaler / DynamicGradScaler): the loss is
// multiplied by scale() before backward; an iteration whose gradients overflow is skipped and,
// after `hysteresis` such iterations, the scale shrinks; `growth_interval` clean iterations in a
// row grow it.
#pragma once

#include "megatron/export.h"

#include <cstdint>

namespace megatron::optimizer {

struct MEGATRON_API GradScalerConfig {
  double initial_scale = 4294967296.0;
  double min_scale = 1.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 1000;
  int64_t hysteresis = 2;
  bool dynamic = true;  // false: the scale stays initial_scale
};

class MEGATRON_API GradScaler {
 public:
  explicit GradScaler(GradScalerConfig config);
  double scale() const { return scale_; }
  // Records one iteration's outcome.
  void update(bool found_inf);

  struct State {
    double scale;
    int64_t growth_tracker, hysteresis_tracker;
  };
  State state() const { return {scale_, growth_tracker_, hysteresis_tracker_}; }
  void load_state(const State& s);

 private:
  GradScalerConfig config_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_;
};

}  // namespace megatron::optimizer
