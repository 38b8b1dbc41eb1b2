// Megatron-LM's optimizer state in its legacy checkpoints (--ckpt-format torch), read onto our
// parameter names, and ours written in it. Its non-distributed optimizers save torch's state_dict(): state by parameter
// index, the indices numbered over the parameter groups in order, each group's parameters in the
// model's named_parameters() order, which is the order of the saved model dict (state_dict() walks
// the modules as named_parameters() does). The groups (megatron/core/optimizer _get_param_groups)
// are sorted by their overrides: weight decay; with --decoupled-lr the embedding and output layer;
// no weight decay (biases and 1-D parameters). bf16/fp16 runs nest that dict under "optimizer"
// beside the fp32 master copies of their 16-bit parameters, group by group.
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/optimizer/optimizer.h"
#include "training/checkpointing/checkpoint_dicts.h"

namespace megatron::training::detail {
namespace {

enum class GroupKind { kDecay, kDecoupled, kNoDecay };

const char* kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::kDecay: return "weight decay";
    case GroupKind::kDecoupled: return "decoupled learning rate";
    case GroupKind::kNoDecay: return "no weight decay";
  }
  return "";
}

GroupKind kind_of_group(const GenericDict& g) {
  auto value = [&](const char* key) -> c10::IValue {
    auto it = g.find(key);
    return it == g.end() ? c10::IValue() : it->value();
  };
  if (const auto wd = value("wd_mult"); (wd.isDouble() || wd.isInt()) && wd.toScalar().toDouble() == 0.0)
    return GroupKind::kNoDecay;
  // default_config is false where an override sets the learning rate; older versions marked it.
  if (const auto d = value("default_config"); d.isBool() && !d.toBool()) return GroupKind::kDecoupled;
  if (const auto d = value("is_decoupled_lr"); d.isBool() && d.toBool()) return GroupKind::kDecoupled;
  return GroupKind::kDecay;
}

struct ModelParam {
  std::string name;  // ours, with the chunk's prefix
  at::Tensor tensor;
  GroupKind kind;
};

std::vector<ModelParam> model_params(const GenericDict& d, bool decoupled, const std::string& file) {
  std::vector<ModelParam> out;
  for (auto& p : model_dict_params(d, file)) {
    GroupKind kind = GroupKind::kDecay;
    if (optimizer::no_weight_decay(p.local, p.tensor.dim()))
      kind = GroupKind::kNoDecay;
    else if (decoupled && optimizer::is_embedding_or_output_name(p.local))
      kind = GroupKind::kDecoupled;
    out.push_back({std::move(p.name), p.tensor, kind});
  }
  return out;
}

}  // namespace

