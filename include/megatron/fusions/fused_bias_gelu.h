// The MLP's bias add and GELU in one kernel, and in backward GELU's derivative with the bias
// gradient summed beside it (Megatron-LM's megatron/core/fusions/fused_bias_gelu.py, though the
// GELU is the one the model asks for: exact, or tanh-approximated). CUDA kernels where
// fused_bias_gelu_supported(); elsewhere ATen's gelu(x + bias), the GPU tests' reference.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

namespace megatron::fusions {

// x [*, f] on a GPU, fp32, bf16 or fp16, bias [f] in the same dtype, f a multiple of 16 bytes.
MEGATRON_API bool fused_bias_gelu_supported(const at::Tensor& x, const at::Tensor& bias);

// gelu(x + bias) over the last dim; `tanh`: the tanh approximation.
MEGATRON_API at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh);

}  // namespace megatron::fusions
