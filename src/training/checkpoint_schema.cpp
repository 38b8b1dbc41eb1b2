// RankCheckpoint <-> the dicts of model_optim_rng.pt and distrib_optim.pt. Insertion order is the
// files' key order, so the same state always gives the same bytes.
#include "megatron/training/checkpoint_schema.h"

#include <c10/util/Exception.h>

#include <filesystem>

#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpoint_layout.h"

namespace megatron::training {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;
using TensorMap = RankCheckpoint::TensorMap;

GenericDict new_dict() {
  return GenericDict(c10::StringType::get(), c10::AnyType::get());
}
GenericList new_list() {
  return GenericList(c10::AnyType::get());
}

// --- Arguments <-> dict, one entry per saved line of the table

struct ToDict {
  GenericDict& d;
  void operator()(const char* k, const int64_t& v) const { d.insert(k, v); }
  void operator()(const char* k, const uint64_t& v) const { d.insert(k, static_cast<int64_t>(v)); }
  void operator()(const char* k, const double& v) const { d.insert(k, v); }
  void operator()(const char* k, const bool& v) const { d.insert(k, v); }
  void operator()(const char* k, const std::string& v) const { d.insert(k, v); }
  template <typename T>
  void operator()(const char* k, const std::vector<T>& v) const {
    auto l = new_list();
    for (const auto& x : v) l.push_back(x);
    d.insert(k, l);
  }
  template <typename T>
  void operator()(const char* k, const std::optional<T>& v) const {
    if (v)
      (*this)(k, *v);
    else
      d.insert(k, c10::IValue());
  }
};

[[noreturn]] void bad(const char* k, const c10::IValue& v, const char* want) {
  TORCH_CHECK(false, "[checkpointing] the saved argument '", k, "' is a ", v.tagKind(), ", expected ", want);
}
void set(const char* k, const c10::IValue& v, int64_t& out) {
  if (!v.isInt()) bad(k, v, "int");
  out = v.toInt();
}
void set(const char* k, const c10::IValue& v, uint64_t& out) {
  if (!v.isInt()) bad(k, v, "int");
  out = static_cast<uint64_t>(v.toInt());
}
void set(const char* k, const c10::IValue& v, double& out) {
  if (!v.isDouble() && !v.isInt()) bad(k, v, "float");
  out = v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
}
void set(const char* k, const c10::IValue& v, bool& out) {
  if (!v.isBool()) bad(k, v, "bool");
  out = v.toBool();
}
void set(const char* k, const c10::IValue& v, std::string& out) {
  if (!v.isString()) bad(k, v, "str");
  out = v.toStringRef();
}
template <typename T>
void set(const char* k, const c10::IValue& v, std::vector<T>& out) {
  if (!v.isList()) bad(k, v, "list");
  out.clear();
  for (const auto& x : v.toListRef()) set(k, x, out.emplace_back());
}
template <typename T>
void set(const char* k, const c10::IValue& v, std::optional<T>& out) {
  if (v.isNone()) {
    out.reset();
    return;
  }
  T value{};
  set(k, v, value);
  out = value;
}

// --- dict access with one-line errors naming the file

const c10::IValue& get(const GenericDict& d, const char* key, const std::string& file) {
  auto it = d.find(key);
  TORCH_CHECK(it != d.end(), "[checkpointing] ", file, " has no '", key, "' entry");
  return it->value();
}
GenericDict get_dict(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(), ", expected a dict");
  return v.toGenericDict();
}
int64_t get_int(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isInt(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(), ", expected an int");
  return v.toInt();
}
double get_double(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isDouble() || v.isInt(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(),
              ", expected a float");
  return v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
}

GenericDict tensor_dict(const TensorMap& tensors) {
  GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : tensors) d.insert(k, v.detach());
  return d;
}
TensorMap to_tensor_map(const c10::IValue& v, const std::string& what) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", what, " is not a dict of tensors");
  TensorMap out;
  for (const auto& e : v.toGenericDict()) {
    TORCH_CHECK(e.key().isString() && e.value().isTensor(), "[checkpointing] ", what, " holds a non-tensor entry");
    out[e.key().toStringRef()] = e.value().toTensor();
  }
  return out;
}

GenericDict param_state_dict(const std::map<std::string, TensorMap>& state) {
  auto d = new_dict();
  for (const auto& [name, s] : state) d.insert(name, tensor_dict(s));
  return d;
}
std::map<std::string, TensorMap> param_state_from(const c10::IValue& v, const std::string& what) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", what, " is not a dict");
  std::map<std::string, TensorMap> out;
  for (const auto& e : v.toGenericDict()) out[e.key().toStringRef()] = to_tensor_map(e.value(), what);
  return out;
}

