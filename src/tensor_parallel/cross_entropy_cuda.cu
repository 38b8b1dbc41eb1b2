// One block per row of logits. Forward: an online softmax (running maximum and rescaled sum, as
// fused cross-entropy kernels do) over the row in one read, reduced across the block; backward:
// the softmax recomputed from the saved log-sum-exp, written straight into the gradient's dtype.
#include "cross_entropy_cuda.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

namespace megatron::tensor_parallel::detail {
namespace {

constexpr int kThreads = 512;

// A running maximum and the sum of exp(x - max) over the values seen.
struct MaxSum {
  float max, sum;
};

__device__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.max == -INFINITY) return b;
  if (b.max == -INFINITY) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// (max, sum) and the plain row sum, reduced over the block; thread 0 holds the result.
__device__ void block_reduce(MaxSum& ms, float& total) {
  __shared__ float maxes[32], sums[32], totals[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    ms = combine(ms, {__shfl_xor_sync(0xffffffff, ms.max, offset), __shfl_xor_sync(0xffffffff, ms.sum, offset)});
    total += __shfl_xor_sync(0xffffffff, total, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) maxes[warp] = ms.max, sums[warp] = ms.sum, totals[warp] = total;
  __syncthreads();
  if (warp != 0) return;
  const int warps = blockDim.x / 32;
  ms = lane < warps ? MaxSum{maxes[lane], sums[lane]} : MaxSum{-INFINITY, 0.f};
  total = lane < warps ? totals[lane] : 0.f;
  for (int offset = 16; offset > 0; offset >>= 1) {
    ms = combine(ms, {__shfl_xor_sync(0xffffffff, ms.max, offset), __shfl_xor_sync(0xffffffff, ms.sum, offset)});
    total += __shfl_xor_sync(0xffffffff, total, offset);
  }
}

template <typename T>
__global__ void stats_kernel(const T* __restrict__ logits, const int64_t* __restrict__ target, float* __restrict__ out,
                             int64_t n, int64_t part, bool with_sum) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * part;
  MaxSum ms{-INFINITY, 0.f};
  float total = 0.f;  // also carries a NaN logit into the result
  for (int64_t j = threadIdx.x; j < part; j += blockDim.x) {
    const float v = static_cast<float>(x[j]);
    total += v;
    if (v > ms.max) {
      ms.sum = ms.sum * expf(ms.max - v) + 1.f;
      ms.max = v;
    } else if (v > -INFINITY) {
      ms.sum += expf(v - ms.max);
    }
  }
  block_reduce(ms, total);
  if (threadIdx.x != 0) return;
  const int64_t t = target[row];
  out[row] = isnan(total) ? NAN : ms.max + logf(ms.sum);
  out[n + row] = t >= 0 ? static_cast<float>(x[t]) : 0.f;
  if (with_sum) out[2 * n + row] = total;
}

template <typename T>
__global__ void backward_kernel(const T* __restrict__ logits, const float* __restrict__ log_sum_exp,
                                const int64_t* __restrict__ target, const float* __restrict__ grad_loss,
                                T* __restrict__ grad, int64_t part, float on_target, float uniform) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * part;
  T* g = grad + row * part;
  const float lse = log_sum_exp[row], scale = grad_loss[row];
  const int64_t t = target[row];
  for (int64_t j = threadIdx.x; j < part; j += blockDim.x) {
    const float p = expf(static_cast<float>(x[j]) - lse) - uniform - (j == t ? on_target : 0.f);
    g[j] = static_cast<T>(p * scale);
  }
}

void check_inputs(const at::Tensor& logits, const at::Tensor& local_target) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && logits.is_contiguous(),
              "[cross_entropy_cuda] logits must be a contiguous 2-D CUDA tensor");
  TORCH_CHECK(local_target.scalar_type() == at::kLong && local_target.numel() == logits.size(0),
              "[cross_entropy_cuda] one int64 target per row expected");
}

}  // namespace

at::Tensor cross_entropy_stats_cuda(const at::Tensor& logits, const at::Tensor& local_target, bool with_sum) {
  check_inputs(logits, local_target);
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t n = logits.size(0), part = logits.size(1);
  at::Tensor out = at::empty({with_sum ? 3 : 2, n}, logits.options().dtype(at::kFloat));
  if (n == 0) return out;
  const at::Tensor target = local_target.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "cross_entropy_stats_cuda", [&] {
    stats_kernel<scalar_t><<<n, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        logits.data_ptr<scalar_t>(), target.data_ptr<int64_t>(), out.data_ptr<float>(), n, part, with_sum);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor cross_entropy_backward_cuda(const at::Tensor& logits, const at::Tensor& log_sum_exp,
                                       const at::Tensor& local_target, const at::Tensor& grad_loss, double smoothing,
                                       int64_t vocab) {
  check_inputs(logits, local_target);
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t n = logits.size(0), part = logits.size(1);
  at::Tensor grad = at::empty_like(logits);
  if (n == 0) return grad;
  const at::Tensor lse = log_sum_exp.to(at::kFloat).contiguous(), target = local_target.contiguous();
  const at::Tensor scale = grad_loss.to(at::kFloat).reshape({n}).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "cross_entropy_backward_cuda", [&] {
    backward_kernel<scalar_t><<<n, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        logits.data_ptr<scalar_t>(), lse.data_ptr<float>(), target.data_ptr<int64_t>(), scale.data_ptr<float>(),
        grad.data_ptr<scalar_t>(), part, static_cast<float>(1.0 - smoothing), static_cast<float>(smoothing / vocab));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad;
}

}  // namespace megatron::tensor_parallel::detail
