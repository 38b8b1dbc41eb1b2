// LayerNorm and RMSNorm with the residual add fused in front (Megatron-LM's
// megatron/core/fusions/fused_layer_norm.py): one read of the row forward, and backward one
// pass for the input gradient with the weight and bias gradients reduced beside it instead of
// ATen's separate GammaBetaBackward. CUDA kernels where fused_norm_supported(); elsewhere the
// same arithmetic in ATen operators (the reference the GPU tests compare the kernels with).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <utility>

namespace megatron::fusions {

// The kernels take x on a GPU: fp32, bf16 or fp16, the weight in the same dtype, the last dim a
// multiple of 16 bytes and at most 16384 values. Callers use ATen's norms otherwise.
MEGATRON_API bool fused_norm_supported(const at::Tensor& x, const at::Tensor& weight);

// [*, h] -> [*, h]: LayerNorm ((x - mean) * rstd * weight + bias; `bias` may be undefined) or, with
// `rms`, RMSNorm (x * rstd * weight).
MEGATRON_API at::Tensor fused_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                         double eps, bool rms);

// (residual + x, norm(residual + x)): the residual sum, rounded to x's dtype as `residual + x` is,
// and its norm, from one kernel each way.
MEGATRON_API std::pair<at::Tensor, at::Tensor> fused_add_layer_norm(const at::Tensor& residual, const at::Tensor& x,
                                                                    const at::Tensor& weight, const at::Tensor& bias,
                                                                    double eps, bool rms);

}  // namespace megatron::fusions
