// DistributedDataParallel (megatron/core/distributed/distributed_data_parallel.py): data
// parallelism for this rank's model chunks. It owns the ParamAndGradBuffers that hold the
// parameters and their fp32 gradients (Megatron-LM's main_grad), the gradient buckets that average
// those over the data-parallel ranks (under the backward pass with overlap_grad_reduce), with the
// distributed optimizer each rank's shard of the buffers (ParamShards, whose fp32 main parameters
// optimizer::DistributedOptimizer updates), and Megatron-FSDP's units (ZeRO-2/3) with the hooks a
// module calls around its forward. The optimizer updates what this holds and never communicates
// over the data-parallel group itself.
//
// Megatron-LM wraps each model chunk in its own DistributedDataParallel; one wrapper over all of a
// rank's chunks keeps one buffer per dtype across them, so the shards and the order in which the
// gradient norm is summed do not depend on the number of virtual pipeline stages.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/param_and_grad_buffer.h"
#include "megatron/distributed/param_shards.h"
#include "megatron/transformer/param_gather.h"

namespace megatron::distributed {

class GradBuckets;
class FsdpUnits;

// Megatron-FSDP's --data-parallel-sharding-strategy: what is sharded over the data-parallel ranks
// between uses. kOptim is the distributed optimizer (ZeRO-1); kOptimGrads adds the gradients
// (ZeRO-2), kOptimGradsParams the parameters (ZeRO-3).
enum class ShardingStrategy { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };
// From the flag's words (no_shard | optim | optim_grads | optim_grads_params); the one place
// they are read.
MEGATRON_API ShardingStrategy sharding_strategy_from_string(const std::string& name);
MEGATRON_API const char* to_string(ShardingStrategy strategy);

// Megatron-LM's DistributedDataParallelConfig, the fields that apply here (gradients are always
// reduced in fp32).
struct MEGATRON_API DistributedDataParallelConfig {
  // Each bucket's all-reduce (or reduce to its shards' ranks) launched as soon as the backward
  // pass has completed its gradients.
  bool overlap_grad_reduce = false;
  // With the distributed optimizer: the updated parameters gathered under the next forward, each
  // bucket waited for by the first module that reads it (param_gather() hooks); gathered at the
  // end of the step when a module never asked for its hooks.
  bool overlap_param_gather = false;
  // Shards over the data-parallel ranks (ZeRO-1): each rank holds the main parameters of its
  // shard. No effect with one data-parallel rank. kOptimGrads / kOptimGradsParams need it.
  bool use_distributed_optimizer = false;
  ShardingStrategy data_parallel_sharding_strategy = ShardingStrategy::kNoShard;
  // ZeRO-3: the next layer's parameters gathered while this one runs.
  bool fsdp_prefetch = true;
  // Elements per gradient bucket (Megatron-LM's default: max(40M, 1M x DP)).
  int64_t bucket_size = 40'000'000;
  // false: each bucket is reduced as a bfloat16 copy (half the traffic), written back into the fp32
  // gradients, which still accumulate micro-batches in fp32 (--grad-reduce-in-bf16).
  bool grad_reduce_in_fp32 = true;

