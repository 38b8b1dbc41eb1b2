#include "megatron/optimizer/distrib_optimizer.h"

#include <c10/util/Exception.h>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/distributed_data_parallel.h"

namespace megatron::optimizer {

DistributedOptimizer::DistributedOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                                           std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                                           std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups)
    : MegatronOptimizer(ddp, std::move(config), std::move(model_parallel_group), std::move(expert_norm_groups),
                        /*sharded=*/true) {}

void DistributedOptimizer::copy_main_params_to_model_params() {
  ddp_.start_param_sync();
}

void DistributedOptimizer::reduce_norm_over_shards(at::Tensor& sums) const {
  // Every shard of the model once: an expert's shards are over the expert-data-parallel ranks,
  // which with the expert-parallel ones make up the data-parallel group, or (expert TP below TP)
  // the data-parallel and tensor-parallel ones, which the model-parallel sum then covers.
  ddp_.data_parallel_group()->all_reduce(sums);
}

std::unique_ptr<MegatronOptimizer> get_megatron_optimizer(
    const OptimizerConfig& config, distributed::DistributedDataParallel& ddp,
    std::shared_ptr<comm::ProcessGroup> model_parallel_group,
    std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups) {
  if (ddp.sharded())
    return std::make_unique<DistributedOptimizer>(ddp, config, std::move(model_parallel_group),
                                                  std::move(expert_norm_groups));
  return std::make_unique<MegatronOptimizer>(ddp, config, std::move(model_parallel_group),
                                             std::move(expert_norm_groups));
}

}  // namespace megatron::optimizer
