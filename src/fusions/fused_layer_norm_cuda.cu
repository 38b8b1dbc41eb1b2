// LayerNorm and RMSNorm over rows of up to 16384 values, with the residual add fused in front.
// Each thread holds up to four 16-byte packs of a row in registers, so a row is read once.
// Forward: one block per row. Backward: a grid of as many blocks as fit on the GPU at once, each
// looping over rows and keeping its columns' weight and bias gradients in registers; a second
// kernel sums those per-block partials, so the result does not depend on timing (no atomics).
#include "fused_layer_norm_cuda.h"

#include "fusion_kernels.cuh"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>

namespace megatron::fusions::detail {
namespace {

constexpr int kMaxThreads = 512;  // per row
constexpr int kMaxPacks = 4;      // per thread

// Sums each of v[0..kN) over the block; every thread gets the sums. `shared` holds 32 * kN floats.
template <int kN>
__device__ void block_sum(float (&v)[kN], float* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] += __shfl_xor_sync(0xffffffff, v[k], offset);
  }
  const int warps = blockDim.x / 32;
  if (warps == 1) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the previous call's readers are done with `shared`
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < kN; ++k) shared[k * 32 + warp] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kN; ++k) v[k] = lane < warps ? shared[k * 32 + lane] : 0.f;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] += __shfl_xor_sync(0xffffffff, v[k], offset);
  }
}

template <typename T, int kPacks>
__global__ void __launch_bounds__(kMaxThreads)
    norm_forward_kernel(const T* __restrict__ residual, const T* __restrict__ x, const T* __restrict__ weight,
                        const T* __restrict__ bias, T* __restrict__ y, T* __restrict__ sum,
                        float* __restrict__ mean_out, float* __restrict__ rstd_out, int hidden, float eps, bool rms) {
  __shared__ float shared[32];
  constexpr int N = Pack<T>::N;
  const int packs = hidden / N;
  const int64_t row = blockIdx.x, offset = row * hidden;
  Pack<T> v[kPacks];
  float total[1] = {0.f};  // sum, or sum of squares for RMSNorm
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p >= packs) continue;
    v[i].load(x + offset + p * N);
    if (residual != nullptr) {
      Pack<T> r;
      r.load(residual + offset + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k)
        v[i].v[k] = static_cast<float>(static_cast<T>(r.v[k] + v[i].v[k]));  // as x's add rounds
      v[i].store(sum + offset + p * N);
    }
#pragma unroll
    for (int k = 0; k < N; ++k) total[0] += rms ? v[i].v[k] * v[i].v[k] : v[i].v[k];
  }
  block_sum(total, shared);
  float mean = 0.f, rstd;
  if (rms) {
    rstd = rsqrtf(total[0] / hidden + eps);
  } else {
    mean = total[0] / hidden;
    float squares[1] = {0.f};  // around the mean: two passes over registers, no cancellation
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      if (threadIdx.x + i * blockDim.x >= packs) continue;
#pragma unroll
      for (int k = 0; k < N; ++k) squares[0] += (v[i].v[k] - mean) * (v[i].v[k] - mean);
    }
    block_sum(squares, shared);
    rstd = rsqrtf(squares[0] / hidden + eps);
  }
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p >= packs) continue;
    Pack<T> w, b;
    w.load(weight + p * N);
    if (bias != nullptr) b.load(bias + p * N);
