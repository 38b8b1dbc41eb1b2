// RankCheckpoint <-> the dicts of model_optim_rng.pt and distrib_optim.pt. Insertion order is the
// files' key order, so the same state always gives the same bytes.
#include "megatron/training/checkpoint_schema.h"

#include <ATen/ops/full.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpoint_layout.h"
#include "training/arguments/saved_args.h"
#include "training/checkpointing/checkpoint_dicts.h"
#include "training/checkpointing/host_rng_state.h"

namespace megatron::training {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;
using TensorMap = RankCheckpoint::TensorMap;

using detail::get;
using detail::get_dict;
using detail::get_double;
using detail::get_int;
using detail::new_dict;
using detail::new_list;

GenericDict tensor_dict(const TensorMap& tensors) {
  GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : tensors) d.insert(k, v.detach());
  return d;
}
}  // namespace

namespace detail {
namespace {

// Megatron-LM's modules register their parameters in this order, which its state_dict() and
// named_parameters() (so its optimizer's parameter indices) follow; our model dicts are written
// in it. Names it does not have (the embedding's own norm) go after their siblings.
int registration_rank(const std::string& part) {
  static const std::vector<std::vector<std::string>> kModules = {
      {"embedding", "decoder", "output_layer"},                           // GPTModel
      {"word_embeddings", "position_embeddings"},                         // LanguageModelEmbedding
      {"layers", "final_layernorm"},                                      // TransformerBlock
      {"input_layernorm", "self_attention", "pre_mlp_layernorm", "mlp"},  // TransformerLayer
      {"linear_proj", "linear_qkv", "q_layernorm", "k_layernorm"},        // SelfAttention
      {"linear_fc1", "linear_fc2"},                                       // MLP
      {"weight", "bias"}};                                                // a layer's own
  for (const auto& children : kModules)
    if (auto it = std::find(children.begin(), children.end(), part); it != children.end())
      return static_cast<int>(it - children.begin());
  return 100;  // after the known ones
}

}  // namespace

bool registered_before(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const size_t ie = std::min(a.find('.', i), a.size()), je = std::min(b.find('.', j), b.size());
    const std::string x = a.substr(i, ie - i), y = b.substr(j, je - j);
    const bool numbers = !x.empty() && !y.empty() && std::all_of(x.begin(), x.end(), ::isdigit) &&
                         std::all_of(y.begin(), y.end(), ::isdigit);
    if (numbers && std::stoll(x) != std::stoll(y)) return std::stoll(x) < std::stoll(y);
    if (!numbers && x != y) {
      const int rx = registration_rank(x), ry = registration_rank(y);
      return rx != ry ? rx < ry : x < y;
    }
    i = ie + 1;
    j = je + 1;
  }
  return a.size() < b.size();
}

}  // namespace detail

namespace {

GenericDict model_dict(const TensorMap& tensors) {
  std::vector<std::string> names;
  for (const auto& [k, v] : tensors) names.push_back(k);
  std::stable_sort(names.begin(), names.end(), detail::registered_before);
  GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& name : names) d.insert(name, tensors.at(name).detach());
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

// Ours (param_state by name, which reshards by renaming) and, without the distributed
// optimizer, Megatron-LM's beside it over the same tensors (detail::add_megatron_lm_optimizer).
GenericDict optimizer_dict(const RankCheckpoint::OptimizerState& o, const GenericDict& main, const Arguments& args,
                           std::map<std::string, c10::IValue>& files) {
  auto opt = new_dict();
  opt.insert("distributed", o.distributed);
  if (o.distributed) {
    auto dist = new_dict();
    dist.insert("param_state", param_state_dict(o.param_state));
    files[kDistribOptimFileName] = dist;
  } else {
    opt.insert("param_state", param_state_dict(o.param_state));
  }
  if (o.grad_scaler) {  // Megatron-LM's DynamicGradScaler keeps the scale as a one-element tensor
    auto sd = new_dict();
    sd.insert("scale", at::full({1}, o.grad_scaler->scale, at::kFloat));
    sd.insert("growth_tracker", o.grad_scaler->growth_tracker);
    sd.insert("hysteresis_tracker", o.grad_scaler->hysteresis_tracker);
    opt.insert("grad_scaler", sd);
  }
  if (!o.distributed) detail::add_megatron_lm_optimizer(opt, main, o, args, kModelFileName);
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

}  // namespace

GenericDict detail::rng_dict(const RankCheckpoint::RngState& r) {
  auto d = new_dict();
  if (r.host_seed) {
    d.insert("random_rng_state", detail::python_random_state(*r.host_seed));
    d.insert("np_rng_state", detail::numpy_random_state(static_cast<uint32_t>(*r.host_seed)));
  }
  d.insert("torch_rng_state", r.torch_rng_state);
  if (r.cuda_rng_state.defined()) d.insert("cuda_rng_state", r.cuda_rng_state);
  d.insert("rng_tracker_states", tensor_dict(r.rng_tracker_states));
  return d;
}

namespace {

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
  // The learning rates, from Megatron-LM's groups written beside ours (none in older files).
  if (auto g = opt.find("param_groups"); g != opt.end()) detail::read_group_lrs(g->value(), o, file);
  if (auto inner = opt.find("optimizer"); inner != opt.end() && inner->value().isGenericDict())
    detail::read_group_lrs(get(inner->value().toGenericDict(), "param_groups", file), o, file);
  o.grad_scaler = detail::read_grad_scaler(opt, file, /*stateless_allowed=*/false);
  o.scheduler = detail::read_scheduler(d, file);
  return o;
}

}  // namespace

