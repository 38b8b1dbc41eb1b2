// Megatron-LM's distributed optimizer in its default torch_dist layout (dp_reshardable), read onto
// our parameter names. Each (TP, PP) rank's state is its gradient buffers' flat tensors, one
// global tensor per bucket and state,
//   optimizer.distributed.dp_group_idx_<mp rank>.gbuf_idx_<buffer>.dtype_<dtypes>.bucket_idx_<b>.<state>
// (the bucket without its padding to a data-parallel multiple, so that any DP size reads it), and
// its parameter groups a ShardedObject beside them, optimizer.distributed.dp_group_idx_<mp rank>.optimizer.
// Buckets back to back are the legacy distrib_optim.pt's buffer (megatron_lm_distrib_optim.cpp),
// which is why only the data-parallel size may change.
#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "training/checkpointing/checkpoint_dicts.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::training::detail {

bool is_dp_reshardable(const DcpMetadata& md) {
  for (const auto& [key, t] : md.tensors)
    if (key.rfind(kDpReshardablePrefix, 0) == 0) return true;
  return false;
}

void read_dp_reshardable(const std::string& iter_dir, const DcpMetadata& md, const GenericDict& common,
                         const TorchDistPlacement& at, const TrainingState& state, RankCheckpoint::OptimizerState& o) {
  const std::string way_out = "; save it there with --dist-ckpt-optim-fully-reshardable, or pass --no-load-optim";
  const auto args = get_dict(common, "args", iter_dir + " common state");
  auto saved_size = [&](const char* key) {
    auto it = args.find(key);
    return it != args.end() && it->value().isInt() ? it->value().toInt() : int64_t{1};
  };
  const int64_t tp = saved_size("tensor_model_parallel_size"), pp = saved_size("pipeline_model_parallel_size");
  TORCH_CHECK(tp == at.tp_size && pp == at.pp_size, "[checkpointing] ", iter_dir,
              " holds Megatron-LM's distributed-optimizer state in its 'dp_reshardable' layout, saved at TP ", tp,
              ", PP ", pp, ", which only another data-parallel size reads; this run is TP ", at.tp_size, ", PP ",
              at.pp_size, way_out);
  // Its model-parallel rank (tp-pp order) numbers the data-parallel group.
  const std::string prefix = kDpReshardablePrefix + std::to_string(at.tp_rank + at.tp_size * at.pp_rank) + ".";

  std::optional<double> step;
  for (const auto& [key, object] : md.objects) {
    if (key.rfind(prefix + "optimizer/", 0) != 0) continue;
    const auto value = read_sharded_object(iter_dir, md, key);
    TORCH_CHECK(value.isGenericDict(), "[checkpointing] ", iter_dir, ": '", key, "' is not a dict");
    const auto& groups = get(value.toGenericDict(), "param_groups", iter_dir + " '" + key + "'");
    read_group_lrs(groups, o, iter_dir);
    TORCH_CHECK(groups.isList(), "[checkpointing] ", iter_dir, ": '", key, "' holds no list of parameter groups");
    for (const auto& g : groups.toListRef()) {
      TORCH_CHECK(g.isGenericDict(), "[checkpointing] ", iter_dir, ": '", key, "' holds a group that is not a dict");
      if (auto s = g.toGenericDict().find("step"); !step && s != g.toGenericDict().end()) step = step_value(s->value());
    }
  }
  TORCH_CHECK(step, "[checkpointing] ", iter_dir, " has no parameter groups with a step under '", prefix, "optimizer'",
              way_out);

  // Each buffer's state: its buckets, in order, back to back.
  std::map<std::pair<size_t, std::string>, std::map<int64_t, std::string>> buckets;
  for (const auto& [key, t] : md.tensors) {
    if (key.rfind(prefix + "gbuf_idx_", 0) != 0) continue;
    const size_t bucket = key.rfind(".bucket_idx_"), kind = key.rfind('.');
    const std::string buffer = key.substr(prefix.size() + 9, key.find('.', prefix.size()) - prefix.size() - 9),
                      index = bucket == std::string::npos || kind <= bucket
                                  ? ""
                                  : key.substr(bucket + 12, kind - bucket - 12);
    auto number = [](const std::string& s) {
      return !s.empty() && s.size() < 10 &&
             std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    };
    TORCH_CHECK(
        number(buffer) && number(index), "[checkpointing] ", iter_dir, ": tensor '", key,
        "' is not named as Megatron-LM names a bucket's state (...gbuf_idx_<n>.dtype_<..>.bucket_idx_<n>.<state>)");
    buckets[{std::stoul(buffer), key.substr(kind + 1)}][std::stoll(index)] = key;
  }
  // This rank's parameters in Megatron-LM's named_parameters() order, which its buffers follow.
  std::vector<ModelDictParam> params;
  const auto& model = *state.model;
  for (size_t v = 0; v < model.size(); ++v) {
    std::vector<ModelDictParam> chunk;
    for (const auto& p : model[v]->named_parameters())
      chunk.push_back({model_chunk_prefix(v, model.size()) + p.key(), p.value(), v, p.key()});
    std::stable_sort(chunk.begin(), chunk.end(),
                     [](const auto& a, const auto& b) { return registered_before(a.local, b.local); });
    params.insert(params.end(), chunk.begin(), chunk.end());
  }
  read_distrib_optim_buffers(
      params, args, *step,
      [&](size_t c, const char* key) {
        auto it = buckets.find({c, key});
        if (it == buckets.end()) return at::Tensor();
        std::vector<at::Tensor> parts;
        for (const auto& [b, name] : it->second) {
          TORCH_CHECK(b == static_cast<int64_t>(parts.size()), "[checkpointing] ", iter_dir, " has no bucket ",
                      parts.size(), " of '", name, "''s buffer");
          parts.push_back(read_dcp_box(iter_dir, md, name, {0}, md.tensors.at(name).size));
        }
        return at::cat(parts);
      },
      o, iter_dir, way_out);
}

}  // namespace megatron::training::detail
