// DistributedOptimizer (Megatron-LM's, ZeRO-1): each data-parallel rank updates only its shard of
// every buffer region (distributed::ParamShards, which the DistributedDataParallel wrapper owns)
// and holds only that shard's optimizer state. The gradient norm sums the shards over the
// data-parallel group before the model-parallel one; the updated shards go back to every rank
// through the wrapper's parameter gather (start_param_sync: now, or under the next forward with
// --overlap-param-gather), and under ZeRO-2/3 the wrapper's FSDP units release what is not needed
// between uses.
#pragma once

#include "megatron/export.h"

#include <memory>

#include "megatron/optimizer/optimizer.h"

namespace megatron::optimizer {

class MEGATRON_API DistributedOptimizer : public MegatronOptimizer {
 public:
  // `ddp` must hold shards (use_distributed_optimizer with more than one data-parallel rank).
  DistributedOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                       std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                       std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups = {});
  bool is_distributed() const override { return true; }

 protected:
  void copy_main_params_to_model_params() override;
  void reduce_norm_over_shards(at::Tensor& sums) const override;
};

}  // namespace megatron::optimizer