RankCheckpoint::RngState detail::read_rng(const c10::IValue& v, const std::string& file) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", file, ": an rng_state entry is not a dict");
  const auto d = v.toGenericDict();
  RankCheckpoint::RngState r;
  r.torch_rng_state = get(d, "torch_rng_state", file).toTensor();
  if (auto it = d.find("cuda_rng_state"); it != d.end()) r.cuda_rng_state = it->value().toTensor();
  r.rng_tracker_states = to_tensor_map(get(d, "rng_tracker_states", file), file + " rng_tracker_states");
  return r;
}

namespace {

TensorMap local_layer_names(const c10::IValue& v, const std::string& what) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", what, " is not a dict of tensors");
  auto kept = new_dict();
  for (const auto& e : v.toGenericDict()) {
    if (!e.key().isString()) continue;
    const std::string name = detail::local_layer_name(e.key().toStringRef());
    if (!name.empty()) kept.insert(name, e.value());
  }
  return to_tensor_map(kept, what);
}

// Transformer Engine's layers hold the norm before a linear layer inside it; megatron-core's
// torch_dist checkpoints name the local layers' norms so too.
constexpr std::pair<const char*, const char*> kFusedNorms[] = {
    {"self_attention.linear_qkv.layer_norm_weight", "input_layernorm.weight"},
    {"self_attention.linear_qkv.layer_norm_bias", "input_layernorm.bias"},
    {"mlp.linear_fc1.layer_norm_weight", "pre_mlp_layernorm.weight"},
    {"mlp.linear_fc1.layer_norm_bias", "pre_mlp_layernorm.bias"}};

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string detail::local_layer_name(std::string name) {
  if (has_suffix(name, "_extra_state")) return "";
  for (const auto& [fused, local] : kFusedNorms)
    if (name.size() > std::strlen(fused) && has_suffix(name, fused))
      return name.substr(0, name.size() - std::strlen(fused)) + local;
  return name;
}

std::string detail::fused_layer_name(const std::string& name, bool dense_mlp) {
  for (const auto& [fused, local] : kFusedNorms) {
    if (!dense_mlp && std::strncmp(fused, "mlp.", 4) == 0) continue;  // an MoE layer keeps pre_mlp_layernorm
    const size_t n = std::strlen(local);
    if (has_suffix(name, local) && (name.size() == n || name[name.size() - n - 1] == '.'))
      return name.substr(0, name.size() - n) + fused;
  }
  return name;
}

RankCheckpoint::SchedulerState detail::read_scheduler(const GenericDict& d, const std::string& file) {
  const auto sd = get_dict(d, "opt_param_scheduler", file);
  RankCheckpoint::SchedulerState s;
  s.max_lr = get_double(sd, "max_lr", file);
  s.min_lr = get_double(sd, "min_lr", file);
  // Megatron-LM's warmup is a float when it came from --lr-warmup-fraction.
  s.lr_warmup_steps = static_cast<int64_t>(get_double(sd, "lr_warmup_steps", file));
  s.lr_decay_steps = get_int(sd, "lr_decay_steps", file);
  s.lr_decay_style = get(sd, "lr_decay_style", file).toStringRef();
  s.num_steps = get_int(sd, "num_steps", file);
  return s;
}

