// The CUDA kernels of bias_gelu (fused_bias_gelu_cuda.cu), for builds with MEGATRON_WITH_CUDA.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace megatron::fusions::detail {

bool bias_gelu_cuda_supported(const at::Tensor& x, const at::Tensor& bias);

// gelu(x + bias), x [rows, f] contiguous; the sum is held in fp32, not rounded to x's dtype.
at::Tensor bias_gelu_forward_cuda(const at::Tensor& x, const at::Tensor& bias, bool tanh);

// (dx, dbias): dx = dy * gelu'(x + bias) in x's dtype, dbias its sum over rows (of the rounded
// values, as the GEMMs read them), reduced per block of rows and then over the blocks.
std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor& dy, const at::Tensor& x,
                                                          const at::Tensor& bias, bool tanh);

}  // namespace megatron::fusions::detail