RankCheckpoint::OptimizerState read_megatron_lm_optimizer(const GenericDict& d, const std::string& file) {
  const auto top = get_dict(d, "optimizer", file);
  // Float16OptimizerWithFloat16Params: {"optimizer": torch's, "fp32_from_fp16_params", "grad_scaler"}.
  const bool nested = top.contains("optimizer");
  const auto torch_state = nested ? get_dict(top, "optimizer", file) : top;
  if (!torch_state.contains("state")) return read_megatron_lm_distrib_optim(d, file);
  const auto& saved_groups = get(torch_state, "param_groups", file);
  TORCH_CHECK(saved_groups.isList(), "[checkpointing] ", file, ": the optimizer's 'param_groups' is not a list");
  std::vector<GenericDict> groups;
  std::vector<GroupKind> kinds;
  for (const auto& g : saved_groups.toListRef()) {
    TORCH_CHECK(g.isGenericDict(), "[checkpointing] ", file, ": an optimizer parameter group is not a dict");
    groups.push_back(g.toGenericDict());
    kinds.push_back(kind_of_group(groups.back()));
    for (size_t k = 0; k + 1 < kinds.size(); ++k)
      TORCH_CHECK(kinds[k] != kinds.back(), "[checkpointing] ", file, ": optimizer parameter groups ", k, " and ",
                  kinds.size() - 1, " are both the ", kind_name(kinds.back()),
                  " group; only Megatron-LM's standard groups (weight decay, --decoupled-lr, no weight decay) are "
                  "read; pass --no-load-optim");
  }
  const bool decoupled = std::find(kinds.begin(), kinds.end(), GroupKind::kDecoupled) != kinds.end();
  const std::vector<ModelParam> params = model_params(d, decoupled, file);

  const auto state = get_dict(torch_state, "state", file);
  std::vector<c10::IValue> masters;  // fp32_from_fp16_params, one list per group
  if (nested && top.contains("fp32_from_fp16_params") && top.at("fp32_from_fp16_params").isList())
    masters = top.at("fp32_from_fp16_params").toListRef().vec();
  RankCheckpoint::OptimizerState o;
  size_t mapped = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    std::vector<const ModelParam*> members;
    for (const auto& p : params)
      if (p.kind == kinds[k]) members.push_back(&p);
    const auto& indices = get(groups[k], "params", file);
    TORCH_CHECK(indices.isList() && indices.toListRef().size() == members.size(), "[checkpointing] ", file,
                ": optimizer parameter group ", k, " (", kind_name(kinds[k]), ") holds ",
                indices.isList() ? std::to_string(indices.toListRef().size()) : std::string("no list of"),
                " parameters, the model ", members.size());
    const auto group_step = groups[k].find("step");  // TE's and apex's FusedAdam count per group
    std::vector<at::Tensor> group_masters;
    if (k < masters.size() && masters[k].isList())
      for (const auto& m : masters[k].toListRef())
        if (m.isTensor()) group_masters.push_back(m.toTensor());
    size_t next_master = 0;
    for (size_t j = 0; j < members.size(); ++j) {
      const ModelParam& p = *members[j];
      auto& mine = o.param_state[p.name];
      const c10::IValue index = indices.toListRef()[j];
      if (auto it = state.find(index); it != state.end() && it->value().isGenericDict()) {
        for (const auto& e : it->value().toGenericDict()) {
          const std::string key = e.key().toStringRef();
          if (key == "step") {
            if (const auto step = step_value(e.value())) mine["step"] = at::scalar_tensor(*step, at::kFloat);
          } else if (e.value().isTensor()) {
            mine[key] = e.value().toTensor();
          }
        }
        if (!mine.count("step") && group_step != groups[k].end())
          if (const auto step = step_value(group_step->value())) mine["step"] = at::scalar_tensor(*step, at::kFloat);
      }
      if (p.tensor.scalar_type() == at::kBFloat16 || p.tensor.scalar_type() == at::kHalf) {
        TORCH_CHECK(next_master < group_masters.size(), "[checkpointing] ", file,
                    ": fp32_from_fp16_params has no fp32 copy of ", p.name);
        const at::Tensor& master = group_masters[next_master++];
        TORCH_CHECK(master.numel() == p.tensor.numel(), "[checkpointing] ", file, ": fp32_from_fp16_params holds ",
                    master.numel(), " elements for ", p.name, ", which has ", p.tensor.numel());
        mine["main_param"] = master;
      }
      ++mapped;
    }
    TORCH_CHECK(next_master == group_masters.size(), "[checkpointing] ", file, ": fp32_from_fp16_params holds ",
                group_masters.size(), " copies for optimizer parameter group ", k, ", which has ", next_master,
                " 16-bit parameters");
  }
  read_group_lrs(saved_groups, o, file);
  TORCH_CHECK(mapped == params.size(), "[checkpointing] ", file, ": the optimizer's parameter groups hold ", mapped,
              " of the model's ", params.size(), " parameters");
  if (nested) o.grad_scaler = read_grad_scaler(top, file, /*stateless_allowed=*/true);
  o.scheduler = read_scheduler(d, file);
  return o;
}

