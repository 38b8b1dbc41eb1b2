// The device paths against the CPU, on a machine with a GPU (ctest -L gpu; scripts/gpu_check.sh):
// the fused optimizer kernels, the cross entropy, the fused norms and bias-GELU (fusions/), whole
// runs of pretrain() with their losses and their one read-back per iteration, and which stream an
// NCCL wait orders.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/fusions/fused_bias_gelu.h"
#include "megatron/fusions/fused_layer_norm.h"

#include "megatron/optimizer/optimizer.h"
#include "megatron/readback.h"
#include "megatron/tensor_parallel/cross_entropy.h"
#include "megatron/tensor_parallel/fp8.h"
#include "megatron/training/gpt_callbacks.h"
#include "megatron/training/training.h"
#include "optimizer/wrapped_optimizer.h"
#include "tiny_gpt_args.h"

namespace megatron {
namespace {

const c10::Device kCuda("cuda:0");

TEST(Gpu, FusedAdamWOnCudaMatchesCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  at::manual_seed(1);
  const at::Tensor init = at::randn({64, 32});
  std::vector<at::Tensor> grads;
  for (int t = 0; t < 5; ++t) grads.push_back(at::randn({64, 32}));
  auto run = [&](c10::Device device) {
    auto w = init.to(device).set_requires_grad(true);
    optimizer::OptimizerConfig c;
    c.lr = 1e-2;
    auto wrapped = testing::wrap({{"w", w}}, c);
    for (const auto& g : grads) {
      w.mutable_grad() = g.to(device);
      auto r = wrapped.optimizer->step();
      EXPECT_EQ(r.found_inf.item<float>(), 0.0f);
    }
    return w.detach().cpu();
  };
  const at::Tensor cuda = run(kCuda), cpu = run(at::kCPU);
  EXPECT_TRUE(at::allclose(cuda, cpu, 1e-5, 1e-6)) << "max |cuda - cpu| = " << (cuda - cpu).abs().max().item<float>();
}

// The CUDA kernel (cross_entropy_cuda.cu) against the ATen path on the CPU, with and without
// label smoothing, over a row longer than a block and a non-uniform output gradient.
// Rows of 5000 values take 16-byte loads, of 5001 one value at a time; a row of -inf but one
// value and a row with a NaN are kept as the CPU keeps them.
TEST(Gpu, CrossEntropyKernelMatchesCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  for (int64_t vocab : {5000, 5001}) {
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      for (double smoothing : {0.0, 0.1}) {
        at::Tensor logits = (at::randn({4, 3, vocab}) * 3).to(dtype);
        at::Tensor target = at::randint(0, vocab, {4, 3});
        logits[1][2].fill_(-INFINITY);
        logits[1][2][7] = 1.0;
        target[1][2] = 7;
        at::Tensor gout = at::rand({4, 3});
        logits[2][0][11] = NAN;
        auto run = [&](c10::Device device) {
          auto x = logits.to(device).set_requires_grad(true);
          auto loss = tensor_parallel::vocab_parallel_cross_entropy(x, target.to(device), nullptr, smoothing);
          loss.backward(gout.to(device));
          return std::make_pair(loss.cpu(), x.grad().cpu().to(at::kFloat));
        };
        auto [loss_gpu, grad_gpu] = run(kCuda);
        auto [loss_cpu, grad_cpu] = run(at::kCPU);
        const auto what = ::testing::Message() << dtype << " vocab " << vocab << " smoothing " << smoothing;
        EXPECT_TRUE(at::allclose(loss_gpu, loss_cpu, 1e-5, 1e-5, /*equal_nan=*/true)) << what;
        EXPECT_TRUE(at::allclose(grad_gpu, grad_cpu, dtype == at::kFloat ? 1e-5 : 1e-2, 1e-6, /*equal_nan=*/true))
            << what << ": max |gpu - cpu| " << (grad_gpu - grad_cpu).abs().nan_to_num(0).max().item<float>();
        EXPECT_TRUE(loss_gpu[2][0].isnan().item<bool>()) << what;
      }
    }
  }
}

// Largest |a - b| relative to the largest |b|, in fp32.
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor af = a.cpu().to(at::kFloat), bf = b.cpu().to(at::kFloat);
  return (af - bf).abs().max().item<double>() / std::max(bf.abs().max().item<double>(), 1e-30);
}

