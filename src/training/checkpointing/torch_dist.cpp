// torch_dist checkpoints (torch_dist.h): megatron-core's keys and sharding over the DCP files of
// dcp_files.h. A parameter's key is its global name with the layer number (and local expert
// number) taken out and made a leading axis, and the norms named as Transformer Engine's layers
// hold them (megatron-core's local layers map their keys so); its global shape is the TP = 1
// tensor's, and a TP rank's shard is one chunk (two for the gated fc1, [gate; up]).
#include "training/checkpointing/torch_dist.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "input_files.h"
#include "megatron/models/common/language_module.h"
#include "megatron/training/checkpoint_files.h"
#include "training/checkpointing/checkpoint_dicts.h"
#include "training/checkpointing/paths.h"

namespace megatron::training::detail {
namespace {
using models::common::LanguageModule;
using models::common::ShardedParameter;

// The local layers' linear modules megatron-core keeps an _extra_state object for.
constexpr const char* kExtraStateModules[] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                              "mlp.linear_fc1", "mlp.linear_fc2"};

struct Placement {
  std::string key;
  std::vector<int64_t> lead_offsets, lead_sizes;  // the stacked axes: layer, then expert
  tensor_parallel::ShardLayout layout;
  bool expert = false;
  bool tied_copy = false;  // a last stage's copy of the tied embedding: a replica of the first stage's
  bool vocab = false;      // rows past the vocabulary are padding, whose count depends on TP
};

// Where this rank's part of the tensor lies: one box per block of the layout, and where the
// block starts in the local tensor along the partition dimension.
struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t local_start = 0;
};

const LanguageModule& language_module(const std::shared_ptr<torch::nn::Module>& m) {
  const auto* lm = dynamic_cast<const LanguageModule*>(m.get());
  TORCH_CHECK(lm, "[checkpointing] --ckpt-format torch_dist: the model is not a LanguageModule");
  return *lm;
}

std::vector<Placement> placements(const std::vector<ShardedParameter>& params, const Arguments& args) {
  std::set<std::string> names;
  for (const auto& p : params) names.insert(p.init_name);
  std::vector<Placement> out;
  for (const auto& p : params) {
    Placement pl;
    pl.layout = p.init.layout;
    pl.expert = p.expert_parallel;
    pl.tied_copy = p.name == "output_layer.weight" && p.init_name != p.name;
    pl.vocab = p.init_name == "embedding.word_embeddings.weight" || p.init_name == "output_layer.weight";
    auto stacked = stacked_name(p.init_name, names, args);
    pl.key = std::move(stacked.key);
    pl.lead_offsets = std::move(stacked.index);
    pl.lead_sizes = std::move(stacked.counts);
    out.push_back(std::move(pl));
  }
  return out;
}

std::vector<int64_t> global_shape(const Placement& pl, at::IntArrayRef local) {
  auto shape = pl.lead_sizes;
  for (int64_t s : pl.layout.is_sharded() ? pl.layout.full_shape(local) : local.vec()) shape.push_back(s);
  return shape;
}

std::vector<Box> boxes(const Placement& pl, at::IntArrayRef local) {
  const auto full = global_shape(pl, local);
  const size_t lead = pl.lead_offsets.size();
  auto box = [&](int64_t local_start, int64_t global_start, int64_t piece) {
    Box b;
    b.offsets = pl.lead_offsets;
    b.sizes.assign(lead, 1);
    for (size_t d = 0; d < local.size(); ++d) {
      const bool split = pl.layout.is_sharded() && static_cast<int64_t>(d) == pl.layout.partition_dim;
      b.offsets.push_back(split ? global_start : 0);
      b.sizes.push_back(split ? piece : local[d]);
    }
    b.local_start = local_start;
    return b;
  };
  if (!pl.layout.is_sharded()) return {box(0, 0, 0)};
  const int64_t dim = pl.layout.partition_dim, blocks = pl.layout.num_chunks;
  const int64_t piece = local[dim] / blocks, block = full[lead + dim] / blocks;
  std::vector<Box> out;
  for (int64_t b = 0; b < blocks; ++b) out.push_back(box(b * piece, b * block + pl.layout.rank * piece, piece));
  return out;
}

// The part of `local` a box holds, with the stacked axes in front.
at::Tensor box_part(const at::Tensor& local, const Placement& pl, const Box& b) {
  at::Tensor t = local;
  if (pl.layout.is_sharded())
    t = t.narrow(pl.layout.partition_dim, b.local_start, b.sizes[pl.lead_offsets.size() + pl.layout.partition_dim]);
  return t.reshape(b.sizes);
}

std::string rng_key(const TorchDistPlacement& at) {  // Megatron-LM's ShardedObject over (PP, TP)
  return "rng_state/shard_" + std::to_string(at.pp_rank) + "." + std::to_string(at.tp_rank) + "_" +
         std::to_string(at.pp_size) + "." + std::to_string(at.tp_size);
}

}  // namespace