std::vector<std::string> model_chunk_keys(const GenericDict& d) {
  if (d.contains(model_chunk_key(0, 1))) return {model_chunk_key(0, 1)};
  std::vector<std::string> keys;  // numbered: any chunk count above one names them alike
  while (d.contains(model_chunk_key(keys.size(), 2))) keys.push_back(model_chunk_key(keys.size(), 2));
  return keys;
}

std::vector<ModelDictParam> model_dict_params(const GenericDict& d, const std::string& file) {
  const std::vector<std::string> keys = model_chunk_keys(d);
  std::vector<ModelDictParam> out;
  for (size_t c = 0; c < keys.size(); ++c) {
    for (const auto& e : get_dict(d, keys[c].c_str(), file)) {
      if (!e.key().isString() || !e.value().isTensor()) continue;
      std::string local = local_layer_name(e.key().toStringRef());
      if (local.empty()) continue;
      out.push_back({model_chunk_prefix(c, keys.size()) + local, e.value().toTensor(), c, local});
    }
  }
  return out;
}

void read_group_lrs(const c10::IValue& groups, RankCheckpoint::OptimizerState& o, const std::string& file) {
  if (!groups.isList()) return;
  for (const auto& g : groups.toListRef()) {
    TORCH_CHECK(g.isGenericDict(), "[checkpointing] ", file, ": an optimizer parameter group is not a dict");
    const auto gd = g.toGenericDict();
    if (gd.contains("lr"))
      (kind_of_group(gd) == GroupKind::kDecoupled ? o.decoupled_lr : o.lr) = get_double(gd, "lr", file);
  }
}

std::optional<RankCheckpoint::GradScalerState> read_grad_scaler(const GenericDict& optimizer, const std::string& file,
                                                                bool stateless_allowed) {
  const auto it = optimizer.find("grad_scaler");
  if (it == optimizer.end() || !it->value().isGenericDict()) return std::nullopt;
  const GenericDict s = it->value().toGenericDict();
  if (stateless_allowed && !s.contains("scale")) return std::nullopt;
  const auto scale = step_value(get(s, "scale", file + " grad_scaler"));
  TORCH_CHECK(scale, "[checkpointing] ", file, ": the grad_scaler's scale is a ", s.at("scale").tagKind(),
              ", expected a tensor or a float");
  return RankCheckpoint::GradScalerState{*scale, get_int(s, "growth_tracker", file),
                                         get_int(s, "hysteresis_tracker", file)};
}

std::optional<double> step_value(const c10::IValue& v) {
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
  if (v.isInt() || v.isDouble()) return v.toScalar().toDouble();
  return std::nullopt;
}

