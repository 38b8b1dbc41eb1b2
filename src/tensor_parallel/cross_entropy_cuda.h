// The CUDA kernels of vocab_parallel_cross_entropy (cross_entropy_cuda.cu), for builds with
// MEGATRON_WITH_CUDA: each reads the logits once in their own dtype, with no fp32 copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace megatron::tensor_parallel::detail {

// Per row of `logits` [n, part] (fp32, bf16 or fp16, contiguous): the log-sum-exp, the logit at
// `local_target` [n] int64 (0 where it is -1: the target is on another rank) and, with
// `with_sum`, the sum of the row; fp32 [2 or 3, n].
at::Tensor cross_entropy_stats_cuda(const at::Tensor& logits, const at::Tensor& local_target, bool with_sum);

// The logits' gradient in their dtype: (exp(x - log_sum_exp) - (1 - smoothing) at local_target
// - smoothing / vocab) * grad_loss, per row.
at::Tensor cross_entropy_backward_cuda(const at::Tensor& logits, const at::Tensor& log_sum_exp,
                                       const at::Tensor& local_target, const at::Tensor& grad_loss, double smoothing,
                                       int64_t vocab);

}  // namespace megatron::tensor_parallel::detail