// The norm kernels (fusions/fused_layer_norm_cuda.cu) against the same function on the CPU: rows of
// 768 values (one 16-byte pack per thread, three warps), 1000 (a warp partly idle), 8192 and 12288
// (two and three bf16 packs per thread; 12288 fp32 values are refused), few rows and more rows
// than the backward grid has blocks;
// LayerNorm, RMSNorm, with and without the residual add; every output and every gradient.
TEST(Gpu, FusedNormKernelsMatchCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  at::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
    for (auto [rows, hidden] :
         std::vector<std::pair<int64_t, int64_t>>{{6, 768}, {5, 1000}, {50000, 768}, {300, 8192}, {7, 12288}}) {
      for (bool rms : {false, true}) {
        for (bool add : {false, true}) {
          const at::Tensor x = (at::randn({rows, hidden}) * 2 + 0.5).to(dtype), r = at::randn({rows, hidden}).to(dtype);
          const at::Tensor w = (at::rand({hidden}) + 0.5).to(dtype), b = at::randn({hidden}).to(dtype);
          const at::Tensor dy = at::randn({rows, hidden}).to(dtype), ds = at::randn({rows, hidden}).to(dtype);
          auto run = [&](c10::Device device) {
            auto xd = x.to(device).requires_grad_(), rd = r.to(device).requires_grad_();
            auto wd = w.to(device).requires_grad_(), bd = b.to(device).requires_grad_();
            at::Tensor y, s;
            if (add) {
              std::tie(s, y) = fusions::fused_add_layer_norm(rd, xd, wd, rms ? at::Tensor() : bd, 1e-5, rms);
              torch::autograd::backward({y, s}, {dy.to(device), ds.to(device)});
            } else {
              y = fusions::fused_layer_norm(xd, wd, rms ? at::Tensor() : bd, 1e-5, rms);
              y.backward(dy.to(device));
            }
            std::vector<at::Tensor> out{y, xd.grad(), wd.grad()};
            if (add) out.push_back(s), out.push_back(rd.grad());
            if (!rms) out.push_back(bd.grad());
            return out;
          };
          // The kernels take rows of at most 16384 bf16 or 8192 fp32 values (2048 packs of 16 bytes).
          const bool supported = dtype != at::kFloat || hidden <= 8192;
          ASSERT_EQ(fusions::fused_norm_supported(x.to(kCuda), w.to(kCuda)), supported) << dtype << " " << hidden;
          if (!supported) continue;
          const auto gpu = run(kCuda), cpu = run(at::kCPU);
          ASSERT_EQ(gpu.size(), cpu.size());
          for (size_t i = 0; i < gpu.size(); ++i) {
            EXPECT_LT(relative_error(gpu[i], cpu[i]), tol)
                << dtype << " rows " << rows << " hidden " << hidden << (rms ? " RMSNorm" : " LayerNorm")
                << (add ? " with the residual add" : "") << ", output " << i << " (y, dx, dw, [sum, dresidual,] db)";
          }
        }
      }
    }
  }
}