// Written so that its FP32Optimizer / Float16OptimizerWithFloat16Params.load_state_dict resumes
// it: its groups matched by their identifying keys (max_lr, min_lr, wd_mult, lr_mult, ...), each
// group's hyperparameters whole (torch's load replaces them), a step per parameter for torch's
// AdamW and per group for FusedAdam. The moments are param_state's tensors, so torch.save's
// storage sharing writes them once.
void add_megatron_lm_optimizer(GenericDict& opt, const GenericDict& main, const RankCheckpoint::OptimizerState& o,
                               const Arguments& args, const std::string& file) {
  const bool decoupled = args.decoupled_lr.has_value();
  // Megatron-LM builds every group any rank has, on every rank (empty where a stage has none).
  std::vector<GroupKind> kinds = {GroupKind::kDecay};
  if (decoupled) kinds.push_back(GroupKind::kDecoupled);
  kinds.push_back(GroupKind::kNoDecay);
  const bool adam = args.optimizer == "adam";
  const std::vector<ModelParam> params = model_params(main, decoupled, file);

  GenericDict state(c10::IntType::get(), c10::AnyType::get());
  auto groups = c10::impl::GenericList(c10::AnyType::get());
  auto masters = c10::impl::GenericList(c10::AnyType::get());
  int64_t index = 0;
  for (const GroupKind kind : kinds) {
    auto indices = c10::impl::GenericList(c10::AnyType::get());  // typed lists pickle as torch.jit builders
    auto group_masters = c10::impl::GenericList(c10::AnyType::get());
    std::optional<int64_t> step;
    for (const ModelParam& p : params) {
      if (p.kind != kind) continue;
      const auto it = o.param_state.find(p.name);
      if (it == o.param_state.end()) continue;  // not the optimizer's: frozen, or a buffer
      const bool half = p.tensor.scalar_type() == at::kBFloat16 || p.tensor.scalar_type() == at::kHalf;
      if (half) {
        TORCH_CHECK(it->second.count("main_param"), "[checkpointing] ", file,
                    ": the optimizer state has no fp32 main copy of the 16-bit parameter ", p.name);
        group_masters.push_back(it->second.at("main_param"));
      }
      if (!it->second.empty()) {
        auto s = new_dict();
        if (auto st = it->second.find("step"); st != it->second.end()) {
          // torch's AdamW adds to each parameter's step in place: one tensor each.
          s.insert("step", st->second.detach().to(at::kCPU, at::kFloat).reshape({}).clone());
          step = static_cast<int64_t>(st->second.item<double>());
        }
        for (const auto& [key, t] : it->second)
          if (key != "step" && key != "main_param") s.insert(key, t.detach());
        state.insert(index, s);
      }
      indices.push_back(index++);
    }
    auto g = new_dict();  // _get_param_groups' keys, then the optimizer's
    g.insert("params", indices);
    g.insert("is_expert_parallel", false);
    g.insert("default_config", kind != GroupKind::kDecoupled);
    g.insert("wd_mult", kind == GroupKind::kNoDecay ? 0.0 : 1.0);
    g.insert("lr_mult", 1.0);
    g.insert("is_decoupled_lr", false);
    g.insert("max_lr", kind == GroupKind::kDecoupled ? *args.decoupled_lr : o.scheduler.max_lr);
    g.insert("min_lr",
             kind == GroupKind::kDecoupled ? args.decoupled_min_lr.value_or(args.min_lr) : o.scheduler.min_lr);
    g.insert("lr", kind == GroupKind::kDecoupled ? o.decoupled_lr : o.lr);
    const double weight_decay = kind == GroupKind::kNoDecay ? 0.0 : args.weight_decay;
    if (adam) {
      g.insert("betas", c10::ivalue::Tuple::create(args.adam_beta1, args.adam_beta2));
      g.insert("eps", args.adam_eps);
      g.insert("weight_decay", weight_decay);
      for (const char* off : {"amsgrad", "maximize", "capturable", "differentiable"}) g.insert(off, false);
      g.insert("foreach", c10::IValue());
      g.insert("fused", c10::IValue());
      g.insert("decoupled_weight_decay", true);
      g.insert("bias_correction", true);  // FusedAdam's
      if (step) g.insert("step", *step);  // FusedAdam counts per group
    } else {
      g.insert("momentum", args.sgd_momentum);
      g.insert("dampening", 0.0);
      g.insert("weight_decay", weight_decay);
      for (const char* off : {"nesterov", "maximize", "differentiable"}) g.insert(off, false);
      g.insert("foreach", c10::IValue());
      g.insert("fused", c10::IValue());
    }
    groups.push_back(g);
    masters.push_back(group_masters);
  }
  if (args.bf16 || args.fp16) {  // Float16OptimizerWithFloat16Params
    auto inner = new_dict();
    inner.insert("state", state);
    inner.insert("param_groups", groups);
    opt.insert("optimizer", inner);
    opt.insert("fp32_from_fp16_params", masters);
  } else {  // FP32Optimizer: torch's state_dict() itself
    opt.insert("state", state);
    opt.insert("param_groups", groups);
  }
}

}  // namespace megatron::training::detail