  bool shards_grads() const {
    return data_parallel_sharding_strategy == ShardingStrategy::kOptimGrads || shards_params();
  }
  bool shards_params() const { return data_parallel_sharding_strategy == ShardingStrategy::kOptimGradsParams; }
};

// One trainable parameter of the wrapped chunks, with what its buffers need to know of it.
struct MEGATRON_API ModelParam {
  std::string name;
  at::Tensor param;
  // Its parameter group (0..3: the optimizer's groups, optimizer::param_group_of): the members of
  // a group are one contiguous region of their buffer, which one update kernel covers.
  int param_group = 0;
  // A copy of a parameter that another rank counts in the gradient norm: replicated on TP
  // ranks > 0, or the last pipeline stage's copy of the tied word embedding.
  bool counted_elsewhere_in_grad_norm = false;
  // Its gradient is summed with another pipeline stage's after the data-parallel reduction (the
  // tied word embedding on the first and last stage): with the distributed optimizer its bucket
  // is all-reduced, since the stages' shards hold different parameters.
  bool shared_across_pipeline_stages = false;
  // Under ZeRO-2/3: the unit it belongs to (a decoder layer, such as decoder.layers.3 with its
  // chunk's prefix), whose parameters are gathered and whose gradient is reduced together;
  // empty: the embedding and output layer's unit, kept whole through a step.
  std::string fsdp_unit;
  // Replicated over the TP ranks, its gradient partial on each under sequence parallelism
  // (Megatron-LM's param.sequence_parallel): summed over the TP group after the data-parallel
  // reduction. The FSDP units do it (finalize_model_grads cannot: their whole gradients are gone).
  bool sequence_parallel = false;
  // One of this rank's experts (models::common::ShardedParameter::expert_parallel): its buffer
  // is reduced, and sharded, over the expert-data-parallel ranks.
  bool expert_parallel = false;
  // For a parameter created without memory (tensor_parallel::DeferredParameterInit, under
  // ZeRO-3): writes its initial value into `view` (its shape, dtype and device).
  std::function<void(at::Tensor&)> initialize;
  // overlap_param_gather: the unit whose hook waits for its part of the gather, when not
  // fsdp_unit (a chunk's final norm and output layer wait with its last layer).
  std::string gather_wait_unit;
};

// Bytes the buffers hold now, counted from the live storages (each once).
struct MEGATRON_API BufferMemory {
  int64_t params = 0;  // the model's parameters
  int64_t grads = 0;   // their gradients (whole, or this rank's shards)
};

class MEGATRON_API DistributedDataParallel {
 public:
  // data_parallel_group averages the gradients (nullptr or one rank: no data parallelism);
  // tensor_parallel_group sums the sequence-parallel gradients of FSDP units;
  // expert_data_parallel_group averages the experts' gradients (nullptr: the data-parallel group).
  // Megatron-LM's --num-distributed-optimizer-instances: the two data-parallel groups are then one
  // instance's ranks, each instance holding a whole optimizer state sharded over its ranks, and
  // the across_instances groups (the ranks at the same place in every instance) average what each
  // instance reduced.
  DistributedDataParallel(std::vector<ModelParam> params, DistributedDataParallelConfig config,
                          std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                          std::shared_ptr<comm::ProcessGroup> tensor_parallel_group = nullptr,
                          std::shared_ptr<comm::ProcessGroup> expert_data_parallel_group = nullptr,
                          std::shared_ptr<comm::ProcessGroup> across_instances_group = nullptr,
                          std::shared_ptr<comm::ProcessGroup> expert_across_instances_group = nullptr);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  const DistributedDataParallelConfig& config() const { return config_; }
  const std::shared_ptr<comm::ProcessGroup>& data_parallel_group() const { return dp_; }
  const std::vector<ModelParam>& params() const { return params_; }
  // Whether each rank holds a shard of the buffers (the distributed optimizer with more than one
  // data-parallel rank).
  bool sharded() const { return sharded_; }

  // The buffers: one per parameter dtype for the parameters outside FSDP units (all of them
  // without gradient sharding), the experts' after the others', then one per unit, in the order
  // the model runs them.
  size_t num_buffers() const { return buffers_.size(); }
  const ParamAndGradBuffer& buffer(size_t b) const { return *buffers_[b]; }
  // params() indices of buffer b's parameters, in the buffer's order.
  const std::vector<size_t>& buffer_params(size_t b) const { return buffer_params_[b]; }
  // Whether buffer b holds experts' parameters, and the group it is reduced (and sharded) over.
  bool expert_buffer(size_t b) const { return expert_buffer_[b]; }
  const std::shared_ptr<comm::ProcessGroup>& buffer_group(size_t b) const { return buffer_group_[b]; }
  // The parameter group of each of buffer b's regions.
  const std::vector<int>& region_groups(size_t b) const { return region_groups_[b]; }
  // This rank's shard of region r of buffer b (nullptr when not sharded).
  const ParamShards* shards(size_t b, size_t r) const;
  // The fp32 gradients region r of buffer b is updated with, once finish_grad_sync() has run: the
  // region's, averaged over the data-parallel ranks, or this rank's shard of them.
  at::Tensor reduced_grads(size_t b, size_t r) const;

  // Zeroes the gradients (Megatron-LM's zero_grad_buffer); those of bf16/fp16 parameters are
  // views of the fp32 buffer that autograd accumulates the micro-batches into.
  void zero_grad_buffer();
  // Each gradient is complete after `accumulations` backward passes (the step's micro-batches):
  // from then on its bucket is reduced as soon as every gradient in it is complete. No effect
  // without overlap_grad_reduce. Call after zero_grad_buffer().
  void start_grad_sync(int64_t accumulations);
  // The data-parallel average of the gradients: what the backward passes have not launched is
  // launched now, then everything is waited for. Before anything else reads or changes the
  // gradients; again before the next zero_grad_buffer(), a no-op.
  void finish_grad_sync();
  // An optimizer step has read the gradients: the next finish_grad_sync() syncs again, whether
  // or not zero_grad_buffer() runs first (a caller may replace .grad between steps).
  void grads_consumed() { grads_synced_ = false; }
  // Megatron-LM's no_sync(): while the returned guard lives, backward passes accumulate without
  // launching any bucket (the last micro-batch's, after it is gone, launches them all).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }
  // Buckets whose reduction was launched since start_grad_sync() (0 without overlap), and
  // buckets in all (0 without data parallelism).
  int64_t grad_buckets_launched() const;
  int64_t grad_bucket_count() const;

