// The device paths against the CPU, on a machine with a GPU (ctest -L gpu; scripts/gpu_check.sh):
// the fused optimizer kernels, the cross entropy, whole runs of pretrain() with their losses
// and their one read-back per iteration, and which stream an NCCL wait orders.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "megatron/comm/process_group.h"

#include "megatron/optimizer/optimizer.h"
#include "megatron/readback.h"
#include "megatron/tensor_parallel/cross_entropy.h"
#include "megatron/training/gpt_callbacks.h"
#include "megatron/training/training.h"
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
    optimizer::MegatronOptimizer opt({{"w", w}}, c, nullptr, nullptr);
    for (const auto& g : grads) {
      w.mutable_grad() = g.to(device);
      auto r = opt.step();
      EXPECT_EQ(r.found_inf.item<float>(), 0.0f);
    }
    return w.detach().cpu();
  };
  const at::Tensor cuda = run(kCuda), cpu = run(at::kCPU);
  EXPECT_TRUE(at::allclose(cuda, cpu, 1e-5, 1e-6)) << "max |cuda - cpu| = " << (cuda - cpu).abs().max().item<float>();
}

// The CUDA kernel (cross_entropy_cuda.cu) against the ATen path on the CPU, with and without
// label smoothing, over a row longer than a block and a non-uniform output gradient.
TEST(Gpu, CrossEntropyKernelMatchesCpu) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (double smoothing : {0.0, 0.1}) {
      at::Tensor logits = (at::randn({4, 3, 5000}) * 3).to(dtype);
      at::Tensor target = at::randint(0, 5000, {4, 3});
      at::Tensor gout = at::rand({4, 3});
      auto run = [&](c10::Device device) {
        auto x = logits.to(device).set_requires_grad(true);
        auto loss = tensor_parallel::vocab_parallel_cross_entropy(x, target.to(device), nullptr, smoothing);
        loss.backward(gout.to(device));
        return std::make_pair(loss.cpu(), x.grad().cpu().to(at::kFloat));
      };
      auto [loss_gpu, grad_gpu] = run(kCuda);
      auto [loss_cpu, grad_cpu] = run(at::kCPU);
      EXPECT_TRUE(at::allclose(loss_gpu, loss_cpu, 1e-5, 1e-5)) << dtype << " smoothing " << smoothing;
      EXPECT_TRUE(at::allclose(grad_gpu, grad_cpu, dtype == at::kFloat ? 1e-5 : 1e-2, 1e-6))
          << dtype << " smoothing " << smoothing;
    }
  }
}

// An asynchronous collective launched on one stream and waited for on another (as the autograd
// engine's device thread waits for what the main thread launched): the waiting stream's later
// work runs after the collective, and the host does not block.
TEST(Gpu, NcclWaitOrdersTheStreamCurrentAtTheWait) {
  ASSERT_TRUE(at::hasCUDA()) << "this test needs a GPU";
  comm::DistributedOptions options;
  options.device_type = at::kCUDA;
  auto world = comm::init_distributed(comm::LauncherEnv::from_environment(), options);
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
