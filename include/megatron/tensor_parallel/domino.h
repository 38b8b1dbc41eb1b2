// Domino's building blocks (DeepSpeed-Domino): a tensor-parallel all-reduce issued where its input
// is ready and waited only where its result is needed, so that the other half-batch computes
// meanwhile. A PendingReduce is one call site's handle; it travels through the autograd context,
// never through a global table.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "megatron/comm/process_group.h"
#include "megatron/tensor_parallel/mappings.h"

namespace megatron::tensor_parallel {

struct MEGATRON_API PendingReduce {
  comm::WorkHandle work;  // null: nothing in flight
  // Waits for the collective (a stream wait for NCCL) and forgets it.
  void wait();
};
using PendingPtr = std::shared_ptr<PendingReduce>;

// forward: launches the all-reduce of `partial` over `group` in place and records it in
// `pending`; the result is valid only after wait_for_reduce. backward: identity.
MEGATRON_API at::Tensor start_reduce_from_tensor_model_parallel_region(const at::Tensor& partial, const GroupPtr& group,
                                                                       const PendingPtr& pending);
// forward: waits for `pending`, identity otherwise. backward: identity.
MEGATRON_API at::Tensor wait_for_reduce(const at::Tensor& x, const PendingPtr& pending);
// forward: identity. backward: waits for `pending` (the input-gradient all-reduce a
// ColumnParallelLinear given the same handle launched in its backward) before passing the
// gradient on, to the LayerNorm backward that needs it.
MEGATRON_API at::Tensor wait_for_grad_reduce_in_backward(const at::Tensor& x, const PendingPtr& pending);

// Domino's backward order: autograd runs the ready node created last first, so a half's
// input-gradient wait would follow its own weight-gradient GEMM. A chain renumbers the waits in
// forward order, so each runs after the other half's sub-block backward, which hides its all-reduce.
class MEGATRON_API GradWaitChain {
 public:
  at::Tensor wait_for_grad_reduce_in_backward(const at::Tensor& x, const PendingPtr& pending);

 private:
  std::optional<uint64_t> reserved_;
};

}  // namespace megatron::tensor_parallel