std::map<std::string, c10::IValue> RankCheckpoint::to_files() const {
  std::map<std::string, c10::IValue> files;
  auto d = new_dict();
  auto saved_args = arguments_to_dict(args);
  saved_args.insert("padded_vocab_size", padded_vocab_size);
  saved_args.insert("true_vocab_size", true_vocab_size);
  saved_args.insert("consumed_train_samples", consumed_train_samples);
  saved_args.insert("consumed_valid_samples", consumed_valid_samples);
  d.insert("args", detail::saved_args_namespace(std::move(saved_args), args));
  d.insert("checkpoint_version", kCheckpointVersion);
  d.insert("iteration", iteration);
  for (size_t v = 0; v < model.size(); ++v) d.insert(model_chunk_key(v, model.size()), model_dict(model[v]));
  if (optimizer) {
    d.insert("optimizer", optimizer_dict(*optimizer, d, args, files));
    d.insert("opt_param_scheduler", scheduler_dict(optimizer->scheduler));
  }
  if (rng_state) {
    auto list = new_list();
    for (const auto& r : *rng_state) list.push_back(detail::rng_dict(r));
    d.insert("rng_state", list);
  }
  d.insert("consumed_train_samples", consumed_train_samples);
  d.insert("consumed_valid_samples", consumed_valid_samples);
  if (!data_fingerprint.empty()) d.insert("data_fingerprint", data_fingerprint);
  if (!fp8_state.empty()) d.insert("fp8_state", tensor_dict(fp8_state));
  files[kModelFileName] = d;
  return files;
}

RankCheckpoint RankCheckpoint::read(const std::string& rank_dir, bool read_optimizer_state) {
  const std::string file = (std::filesystem::path(rank_dir) / kModelFileName).string();
  const auto main = read_checkpoint_file(file);
  TORCH_CHECK(main.isGenericDict(), "[checkpointing] ", file, " does not hold a dict");
  return from_dict(main.toGenericDict(), file, rank_dir, read_optimizer_state, /*sharded=*/false);
}

RankCheckpoint RankCheckpoint::from_dict(const c10::impl::GenericDict& d, const std::string& file,
                                         const std::string& rank_dir, bool read_optimizer_state, bool sharded) {
  RankCheckpoint c;
  const auto saved_args = get_dict(d, "args", file);
  c.args = arguments_from_dict(saved_args);
  if (saved_args.contains("padded_vocab_size")) c.padded_vocab_size = get_int(saved_args, "padded_vocab_size", file);
  if (saved_args.contains("true_vocab_size")) c.true_vocab_size = get_int(saved_args, "true_vocab_size", file);
  c.iteration = get_int(d, "iteration", file);
  if (auto it = d.find("checkpoint_version"); it != d.end() && (it->value().isDouble() || it->value().isInt()))
    c.checkpoint_version = it->value().isDouble() ? it->value().toDouble() : static_cast<double>(it->value().toInt());
  for (const std::string& key : detail::model_chunk_keys(d))
    c.model.push_back(local_layer_names(d.at(key), file + " '" + key + "'"));
  TORCH_CHECK(sharded || !c.model.empty(), "[checkpointing] ", file, " has no 'model' entry");
  if (d.contains("optimizer") && d.at("optimizer").isList())  // Megatron-LM's ChainedOptimizer of several
    c.optimizer_unread = "[checkpointing] " + file + " holds " + std::to_string(d.at("optimizer").toListRef().size()) +
                         " optimizers' state (Megatron-LM's expert-parallel or "
                         "--overlap-param-gather-with-optimizer-step optimizers), which this reader does not map";
  if (d.contains("optimizer") && d.at("optimizer").isGenericDict()) {
    // Megatron-LM's own optimizer state (torch's by parameter index, no "distributed" key).
    const bool megatron_lm = !d.at("optimizer").toGenericDict().contains("distributed");
    if (read_optimizer_state && !megatron_lm) c.optimizer = read_optimizer(d, rank_dir, file);
    if (read_optimizer_state && megatron_lm && sharded) {  // a torch_dist common state: its tensors are elsewhere
      c.optimizer_unread = detail::unmapped_optimizer_layout(d, file);
      if (c.optimizer_unread.empty()) c.optimizer = detail::read_megatron_core_optimizer_common(d, file);
    } else if (read_optimizer_state && megatron_lm) {
      try {
        c.optimizer = detail::read_megatron_lm_optimizer(d, file);
      } catch (const c10::Error& e) {  // the weights stay readable (conversion carries them without it)
        c.optimizer_unread = e.what_without_backtrace();
      }
    }
  }
  if (auto it = d.find("rng_state"); it != d.end() && it->value().isList()) {
    c.rng_state.emplace();
    for (const auto& r : it->value().toListRef()) c.rng_state->push_back(detail::read_rng(r, file));
  }
  // Megatron-LM keeps the consumed samples in its args only.
  const auto& counts = d.contains("consumed_train_samples") ? d : saved_args;
  c.consumed_train_samples = get_int(counts, "consumed_train_samples", file);
  c.consumed_valid_samples = get_int(counts, "consumed_valid_samples", file);
  if (auto it = d.find("data_fingerprint"); it != d.end() && it->value().isString())
    c.data_fingerprint = it->value().toStringRef();
  if (auto it = d.find("fp8_state"); it != d.end()) c.fp8_state = to_tensor_map(it->value(), file + " 'fp8_state'");
  return c;
}

}  // namespace megatron::training
