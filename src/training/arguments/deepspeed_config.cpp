// A DeepSpeed JSON config (ds_config.json) read into Arguments, key by key with DeepSpeed's
// meaning; parsed with nlohmann-json. Keys that change nothing here are accepted with one warning;
// every other unknown key is refused, since silently training something else is worse.
#include "training/arguments/deepspeed_config.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <vector>

#include "input_files.h"
#include "megatron/logging.h"
#include "training/arguments/argument_ranges.h"

namespace megatron::training::detail {
namespace {

using nlohmann::json;

// Keys accepted without effect, with the value they must hold (null: any value): logging
// switches, bucket sizes and overlap knobs of DeepSpeed's own engine, and features at their off
// setting.
const std::vector<std::pair<std::string, json>>& harmless_keys() {
  static const std::vector<std::pair<std::string, json>> keys = {
      {"wall_clock_breakdown", nullptr},
      {"memory_breakdown", nullptr},
      {"dump_state", false},
      {"zero_allow_untested_optimizer", nullptr},
      {"prescale_gradients", false},
      {"gradient_predivide_factor", 1.0},
      {"zero_optimization.reduce_bucket_size", nullptr},
      {"zero_optimization.allgather_bucket_size", nullptr},
      {"zero_optimization.overlap_comm", nullptr},
      {"zero_optimization.contiguous_gradients", nullptr},
      {"zero_optimization.reduce_scatter", true},
      {"zero_optimization.allgather_partitions", true},
      {"zero_optimization.round_robin_gradients", false},
      {"fp16.auto_cast", false},
      {"fp16.consecutive_hysteresis", false},
      {"optimizer.params.torch_adam", nullptr},
      {"optimizer.params.adam_w_mode", true},
      {"activation_checkpointing", nullptr},
      {"curriculum_learning.enabled", false},
      {"flops_profiler.enabled", false},
      {"tensorboard.enabled", false},
      {"wandb.enabled", false},
      {"csv_monitor.enabled", false},
  };
  return keys;
}

std::string shown(const json& v) {
  return megatron::detail::excerpt(v.dump());
}

class Reader {
 public:
  Reader(Arguments& a, const std::set<std::string>& given) : a_(a), given_(given), file_(a.deepspeed_config) {}

  void read(int64_t world_size) {
    const json config = parse_file();
    if (!config.is_object()) fail("expected a JSON object at the top, found ", shown(config));
    std::vector<std::string> unknown, harmless;
    walk(config, "", unknown, harmless);
    if (!unknown.empty()) {
      std::string list;
      for (const auto& k : unknown) list += (list.empty() ? "\"" : ", \"") + k + "\"";
      fail(unknown.size() > 1 ? "keys " : "key ", list, unknown.size() > 1 ? " are" : " is",
           " not implemented (a training run must not silently differ from what its config asks)");
    }
    if (!harmless.empty()) {
      std::string list;
      for (const auto& k : harmless) list += (list.empty() ? "" : ", ") + k;
      log_rank_0(LogLevel::kWarn, "[arguments] " + file_ + ": accepted without effect here: " + list);
    }
    // DeepSpeed's defaults where the config and the command line are silent (Megatron-LM's
    // differ): no gradient clipping, and a first fp16 loss scale of 2^16.
    if (!seen_.count("gradient_clipping") && !given_.count("clip_grad")) a_.clip_grad = 0.0;
    if (a_.fp16 && !seen_.count("fp16.initial_scale_power") && !given_.count("initial_loss_scale"))
      a_.initial_loss_scale = 65536.0;
    resolve_batch(world_size);
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    TORCH_CHECK(false, "[arguments] --deepspeed_config ", file_, ": ", parts...);
    std::abort();  // not reached
  }

  json parse_file() const {
    const std::string where = "[arguments] --deepspeed_config " + file_;
    return megatron::detail::parse_json(megatron::detail::read_whole_file(file_, where), where);
  }