// The bias-GELU kernels against ATen's gelu(x + bias) on the CPU: exact and tanh GELU, 3072 and
// 1000 columns, a few rows and many; the output, the input gradient and the bias gradient.
TEST(Gpu, FusedBiasGeluKernelsMatchCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  at::manual_seed(4);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{7, 3072}, {5000, 1000}, {20000, 3072}}) {
      for (bool tanh : {false, true}) {
        const at::Tensor x = at::randn({rows, cols}).to(dtype), b = at::randn({cols}).to(dtype);
        const at::Tensor dy = at::randn({rows, cols}).to(dtype);
        auto run = [&](c10::Device device) {
          auto xd = x.to(device).requires_grad_(), bd = b.to(device).requires_grad_();
          auto y = fusions::bias_gelu(xd, bd, tanh);
          y.backward(dy.to(device));
          return std::vector<at::Tensor>{y, xd.grad(), bd.grad()};
        };
        ASSERT_TRUE(fusions::fused_bias_gelu_supported(x.to(kCuda), b.to(kCuda)));
        const auto gpu = run(kCuda), cpu = run(at::kCPU);
        for (size_t i = 0; i < gpu.size(); ++i) {
          EXPECT_LT(relative_error(gpu[i], cpu[i]), tol)
              << dtype << " rows " << rows << " cols " << cols << (tanh ? " tanh" : " exact") << ", output " << i
              << " (y, dx, dbias)";
        }
      }
    }
  }
}

// FP8 GEMMs (at::_scaled_mm on the tensor cores) against the CPU's dequantised GEMMs, both
// recipes and formats, a token count that needs padding; the scales the delayed recipe updates.
TEST(Gpu, Fp8LinearMatchesCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major * 10 + prop->minor < 89) GTEST_SKIP() << prop->name << " has no FP8 tensor cores";
  at::manual_seed(5);
  const at::Tensor x = at::randn({200, 768}).to(at::kBFloat16), w = (at::randn({2304, 768}) * 0.02).to(at::kBFloat16);
  const at::Tensor b = at::randn({2304}).to(at::kBFloat16), dy = (at::randn({200, 2304}) * 1e-3).to(at::kBFloat16);
  for (const char* format : {"e4m3", "hybrid"}) {
    for (const char* recipe : {"delayed", "tensorwise"}) {
      const auto config = tensor_parallel::Fp8Config::from_flags(format, recipe, 0, 2, "max", true);
      auto run = [&](c10::Device device) {
        auto meta = std::make_shared<tensor_parallel::Fp8Meta>(config);
        std::vector<at::Tensor> out;
        for (int step = 0; step < 2; ++step) {  // the second with the scales the first set
          auto xd = x.to(device).requires_grad_(), wd = w.to(device).requires_grad_(),
               bd = b.to(device).requires_grad_();
          auto y = tensor_parallel::fp8_linear(xd, wd, bd, meta);
          y.backward(dy.to(device));
          meta->update_scales();
          out = {y.to(at::kFloat), xd.grad().to(at::kFloat), wd.grad().to(at::kFloat), bd.grad().to(at::kFloat),
                 meta->scale.clone()};
        }
        return out;
      };
      const auto gpu = run(kCuda), cpu = run(at::kCPU);
      for (size_t i = 0; i < gpu.size(); ++i)
        EXPECT_LT(relative_error(gpu[i], cpu[i]), 2e-2)
            << format << " " << recipe << ", output " << i << " (y, dx, dw, db, scales)";
    }
  }
}

// The job's one world group (init_distributed runs once per process), on CUDA tensors.
std::shared_ptr<comm::ProcessGroup> gpu_world() {
  static const auto world = [] {
    comm::DistributedOptions options;
    options.device_type = at::kCUDA;
    return comm::init_distributed(comm::LauncherEnv::from_environment(), options);
  }();
  return world;
}

// NCCL's all_to_all (grouped send/recv) on a one-GPU world: the rows come back whole, and a
// zero-row exchange is no operation at all.
TEST(Gpu, NcclAllToAllMovesRows) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  auto world = gpu_world();
  for (int64_t rows : {0, 5}) {
    at::Tensor input = at::arange(rows * 3, kCuda).view({rows, 3}).to(at::kBFloat16);
    at::Tensor output = at::full({rows, 3}, -1, input.options());
    world->all_to_all(output, input, {rows}, {rows});
    EXPECT_TRUE(at::equal(output.cpu(), input.cpu())) << rows << " rows";
  }
}