std::string model_key(size_t chunk, size_t chunks) {
  return chunks > 1 ? "model" + std::to_string(chunk) : "model";
}

GenericDict optimizer_dict(const RankCheckpoint::OptimizerState& o, std::map<std::string, c10::IValue>& files) {
  auto opt = new_dict();
  opt.insert("distributed", o.distributed);
  if (o.distributed) {
    auto dist = new_dict();
    dist.insert("param_state", param_state_dict(o.param_state));
    files[kDistribOptimFileName] = dist;
  } else {
    opt.insert("param_state", param_state_dict(o.param_state));
  }
  auto groups = new_list();
  for (const auto& g : o.param_groups) {
    auto gd = new_dict();
    gd.insert("lr", g.lr);
    gd.insert("num_params", g.num_params);
    groups.push_back(gd);
  }
  opt.insert("param_groups", groups);
  if (o.grad_scaler) {
    auto sd = new_dict();
    sd.insert("scale", o.grad_scaler->scale);
    sd.insert("growth_tracker", o.grad_scaler->growth_tracker);
    sd.insert("hysteresis_tracker", o.grad_scaler->hysteresis_tracker);
    opt.insert("grad_scaler", sd);
  } else {
    opt.insert("grad_scaler", c10::IValue());
  }
  return opt;
}

GenericDict scheduler_dict(const RankCheckpoint::SchedulerState& s) {
  auto d = new_dict();
  d.insert("max_lr", s.max_lr);
  d.insert("min_lr", s.min_lr);
  d.insert("lr_warmup_steps", s.lr_warmup_steps);
  d.insert("lr_decay_steps", s.lr_decay_steps);
  d.insert("lr_decay_style", s.lr_decay_style);
  d.insert("num_steps", s.num_steps);
  return d;
}

GenericDict rng_dict(const RankCheckpoint::RngState& r) {
  auto d = new_dict();
  d.insert("torch_rng_state", r.torch_rng_state);
  if (r.cuda_rng_state.defined()) d.insert("cuda_rng_state", r.cuda_rng_state);
  d.insert("rng_tracker_states", tensor_dict(r.rng_tracker_states));
  return d;
}

RankCheckpoint::OptimizerState read_optimizer(const GenericDict& d, const std::string& rank_dir,
                                              const std::string& file) {
  RankCheckpoint::OptimizerState o;
  const auto opt = get_dict(d, "optimizer", file);
  o.distributed = get(opt, "distributed", file).toBool();
  if (o.distributed) {
    const std::string dist_file = (std::filesystem::path(rank_dir) / kDistribOptimFileName).string();
    const auto dist = read_checkpoint_file(dist_file);
    TORCH_CHECK(dist.isGenericDict(), "[checkpointing] ", dist_file, " does not hold a dict");
    o.param_state = param_state_from(get(dist.toGenericDict(), "param_state", dist_file), dist_file + " param_state");
  } else {
    o.param_state = param_state_from(get(opt, "param_state", file), file + " optimizer state");
  }
  for (const auto& g : get(opt, "param_groups", file).toListRef()) {
    const auto gd = g.toGenericDict();
    o.param_groups.push_back({get_double(gd, "lr", file), get_int(gd, "num_params", file)});
  }
  if (const auto& s = get(opt, "grad_scaler", file); s.isGenericDict()) {
    const auto sd = s.toGenericDict();
    o.grad_scaler = RankCheckpoint::GradScalerState{get_double(sd, "scale", file), get_int(sd, "growth_tracker", file),
                                                    get_int(sd, "hysteresis_tracker", file)};
  }
  const auto sd = get_dict(d, "opt_param_scheduler", file);
  auto& s = o.scheduler;
  s.max_lr = get_double(sd, "max_lr", file);
  s.min_lr = get_double(sd, "min_lr", file);
  s.lr_warmup_steps = get_int(sd, "lr_warmup_steps", file);
  s.lr_decay_steps = get_int(sd, "lr_decay_steps", file);
  s.lr_decay_style = get(sd, "lr_decay_style", file).toStringRef();
  s.num_steps = get_int(sd, "num_steps", file);
  return o;
}

RankCheckpoint::RngState read_rng(const c10::IValue& v, const std::string& file) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", file, ": an rng_state entry is not a dict");
  const auto d = v.toGenericDict();
  RankCheckpoint::RngState r;
  r.torch_rng_state = get(d, "torch_rng_state", file).toTensor();
  if (auto it = d.find("cuda_rng_state"); it != d.end()) r.cuda_rng_state = it->value().toTensor();
  r.rng_tracker_states = to_tensor_map(get(d, "rng_tracker_states", file), file + " rng_tracker_states");
  return r;
}

}  // namespace