  // The handlers of the keys that mean something here, by dotted path.
  using Handler = std::function<void(const std::string& key, const json& value)>;
  const std::map<std::string, Handler>& handlers() {
    if (!handlers_.empty()) return handlers_;
    auto integer_into = [this](int64_t& field, const char* name) {
      return [this, &field, name](const std::string& key, const json& v) { set(key, integer(key, v), field, name); };
    };
    auto& h = handlers_;
    h["train_batch_size"] = [this](const std::string& key, const json& v) {
      set(key, integer(key, v), a_.global_batch_size, "global_batch_size");
    };
    h["train_micro_batch_size_per_gpu"] = integer_into(a_.micro_batch_size, "micro_batch_size");
    h["gradient_accumulation_steps"] = [this](const std::string& key, const json& v) {
      accumulation_ = integer(key, v);
      if (*accumulation_ <= 0) fail("\"", key, "\" must be positive, found ", *accumulation_);
    };
    h["gradient_clipping"] = [this](const std::string& key, const json& v) {
      set(key, number(key, v), a_.clip_grad, "clip_grad");
    };
    // DeepSpeed's own progress line, the nearest thing here being the iteration line: it sets
    // --log-interval unless the command line does (scripts often give both, unequal).
    h["steps_per_print"] = [this](const std::string& key, const json& v) {
      const int64_t steps = integer(key, v);
      if (!given_.count("log_interval")) set(key, steps, a_.log_interval, "log_interval");
    };
    h["zero_optimization.stage"] = [this](const std::string& key, const json& v) {
      const int64_t stage = integer(key, v);
      if (stage < 0 || stage > 3) fail("\"", key, "\" is ", stage, ": DeepSpeed's ZeRO stages are 0 to 3");
      set(key, stage, a_.zero_stage, "zero_stage");
    };
    h["fp16.enabled"] = [this](const std::string& key, const json& v) { set(key, boolean(key, v), a_.fp16, "fp16"); };
    // DeepSpeed reads the loss-scale keys only when fp16 is on.
    h["fp16.loss_scale"] = [this](const std::string& key, const json& v) {
      const double scale = number(key, v);
      if (scale < 0) fail("\"", key, "\" must be 0 (dynamic) or positive, found ", shown(v));
      if (fp16_on() && scale == 0 && given_.count("loss_scale") && a_.loss_scale)
        fail("\"", key, "\" is 0 (dynamic loss scaling) but --loss-scale is ", *a_.loss_scale,
             "; give one, or make them agree");
      if (fp16_on() && scale > 0) set(key, scale, a_.loss_scale, "loss_scale");
    };
    h["fp16.initial_scale_power"] = [this](const std::string& key, const json& v) {
      const int64_t power = integer(key, v);
      // 2^power must be a finite double before it becomes the loss scale.
      if (power < -1022 || power > 1023) fail("\"", key, "\" is ", power, "; 2 to that power is not a number here");
      if (fp16_on()) set(key, std::ldexp(1.0, static_cast<int>(power)), a_.initial_loss_scale, "initial_loss_scale");
    };
    h["fp16.loss_scale_window"] = [this](const std::string& key, const json& v) {
      if (fp16_on()) set(key, integer(key, v), a_.loss_scale_window, "loss_scale_window");
    };
    h["fp16.hysteresis"] = [this](const std::string& key, const json& v) {
      if (fp16_on()) set(key, integer(key, v), a_.hysteresis, "hysteresis");
    };
    h["fp16.min_loss_scale"] = [this](const std::string& key, const json& v) {
      if (fp16_on()) set(key, number(key, v), a_.min_loss_scale, "min_loss_scale");
    };
    auto bf16 = [this](const std::string& key, const json& v) { set(key, boolean(key, v), a_.bf16, "bf16"); };
    h["bf16.enabled"] = bf16;
    h["bfloat16.enabled"] = bf16;  // DeepSpeed's older spelling
    h["optimizer.type"] = [this](const std::string& key, const json& v) {
      std::string type = v.is_string() ? v.get<std::string>() : "";
      for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (type != "adam" && type != "adamw")
        fail("\"", key, "\" is ", shown(v), "; only Adam and AdamW (both decoupled weight decay here) are implemented");
      set(key, std::string("adam"), a_.optimizer, "optimizer");
    };
    h["optimizer.params.lr"] = [this](const std::string& key, const json& v) { set(key, number(key, v), a_.lr, "lr"); };
    h["optimizer.params.betas"] = [this](const std::string& key, const json& v) {
      if (!v.is_array() || v.size() != 2) fail("\"", key, "\" must be [beta1, beta2], found ", shown(v));
      set(key + "[0]", number(key + "[0]", v[0]), a_.adam_beta1, "adam_beta1");
      set(key + "[1]", number(key + "[1]", v[1]), a_.adam_beta2, "adam_beta2");
    };
    h["optimizer.params.eps"] = [this](const std::string& key, const json& v) {
      set(key, number(key, v), a_.adam_eps, "adam_eps");
    };
    h["optimizer.params.weight_decay"] = [this](const std::string& key, const json& v) {
      set(key, number(key, v), a_.weight_decay, "weight_decay");
    };
    return handlers_;
  }

  // Visits objects depth-first; "fp16.enabled" is handled before the keys that depend on it.
  void walk(const json& object, const std::string& prefix, std::vector<std::string>& unknown,
            std::vector<std::string>& harmless) {
    std::vector<std::pair<std::string, const json*>> items;
    for (auto it = object.begin(); it != object.end(); ++it) items.emplace_back(it.key(), &it.value());
    std::stable_partition(items.begin(), items.end(), [](const auto& kv) { return kv.first == "enabled"; });
    for (const auto& [name, value] : items) {
      const std::string key = prefix + name;
      if (value->is_string() && value->get<std::string>() == "auto") continue;  // the flags decide
      if (auto h = handlers().find(key); h != handlers().end()) {
        seen_.insert(key);
        h->second(key, *value);
      } else if (const json* want = harmless_value(key)) {
        if (!want->is_null() && *want != *value) {
          unknown.push_back(key + "=" + shown(*value));
        } else {
          harmless.push_back(key);
        }
      } else if (value->is_object() && has_keys_under(key + ".")) {
        walk(*value, key + ".", unknown, harmless);
      } else {
        unknown.push_back(key);
      }
    }
  }

