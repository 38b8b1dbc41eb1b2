// What a torch_dist folder keeps besides its tensors (torch_dist.h): metadata.json, common.pt (or
// newer megatron-core's common_state object), and the optimizer's part of that common state as
// megatron-core leaves it: its MegatronOptimizer.sharded_state_dict with the tensors taken out
// (dist_checkpointing keeps those in the .distcp files, optimizer.state.<state>.<parameter key>).
// Torch's param_groups lose their parameter indices (a LocalNonpersistentObject: the loading run's
// own), the per-parameter state keeps only the step every parameter shares ("common_step"), and
// the fp32 master copies are tensors. Its distributed optimizer's model-space layout
// (fully_reshardable) keeps the step in the groups and names the fp32 copy "param"; runs with
// --use-distributed-optimizer write that one, as Megatron-LM's with --dist-ckpt-optim-fully-reshardable.
// Its bucket layout (dp_reshardable, its default) keeps nothing here (torch_dist_dp_reshardable.cpp).
#include "training/checkpointing/torch_dist.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <string>
#include <vector>

#include "input_files.h"
#include "megatron/training/checkpoint_files.h"
#include "training/checkpointing/checkpoint_dicts.h"
#include "training/checkpointing/paths.h"

namespace megatron::training::detail {
namespace {

// What megatron-core's metadata.json says of its files.
constexpr const char* kShardedMetadata =
    R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", )"
    R"("common_backend_version": 1})";

// The torch optimizer dicts of an optimizer entry: one, or a ChainedOptimizer's (int keys), each
// nested under "optimizer" by the 16-bit and distributed optimizers.
std::vector<GenericDict> torch_dicts(const GenericDict& optimizer) {
  std::vector<GenericDict> out;
  auto add = [&](const GenericDict& o) {
    auto inner = o.find("optimizer");
    out.push_back(inner != o.end() && inner->value().isGenericDict() ? inner->value().toGenericDict() : o);
  };
  bool chained = !optimizer.empty();
  for (const auto& e : optimizer) chained = chained && e.key().isInt() && e.value().isGenericDict();
  if (!chained) {
    add(optimizer);
    return out;
  }
  for (const auto& e : optimizer) add(e.value().toGenericDict());
  return out;
}

constexpr const char* kFullyReshardable = "fully_reshardable";

std::string sharding_type(const GenericDict& optimizer) {
  for (const auto& e : optimizer) {
    if (e.key().isString() && e.key().toStringRef() == "param_state_sharding_type" && e.value().isString())
      return e.value().toStringRef();
    if (e.key().isInt() && e.value().isGenericDict()) {
      if (auto inner = sharding_type(e.value().toGenericDict()); !inner.empty()) return inner;
    }
  }
  return "";
}

}  // namespace

c10::IValue sharded_object(const c10::IValue& value) {
  c10::impl::GenericList shards(c10::AnyType::get());
  shards.push_back(value);
  return shards;
}
c10::IValue read_sharded_object(const std::string& dir, const DcpMetadata& md, const std::string& key) {
  const auto shards = read_dcp_object(dir, md, key);
  TORCH_CHECK(shards.isList() && shards.toListRef().size() == 1, "[checkpointing] ", dir, ": object '", key,
              "' is not megatron-core's list of one shard");
  return shards.toListRef()[0];
}

void write_torch_dist_global(const std::string& dir, const DcpMetadata& md, const RankCheckpoint& c,
                             std::optional<at::Tensor> step) {
  write_text_file(join(dir, kDcpMetadataFileName), dcp_metadata_pickle(md));
  RankCheckpoint head = c;  // its tensors are in the .distcp files
  for (auto& m : head.model) m.clear();
  if (head.optimizer) {
    for (const auto& [name, s] : head.optimizer->param_state)
      if (auto it = s.find("step"); !step && it != s.end()) step = it->second;
    head.optimizer->param_state.clear();
    head.optimizer->distributed = false;
  }
  head.rng_state.reset();
  head.fp8_state.clear();
  auto common = head.to_files().at(kModelFileName).toGenericDict();
  to_megatron_core_common(common, step, c.args.use_distributed_optimizer);
  write_checkpoint_file(join(dir, kCommonFileName), common);
  write_text_file(join(dir, kShardedMetadataFileName), kShardedMetadata);
}

bool is_torch_dist(const std::string& iter_dir) {
  const std::string path = join(iter_dir, kShardedMetadataFileName);
  if (!std::filesystem::exists(path)) return false;
  const auto json = megatron::detail::parse_json(
      megatron::detail::read_whole_file(path, "[checkpointing] " + path, 1 << 20), "[checkpointing] " + path);
  auto field = [&](const char* name) {
    TORCH_CHECK(json.is_object() && json.contains(name), "[checkpointing] ", path, " has no '", name, "'");
    return json.at(name);
  };
  TORCH_CHECK(field("sharded_backend") == "torch_dist", "[checkpointing] ", path, ": sharded_backend ",
              field("sharded_backend").dump(), " is not one read here (torch_dist)");
  TORCH_CHECK(field("sharded_backend_version") == 1, "[checkpointing] ", path, ": sharded_backend_version ",
              field("sharded_backend_version").dump(), " is not one read here (1)");
  // Newer megatron-core keeps the common state among the sharded objects and names no common backend.
  TORCH_CHECK(!json.contains("common_backend") || json.at("common_backend") == "torch", "[checkpointing] ", path,
              ": common_backend ", json.value("common_backend", nlohmann::json()).dump(),
              " is not one read here (torch)");
  return true;
}

RankCheckpoint read_torch_dist_common(const std::string& iter_dir, const DcpMetadata& md, bool read_optimizer,
                                      std::optional<at::Tensor>* step, c10::IValue* raw) {
  std::string where = join(iter_dir, kCommonFileName);
  c10::IValue common;
  if (auto object = md.objects.find(kCommonStateKey); object != md.objects.end() && !std::filesystem::exists(where)) {
    where = join(iter_dir, object->second.file) + " '" + kCommonStateKey + "'";
    common = read_sharded_object(iter_dir, md, kCommonStateKey);
  } else {
    common = read_checkpoint_file(where);
  }
  TORCH_CHECK(common.isGenericDict(), "[checkpointing] ", where, " does not hold a dict");
  if (raw) *raw = common;
  RankCheckpoint c =
      RankCheckpoint::from_dict(common.toGenericDict(), where, iter_dir, read_optimizer, /*sharded=*/true);
  if (step && c.optimizer) {
    *step = megatron_core_optimizer_step(common.toGenericDict());
    if (!*step && md.tensors.count(kTorchDistStepKey)) *step = read_dcp_box(iter_dir, md, kTorchDistStepKey, {0}, {1});
    if (*step) *step = (*step)->reshape({}).to(at::kFloat);
  }
  return c;
}

bool holds_optimizer_state(const DcpMetadata& md) {
  for (const auto& [key, t] : md.tensors)
    if (key.rfind("optimizer.", 0) == 0) return true;
  return false;
}

void to_megatron_core_common(GenericDict& common, const std::optional<at::Tensor>& step, bool distributed) {
  // What Megatron-LM's save_checkpoint records of its state dicts' form.
  auto content = new_dict();
  if (distributed) {
    content.insert("distrib_optim_sharding_type", kFullyReshardable);
    content.insert("distrib_optim_fully_reshardable_mem_efficient", false);
  }
  content.insert("singleton_local_shards", false);
  content.insert("chained_optim_avoid_prefix", true);
  common.insert_or_assign("content_metadata", content);
  if (!common.contains("optimizer")) return;

  auto optimizer = common.at("optimizer").toGenericDict();
  for (const char* ours : {"distributed", "param_state", "fp32_from_fp16_params"}) (void)optimizer.erase(ours);
  GenericDict torch_state = torch_dicts(optimizer).at(0);
  for (const auto& g : get(torch_state, "param_groups", "the optimizer state").toListRef()) {
    auto group = g.toGenericDict();
    (void)group.erase("params");
    if (step) group.insert_or_assign("step", static_cast<int64_t>(step->item<double>()));  // FusedAdam's, and theirs
  }
  if (distributed) {  // DistributedOptimizer.state_dict(): torch's groups alone, beside the layout's name
    auto groups = new_dict();
    groups.insert("param_groups", torch_state.at("param_groups"));
    auto dist = new_dict();
    dist.insert("optimizer", groups);
    if (auto scaler = optimizer.find("grad_scaler"); scaler != optimizer.end())
      dist.insert("grad_scaler", scaler->value());
    dist.insert("param_state_sharding_type", kFullyReshardable);
    common.insert_or_assign("optimizer", dist);
    return;
  }
  auto state = new_dict();
  if (step) state.insert("common_step", step->detach().to(at::kCPU, at::kFloat).reshape({}).clone());  // AdamW's
  torch_state.insert_or_assign("state", state);
}

RankCheckpoint::OptimizerState read_megatron_core_optimizer_common(const GenericDict& d, const std::string& file) {
  const auto top = get_dict(d, "optimizer", file);
  RankCheckpoint::OptimizerState o;
  for (const GenericDict& t : torch_dicts(top))
    if (auto g = t.find("param_groups"); g != t.end()) read_group_lrs(g->value(), o, file);
  o.grad_scaler = read_grad_scaler(top, file, /*stateless_allowed=*/true);
  o.scheduler = read_scheduler(d, file);
  return o;
}

std::optional<at::Tensor> megatron_core_optimizer_step(const GenericDict& d) {
  const auto top = d.find("optimizer");
  if (top == d.end() || !top->value().isGenericDict()) return std::nullopt;
  for (const GenericDict& t : torch_dicts(top->value().toGenericDict())) {
    std::optional<double> step;
    if (auto s = t.find("state"); s != t.end() && s->value().isGenericDict())
      if (auto c = s->value().toGenericDict().find("common_step"); c != s->value().toGenericDict().end())
        step = step_value(c->value());
    if (auto g = t.find("param_groups"); !step && g != t.end() && g->value().isList())
      for (const auto& group : g->value().toListRef())
        if (group.isGenericDict())
          if (auto s = group.toGenericDict().find("step"); !step && s != group.toGenericDict().end())
            step = step_value(s->value());
    if (step) return at::scalar_tensor(*step, at::kFloat);
  }
  return std::nullopt;
}

std::string unmapped_optimizer_layout(const GenericDict& d, const std::string& file) {
  const auto top = d.find("optimizer");
  if (top == d.end() || !top->value().isGenericDict()) return "";
  const std::string type = sharding_type(top->value().toGenericDict());
  if (type.empty() || type == kFullyReshardable || type == "dp_reshardable") return "";
  // The deprecated ones: flattened shards of the parameters, or one gathered object.
  return "[checkpointing] " + file + " holds Megatron-LM's distributed-optimizer state in its '" + type +
         "' layout, which this reader does not map; save it there with --dist-ckpt-optim-fully-reshardable "
         "(the parameters' own layout), or pass --no-load-optim";
}

}  // namespace megatron::training::detail
