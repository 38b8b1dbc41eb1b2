// Megatron-LM's optimizer state in its legacy checkpoints (--ckpt-format torch), read onto our
// parameter names. Its non-distributed optimizers save torch's state_dict(): state by parameter
// index, the indices numbered over the parameter groups in order, each group's parameters in the
// model's named_parameters() order, which is the order of the saved model dict (state_dict() walks
// the modules as named_parameters() does). The groups (megatron/core/optimizer _get_param_groups)
// are sorted by their overrides: weight decay; with --decoupled-lr the embedding and output layer;
// no weight decay (biases and 1-D parameters). bf16/fp16 runs nest that dict under "optimizer"
// beside the fp32 master copies of their 16-bit parameters, group by group.
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_dicts.h"
#include "megatron/optimizer/optimizer.h"

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

// Every parameter in named_parameters() order: chunk by chunk, each in its dict's key order.
std::vector<ModelParam> model_params(const GenericDict& d, bool decoupled, const std::string& file) {
  std::vector<std::pair<std::string, std::string>> chunks;  // (key, prefix)
  if (d.contains("model")) {
    chunks.emplace_back("model", "");
  } else {
    for (size_t v = 0; d.contains("model" + std::to_string(v)); ++v)
      chunks.emplace_back("model" + std::to_string(v), "model" + std::to_string(v) + ".");
  }
  std::vector<ModelParam> out;
  for (const auto& [key, prefix] : chunks) {
    for (const auto& e : get_dict(d, key.c_str(), file)) {
      if (!e.key().isString() || !e.value().isTensor()) continue;
      const std::string name = local_layer_name(e.key().toStringRef());
      if (name.empty()) continue;
      const at::Tensor t = e.value().toTensor();
      GroupKind kind = GroupKind::kDecay;
      if (optimizer::no_weight_decay(name, t.dim()))
        kind = GroupKind::kNoDecay;
      else if (decoupled && optimizer::is_embedding_or_output_name(name))
        kind = GroupKind::kDecoupled;
      out.push_back({prefix + name, t, kind});
    }
  }
  return out;
}

}  // namespace

RankCheckpoint::OptimizerState read_megatron_lm_optimizer(const GenericDict& d, const std::string& file) {
  const auto top = get_dict(d, "optimizer", file);
  // Float16OptimizerWithFloat16Params: {"optimizer": torch's, "fp32_from_fp16_params", "grad_scaler"}.
  const bool nested = top.contains("optimizer");
  const auto torch_state = nested ? get_dict(top, "optimizer", file) : top;
  TORCH_CHECK(torch_state.contains("state"), "[checkpointing] ", file,
              " holds the state of Megatron-LM's distributed optimizer (its distrib_optim.pt), which this reader "
              "does not map onto its parameters; pass --no-load-optim (the Adam moments restart) or --finetune");
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
            const auto& v = e.value();
            mine["step"] = v.isTensor() ? v.toTensor().to(at::kFloat).reshape({})
                                        : at::scalar_tensor(v.toScalar().toDouble(), at::kFloat);
          } else if (e.value().isTensor()) {
            mine[key] = e.value().toTensor();
          }
        }
        if (!mine.count("step") && group_step != groups[k].end()) {
          const auto& v = group_step->value();
          if (v.isTensor()) mine["step"] = v.toTensor().to(at::kFloat).reshape({});
          if (v.isInt() || v.isDouble()) mine["step"] = at::scalar_tensor(v.toScalar().toDouble(), at::kFloat);
        }
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
    o.param_groups.push_back(
        {groups[k].contains("lr") ? get_double(groups[k], "lr", file) : 0.0, static_cast<int64_t>(members.size())});
  }
  TORCH_CHECK(mapped == params.size(), "[checkpointing] ", file, ": the optimizer's parameter groups hold ", mapped,
              " of the model's ", params.size(), " parameters");
  if (nested && top.contains("grad_scaler") && top.at("grad_scaler").isGenericDict()) {
    const auto s = top.at("grad_scaler").toGenericDict();
    if (s.contains("scale")) {
      const auto& scale = s.at("scale");
      o.grad_scaler = RankCheckpoint::GradScalerState{
          scale.isTensor() ? scale.toTensor().item<double>() : get_double(s, "scale", file),
          get_int(s, "growth_tracker", file), get_int(s, "hysteresis_tracker", file)};
    }
  }
  o.scheduler = read_scheduler(d, file);
  return o;
}

}  // namespace megatron::training::detail
