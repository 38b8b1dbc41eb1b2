// Megatron-FSDP's units: the decoder layers' parameters sharded over the data-parallel ranks,
// each layer its own ParamAndGradBuffer (a "unit"), its regions split as the distributed
// optimizer splits them. Under optim_grads (ZeRO-2) a unit's whole gradient lives from the
// step's first backward pass to its reduce-scatter in the last one, then only this rank's shard
// stays. Under optim_grads_params (ZeRO-3) the parameters too: gathered from the shards before
// the layer's forward and again before its backward (the next layer's gather launched ahead with
// prefetch), released after each, and the gradient reduce-scattered after every backward pass,
// summed into the shard. The hooks: ParamGather around the layer's forward, a hook on its
// output's gradient, and one after each parameter's gradient accumulation.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/param_and_grad_buffer.h"
#include "megatron/distributed/param_shards.h"
#include "megatron/transformer/param_gather.h"

namespace torch::autograd {
struct Node;
}

namespace megatron::distributed {

class MEGATRON_API FsdpUnits {
 public:
  // tensor_parallel_group: sums the sequence-parallel parameters' gradients (nullptr: none).
  FsdpUnits(std::shared_ptr<comm::ProcessGroup> data_parallel_group, bool shard_params, bool prefetch,
            std::shared_ptr<comm::ProcessGroup> tensor_parallel_group = nullptr);
  ~FsdpUnits();

  // A unit, in forward order within its model chunk: its buffer, the shards of the buffer's
  // regions, its parameters in the buffer's order, which of them have sequence-parallel
  // gradients (partial on each TP rank). Returns its index. The buffer and shards must outlive
  // this.
  size_t add_unit(ParamAndGradBuffer& buffer, std::vector<const ParamShards*> shards,
                  const std::vector<at::Tensor>& params, int chunk, const std::vector<bool>& sequence_parallel = {});
  // A unit whose parameters are gathered on first use in a step and kept until release_params()
  // (the embedding and output layer: the tied weight serves both ends); its gradients are not
  // this class's business.
  size_t add_kept_unit(ParamAndGradBuffer& buffer, std::vector<const ParamShards*> shards);
  // What a module calls around its forward for unit `unit`.
  std::shared_ptr<transformer::ParamGather> hooks(size_t unit);

  // A step begins: every unit's gradient is complete after `accumulations` backward passes.
  void start(int64_t accumulations);
  // Zeroes the gradient shards (and, without parameter sharding, allocates the whole gradients).
  void zero_grad();
  // Reduces what the backward passes left unreduced and waits for every reduce-scatter: each
  // unit's grad_shard() then holds this rank's part of the data-parallel average, its
  // sequence-parallel parts summed over the TP group (whose ranks' shards line up: the buffers
  // have the same layout on every TP rank).
  void finish();
  const at::Tensor& grad_shard(size_t unit, size_t region) const;

  // ZeRO-3: every unit's parameters whole (for checkpoints), and all released (after the update,
  // or after a checkpoint). No-ops without parameter sharding.
  void gather_all();
  void release_params();
  // ZeRO-2 with --overlap-param-gather, after the update wrote each shard into its parameters:
  // launches, in forward order, the parameter all-gather of every unit whose module calls its
  // hooks, which waits for it as its forward begins; finish_param_sync() waits for the rest.
  void start_param_sync();
  void finish_param_sync();
  // Units whose all-gather start_param_sync() launched and nothing has waited for yet.
  int64_t param_syncs_pending() const;
  bool hooked(size_t unit) const;
  // Units (kept ones included) whose hooks() nobody asked for.
  int64_t units_without_hooks() const;
  // Units that start_param_sync() launches: hooked, not kept.
  int64_t units_gathered_under_forward() const;
  // Parameter all-gathers launched so far, for tests.
  int64_t gathers() const;

  struct State;  // shared with the hooks

 private:
  std::shared_ptr<State> state_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;  // keeps the hooked ones alive
};

}  // namespace megatron::distributed