TorchDistPlacement TorchDistPlacement::of(const ParallelState& ps) {
  TorchDistPlacement at;
  at.rank = ps.get_world_group().rank();
  at.tp_rank = ps.get_tensor_model_parallel_rank();
  at.tp_size = ps.get_tensor_model_parallel_world_size();
  at.pp_rank = ps.get_pipeline_model_parallel_rank();
  at.pp_size = ps.get_pipeline_model_parallel_world_size();
  at.dp_rank = ps.get_data_parallel_rank(/*with_context_parallel=*/true);
  at.dp_size = ps.get_data_parallel_world_size(/*with_context_parallel=*/true);
  at.edp_rank = ps.get_expert_data_parallel_rank();
  at.edp_size = ps.get_expert_data_parallel_world_size();
  at.etp_rank = ps.get_expert_tensor_parallel_rank();
  at.etp_size = ps.get_expert_tensor_parallel_world_size();
  return at;
}

std::string TorchDistPlacement::file_name() const {
  return "__" + std::to_string(rank) + "_0.distcp";
}

std::vector<DcpItem> torch_dist_items(const Arguments& args, const TrainingState& state, const RankCheckpoint& c,
                                      const TorchDistPlacement& at) {
  std::vector<DcpItem> items;
  size_t n = 0;  // the chunks in the order every replica lists them: replica n % replicas writes chunk n
  auto add = [&](const Placement& pl, const std::string& key, const at::Tensor& local) {
    const bool tp_replica = !pl.layout.is_sharded() && (pl.expert ? at.etp_rank : at.tp_rank) != 0;
    for (const Box& b : boxes(pl, local.sizes())) {
      const size_t index = n++;
      if (tp_replica) continue;
      const bool mine = pl.expert ? index % at.edp_size == static_cast<size_t>(at.edp_rank)
                                  : index % at.dp_size == static_cast<size_t>(at.dp_rank);
      if (mine) items.push_back({key, global_shape(pl, local.sizes()), b.offsets, box_part(local, pl, b), {}});
    }
  };
  const auto& model = *state.model;
  for (size_t v = 0; v < model.size(); ++v) {
    const auto params = language_module(model[v]).sharded_parameters();
    const auto places = placements(params, args);
    for (size_t i = 0; i < params.size(); ++i) {
      const Placement& pl = places[i];
      if (pl.tied_copy) continue;  // the first stage writes the embedding
      add(pl, pl.key, c.model[v].at(params[i].name));
      if (pl.lead_offsets.size() == 1 && !pl.expert && at.tp_rank == 0 && at.dp_rank == 0 && pl.key.size() > 7 &&
          pl.key.compare(pl.key.size() - 7, 7, ".weight") == 0) {
        for (const char* module : kExtraStateModules) {
          if (pl.key != std::string(models::common::kLayersPart) + module + ".weight") continue;
          items.push_back({std::string(models::common::kLayersPart) + module + "._extra_state/shard_" +
                               std::to_string(pl.lead_offsets[0]) + "_" + std::to_string(args.num_layers),
                           {},
                           {},
                           at::Tensor(),
                           sharded_object(c10::IValue())});
        }
      }
      if (!c.optimizer || params[i].buffer) continue;
      const auto& state_of = c.optimizer->param_state.at(model_chunk_prefix(v, model.size()) + params[i].name);
      const bool distributed = args.use_distributed_optimizer;
      for (const auto& [ours, theirs] : kTorchDistOptimizerStates)
        if (auto s = state_of.find(ours); s != state_of.end())
          add(pl, "optimizer.state." + torch_dist_state_name(ours, distributed) + "." + pl.key, s->second);
      if (distributed && !state_of.empty() && !state_of.count("main_param"))
        add(pl, std::string("optimizer.state.") + kDistributedMainParamName + "." + pl.key,
            c.model[v].at(params[i].name));
    }
  }
  if (c.rng_state && at.dp_rank == 0) {
    c10::impl::GenericList list(c10::AnyType::get());
    for (const auto& r : *c.rng_state) list.push_back(rng_dict(r));
    items.push_back({rng_key(at), {}, {}, at::Tensor(), sharded_object(list)});
  }
  add_torch_dist_fp8_items(items, state, c, at);
  return items;
}