#pragma unroll
    for (int k = 0; k < N; ++k) v[i].v[k] = (v[i].v[k] - mean) * rstd * w.v[k] + (bias != nullptr ? b.v[k] : 0.f);
    v[i].store(y + offset + p * N);
  }
  if (threadIdx.x == 0) {
    rstd_out[row] = rstd;
    if (!rms) mean_out[row] = mean;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight (RMSNorm: without mean(g));
// the weight and bias gradients, sum(dy * xhat) and sum(dy), are this block's rows' partials.
template <typename T, int kPacks>
__global__ void __launch_bounds__(kMaxThreads)
    norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ grad_sum, const T* __restrict__ x,
                         const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ weight,
                         T* __restrict__ dx, float* __restrict__ dweight_part, float* __restrict__ dbias_part,
                         int64_t rows, int hidden, bool rms) {
  __shared__ float shared[64];
  constexpr int N = Pack<T>::N;
  const int packs = hidden / N;
  uint4 w[kPacks];  // the weight as stored: half the registers of fp32 for bf16 / fp16
  float dw[kPacks][N] = {}, db[kPacks][N] = {};
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p < packs) w[i] = *reinterpret_cast<const uint4*>(weight + p * N);
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t offset = row * hidden;
    const float mu = rms ? 0.f : mean[row], rs = rstd[row];
    Pack<T> xhat[kPacks], g[kPacks];
    float c[2] = {0.f, 0.f};  // sum(g * xhat), sum(g)
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const int p = threadIdx.x + i * blockDim.x;
      if (p >= packs) continue;
      xhat[i].load(x + offset + p * N);
      g[i].load(dy + offset + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float xh = (xhat[i].v[k] - mu) * rs, d = g[i].v[k];
        dw[i][k] += d * xh;
        db[i][k] += d;
        xhat[i].v[k] = xh;
        g[i].v[k] = d * static_cast<float>(reinterpret_cast<const T*>(&w[i])[k]);
        c[0] += g[i].v[k] * xh;
        c[1] += g[i].v[k];
      }
    }
    block_sum(c, shared);
    const float c1 = c[0] / hidden, c2 = rms ? 0.f : c[1] / hidden;
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const int p = threadIdx.x + i * blockDim.x;
      if (p >= packs) continue;
      Pack<T> extra;
      if (grad_sum != nullptr) extra.load(grad_sum + offset + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        g[i].v[k] = rs * (g[i].v[k] - c2 - xhat[i].v[k] * c1) + (grad_sum != nullptr ? extra.v[k] : 0.f);
      }
      g[i].store(dx + offset + p * N);
    }
  }
  float* dw_out = dweight_part + static_cast<int64_t>(blockIdx.x) * hidden;
  float* db_out = dbias_part != nullptr ? dbias_part + static_cast<int64_t>(blockIdx.x) * hidden : nullptr;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p >= packs) continue;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      dw_out[p * N + k] = dw[i][k];
      if (db_out != nullptr) db_out[p * N + k] = db[i][k];
    }
  }
}

// Threads per row (a multiple of 32) and 16-byte packs per thread.
std::pair<int, int> launch_shape(int64_t hidden, int64_t element_size) {
  const int64_t packs = hidden / (16 / element_size);
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (packs + 31) / 32 * 32));
  return {threads, static_cast<int>((packs + threads - 1) / threads)};
}

// Calls f with kPacks as a compile-time constant.
template <typename F>
void with_packs(int packs, F&& f) {
  switch (packs) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    default: TORCH_INTERNAL_ASSERT(false, "[fused_layer_norm] ", packs, " packs per thread");
  }
}

template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

bool norm_cuda_supported(const at::Tensor& x, const at::Tensor& weight) {
  if (!x.is_cuda() || x.dim() == 0 || weight.scalar_type() != x.scalar_type()) return false;
  const int64_t hidden = x.size(-1);
  return weight.numel() == hidden && packs_fit(x.scalar_type(), hidden) &&
         hidden / (16 / x.element_size()) <= kMaxThreads * kMaxPacks;
}

