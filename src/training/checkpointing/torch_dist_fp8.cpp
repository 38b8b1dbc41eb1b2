// FP8 delayed-scaling state in torch_dist checkpoints: one ShardedObject per FP8 layer under its
// global name ("decoder.layers.5.self_attention.linear_qkv.fp8_state/shard_0_1", a dict of
// "scale" and "amax_history"), so that a run of another TP/PP/DP layout finds each layer's state.
// After the per-iteration amax reduction every TP and DP rank holds the same state: TP rank 0 of
// DP rank 0 writes it.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "megatron/models/common/language_module.h"
#include "megatron/tensor_parallel/fp8.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::training::detail {
namespace {

const std::string kWeight = ".weight";

// The global module name of each of a chunk's FP8 layers, by its local one.
std::map<std::string, std::string> global_fp8_modules(const std::shared_ptr<torch::nn::Module>& chunk) {
  std::map<std::string, std::string> out;
  const auto* lm = dynamic_cast<const models::common::LanguageModule*>(chunk.get());
  if (!lm) return out;
  std::map<std::string, std::string> global_of;
  for (const auto& p : lm->sharded_parameters()) global_of[p.name] = p.init_name;
  for (const auto& [local, meta] : tensor_parallel::named_fp8_metas(*chunk)) {
    auto it = global_of.find(local + kWeight);
    TORCH_CHECK(it != global_of.end() && it->second.size() > kWeight.size(), "[checkpointing] FP8 layer '", local,
                "' has no weight among the model's parameters");
    out[local] = it->second.substr(0, it->second.size() - kWeight.size());
  }
  return out;
}

std::string object_key(const std::string& global_module) {
  return global_module + ".fp8_state/shard_0_1";
}

}  // namespace

void add_torch_dist_fp8_items(std::vector<DcpItem>& items, const TrainingState& state, const RankCheckpoint& c,
                              const TorchDistPlacement& at) {
  if (at.tp_rank != 0 || at.dp_rank != 0) return;
  const auto& model = *state.model;
  for (size_t v = 0; v < model.size(); ++v) {
    const std::string prefix = model_chunk_prefix(v, model.size());
    for (const auto& [local, global] : global_fp8_modules(model[v])) {
      auto scale = c.fp8_state.find(prefix + local + ".fp8_scale");
      auto history = c.fp8_state.find(prefix + local + ".fp8_amax_history");
      if (scale == c.fp8_state.end() || history == c.fp8_state.end()) continue;  // tensorwise: nothing kept
      c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
      d.insert("scale", scale->second);
      d.insert("amax_history", history->second);
      c10::impl::GenericList shards(c10::AnyType::get());  // megatron-core's list of one shard
      shards.push_back(d);
      items.push_back({object_key(global), {}, {}, at::Tensor(), shards});
    }
  }
}

void read_torch_dist_fp8(RankCheckpoint& c, const std::string& iter_dir, const DcpMetadata& md,
                         const TrainingState& state) {
  c.fp8_state.clear();
  const auto& model = *state.model;
  for (size_t v = 0; v < model.size(); ++v) {
    const std::string prefix = model_chunk_prefix(v, model.size());
    for (const auto& [local, global] : global_fp8_modules(model[v])) {
      const std::string key = object_key(global);
      if (!md.objects.count(key)) continue;  // saved without FP8: load_fp8_state says what follows
      const auto shards = read_dcp_object(iter_dir, md, key);
      TORCH_CHECK(shards.isList() && shards.toListRef().size() == 1 && shards.toListRef()[0].isGenericDict(),
                  "[checkpointing] ", iter_dir, ": object '", key, "' is not a list of one dict");
      const auto d = shards.toListRef()[0].toGenericDict();
      for (const char* field : {"scale", "amax_history"}) {
        TORCH_CHECK(d.contains(field) && d.at(field).isTensor(), "[checkpointing] ", iter_dir, ": object '", key,
                    "' has no tensor '", field, "'");
        c.fp8_state[prefix + local + (std::string(field) == "scale" ? ".fp8_scale" : ".fp8_amax_history")] =
            d.at(field).toTensor();
      }
    }
  }
}

}  // namespace megatron::training::detail
