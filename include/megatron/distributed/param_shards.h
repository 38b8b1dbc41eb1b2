// The sharding of one region of a ParamAndGradBuffer over the data-parallel ranks (ZeRO-1,
// Megatron-LM's DistributedOptimizer; and Megatron-FSDP's units): the region (padded to a multiple
// of the data-parallel size) is split evenly, and each rank holds the fp32 main parameters of its
// shard only, which optimizer::DistributedOptimizer updates. Gradients arrive by reduce-scatter of
// the region (averaged), updated parameters leave by all-gather into it. DistributedDataParallel
// owns the shards: the FSDP units gather parameters from them.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/param_and_grad_buffer.h"

namespace megatron::distributed {

class MEGATRON_API ParamShards {
 public:
  // The buffer must outlive this. own_main: the main parameters are a copy even for an fp32
  // buffer (ZeRO-3, whose buffer releases its parameters between uses).
  ParamShards(const ParamAndGradBuffer& buffer, size_t region, std::shared_ptr<comm::ProcessGroup> data_parallel_group,
              bool own_main = false);

  // This rank's fp32 main parameters: a view of the parameters themselves for an fp32 buffer, a
  // copy for a bf16/fp16 one.
  const at::Tensor& main() const { return main_; }
  // Launches the reduce-scatter of the region's gradients into `shard` (shard_numel() fp32
  // elements): this rank's part of their data-parallel average.
  comm::WorkHandle reduce_scatter_grads_async(at::Tensor& shard) const;
  // This rank's shard of the gradients once the buckets have reduced each piece to its shard's
  // rank: a view of the buffer, no collective.
  at::Tensor reduced_grads() const;
  int64_t shard_numel() const { return shard_numel_; }
  // The parts of a shard gradient that count in the norm.
  std::vector<at::Tensor> norm_grads(const at::Tensor& shard_grad) const;
  // The parts of (offset, numel) ranges of the region that fall in this rank's shard, as
  // (offset, numel) in the shard.
  std::vector<std::pair<int64_t, int64_t>> in_shard(const std::vector<std::pair<int64_t, int64_t>>& ranges) const;
  // Writes every rank's updated shard into the model parameters.
  void all_gather_params() const;
  // Writes this rank's updated shard into its part of the model parameters only (for a gather
  // that others launch: GradBuckets::start_param_sync).
  void write_main_to_params() const;
  // The same, launched; `sent` keeps the outgoing shard alive until the work is waited for.
  comm::WorkHandle all_gather_params_async(at::Tensor& sent) const;
  // Copies this rank's part of the (allocated) model parameters into the main parameters.
  void reload_main() const;

  // For checkpoints. Every rank's shard-shaped tensor concatenated in rank order: the region,
  // padded (collective over the data-parallel group).
  at::Tensor gather(const at::Tensor& local) const;
  // This rank's piece of the region's elements (`flat`, unpadded).
  at::Tensor local_piece(const at::Tensor& flat) const;

 private:
  const ParamAndGradBuffer& buffer_;
  size_t region_;
  std::shared_ptr<comm::ProcessGroup> dp_;
  int64_t shard_offset_ = 0, shard_numel_ = 0;
  at::Tensor main_;
};

}  // namespace megatron::distributed