  const json* harmless_value(const std::string& key) const {
    for (const auto& [k, v] : harmless_keys())
      if (k == key) return &v;
    return nullptr;
  }
  bool has_keys_under(const std::string& prefix) {
    for (const auto& [k, h] : handlers())
      if (k.rfind(prefix, 0) == 0) return true;
    for (const auto& [k, v] : harmless_keys())
      if (k.rfind(prefix, 0) == 0) return true;
    return false;
  }

  bool fp16_on() const { return a_.fp16; }

  double number(const std::string& key, const json& v) const {
    if (!v.is_number()) fail("\"", key, "\" must be a number, found ", shown(v));
    return v.get<double>();
  }
  // Checked in the type nlohmann holds it in (uint64, int64 or double) before it becomes an int64.
  int64_t integer(const std::string& key, const json& v) const {
    if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>())))
      fail("\"", key, "\" must be an integer, found ", shown(v));
    const bool fits = v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                      : v.is_number_integer() ? true
                                              : std::fabs(v.get<double>()) < 0x1p63;
    if (!fits) fail("\"", key, "\" is ", shown(v), ", beyond a 64-bit integer");
    return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
  }
  bool boolean(const std::string& key, const json& v) const {
    if (!v.is_boolean()) fail("\"", key, "\" must be true or false, found ", shown(v));
    return v.get<bool>();
  }

  // The value must lie in its flag's range (arguments_table.h); the error names this file's key.
  template <typename T>
  void in_range(const std::string& key, const T& value, const char* name) const {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      check_range(name, static_cast<double>(value), "[arguments] --deepspeed_config " + file_ + ": \"" + key + "\"");
  }
  // A key fills its field unless the command line set it; then the two must agree.
  template <typename T>
  void set(const std::string& key, const T& value, T& field, const char* name) {
    in_range(key, value, name);
    if (given_.count(name) && field != value)
      fail("\"", key, "\" is ", json(value).dump(), " but ", flag_of(name), " is ", json(field).dump(),
           "; give one, or make them agree");
    field = value;
  }
  template <typename T>
  void set(const std::string& key, const T& value, std::optional<T>& field, const char* name) {
    in_range(key, value, name);
    if (given_.count(name) && field && *field != value)
      fail("\"", key, "\" is ", json(value).dump(), " but ", flag_of(name), " is ", json(*field).dump(),
           "; give one, or make them agree");
    field = value;
  }

  // DeepSpeed's rule: train_batch_size = micro x accumulation steps x data-parallel size; any two
  // determine the third, and only train_batch_size means one accumulation step.
  void resolve_batch(int64_t world_size) {
    const int64_t model_parallel = a_.tensor_model_parallel_size * a_.pipeline_model_parallel_size;
    if (model_parallel <= 0 || world_size % model_parallel != 0) return;  // validate() says why
    const int64_t dp = world_size / model_parallel;
    const int64_t micro = a_.micro_batch_size;
    const auto global = a_.global_batch_size;
    if (accumulation_) {
      const int64_t steps = *accumulation_;
      if (micro > 0 && global) {
        if (*global != micro * steps * dp)
          fail("train_batch_size (", *global, ") != micro batch (", micro, ") x gradient_accumulation_steps (", steps,
               ") x data-parallel size (", dp, ") = ", micro * steps * dp);
      } else if (micro > 0) {
        a_.global_batch_size = micro * steps * dp;
      } else if (global) {
        if (*global % (steps * dp) != 0)
          fail("train_batch_size (", *global, ") is not divisible by gradient_accumulation_steps (", steps,
               ") x data-parallel size (", dp, ")");
        a_.micro_batch_size = *global / (steps * dp);
      } else {
        fail("gradient_accumulation_steps needs train_batch_size or train_micro_batch_size_per_gpu");
      }
    } else if (micro == 0 && global) {
      if (*global % dp != 0)
        fail("train_batch_size (", *global, ") is not divisible by the data-parallel size (", dp, ")");
      a_.micro_batch_size = *global / dp;
    }
  }

  Arguments& a_;
  const std::set<std::string>& given_;
  std::string file_;
  std::optional<int64_t> accumulation_;
  std::set<std::string> seen_;  // the handled keys the file has
  std::map<std::string, Handler> handlers_;
};

}  // namespace

void apply_deepspeed_config(Arguments& a, const std::set<std::string>& given, int64_t world_size) {
  TORCH_CHECK(!a.deepspeed_config.empty() || !a.deepspeed,
              "[arguments] --deepspeed needs --deepspeed_config (the DeepSpeed JSON config it reads)");
  if (a.deepspeed_config.empty()) return;
  Reader(a, given).read(world_size);
}

}  // namespace megatron::training::detail
