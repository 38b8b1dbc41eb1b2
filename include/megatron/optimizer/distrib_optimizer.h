// The distributed optimizer's sharding (ZeRO-1, Megatron-LM's DistributedOptimizer): the fp32 main
// parameters of a group of model parameters live in one flat buffer split evenly over the
// data-parallel ranks; each rank keeps and updates only its shard. Gradients arrive by
// reduce-scatter (averaged), updated parameters leave by all-gather.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron::optimizer {

class MEGATRON_API ParamShards {
 public:
  // params: the model parameters of one group, in a fixed order; duplicate[i]: parameter i is
  // replicated over TP ranks and must not count in the norm on this rank.
  ParamShards(std::vector<at::Tensor> params, const std::vector<bool>& duplicate,
              std::shared_ptr<comm::ProcessGroup> data_parallel_group);

  // This rank's fp32 main parameters (a leaf tensor the inner optimizer updates).
  at::Tensor& shard() { return shard_; }
  // Averages the model gradients over DP ranks into shard().grad().
  void reduce_scatter_grads();
  // Sum of squares of this rank's shard gradient, without TP duplicates.
  double grad_sum_of_squares() const;
  // Gathers every rank's updated shard and writes it into the model parameters.
  void all_gather_params();

  // For checkpoints. The model parameters of the group, in order.
  const std::vector<at::Tensor>& params() const { return params_; }
  // Every rank's shard-shaped tensor (like shard()) concatenated in rank order: a flat buffer of
  // the group's elements plus padding (collective over the data-parallel group).
  at::Tensor gather(const at::Tensor& local) const;
  // This rank's piece of the group's flat buffer (`flat` holds the group's elements, unpadded).
  at::Tensor local_piece(const at::Tensor& flat) const;

 private:
  std::vector<at::Tensor> params_;
  std::shared_ptr<comm::ProcessGroup> dp_;
  int64_t numel_ = 0, shard_numel_ = 0;
  at::Tensor shard_;
  at::Tensor norm_mask_;  // 1 where the shard's element counts in the gradient norm
};

}  // namespace megatron::optimizer
