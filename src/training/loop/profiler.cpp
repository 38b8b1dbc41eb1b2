#include "training/loop/profiler.h"

#include "build_config.h"

#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#if MEGATRON_WITH_CUDA
#include <cuda_profiler_api.h>
#endif

#include "megatron/logging.h"

namespace megatron::training::detail {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

ProfilerConfig kineto_config() {
  return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true);
}

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (cuda) a.insert(ActivityType::CUDA);
  return a;
}

// torch.profiler.tensorboard_trace_handler's file name: <host>_<pid>.<time in ns>.pt.trace.json.
std::filesystem::path trace_path(const std::string& dir) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::filesystem::path(dir) /
         (std::string(host) + "_" + std::to_string(getpid()) + "." + std::to_string(ns) + ".pt.trace.json");
}

}  // namespace

IterationProfiler::IterationProfiler(const Arguments& args, int64_t rank, c10::Device device)
    : args_(args), cuda_(device.is_cuda()) {
  if (args.use_pytorch_profiler && !args.profile && rank == 0)
    log(LogLevel::kWarn, "--use-pytorch-profiler does nothing without --profile");
  const auto& ranks = args.profile_ranks;
  enabled_ = args.profile && std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
  if (!enabled_) return;
  TORCH_CHECK(args.use_pytorch_profiler || cuda_,
              "[training] --profile without --use-pytorch-profiler marks CUDA profiler ranges for nsys, and this run "
              "is on ",
              device, "; add --use-pytorch-profiler (and --tensorboard-dir) for a trace");
  if (args.use_pytorch_profiler) kineto::prepareProfiler(kineto_config(), activities(cuda_));
}

IterationProfiler::~IterationProfiler() {
  try {
    stop();
  } catch (const std::exception& e) {
    log(LogLevel::kWarn, std::string("[profile] the trace could not be written: ") + e.what());
  }
}

void IterationProfiler::before_iteration(int64_t iteration) {
  if (enabled_ && iteration == args_.profile_step_start + 1) start();
}

void IterationProfiler::after_iteration(int64_t iteration) {
  if (enabled_ && iteration == args_.profile_step_end) stop();
}

void IterationProfiler::start() {
  running_ = true;
  if (args_.use_pytorch_profiler) {
    kineto::enableProfiler(kineto_config(), activities(cuda_));
    return;
  }
#if MEGATRON_WITH_CUDA
  cudaProfilerStart();
#endif
}

void IterationProfiler::stop() {
  if (!running_) return;
  running_ = false;
  if (!args_.use_pytorch_profiler) {
#if MEGATRON_WITH_CUDA
    cudaProfilerStop();
#endif
    return;
  }
  auto result = kineto::disableProfiler();
  std::filesystem::create_directories(args_.tensorboard_dir);
  const auto path = trace_path(args_.tensorboard_dir);
  // Written under a temporary name and renamed, so that a viewer never opens half a trace.
  const auto tmp = path.string() + ".tmp";
  result->save(tmp);
  std::filesystem::rename(tmp, path);
  log(LogLevel::kInfo, "[profile] iterations " + std::to_string(args_.profile_step_start + 1) + "-" +
                           std::to_string(args_.profile_step_end) + ": trace written to " + path.string());
}

}  // namespace megatron::training::detail
