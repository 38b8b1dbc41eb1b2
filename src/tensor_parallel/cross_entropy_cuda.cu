// One block per row of logits, each thread reading 16 bytes at a time (8 bf16 / fp16 values, 4
// fp32) with two loads in flight. Forward: an online softmax (running maximum and rescaled sum,
// as fused cross-entropy kernels do), one rescale per 16 bytes, in one read of the row; backward:
// the softmax recomputed from the saved log-sum-exp, written straight into the gradient's dtype.
// Rows whose length or address is not a multiple of 16 bytes take the same code one value at a time.
#include "cross_entropy_cuda.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace megatron::tensor_parallel::detail {
namespace {

constexpr int kThreads = 512;
constexpr float kLog2e = 1.4426950408889634f;

// A running maximum and the sum of exp(x - max) over the values seen.
struct MaxSum {
  float max, sum;
};

__device__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.max == -INFINITY) return b;
  if (b.max == -INFINITY) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * exp2f((a.max - m) * kLog2e) + b.sum * exp2f((b.max - m) * kLog2e)};
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

// kVec consecutive values of T: 16 bytes (one vector load), or 1.
template <typename T, int kVec>
struct Pack {
  static_assert(kVec == 1 || kVec * sizeof(T) == 16, "a pack is one value or 16 bytes");
  using Raw = std::conditional_t<kVec == 1, T, uint4>;
  float v[kVec];

  // Streaming 16-byte loads and stores: nothing reads the row again soon (the backward pass
  // comes after the whole model's).
  __device__ void load(const T* p) {
    Raw raw;
    if constexpr (kVec == 1) {
      raw = *p;
    } else {
      raw = __ldcs(reinterpret_cast<const uint4*>(p));
    }
    const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = static_cast<float>(x[k]);
  }
  __device__ void store(T* p) const {
    Raw raw;
    T* x = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = static_cast<T>(v[k]);
    if constexpr (kVec == 1) {
      *p = raw;
    } else {
      __stcs(reinterpret_cast<uint4*>(p), raw);
    }
  }
};

// Folds one pack into the running (max, sum): one rescale per pack, not per value.
template <int kVec>
__device__ void accumulate(const float (&v)[kVec], MaxSum& ms, float& total) {
  float m = v[0];
#pragma unroll
  for (int k = 0; k < kVec; ++k) total += v[k], m = fmaxf(m, v[k]);
  if (m > ms.max) {
    ms.sum *= exp2f((ms.max - m) * kLog2e);  // 0 while the running max is -inf
    ms.max = m;
  }
  if (ms.max == -INFINITY) return;  // every value so far is -inf
#pragma unroll
  for (int k = 0; k < kVec; ++k) ms.sum += exp2f((v[k] - ms.max) * kLog2e);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    stats_kernel(const T* __restrict__ logits, const int64_t* __restrict__ target, float* __restrict__ out, int64_t n,
                 int64_t part, bool with_sum) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * part;
  const int64_t packs = part / kVec;
  MaxSum ms{-INFINITY, 0.f};
  float total = 0.f;  // also carries a NaN logit into the result
  const int64_t stride = blockDim.x;
  int64_t j = threadIdx.x;
  for (; j + stride < packs; j += 2 * stride) {  // two loads in flight
    Pack<T, kVec> a, b;
    a.load(x + j * kVec);
    b.load(x + (j + stride) * kVec);
    accumulate(a.v, ms, total);
    accumulate(b.v, ms, total);
  }
  if (j < packs) {
    Pack<T, kVec> a;
    a.load(x + j * kVec);
    accumulate(a.v, ms, total);
  }
  block_reduce(ms, total);
  if (threadIdx.x != 0) return;
  const int64_t t = target[row];
  out[row] = isnan(total) ? NAN : ms.max + logf(ms.sum);
  out[n + row] = t >= 0 ? static_cast<float>(x[t]) : 0.f;
  if (with_sum) out[2 * n + row] = total;
}

// grad = (exp(x - lse) - uniform - on_target at the target) * grad_loss, one pack at a time.
template <typename T, int kVec>
__device__ void gradient_pack(const T* x, T* g, int64_t first, int64_t t, float lse, float scale, float on_target,
                              float uniform) {
  Pack<T, kVec> p;
  p.load(x + first);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const float softmax = exp2f((p.v[k] - lse) * kLog2e) - uniform - (first + k == t ? on_target : 0.f);
    p.v[k] = softmax * scale;
  }
  p.store(g + first);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ logits, const float* __restrict__ log_sum_exp,
                    const int64_t* __restrict__ target, const float* __restrict__ grad_loss, T* __restrict__ grad,
                    int64_t part, float on_target, float uniform) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * part;
  T* g = grad + row * part;
  const float lse = log_sum_exp[row], scale = grad_loss[row];
  const int64_t t = target[row];
  const int64_t packs = part / kVec, stride = blockDim.x;
  int64_t j = threadIdx.x;
  for (; j + stride < packs; j += 2 * stride) {
    gradient_pack<T, kVec>(x, g, j * kVec, t, lse, scale, on_target, uniform);
    gradient_pack<T, kVec>(x, g, (j + stride) * kVec, t, lse, scale, on_target, uniform);
  }
  if (j < packs) gradient_pack<T, kVec>(x, g, j * kVec, t, lse, scale, on_target, uniform);
}

// Whether rows of `part` values of T starting at `p` can be read 16 bytes at a time.
template <typename T>
bool vectorizable(const T* p, int64_t part) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (part * static_cast<int64_t>(sizeof(T))) % 16 == 0;
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
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "cross_entropy_stats_cuda", [&] {
    const scalar_t* x = logits.data_ptr<scalar_t>();
    if (vectorizable(x, part)) {
      stats_kernel<scalar_t, 16 / sizeof(scalar_t)>
          <<<n, kThreads, 0, stream>>>(x, target.data_ptr<int64_t>(), out.data_ptr<float>(), n, part, with_sum);
    } else {
      stats_kernel<scalar_t, 1>
          <<<n, kThreads, 0, stream>>>(x, target.data_ptr<int64_t>(), out.data_ptr<float>(), n, part, with_sum);
    }
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
  const float on_target = static_cast<float>(1.0 - smoothing), uniform = static_cast<float>(smoothing / vocab);
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "cross_entropy_backward_cuda", [&] {
    const scalar_t* x = logits.data_ptr<scalar_t>();
    scalar_t* g = grad.data_ptr<scalar_t>();
    // empty_like of a contiguous tensor is allocated 16-byte aligned by the caching allocator, as logits are.
    if (vectorizable(x, part) && vectorizable(static_cast<const scalar_t*>(g), part)) {
      backward_kernel<scalar_t, 16 / sizeof(scalar_t)><<<n, kThreads, 0, stream>>>(
          x, lse.data_ptr<float>(), target.data_ptr<int64_t>(), scale.data_ptr<float>(), g, part, on_target, uniform);
    } else {
      backward_kernel<scalar_t, 1><<<n, kThreads, 0, stream>>>(x, lse.data_ptr<float>(), target.data_ptr<int64_t>(),
                                                               scale.data_ptr<float>(), g, part, on_target, uniform);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad;
}

}  // namespace megatron::tensor_parallel::detail