RankCheckpoint read_torch_dist(const std::string& iter_dir, const Arguments& args, const ParallelState& ps,
                               const TrainingState& state, bool read_optimizer) {
  const DcpMetadata md = read_dcp_metadata(iter_dir);
  const bool has_optimizer = holds_optimizer_state(md);
  std::optional<at::Tensor> step;
  c10::IValue common;
  RankCheckpoint c = read_torch_dist_common(iter_dir, md, read_optimizer && has_optimizer, &step, &common);
  if (!has_optimizer) c.optimizer.reset();
  if (c.optimizer) c.optimizer->param_state.clear();
  const auto at = TorchDistPlacement::of(ps);
  if (c.optimizer && is_dp_reshardable(md))
    read_dp_reshardable(iter_dir, md, common.toGenericDict(), at, state, *c.optimizer);

  // This rank's tensor of `key`, its padded vocabulary rows zero past what the checkpoint has.
  auto read = [&](const Placement& pl, const std::string& key, const ShardedParameter& p) {
    auto it = md.tensors.find(key);
    TORCH_CHECK(it != md.tensors.end(), "[checkpointing] ", iter_dir, " has no tensor '", key,
                "', which this run's parameter ", p.name, " needs");
    const auto want = global_shape(pl, p.param.sizes());
    auto saved = it->second.size;
    if (pl.vocab && !saved.empty()) saved[0] = want[0];
    TORCH_CHECK(saved == want, "[checkpointing] ", iter_dir, ": '", key, "' is ", c10::IntArrayRef(it->second.size),
                " in the checkpoint, ", c10::IntArrayRef(want), " in this run's model");
    at::Tensor local = at::zeros(p.param.sizes(), at::TensorOptions().dtype(it->second.dtype));
    for (Box b : boxes(pl, p.param.sizes())) {
      at::Tensor dst = local;
      if (pl.layout.is_sharded())
        dst = dst.narrow(pl.layout.partition_dim, b.local_start,
                         b.sizes[pl.lead_offsets.size() + pl.layout.partition_dim]);
      if (pl.vocab) {  // rows this run pads and the checkpoint did not: zeros
        b.sizes[0] = std::max<int64_t>(0, std::min(b.sizes[0], it->second.size[0] - b.offsets[0]));
        if (b.sizes[0] == 0) continue;
        dst = dst.narrow(0, 0, b.sizes[0]);
      }
      dst.copy_(read_dcp_box(iter_dir, md, key, b.offsets, b.sizes).reshape(dst.sizes()));
    }
    return local;
  };

  const auto& model = *state.model;
  c.model.assign(model.size(), {});
  for (size_t v = 0; v < model.size(); ++v) {
    const auto params = language_module(model[v]).sharded_parameters();
    const auto places = placements(params, args);
    for (size_t i = 0; i < params.size(); ++i) {
      c.model[v][params[i].name] = read(places[i], places[i].key, params[i]);
      if (!c.optimizer || params[i].buffer) continue;
      auto& s = c.optimizer->param_state[model_chunk_prefix(v, model.size()) + params[i].name];
      for (const auto& [ours, theirs] : kTorchDistOptimizerStates) {
        std::string key = std::string("optimizer.state.") + theirs + "." + places[i].key;
        if (!md.tensors.count(key) && std::string(ours) == "main_param" && params[i].param.scalar_type() != at::kFloat)
          key = std::string("optimizer.state.") + kDistributedMainParamName + "." + places[i].key;
        if (md.tensors.count(key)) s[ours] = read(places[i], key, params[i]);
      }
      if (step) s["step"] = step->clone();
    }
  }
  c.rng_state.reset();
  if (md.objects.count(rng_key(at))) {
    const auto list = read_sharded_object(iter_dir, md, rng_key(at));
    TORCH_CHECK(list.isList(), "[checkpointing] ", iter_dir, ": '", rng_key(at), "' is not a list");
    c.rng_state.emplace();
    for (const auto& r : list.toListRef()) c.rng_state->push_back(read_rng(r, iter_dir + " " + rng_key(at)));
  }
  read_torch_dist_fp8(c, iter_dir, md, state);
  return c;
}

void check_every_tensor_read(comm::ProcessGroup& world, const std::string& iter_dir, const Arguments& args,
                             const TrainingState& state) {
  std::string mine;
  for (const auto& m : *state.model)
    for (const auto& pl : placements(language_module(m).sharded_parameters(), args)) mine += pl.key + '\n';
  std::set<std::string> read;
  for (const auto& part : all_gather_bytes(world, mine)) {
    size_t start = 0;
    for (size_t end; (end = part.find('\n', start)) != std::string::npos; start = end + 1)
      read.insert(part.substr(start, end - start));
  }
  for (const auto& [key, t] : read_dcp_metadata(iter_dir).tensors)
    TORCH_CHECK(read.count(key) || key.rfind("optimizer.", 0) == 0, "[checkpointing] ", iter_dir, " holds '", key,
                "', which this run's model has no parameter for (a checkpoint of another model?)");
}

std::vector<std::string> all_gather_bytes(comm::ProcessGroup& world, const std::string& mine) {
  const int64_t n = world.size();
  auto lengths = at::empty({n}, at::kDouble);
  world.all_gather(lengths, at::full({1}, static_cast<double>(mine.size()), at::kDouble));
  const auto longest = static_cast<int64_t>(lengths.max().item<double>());
  auto padded = at::zeros({longest}, at::kByte);
  std::memcpy(padded.data_ptr(), mine.data(), mine.size());
  auto all = at::empty({n * longest}, at::kByte);
  world.all_gather(all, padded);
  std::vector<std::string> out;
  for (int64_t r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest,
                     static_cast<size_t>(lengths[r].item<double>()));
  return out;
}

}  // namespace megatron::training::detail
