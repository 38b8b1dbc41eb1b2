// What the fusions' CUDA kernels share: 16-byte packs of values held as fp32, the deterministic
// sum of per-block column partials, and inputs made contiguous and 16-byte aligned.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace megatron::fusions::detail {
// Internal to each .cu that includes this: each keeps its own copy of the kernels.
namespace {

// 16 bytes of T (8 bf16 / fp16 values, 4 fp32) as fp32 values.
template <typename T>
struct Pack {
  static constexpr int N = 16 / sizeof(T);
  float v[N];

  __device__ void load(const T* p) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = static_cast<float>(x[k]);
  }
  __device__ void store(T* p) const {
    uint4 raw;
    T* x = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = static_cast<T>(v[k]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
};

// out_y[col] = sum over b of part[y][b][col], for y = blockIdx.y (out0, then out1): 32 columns per
// block, 16 rows of threads over b, then the 16 partial sums in a fixed order.
template <typename T>
__global__ void column_sum_kernel(const float* __restrict__ part, int64_t blocks, int64_t cols, T* __restrict__ out0,
                                  T* __restrict__ out1) {
  __shared__ float partial[16][33];
  const float* src = part + static_cast<int64_t>(blockIdx.y) * blocks * cols;
  T* out = blockIdx.y == 0 ? out0 : out1;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.f;
  if (col < cols) {
    for (int64_t b = threadIdx.y; b < blocks; b += 16) acc += src[b * cols + col];
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
#pragma unroll
  for (int r = 1; r < 16; ++r) acc += partial[r][threadIdx.x];
  out[col] = static_cast<T>(acc);
}

// Launches column_sum_kernel over part [outputs, blocks, cols] into out0 (and out1 for 2 outputs).
template <typename T>
void launch_column_sum(const at::Tensor& part, T* out0, T* out1, cudaStream_t stream) {
  const int64_t outputs = part.size(0), blocks = part.size(1), cols = part.size(2);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(outputs)), block(32, 16);
  column_sum_kernel<T><<<grid, block, 0, stream>>>(part.data_ptr<float>(), blocks, cols, out0, out1);
}

// Calls f(T{}) for the dtypes the kernels take: fp32, bf16, fp16.
template <typename F>
void dispatch_float_types(at::ScalarType dtype, const char* name, F&& f) {
  switch (dtype) {
    case at::kFloat: f(float{}); break;
    case at::kBFloat16: f(c10::BFloat16{}); break;
    case at::kHalf: f(c10::Half{}); break;
    default: TORCH_CHECK(false, "[", name, "] fp32, bf16 or fp16 expected, got ", dtype);
  }
}

// t itself when it is contiguous and 16-byte aligned (a parameter can be a view at any offset of
// the flat parameter buffer), else a copy that is.
inline at::Tensor aligned(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

// Whether rows of `cols` values of `dtype` split into 16-byte packs, for dtypes the kernels take.
inline bool packs_fit(at::ScalarType dtype, int64_t cols) {
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  return cols > 0 && cols % (16 / static_cast<int64_t>(c10::elementSize(dtype))) == 0;
}

}  // namespace
}  // namespace megatron::fusions::detail