NormForward norm_forward_cuda(const at::Tensor& residual, const at::Tensor& x_in, const at::Tensor& weight_in,
                              const at::Tensor& bias_in, double eps, bool rms) {
  TORCH_CHECK(norm_cuda_supported(x_in, weight_in), "[fused_layer_norm] unsupported input ", x_in.sizes(), " ",
              x_in.scalar_type(), " with weight ", weight_in.scalar_type());
  const c10::cuda::CUDAGuard guard(x_in.device());
  const int64_t hidden = x_in.size(-1), rows = x_in.numel() / hidden;
  TORCH_CHECK(rows < (int64_t{1} << 31), "[fused_layer_norm] ", rows, " rows: at most 2^31 - 1");
  const at::Tensor x = aligned(x_in), weight = aligned(weight_in);
  const at::Tensor bias = bias_in.defined() ? aligned(bias_in.to(weight.scalar_type())) : at::Tensor();
  const at::Tensor res = residual.defined() ? aligned(residual) : at::Tensor();
  NormForward out;
  out.y = at::empty_like(x);
  if (res.defined()) out.sum = at::empty_like(x);
  out.rstd = at::empty({rows}, x.options().dtype(at::kFloat));
  if (!rms) out.mean = at::empty({rows}, x.options().dtype(at::kFloat));
  if (rows == 0) return out;
  const std::pair<int, int> shape = launch_shape(hidden, x.element_size());
  const int threads = shape.first, packs = shape.second;
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), "fused_layer_norm", [&](auto tag) {
    using scalar_t = decltype(tag);
    with_packs(packs, [&](auto p) {
      norm_forward_kernel<scalar_t, decltype(p)::value><<<rows, threads, 0, stream>>>(
          data_or_null<scalar_t>(res), x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
          data_or_null<scalar_t>(bias), out.y.data_ptr<scalar_t>(),
          out.sum.defined() ? out.sum.data_ptr<scalar_t>() : nullptr, rms ? nullptr : out.mean.data_ptr<float>(),
          out.rstd.data_ptr<float>(), static_cast<int>(hidden), static_cast<float>(eps), rms);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

NormBackward norm_backward_cuda(const at::Tensor& dy_in, const at::Tensor& grad_sum_in, const at::Tensor& x_in,
                                const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& weight_in,
                                bool with_bias, bool rms) {
  const c10::cuda::CUDAGuard guard(x_in.device());
  const int64_t hidden = x_in.size(-1), rows = x_in.numel() / hidden;
  const at::Tensor x = aligned(x_in), weight = aligned(weight_in), dy = aligned(dy_in.to(x.scalar_type()));
  const at::Tensor grad_sum = grad_sum_in.defined() ? aligned(grad_sum_in.to(x.scalar_type())) : at::Tensor();
  NormBackward out;
  out.dx = at::empty_like(x);
  out.dweight = at::empty({hidden}, weight.options());
  if (with_bias) out.dbias = at::empty({hidden}, weight.options());
  if (rows == 0) {
    out.dweight.zero_();
    if (with_bias) out.dbias.zero_();
    return out;
  }
  const std::pair<int, int> shape = launch_shape(hidden, x.element_size());
  const int threads = shape.first, packs = shape.second;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), "fused_layer_norm", [&](auto tag) {
    using scalar_t = decltype(tag);
    with_packs(packs, [&](auto p) {
      auto kernel = norm_backward_kernel<scalar_t, decltype(p)::value>;
      int per_sm = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
      const int64_t blocks = std::min<int64_t>(rows, static_cast<int64_t>(std::max(per_sm, 1)) * sms);
      // [1 or 2, blocks, hidden]: the weight's partials, then the bias's.
      at::Tensor part = at::empty({with_bias ? 2 : 1, blocks, hidden}, x.options().dtype(at::kFloat));
      kernel<<<blocks, threads, 0, stream>>>(
          dy.data_ptr<scalar_t>(), data_or_null<scalar_t>(grad_sum), x.data_ptr<scalar_t>(),
          rms ? nullptr : mean.data_ptr<float>(), rstd.data_ptr<float>(), weight.data_ptr<scalar_t>(),
          out.dx.data_ptr<scalar_t>(), part.data_ptr<float>(),
          with_bias ? part.data_ptr<float>() + blocks * hidden : nullptr, rows, static_cast<int>(hidden), rms);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      launch_column_sum<scalar_t>(part, out.dweight.data_ptr<scalar_t>(),
                                  with_bias ? out.dbias.data_ptr<scalar_t>() : nullptr, stream);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return out;
}

}  // namespace megatron::fusions::detail
