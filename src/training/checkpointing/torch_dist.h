// Megatron-LM's torch_dist checkpoints (--ckpt-format torch_dist): megatron.core's
// dist_checkpointing over PyTorch Distributed Checkpoint (dcp_files.h). An iteration folder holds
// common.pt (what model_optim_rng.pt holds but its tensors), metadata.json, .metadata and
// __<rank>_0.distcp. Each tensor is described whole (as at TP = 1, the layers and experts stacked
// along leading axes, megatron-core's keys) and stored in chunks, so that a run of another
// TP/PP/DP layout reads just the chunks it needs. docs/checkpoints.md.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"
#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/checkpointing.h"
#include "training/checkpointing/dcp_files.h"
#include "training/checkpointing/full_checkpoint.h"

namespace megatron::training::detail {

constexpr const char* kCommonFileName = "common.pt";
constexpr const char* kShardedMetadataFileName = "metadata.json";
constexpr const char* kCommonStateKey = "common_state/shard_0_1";
// Our optimizer states by megatron-core's names for them (optimizer.state.<name>.<parameter key>),
// as its non-distributed optimizers save them. Its distributed optimizer's model-space layout
// (fully_reshardable) names the fp32 main copy "param"; both are read.
inline constexpr std::pair<const char*, const char*> kTorchDistOptimizerStates[] = {
    {"exp_avg", "exp_avg"},
    {"exp_avg_sq", "exp_avg_sq"},
    {"main_param", "fp32_param"},
    {"momentum_buffer", "momentum_buffer"}};
constexpr const char* kDistributedMainParamName = "param";
// The name our state `ours` is written under: the distributed optimizer's layout holds an fp32
// copy of every parameter (of fp32 ones too: the parameter itself) as "param".
inline std::string torch_dist_state_name(const std::string& ours, bool distributed) {
  if (distributed && ours == "main_param") return kDistributedMainParamName;
  for (const auto& [mine, theirs] : kTorchDistOptimizerStates)
    if (ours == mine) return theirs;
  return "";
}
// The step every parameter shares, which the common state keeps (megatron-core's common_step);
// earlier versions of this writer kept it as this one-element tensor instead, still read.
constexpr const char* kTorchDistStepKey = "optimizer.state.step";

// megatron-core's key of a parameter's global name ("decoder.layers.3.input_layernorm.weight" ->
// "decoder.layers.self_attention.linear_qkv.layer_norm_weight") and its place on the stacked axes
// (the layer, then a local expert's global number): `index` of `counts`. `globals`: every global
// name of the model, which says whether a layer's MLP is dense.
struct StackedName {
  std::string key;
  std::vector<int64_t> index, counts;
};
StackedName stacked_name(const std::string& global, const std::set<std::string>& globals, const Arguments& args);
// How many stacked axes a key has, and the global name (our local layers' names) at `index` on
// them: the inverse of stacked_name.
size_t stacked_axes(const std::string& key);
std::string unstacked_name(const std::string& key, const std::vector<int64_t>& index);

// Where this rank sits, taken as a save begins (its files may be written on another thread).
struct TorchDistPlacement {
  int rank = 0;
  int tp_rank = 0, tp_size = 1, pp_rank = 0, pp_size = 1;
  int dp_rank = 0, dp_size = 1;    // among the replicas of the dense parameters (DP x CP)
  int edp_rank = 0, edp_size = 1;  // among those of the expert parameters
  int etp_rank = 0, etp_size = 1;  // an expert's tensor-parallel ranks (its unsplit tensors' replicas)
  static TorchDistPlacement of(const ParallelState& ps);
  std::string file_name() const;  // __<rank>_0.distcp
};

// What this rank writes of `c` (its state, built on every rank): its share of the chunks of every
// parameter and optimizer state (the replicas of a chunk split the writing, as Megatron-LM's
// fully parallel save), the RNG state and the layers' _extra_state objects megatron-core asks
// for. The tensors stay c's.
std::vector<DcpItem> torch_dist_items(const Arguments& args, const TrainingState& state, const RankCheckpoint& c,
                                      const TorchDistPlacement& at);
// torch_dist_fp8.cpp: the FP8 delayed-scaling state of c as one object per layer under its global
// name (TP rank 0 of DP rank 0 writes it), and this run's layers' state back into c.fp8_state.
void add_torch_dist_fp8_items(std::vector<DcpItem>& items, const TrainingState& state, const RankCheckpoint& c,
                              const TorchDistPlacement& at);
void read_torch_dist_fp8(RankCheckpoint& c, const std::string& iter_dir, const DcpMetadata& md,
                         const TrainingState& state);

// Rank 0, once every rank's part is in: .metadata, common.pt (c's state but its tensors, the
// optimizer's in megatron-core's form with the shared `step`, by default c's), and metadata.json last.
void write_torch_dist_global(const std::string& dir, const DcpMetadata& md, const RankCheckpoint& c,
                             std::optional<at::Tensor> step = std::nullopt);

// convert_checkpoint's: a torch_dist iteration folder whole (every tensor at TP = 1 under its
// global name), and a FullCheckpoint written as one (one rank's file holding every tensor whole),
// published under save with args `a`.
FullCheckpoint read_torch_dist_full(const std::string& iter_dir, std::optional<int64_t> iteration);
void write_torch_dist_full(const FullCheckpoint& f, const Arguments& a, const std::string& save);

// Whether iter_dir is a torch_dist checkpoint: its metadata.json names the torch_dist backend
// (another backend or version throws, naming the file).
bool is_torch_dist(const std::string& iter_dir);
// What a torch_dist folder keeps besides its tensors, as a RankCheckpoint without them: common.pt,
// or (newer megatron-core, no common.pt) its common_state object.
// With read_optimizer, `step` gets the step every parameter shares (none without optimizer state);
// `raw`, the common state's dict itself.
RankCheckpoint read_torch_dist_common(const std::string& iter_dir, const DcpMetadata& md, bool read_optimizer,
                                      std::optional<at::Tensor>* step = nullptr, c10::IValue* raw = nullptr);
// Whether the folder's tensors include optimizer state (of any layout).
bool holds_optimizer_state(const DcpMetadata& md);
// torch_dist_dp_reshardable.cpp: Megatron-LM's distributed optimizer in its default layout, its
// gradient buckets' flat state, read into o (this rank's parameters by name, learning rates, step)
// from `common` (the common state's dict) and the folder; the TP and PP sizes must be the saved ones.
constexpr const char* kDpReshardablePrefix = "optimizer.distributed.dp_group_idx_";
bool is_dp_reshardable(const DcpMetadata& md);
void read_dp_reshardable(const std::string& iter_dir, const DcpMetadata& md, const c10::impl::GenericDict& common,
                         const TorchDistPlacement& at, const TrainingState& state, RankCheckpoint::OptimizerState& o);
// megatron-core stores a ShardedObject as the list of this rank's shards of it: one.
c10::IValue sharded_object(const c10::IValue& value);
c10::IValue read_sharded_object(const std::string& dir, const DcpMetadata& md, const std::string& key);
// This rank's state from a torch_dist folder, whatever layout wrote it: the tensors this run's
// parameters (and, with read_optimizer, their optimizer states) need, the RNG state when the
// TP and PP sizes are the saved ones, the rest from common.pt.
RankCheckpoint read_torch_dist(const std::string& iter_dir, const Arguments& args, const ParallelState& ps,
                               const TrainingState& state, bool read_optimizer);

// After read_torch_dist on every rank (collective): a tensor of the checkpoint's model that no
// rank's model read (a checkpoint of another model: more experts, a bias) throws, naming it.
void check_every_tensor_read(comm::ProcessGroup& world, const std::string& iter_dir, const Arguments& args,
                             const TrainingState& state);

// Every rank's `mine`, in rank order (collective over world).
std::vector<std::string> all_gather_bytes(comm::ProcessGroup& world, const std::string& mine);

}  // namespace megatron::training::detail
