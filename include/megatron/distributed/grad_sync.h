// Gradient synchronisation across data-parallel ranks (the reduction half of Megatron-LM's
// DistributedDataParallel): gradients are packed into flat buckets per dtype and averaged with
// one all-reduce per bucket.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron::distributed {

// Averages every tensor in `grads` (in place) over `group`. Buckets hold at most bucket_numel
// elements (a larger tensor gets a bucket of its own).
MEGATRON_API void allreduce_gradients(const std::vector<at::Tensor>& grads, comm::ProcessGroup& group,
                                      int64_t bucket_numel = 40'000'000);

}  // namespace megatron::distributed