// An asynchronous collective launched on one stream and waited for on another (as the autograd
// engine's device thread waits for what the main thread launched): the waiting stream's later
// work runs after the collective, and the host does not block.
TEST(Gpu, NcclWaitOrdersTheStreamCurrentAtTheWait) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  auto world = gpu_world();
  ASSERT_EQ(world->size(), 1);
  at::Tensor t = at::ones({1 << 20}, kCuda);
  world->all_reduce(t);  // the communicator is made on first use, which would outlast the sleep below
  c10::cuda::device_synchronize();
  c10::cuda::CUDAStream launching = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStream waiting = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStream waiting_too = c10::cuda::getStreamFromPool(false, 0);
  ASSERT_TRUE(launching != waiting && waiting != waiting_too && launching != waiting_too);
  at::cuda::CUDAEvent waited_after, waited_too_after;
  comm::WorkHandle work;
  {
    c10::cuda::CUDAStreamGuard guard(launching);
    at::cuda::sleep(int64_t{2} << 30);  // about a second: the collective's inputs are ready after it
    work = world->all_reduce_async(t);
  }
  {
    c10::cuda::CUDAStreamGuard guard(waiting);
    const auto start = std::chrono::steady_clock::now();
    work->wait();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100)) << "the host waited";
    waited_after.record(waiting);
  }
  {
    c10::cuda::CUDAStreamGuard guard(waiting_too);  // a second wait orders its own stream too
    work->wait();
    waited_too_after.record(waiting_too);
  }
  // Without the stream wait, the idle waiting stream's event would complete at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(waited_after.query()) << "the waiting stream ran ahead of the collective";
  EXPECT_FALSE(waited_too_after.query()) << "the second waiting stream ran ahead of the collective";
  EXPECT_FALSE(work->is_completed());
  c10::cuda::device_synchronize();
  EXPECT_TRUE(waited_after.query() && waited_too_after.query() && work->is_completed());
  EXPECT_EQ(t.sum().item<double>(), 1 << 20);  // one rank: the sum is the tensor
}

training::TrainingResult pretrain_on(const std::string& device, int64_t iters, bool bf16 = false) {
  auto a = testing::tiny_gpt_args();
  a.device = device;
  a.train_iters = iters;
  a.log_interval = 1000;
  a.eval_iters = 0;
  a.bf16 = bf16;
  a.validate(1);
  auto cb = training::gpt_callbacks(training::build_tokenizer(a));
  return training::pretrain(a, cb.model_builder, cb.dataset_builder, cb.forward_step);
}

// 20 iterations: fp32 within 1e-4 relative of the CPU run, bf16 within 2%; one read-back each.
TEST(Gpu, PretrainOnCudaGivesTheCpuLossesWithOneReadbackPerIteration) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  const auto cpu = pretrain_on("cpu", 20);
  const int64_t before = host_readback_count();
  const auto gpu = pretrain_on("cuda", 20);
  const int64_t twenty = host_readback_count() - before;
  const auto bf16 = pretrain_on("cuda", 20, /*bf16=*/true);
  ASSERT_EQ(gpu.iterations.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    const double want = cpu.iterations[i].metrics.at("lm loss");
    EXPECT_NEAR(gpu.iterations[i].metrics.at("lm loss"), want, 1e-4 * want) << "fp32, iteration " << i + 1;
    EXPECT_NEAR(bf16.iterations[i].metrics.at("lm loss"), want, 2e-2 * want) << "bf16, iteration " << i + 1;
  }
  const int64_t before_ten = host_readback_count();
  pretrain_on("cuda", 10);
  EXPECT_EQ(twenty - (host_readback_count() - before_ten), 10) << "read-backs per iteration";
}

}  // namespace
}  // namespace megatron
