// What pretrain() builds to update a model, over given parameters: a DistributedDataParallel
// (its parameter groups by Megatron-LM's rules) and the optimizer get_megatron_optimizer puts
// over it.
#pragma once

#include <memory>
#include <vector>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"

namespace megatron::testing {

struct WrappedOptimizer {
  std::unique_ptr<distributed::DistributedDataParallel> ddp;  // before the optimizer, which updates its buffers
  std::unique_ptr<optimizer::MegatronOptimizer> optimizer;
};

inline WrappedOptimizer wrap(std::vector<distributed::ModelParam> params, const optimizer::OptimizerConfig& config,
                             const distributed::DistributedDataParallelConfig& ddp_config = {},
                             std::shared_ptr<comm::ProcessGroup> data_parallel_group = nullptr,
                             std::shared_ptr<comm::ProcessGroup> model_parallel_group = nullptr,
                             std::shared_ptr<comm::ProcessGroup> tensor_parallel_group = nullptr) {
  for (auto& p : params) p.param_group = optimizer::param_group_of(p.name, p.param.dim(), config.decoupled_lr);
  WrappedOptimizer w;
  w.ddp = std::make_unique<distributed::DistributedDataParallel>(
      std::move(params), ddp_config, std::move(data_parallel_group), std::move(tensor_parallel_group));
  w.optimizer = optimizer::get_megatron_optimizer(config, *w.ddp, std::move(model_parallel_group));
  return w;
}

}  // namespace megatron::testing