  // What a module calls around its forward for `unit` (ModelParam::fsdp_unit; "" for the parts
  // outside the decoder layers): under ZeRO-2/3 it gathers the unit's parameters (ZeRO-3) and
  // allocates its whole gradient as its backward begins; with overlap_param_gather it waits for
  // the unit's part of the parameter gather first. nullptr when there is nothing to do.
  std::shared_ptr<transformer::ParamGather> param_gather(const std::string& unit) const;
  // After the distributed optimizer updated the main shards: ZeRO-2/3's whole gradients released
  // (and ZeRO-3's parameters), each shard written into the parameters and gathered — launched for
  // the next forward where the modules wait for their part, now otherwise.
  void start_param_sync();
  // Waits for what is left of the gather start_param_sync() launched. Before anything but the
  // model's forward reads the parameters.
  void finish_param_sync();
  // Buckets and units whose gather is launched and not waited for.
  int64_t param_syncs_pending() const;
  // overlap_param_gather applies: every unit whose parameters the buckets carry has asked for
  // its hooks (else the gather completes within start_param_sync()).
  bool param_sync_overlapped() const;
  // ZeRO-2 with overlap_param_gather: the layer units gathered under the next forward, each waited
  // for by its layer.
  int64_t param_gather_units_overlapped() const;
  // Under ZeRO-2/3, the units whose module never asked for their hooks.
  int64_t fsdp_units_without_hooks() const;
  // ZeRO-3: every parameter whole, for what reads the model outside its forward (checkpoints),
  // and released again. No-ops otherwise.
  void gather_params();
  void release_params();
  // Sharding ends (collective): every parameter whole again and its gradient dropped, so that the
  // model serves without this wrapper. No-op without ZeRO-2/3.
  void unshard();
  // Parameter all-gathers of FSDP units so far, for tests and benchmarks.
  int64_t param_gathers() const;

  // Storages already in `counted` are not counted again; those counted here are added to it.
  BufferMemory memory(std::set<const void*>& counted) const;

 private:
  void average_across_instances();
  void add_buffer(const std::vector<size_t>& indices, const std::string& fsdp_unit);
  std::vector<const ParamShards*> shards_of(size_t b) const;
  const std::string& gather_wait_unit(size_t i) const {
    return params_[i].gather_wait_unit.empty() ? params_[i].fsdp_unit : params_[i].gather_wait_unit;
  }

  std::vector<ModelParam> params_;
  DistributedDataParallelConfig config_;
  std::shared_ptr<comm::ProcessGroup> dp_, tp_, edp_;
  std::shared_ptr<comm::ProcessGroup> across_instances_, expert_across_instances_;  // nullptr: one instance
  double expert_grad_scale_ = 1.0;
  bool sharded_ = false;
  std::vector<std::unique_ptr<ParamAndGradBuffer>> buffers_;
  std::vector<std::vector<size_t>> buffer_params_;
  std::vector<std::vector<int>> region_groups_;
  std::vector<std::vector<std::unique_ptr<ParamShards>>> shards_;  // per buffer and region, when sharded
  std::vector<int64_t> buffer_fsdp_unit_;                          // per buffer: its unit's index, or -1
  std::vector<std::shared_ptr<comm::ProcessGroup>> buffer_group_;  // per buffer: dp_, or edp_ for experts
  std::vector<bool> expert_buffer_;
  // Per buffer outside the units whose group has more than one rank; buckets_[k] cuts
  // buffers_[bucket_buffer_[k]].
  std::vector<std::unique_ptr<GradBuckets>> buckets_;
  std::vector<size_t> bucket_buffer_;
  size_t root_buffers_ = 0;  // buffers_[0, root_buffers_) hold the parameters outside the units
  std::unique_ptr<FsdpUnits> fsdp_;
  std::map<std::string, size_t> fsdp_unit_index_;  // "" for the kept unit (ZeRO-3)
  // A layer's expert unit is named its unit's name with this suffix.
  static constexpr const char* kExpertUnitSuffix = " experts";
  std::map<std::string, int> fsdp_chunks_;      // model chunk prefix -> index
  mutable std::set<std::string> hooked_units_;  // param_gather() asked for them
  bool grads_synced_ = false;                   // finish_grad_sync() ran since zero_grad_buffer()
  int no_sync_depth_ = 0;
};

}  // namespace megatron::distributed
