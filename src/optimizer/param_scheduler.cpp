#include "megatron/optimizer/param_scheduler.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace megatron::optimizer {

OptimizerParamScheduler::OptimizerParamScheduler(ParamSchedulerConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  TORCH_CHECK(c.min_lr >= 0 && c.max_lr >= c.min_lr, "[param_scheduler] need 0 <= min_lr (", c.min_lr, ") <= max_lr (",
              c.max_lr, ")");
  TORCH_CHECK(c.lr_decay_steps > 0, "[param_scheduler] lr_decay_steps (", c.lr_decay_steps, ") must be positive");
  TORCH_CHECK((c.lr_warmup_steps >= 0 && c.lr_warmup_steps < c.lr_decay_steps) || c.lr_decay_style == "constant" ||
                  c.lr_decay_style == "inverse-square-root",
              "[param_scheduler] lr_warmup_steps (", c.lr_warmup_steps, ") must be smaller than lr_decay_steps (",
              c.lr_decay_steps, ")");
  const bool known = c.lr_decay_style == "constant" || c.lr_decay_style == "linear" || c.lr_decay_style == "cosine" ||
                     c.lr_decay_style == "inverse-square-root" || c.lr_decay_style == "WSD";
  TORCH_CHECK(known, "[param_scheduler] unknown lr_decay_style '", c.lr_decay_style,
              "'; expected constant, linear, cosine, inverse-square-root or WSD");
  if (c.lr_decay_style == "WSD") {
    TORCH_CHECK(c.wsd_decay_steps > 0 && c.wsd_decay_steps <= c.lr_decay_steps - c.lr_warmup_steps,
                "[param_scheduler] WSD needs 0 < wsd_decay_steps (", c.wsd_decay_steps,
                ") <= decay steps after warm-up (", c.lr_decay_steps - c.lr_warmup_steps, ")");
    TORCH_CHECK(
        c.lr_wsd_decay_style == "exponential" || c.lr_wsd_decay_style == "linear" || c.lr_wsd_decay_style == "cosine",
        "[param_scheduler] unknown lr_wsd_decay_style '", c.lr_wsd_decay_style, "'");
  }
}

namespace {

// The shortest text that reads back as the same double (Python's repr), so that two rates that
// differ print differently.
std::string shortest(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
std::string shortest(int64_t v) {
  return std::to_string(v);
}
std::string shortest(const std::string& v) {
  return v;
}

// Megatron-LM's _check_and_set: this run's value, or the checkpoint's, or an error.
template <typename T>
void check_and_set(T& value, const T& saved, const char* name, SavedSchedule how, std::vector<std::string>& log) {
  if (how == SavedSchedule::kOverride) {
    log.push_back(" > overriding " + std::string(name) + " value to " + shortest(value));
    return;
  }
  TORCH_CHECK(how == SavedSchedule::kUseCheckpoint || value == saved, "OptimizerParamScheduler: class input value ",
              shortest(value), " and checkpoint value ", shortest(saved), " for ", name, " do not match");
  log.push_back(" > using checkpoint value " + shortest(saved) + " for " + name);
  value = saved;
}

}  // namespace

ParamSchedulerState OptimizerParamScheduler::state_dict() const {
  const auto& c = config_;
  return {c.max_lr, c.min_lr, c.lr_warmup_steps, c.lr_decay_steps, c.lr_decay_style, num_steps_};
}

std::vector<std::string> OptimizerParamScheduler::load_state_dict(const ParamSchedulerState& saved, SavedSchedule how) {
  // Checked on a copy: an error leaves this schedule as it was.
  ParamSchedulerConfig c = config_;
  std::vector<std::string> log;
  check_and_set(c.max_lr, saved.max_lr, "learning rate", how, log);
  check_and_set(c.min_lr, saved.min_lr, "minimum learning rate", how, log);
  check_and_set(c.lr_warmup_steps, saved.lr_warmup_steps, "warmup iterations", how, log);
  check_and_set(c.lr_decay_steps, saved.lr_decay_steps, "total number of iterations", how, log);
  check_and_set(c.lr_decay_style, saved.lr_decay_style, "learning rate decay style", how, log);
  *this = OptimizerParamScheduler(std::move(c));
  num_steps_ = saved.num_steps;
  return log;
}

std::optional<double> OptimizerParamScheduler::decoupled_lr() const {
  if (!config_.decoupled_max_lr) return std::nullopt;
  return get_lr(num_steps_, *config_.decoupled_max_lr, config_.decoupled_min_lr.value_or(config_.min_lr));
}

double OptimizerParamScheduler::get_lr(int64_t num_steps, double max_lr, double min_lr) const {
  const auto& c = config_;
  if (c.lr_warmup_steps > 0 && num_steps <= c.lr_warmup_steps) {
    return c.init_lr + (max_lr - c.init_lr) * static_cast<double>(num_steps) / c.lr_warmup_steps;
  }
  if (c.lr_decay_style == "constant") return max_lr;
  if (num_steps > c.lr_decay_steps) return min_lr;
  if (c.lr_decay_style == "inverse-square-root") {
    double warmup = std::max<int64_t>(c.lr_warmup_steps, 1);
    double steps = std::max<int64_t>(num_steps, 1);
    return std::max(min_lr, max_lr * std::sqrt(warmup) / std::sqrt(steps));
  }
  const double decay_ratio =
      static_cast<double>(num_steps - c.lr_warmup_steps) / static_cast<double>(c.lr_decay_steps - c.lr_warmup_steps);
  double coeff = 1.0;
  if (c.lr_decay_style == "linear") {
    coeff = 1.0 - decay_ratio;
  } else if (c.lr_decay_style == "cosine") {
    coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
  } else {  // WSD: stable until the last wsd_decay_steps, then anneal
    const int64_t anneal_start = c.lr_decay_steps - c.wsd_decay_steps;
    if (num_steps > anneal_start) {
      const double r = static_cast<double>(num_steps - anneal_start) / c.wsd_decay_steps;
      if (c.lr_wsd_decay_style == "linear") {
        coeff = 1.0 - r;
      } else if (c.lr_wsd_decay_style == "cosine") {
        coeff = 0.5 * (std::cos(M_PI * r) + 1.0);
      } else {
        coeff = 2.0 * std::pow(0.5, r) - 1.0;
      }
    }
  }
  return min_lr + coeff * (max_lr - min_lr);
}

double OptimizerParamScheduler::step(int64_t increment) {
  num_steps_ += increment;
  return lr();
}

}  // namespace megatron::optimizer