c10::impl::GenericDict arguments_to_dict(const Arguments& a) {
  auto d = new_dict();
  ToDict to{d};
#define MEGATRON_SAVED_TO_DICT(group, field, saved, check, help) \
  if (ArgSaved::saved == ArgSaved::kSaved) to(#field, a.field);
  MEGATRON_ARGUMENTS(MEGATRON_SAVED_TO_DICT)
#undef MEGATRON_SAVED_TO_DICT
  return d;
}

Arguments arguments_from_dict(const c10::IValue& value) {
  TORCH_CHECK(value.isGenericDict(), "[checkpointing] the saved 'args' is a ", value.tagKind(), ", expected a dict");
  Arguments a;
  const auto d = value.toGenericDict();
#define MEGATRON_SAVED_FROM_DICT(group, field, saved, check, help)                  \
  if (ArgSaved::saved == ArgSaved::kSaved) {                                        \
    if (auto it = d.find(#field); it != d.end()) set(#field, it->value(), a.field); \
  }
  MEGATRON_ARGUMENTS(MEGATRON_SAVED_FROM_DICT)
#undef MEGATRON_SAVED_FROM_DICT
  return a;
}

std::map<std::string, c10::IValue> RankCheckpoint::to_files() const {
  std::map<std::string, c10::IValue> files;
  auto d = new_dict();
  auto saved_args = arguments_to_dict(args);
  saved_args.insert("padded_vocab_size", padded_vocab_size);
  saved_args.insert("true_vocab_size", true_vocab_size);
  saved_args.insert("consumed_train_samples", consumed_train_samples);
  saved_args.insert("consumed_valid_samples", consumed_valid_samples);
  d.insert("args", saved_args);
  d.insert("checkpoint_version", kCheckpointVersion);
  d.insert("iteration", iteration);
  for (size_t v = 0; v < model.size(); ++v) d.insert(model_key(v, model.size()), tensor_dict(model[v]));
  if (optimizer) {
    d.insert("optimizer", optimizer_dict(*optimizer, files));
    d.insert("opt_param_scheduler", scheduler_dict(optimizer->scheduler));
  }
  if (rng_state) {
    auto list = new_list();
    for (const auto& r : *rng_state) list.push_back(rng_dict(r));
    d.insert("rng_state", list);
  }
  d.insert("consumed_train_samples", consumed_train_samples);
  d.insert("consumed_valid_samples", consumed_valid_samples);
  if (!data_fingerprint.empty()) d.insert("data_fingerprint", data_fingerprint);
  files[kModelFileName] = d;
  return files;
}

RankCheckpoint RankCheckpoint::read(const std::string& rank_dir, bool read_optimizer_state) {
  const std::string file = (std::filesystem::path(rank_dir) / kModelFileName).string();
  const auto main = read_checkpoint_file(file);
  TORCH_CHECK(main.isGenericDict(), "[checkpointing] ", file, " does not hold a dict");
  const auto d = main.toGenericDict();
  RankCheckpoint c;
  const auto saved_args = get_dict(d, "args", file);
  c.args = arguments_from_dict(saved_args);
  if (saved_args.contains("padded_vocab_size")) c.padded_vocab_size = get_int(saved_args, "padded_vocab_size", file);
  if (saved_args.contains("true_vocab_size")) c.true_vocab_size = get_int(saved_args, "true_vocab_size", file);
  c.iteration = get_int(d, "iteration", file);
  if (auto it = d.find("checkpoint_version"); it != d.end() && (it->value().isDouble() || it->value().isInt()))
    c.checkpoint_version = it->value().isDouble() ? it->value().toDouble() : static_cast<double>(it->value().toInt());
  if (d.contains("model")) {
    c.model.push_back(to_tensor_map(d.at("model"), file + " 'model'"));
  } else {
    for (size_t v = 0; d.contains("model" + std::to_string(v)); ++v)
      c.model.push_back(to_tensor_map(d.at("model" + std::to_string(v)), file + " 'model" + std::to_string(v) + "'"));
  }
  TORCH_CHECK(!c.model.empty(), "[checkpointing] ", file, " has no 'model' entry");
  if (read_optimizer_state && d.contains("optimizer") && d.at("optimizer").isGenericDict())
    c.optimizer = read_optimizer(d, rank_dir, file);
  if (auto it = d.find("rng_state"); it != d.end() && it->value().isList()) {
    c.rng_state.emplace();
    for (const auto& r : it->value().toListRef()) c.rng_state->push_back(read_rng(r, file));
  }
  c.consumed_train_samples = get_int(d, "consumed_train_samples", file);
  c.consumed_valid_samples = get_int(d, "consumed_valid_samples", file);
  if (auto it = d.find("data_fingerprint"); it != d.end() && it->value().isString())
    c.data_fingerprint = it->value().toStringRef();
  return c;
}

}  // namespace megatron::training
