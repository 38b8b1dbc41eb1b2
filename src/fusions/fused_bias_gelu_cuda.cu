// Bias + GELU over [rows, f]. The grid is (column tiles of 128 packs, chunks of rows): each thread
// keeps its 16-byte pack of the bias (and, backward, of the bias gradient) in registers while it
// walks down its chunk's rows, so the bias gradient is one fp32 partial per chunk and column,
// summed over the chunks by a second kernel in a fixed order.
#include "fused_bias_gelu_cuda.h"

#include "fusion_kernels.cuh"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>

namespace megatron::fusions::detail {
namespace {

constexpr int kThreads = 128;
constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kKappa = 0.044715f;

// GELU and its derivative, as ATen's kernels compute them.
template <bool kTanh>
__device__ float gelu(float z) {
  if constexpr (kTanh) {
    return 0.5f * z * (1.f + tanhf(kSqrt2OverPi * (z + kKappa * z * z * z)));
  } else {
    return 0.5f * z * (1.f + erff(z * kSqrtHalf));
  }
}

template <bool kTanh>
__device__ float gelu_grad(float z) {
  if constexpr (kTanh) {
    const float t = tanhf(kSqrt2OverPi * (z + kKappa * z * z * z));
    return 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kKappa * z * z);
  } else {
    return 0.5f * (1.f + erff(z * kSqrtHalf)) + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  }
}

struct Tiling {
  int64_t tiles, chunks, rows_per_chunk;
};

// Enough blocks to fill the GPU (8 of kThreads per multiprocessor), as few chunks as that allows.
Tiling tiling(int64_t rows, int64_t packs) {
  const int64_t tiles = (packs + kThreads - 1) / kThreads;
  const int64_t target = 8LL * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t wanted = std::clamp<int64_t>(target / tiles, 1, rows);
  const int64_t rows_per_chunk = (rows + wanted - 1) / wanted;
  return {tiles, (rows + rows_per_chunk - 1) / rows_per_chunk, rows_per_chunk};
}

template <typename T, bool kTanh>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_forward_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y, int64_t rows,
                             int64_t rows_per_chunk, int64_t cols) {
  constexpr int N = Pack<T>::N;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p * N >= cols) return;
  Pack<T> b;
  b.load(bias + p * N);
  const int64_t first = blockIdx.y * rows_per_chunk, last = std::min(rows, first + rows_per_chunk);
#pragma unroll 4
  for (int64_t row = first; row < last; ++row) {
    Pack<T> v;
    v.load(x + row * cols + p * N);
#pragma unroll
    for (int k = 0; k < N; ++k) v.v[k] = gelu<kTanh>(v.v[k] + b.v[k]);
    v.store(y + row * cols + p * N);
  }
}

template <typename T, bool kTanh>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ bias,
                              T* __restrict__ dx, float* __restrict__ dbias_part, int64_t rows, int64_t rows_per_chunk,
                              int64_t cols) {
  constexpr int N = Pack<T>::N;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p * N >= cols) return;
  Pack<T> b;
  b.load(bias + p * N);
  float acc[N] = {};
  const int64_t first = blockIdx.y * rows_per_chunk, last = std::min(rows, first + rows_per_chunk);
#pragma unroll 4
  for (int64_t row = first; row < last; ++row) {
    Pack<T> g, v;
    g.load(dy + row * cols + p * N);
    v.load(x + row * cols + p * N);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      // The bias gradient sums the rounded values, which the GEMMs after this read.
      g.v[k] = static_cast<float>(static_cast<T>(g.v[k] * gelu_grad<kTanh>(v.v[k] + b.v[k])));
      acc[k] += g.v[k];
    }
    g.store(dx + row * cols + p * N);
  }
  float* out = dbias_part + static_cast<int64_t>(blockIdx.y) * cols + p * N;
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = acc[k];
}

template <typename F>
void with_tanh(bool tanh, F&& f) {
  if (tanh) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

}  // namespace

bool bias_gelu_cuda_supported(const at::Tensor& x, const at::Tensor& bias) {
  return x.is_cuda() && x.dim() >= 1 && bias.dim() == 1 && bias.scalar_type() == x.scalar_type() &&
         bias.size(0) == x.size(-1) && packs_fit(x.scalar_type(), x.size(-1));
}

at::Tensor bias_gelu_forward_cuda(const at::Tensor& x_in, const at::Tensor& bias_in, bool tanh) {
  TORCH_CHECK(bias_gelu_cuda_supported(x_in, bias_in), "[bias_gelu] unsupported input ", x_in.sizes(), " ",
              x_in.scalar_type(), " with bias ", bias_in.sizes(), " ", bias_in.scalar_type());
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = aligned(x_in), bias = aligned(bias_in);
  at::Tensor y = at::empty_like(x);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  if (rows == 0) return y;
  const Tiling t = tiling(rows, cols / (16 / x.element_size()));
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), "bias_gelu", [&](auto tag) {
    using scalar_t = decltype(tag);
    with_tanh(tanh, [&](auto k) {
      bias_gelu_forward_kernel<scalar_t, decltype(k)::value><<<dim3(t.tiles, t.chunks), kThreads, 0, stream>>>(
          x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), rows, t.rows_per_chunk, cols);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                          const at::Tensor& bias_in, bool tanh) {
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = aligned(x_in), bias = aligned(bias_in), dy = aligned(dy_in.to(x.scalar_type()));
  at::Tensor dx = at::empty_like(x), dbias = at::empty({x.size(-1)}, bias.options());
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  if (rows == 0) return {dx, dbias.zero_()};
  const Tiling t = tiling(rows, cols / (16 / x.element_size()));
  at::Tensor part = at::empty({1, t.chunks, cols}, x.options().dtype(at::kFloat));
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), "bias_gelu", [&](auto tag) {
    using scalar_t = decltype(tag);
    with_tanh(tanh, [&](auto k) {
      bias_gelu_backward_kernel<scalar_t, decltype(k)::value><<<dim3(t.tiles, t.chunks), kThreads, 0, stream>>>(
          dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(),
          part.data_ptr<float>(), rows, t.rows_per_chunk, cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch_column_sum<scalar_t>(part, dbias.data_ptr<scalar_t>(), nullptr, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dx, dbias};
}

}  // namespace megatron::fusions::detail
