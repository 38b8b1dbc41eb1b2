// Megatron-LM's gradient buckets: a ParamAndGradBuffer's fp32 gradients cut into contiguous
// ranges of about bucket_numel elements at parameter boundaries, from the end of each region
// (the last layers' gradients are complete first), each averaged over the data-parallel group
// by one collective. With overlap (--overlap-grad-reduce), a hook on each parameter's gradient
// accumulator counts the step's backward passes; once every gradient of a bucket has had its
// last one, the bucket's all-reduce is launched and runs under the rest of the backward pass.
// Both ways issue the same asynchronous collective on the same ranges, so the results agree
// bit for bit. With the distributed optimizer (shard_numel given) a bucket is not all-reduced but
// reduced, piece by piece, to the rank whose optimizer shard holds each piece: once all buckets
// are done, each rank's shard of the buffer holds the average, as a reduce-scatter would leave it.
// The same buckets carry the updated parameters back (--overlap-param-gather): each shard's
// piece broadcast from its owner, launched after the step in forward order, and waited for by
// the forward that first reads the bucket's parameters.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/param_and_grad_buffer.h"

namespace torch::autograd {
struct Node;
}

namespace megatron::distributed {

class MEGATRON_API GradBuckets {
 public:
  // A range reduced to one rank (data-parallel group rank; -1: all-reduced).
  struct Piece {
    int64_t offset = 0, numel = 0;  // in the buffer
    int owner = -1;
  };
  struct Bucket {
    int64_t offset = 0, numel = 0;  // in the buffer
    std::vector<size_t> params;     // indices into the buffer's parameters
    std::vector<Piece> pieces;      // the collectives that average it
    std::vector<Piece> shards;      // with shard_numel: the range cut where one rank's shard ends
  };

  // params: the buffer's parameters, in the order its constructor took them. shard_numel: per
  // region, the elements of each data-parallel rank's contiguous shard (the distributed
  // optimizer's); empty: buckets are all-reduced. all_reduced[i]: parameter i's bucket is
  // all-reduced even so (its gradient is summed across other ranks afterwards).
  // reduce_dtype: the type the collectives carry (the fp32 gradients are copied to it and back).
  GradBuckets(const ParamAndGradBuffer& buffer, const std::vector<at::Tensor>& params, int64_t bucket_numel,
              const std::vector<int64_t>& shard_numel = {}, const std::vector<bool>& all_reduced = {},
              at::ScalarType reduce_dtype = at::kFloat);
  ~GradBuckets();

  const std::vector<Bucket>& buckets() const;
  // Hooks the parameters' gradient accumulators: from then on start() arms the overlap.
  void enable_overlap();
  // A step begins: each gradient is complete after `accumulations` backward passes.
  void start(std::shared_ptr<comm::ProcessGroup> group, int64_t accumulations);
  // While paused (DistributedDataParallel::no_sync()), a bucket whose gradients are complete is
  // not launched; resuming launches those, in the order they completed.
  void set_paused(bool paused);
  // Launches the buckets not launched yet (all of them without overlap), in order, then waits
  // for every one: the gradients are then the data-parallel average.
  void finish(const std::shared_ptr<comm::ProcessGroup>& group);
  // Buckets launched since start().
  int64_t launched() const;
  // Whether the bucket holding parameter `param` was launched since start().
  bool launched_with(size_t param) const;

  // The distributed optimizer's parameter gather, overlapped: launches every bucket's broadcasts
  // (each shard piece from its owner, which has written its updated shard into the buffer), in
  // the order the parameters were given, so that the first layers' arrive first.
  void start_param_sync(const std::shared_ptr<comm::ProcessGroup>& group);
  // Waits for every pending broadcast.
  void finish_param_sync();
  // What a module calls before its forward: waits for the pending broadcasts of the buckets
  // holding `params` (a no-op once these buckets are gone).
  std::function<void()> param_sync_waiter(const std::vector<size_t>& params) const;
  // Buckets whose broadcasts were launched and not waited for yet.
  int64_t param_syncs_pending() const;

  struct State;  // shared with the accumulator hooks

 private:
  std::shared_ptr<State> state_;  // shared with the hooks, which outlive nothing they point to
  std::vector<at::Tensor> params_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;  // keeps the hooked ones alive
};

}  // namespace megatron::distributed
