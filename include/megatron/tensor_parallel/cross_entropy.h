// Cross entropy over vocab-parallel logits (Megatron's vocab_parallel_cross_entropy): each TP rank
// holds logits for a contiguous slice of the vocabulary; max, target logit and sum of exponentials
// are all-reduced, so the full logits are never gathered.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include "megatron/tensor_parallel/mappings.h"

namespace megatron::tensor_parallel {

// vocab_parallel_logits: [..., V / tp] (any float dtype; computed in fp32); target: [...] int64
// ids into the full (padded) vocabulary. Returns the per-token loss [...] in fp32.
// label_smoothing in [0, 1): the target gets 1 - a·K/(K-1) of the weight and every class
// a·K/(K-1)/K (K = full vocabulary), i.e. a/(K-1) on each wrong class.
MEGATRON_API at::Tensor vocab_parallel_cross_entropy(const at::Tensor& vocab_parallel_logits, const at::Tensor& target,
                                                     const GroupPtr& group, double label_smoothing = 0.0);

}  // namespace megatron::tensor_parallel
