// The distributed optimizer's sharding (ZeRO-1, Megatron-LM's DistributedOptimizer) of one
// region of a ParamAndGradBuffer: the region (padded to a multiple of the data-parallel size) is
// split evenly over the data-parallel ranks, and each rank keeps and updates the fp32 main
// parameters of its shard only. Gradients arrive by reduce-scatter of the region (averaged),
// updated parameters leave by all-gather into it.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/param_and_grad_buffer.h"

namespace megatron::optimizer {

class MEGATRON_API ParamShards {
 public:
  // The buffer must outlive this.
  ParamShards(const distributed::ParamAndGradBuffer& buffer, size_t region,
              std::shared_ptr<comm::ProcessGroup> data_parallel_group);

  // This rank's fp32 main parameters: a view of the parameters themselves for an fp32 buffer, a
  // copy for a bf16/fp16 one.
  const at::Tensor& main() const { return main_; }
  // This rank's shard of the region's gradients, averaged over the data-parallel ranks.
  at::Tensor reduce_scatter_grads() const;
  // The same when the gradient buckets have already reduced each piece to its shard's rank
  // (--overlap-grad-reduce): a view of the buffer, no collective.
  at::Tensor reduced_grads() const;
  int64_t shard_numel() const { return shard_numel_; }
  // The parts of a shard gradient that count in the norm.
  std::vector<at::Tensor> norm_grads(const at::Tensor& shard_grad) const;
  // Writes every rank's updated shard into the model parameters.
  void all_gather_params() const;

  // For checkpoints. Every rank's shard-shaped tensor concatenated in rank order: the region,
  // padded (collective over the data-parallel group).
  at::Tensor gather(const at::Tensor& local) const;
  // This rank's piece of the region's elements (`flat`, unpadded).
  at::Tensor local_piece(const at::Tensor& flat) const;

 private:
  const distributed::ParamAndGradBuffer& buffer_;
  size_t region_;
  std::shared_ptr<comm::ProcessGroup> dp_;
  int64_t shard_offset_ = 0, shard_numel_ = 0;
  at::Tensor main_;
};

}  // namespace megatron::optimizer
