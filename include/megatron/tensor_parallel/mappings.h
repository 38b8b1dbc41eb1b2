// Autograd-aware communication at the boundaries of tensor-parallel regions (Megatron's
// mappings.py). Each is a torch::autograd::Function whose backward is the conjugate collective.
// A null group or a group of one rank makes every mapping the identity.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron::tensor_parallel {

using GroupPtr = std::shared_ptr<comm::ProcessGroup>;

inline int group_size(const GroupPtr& g) {
  return g ? g->size() : 1;
}
inline int group_rank(const GroupPtr& g) {
  return g ? g->rank() : 0;
}

// forward: identity;            backward: all-reduce.
MEGATRON_API at::Tensor copy_to_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group);
// forward: all-reduce;          backward: identity.
MEGATRON_API at::Tensor reduce_from_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group);
// forward: keep this rank's slice of the last dim;  backward: all-gather the last dim.
MEGATRON_API at::Tensor scatter_to_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group);
// forward: all-gather the last dim;  backward: keep this rank's slice.
MEGATRON_API at::Tensor gather_from_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group);

// Sequence parallelism (dim 0 is the sequence, [s, b, h]).
// forward: keep this rank's slice of dim 0;  backward: all-gather dim 0.
MEGATRON_API at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group);
// forward: all-gather dim 0;  backward: reduce-scatter dim 0 when the consumer is
// tensor-parallel (tensor_parallel_output_grad), else keep this rank's slice.
MEGATRON_API at::Tensor gather_from_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group,
                                                             bool tensor_parallel_output_grad = true);
// forward: reduce-scatter dim 0;  backward: all-gather dim 0.
MEGATRON_API at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group);

// Expert parallelism (Megatron-Core's tensor_parallel.all_to_all): input's rows go in runs,
// input_splits[i] to group rank i, and output_splits[j] rows arrive from rank j, in rank order;
// the backward sends the gradient rows back the same way. Empty lists: dim 0 split evenly.
MEGATRON_API at::Tensor all_to_all(const GroupPtr& group, const at::Tensor& input,
                                   const std::vector<int64_t>& output_splits = {},
                                   const std::vector<int64_t>& input_splits = {});

// Plain (non-autograd) helpers, also used by tests: all-gather along `dim`, slice along `dim`.
MEGATRON_API at::Tensor all_gather_along_dim(const at::Tensor& input, const GroupPtr& group, int64_t dim);
MEGATRON_API at::Tensor split_along_dim(const at::Tensor& input, const GroupPtr& group, int64_t dim);

}  // namespace megatron::tensor_parallel
