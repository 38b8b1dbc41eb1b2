// The CUDA kernels of fused_layer_norm (fused_layer_norm_cuda.cu), for builds with
// MEGATRON_WITH_CUDA. Rows are the last dimension; statistics and sums are fp32.
#pragma once

#include <ATen/core/Tensor.h>

namespace megatron::fusions::detail {

// Whether the kernels take rows of `hidden` values of `x`'s dtype with `weight` (same dtype):
// fp32, bf16 or fp16, rows a multiple of 16 bytes, at most 16384 values.
bool norm_cuda_supported(const at::Tensor& x, const at::Tensor& weight);

struct NormForward {
  at::Tensor y;     // [rows, h], x's dtype
  at::Tensor sum;   // residual + x, rounded to x's dtype; undefined without a residual
  at::Tensor mean;  // [rows] fp32; undefined for RMSNorm
  at::Tensor rstd;  // [rows] fp32
};

// y = (x' - mean) * rstd * weight + bias (LayerNorm, `bias` may be undefined) or x' * rstd * weight
// (RMSNorm, `rms`), with x' = residual + x when `residual` is defined. x, residual: [rows, h]
// contiguous.
NormForward norm_forward_cuda(const at::Tensor& residual, const at::Tensor& x, const at::Tensor& weight,
                              const at::Tensor& bias, double eps, bool rms);

struct NormBackward {
  at::Tensor dx;       // [rows, h], plus grad_sum when that is defined
  at::Tensor dweight;  // [h], weight's dtype
  at::Tensor dbias;    // [h]; undefined when with_bias is false
};

// The gradients of norm_forward_cuda from dy (and grad_sum, the gradient of the residual sum, added
// to dx), given its input x' and statistics. The weight and bias gradients are reduced in two
// deterministic passes: per block of rows, then over the blocks.
NormBackward norm_backward_cuda(const at::Tensor& dy, const at::Tensor& grad_sum, const at::Tensor& x,
                                const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& weight,
                                bool with_bias, bool rms);

}  // namespace megatron::fusions::detail
