// The fused kernels (fusions/, the cross entropy) against the ATen operators they replace, forward
// and backward at one model's shapes, in the same run on the same GPU: ms per call (median), the
// ratio ATen / ours, and the bytes each of ours moves per second. Default shapes: GPT-2 124M at
// micro-batch 64 (65536 tokens, hidden 768, ffn 3072, vocabulary 50304), bf16.
//   build-gpu/bin/fusions_bench [--tokens N] [--hidden H] [--ffn F] [--vocab V] [--fp32] [--reps R]
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/csrc/autograd/autograd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "megatron/fusions/fused_bias_gelu.h"
#include "megatron/fusions/fused_layer_norm.h"
#include "megatron/tensor_parallel/cross_entropy.h"

namespace {

using megatron::fusions::bias_gelu;
using megatron::fusions::fused_add_layer_norm;
using megatron::fusions::fused_layer_norm;

// Median ms of `reps` calls, after three warm-up calls.
double median_ms(const std::function<void()>& fn, int reps) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    start.record();
    fn();
    stop.record();
    stop.synchronize();
    ms.push_back(start.elapsed_time(stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Gradients of `outputs` (given their gradients) with respect to `inputs`, not accumulated anywhere.
void backward(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& grads,
              const std::vector<at::Tensor>& inputs) {
  torch::autograd::grad(outputs, inputs, grads);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The fused kernels against the ATen operators they replace, forward + backward, on a GPU"};
  int64_t tokens = 65536, hidden = 768, ffn = 3072, vocab = 50304;
  int reps = 20;
  bool fp32 = false;
  app.add_option("--tokens", tokens, "rows: micro-batch x sequence length");
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--ffn", ffn, "MLP hidden size (per tensor-parallel rank)");
  app.add_option("--vocab", vocab, "vocabulary (per tensor-parallel rank)");
  app.add_option("--reps", reps, "timed calls per kernel");
  app.add_flag("--fp32", fp32, "fp32 instead of bf16");
  CLI11_PARSE(app, argc, argv);
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "fusions_bench: needs a GPU\n");
    return 1;
  }
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(fp32 ? at::kFloat : at::kBFloat16);
  const double elem = fp32 ? 4.0 : 2.0;
  std::printf(
      "fusions_bench (%s): %lld tokens, hidden %lld, ffn %lld, vocabulary %lld, %s; forward + backward, "
      "median of %d\n",
      at::cuda::getCurrentDeviceProperties()->name, static_cast<long long>(tokens), static_cast<long long>(hidden),
      static_cast<long long>(ffn), static_cast<long long>(vocab), fp32 ? "fp32" : "bf16", reps);
  std::printf("%-28s %10s %10s %10s %12s\n", "kernel", "ours ms", "ATen ms", "ATen/ours", "ours GB/s");
  auto report = [&](const char* name, double ours, double aten, double bytes) {
    std::printf("%-28s %10.3f %10.3f %10.3f %12.0f\n", name, ours, aten, aten / ours, bytes / ours / 1e6);
  };

  {  // LayerNorm and RMSNorm: forward reads x, writes y; backward reads x and dy, writes dx.
    auto x = at::randn({tokens, hidden}, opts).requires_grad_();
    auto w = (at::rand({hidden}, opts) + 0.5).requires_grad_(), b = at::randn({hidden}, opts).requires_grad_();
    auto dy = at::randn({tokens, hidden}, opts);
    const double bytes = 5.0 * tokens * hidden * elem;
    report("LayerNorm",
           median_ms(
               [&] {
                 backward({fused_layer_norm(x, w, b, 1e-5, false)}, {dy}, {x, w, b});
               },
               reps),
           median_ms(
               [&] {
                 backward({at::layer_norm(x, {hidden}, w, b, 1e-5)}, {dy}, {x, w, b});
               },
               reps),
           bytes);
    report("RMSNorm",
           median_ms(
               [&] {
                 backward({fused_layer_norm(x, w, {}, 1e-5, true)}, {dy}, {x, w});
               },
               reps),
           median_ms(
               [&] {
                 backward({at::rms_norm(x, {hidden}, w, 1e-5)}, {dy}, {x, w});
               },
               reps),
           bytes);
    // Residual add + LayerNorm: the sum's gradient arrives too, as in a transformer layer.
    auto r = at::randn({tokens, hidden}, opts).requires_grad_();
    auto ds = at::randn({tokens, hidden}, opts);
    report("residual add + LayerNorm",
           median_ms(
               [&] {
                 auto [s, y] = fused_add_layer_norm(r, x, w, b, 1e-5, false);
                 backward({y, s}, {dy, ds}, {r, x, w, b});
               },
               reps),
           median_ms(
               [&] {
                 auto s = r + x;
                 backward({at::layer_norm(s, {hidden}, w, b, 1e-5), s}, {dy, ds}, {r, x, w, b});
               },
               reps),
           8.0 * tokens * hidden * elem);
  }
  {  // bias + GELU: forward reads h, writes y; backward reads h and dy, writes dh.
    auto h = at::randn({tokens, ffn}, opts).requires_grad_();
    auto b = at::randn({ffn}, opts).requires_grad_();
    auto dy = at::randn({tokens, ffn}, opts);
    report("bias + GELU",
           median_ms(
               [&] {
                 backward({bias_gelu(h, b, false)}, {dy}, {h, b});
               },
               reps),
           median_ms(
               [&] {
                 backward({at::gelu(h + b)}, {dy}, {h, b});
               },
               reps),
           5.0 * tokens * ffn * elem);
  }
  {  // Cross entropy: forward reads the logits; backward reads them and writes their gradient.
    auto logits = at::randn({tokens, vocab}, opts).requires_grad_();
    auto target = at::randint(0, vocab, {tokens}, opts.dtype(at::kLong));
    auto grad = at::full({tokens}, 1.0 / tokens, opts.dtype(at::kFloat));
    report("cross entropy",
           median_ms(
               [&] {
                 backward({megatron::tensor_parallel::vocab_parallel_cross_entropy(logits, target, nullptr, 0.0)},
                          {grad}, {logits});
               },
               reps),
           median_ms(
               [&] {
                 auto loss = at::cross_entropy_loss(logits, target, {}, at::Reduction::None);
                 backward({loss}, {grad.to(loss.scalar_type())}, {logits});
               },
               reps),
           3.0 * tokens * vocab * elem);
  }
  return 0;
}
