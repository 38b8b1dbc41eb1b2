// Reading the dicts of a checkpoint file with one-line errors naming the file, shared by the
// readers of our own layout (checkpoint_schema.cpp) and of Megatron-LM's optimizer state
// (megatron_lm_optimizer.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "megatron/training/checkpoint_schema.h"

namespace megatron::training::detail {

using GenericDict = c10::impl::GenericDict;

inline GenericDict new_dict() {
  return GenericDict(c10::StringType::get(), c10::AnyType::get());
}
inline c10::impl::GenericList new_list() {
  return c10::impl::GenericList(c10::AnyType::get());
}

inline const c10::IValue& get(const GenericDict& d, const char* key, const std::string& file) {
  auto it = d.find(key);
  TORCH_CHECK(it != d.end(), "[checkpointing] ", file, " has no '", key, "' entry");
  return it->value();
}
inline GenericDict get_dict(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(), ", expected a dict");
  return v.toGenericDict();
}
inline int64_t get_int(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isInt(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(), ", expected an int");
  return v.toInt();
}
inline double get_double(const GenericDict& d, const char* key, const std::string& file) {
  const auto& v = get(d, key, file);
  TORCH_CHECK(v.isDouble() || v.isInt(), "[checkpointing] ", file, ": '", key, "' is a ", v.tagKind(),
              ", expected a float");
  return v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
}

// A model dict key as our local layers name it: Megatron-LM's Transformer Engine layers hold the
// norm before a linear layer inside it; "" for their per-module FP8 metadata (_extra_state).
std::string local_layer_name(std::string name);
// The other way, as megatron-core's torch_dist checkpoints name the local layers' norms
// (pre_mlp_layernorm stays itself in a layer without a dense MLP).
std::string fused_layer_name(const std::string& name, bool dense_mlp);
// One rank's RNG state as Megatron-LM's rng_state dict, and back.
GenericDict rng_dict(const RankCheckpoint::RngState& r);
RankCheckpoint::RngState read_rng(const c10::IValue& v, const std::string& file);
// opt_param_scheduler (Megatron-LM's keys; steps are samples).
RankCheckpoint::SchedulerState read_scheduler(const GenericDict& d, const std::string& file);
// Every parameter of a (Megatron-LM) model dict in its key order, which is its named_parameters()
// order, chunk after chunk ("model0", "model1", ... with virtual stages).
struct ModelDictParam {
  std::string name;  // ours, with the chunk's prefix ("model1.") with virtual stages
  at::Tensor tensor;
  size_t chunk = 0;
  std::string local;  // within the chunk
};
std::vector<ModelDictParam> model_dict_params(const GenericDict& d, const std::string& file);
// Whether Megatron-LM's modules register parameter `a` before `b` (its named_parameters() order,
// which our model dicts are written in).
bool registered_before(const std::string& a, const std::string& b);
// The learning rates of Megatron-LM's groups (a list of its param_groups) into o.lr and, for the
// --decoupled-lr group, o.decoupled_lr.
void read_group_lrs(const c10::IValue& groups, RankCheckpoint::OptimizerState& o, const std::string& file);
// The model chunks' keys a checkpoint dict holds, in chunk order (model_chunk_key).
std::vector<std::string> model_chunk_keys(const GenericDict& d);
// An optimizer dict's grad_scaler (Megatron-LM's DynamicGradScaler state; its scale a tensor,
// ours once a float); none without one. Megatron-LM's constant scaler keeps no state (an empty
// dict: none); ours always has a scale, so a dict without one is an error there.
std::optional<RankCheckpoint::GradScalerState> read_grad_scaler(const GenericDict& optimizer, const std::string& file,
                                                                bool stateless_allowed);
// A saved optimizer step, a tensor or a number; none for anything else.
std::optional<double> step_value(const c10::IValue& v);
// Megatron-LM's own (non-distributed) optimizer state, mapped onto the parameters by name.
RankCheckpoint::OptimizerState read_megatron_lm_optimizer(const GenericDict& d, const std::string& file);
// Its distributed optimizer's: the groups in `file` (model_optim_rng.pt), the state in the
// distrib_optim.pt beside it (megatron_lm_distrib_optim.cpp).
RankCheckpoint::OptimizerState read_megatron_lm_distrib_optim(const GenericDict& d, const std::string& file);
// Its flat state of one (TP, PP) rank's gradient buffers (one per model chunk: its buckets back to
// back, each without its padding to a data-parallel multiple) onto `params` (that rank's, in
// named_parameters() order) by name: flat(chunk, key) is buffer chunk's "param", "exp_avg" or
// "exp_avg_sq" (undefined: missing); `args` the saved args, which say where buckets close.
void read_distrib_optim_buffers(const std::vector<ModelDictParam>& params, const GenericDict& args, double step,
                                const std::function<at::Tensor(size_t, const char*)>& flat,
                                RankCheckpoint::OptimizerState& o, const std::string& file, const std::string& way_out);
// The same layout written into `opt` from o's state by name, for the model dicts already in `main`.
void add_megatron_lm_optimizer(GenericDict& opt, const GenericDict& main, const RankCheckpoint::OptimizerState& o,
                               const Arguments& args, const std::string& file);
// torch_dist_optimizer.cpp: a torch_dist common state's optimizer in megatron-core's form (no
// tensors): the learning rates, grad scaler and scheduler; the step (megatron_core_optimizer_step);
// and why its layout cannot be mapped ("" when it can).
RankCheckpoint::OptimizerState read_megatron_core_optimizer_common(const GenericDict& d, const std::string& file);
std::optional<at::Tensor> megatron_core_optimizer_step(const GenericDict& d);
std::string unmapped_optimizer_layout(const GenericDict& d, const std::string& file);
// Our common state (a checkpoint dict without tensors) turned into megatron-core's: the optimizer
// entry as its non-distributed optimizers or (`distributed`) its DistributedOptimizer's
// fully_reshardable layout leave it, `step` the one all parameters share; its content_metadata.
void to_megatron_core_common(GenericDict& common, const std::optional<at::Tensor>& step, bool distributed);

}  // namespace megatron::training::detail
