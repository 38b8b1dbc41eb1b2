// --profile: Megatron-LM's profiling of a window of iterations on chosen ranks. With
// --use-pytorch-profiler it records a Kineto trace (CPU operators and the library's named ranges,
// and CUDA kernels on a GPU) into --tensorboard-dir under the name torch.profiler's
// tensorboard_trace_handler gives (<host>_<pid>.<ns>.pt.trace.json), which TensorBoard's profiler
// plugin, Perfetto and chrome://tracing open. Without it, cudaProfilerStart/Stop bracket the
// window for `nsys profile --capture-range=cudaProfilerApi`.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

class IterationProfiler {
 public:
  IterationProfiler(const Arguments& args, int64_t rank, c10::Device device);
  ~IterationProfiler();  // a window that training ended inside is still written
  IterationProfiler(const IterationProfiler&) = delete;
  IterationProfiler& operator=(const IterationProfiler&) = delete;

  // Around train_step(iteration), iterations counted from 1: the window is iterations
  // profile_step_start + 1 .. profile_step_end, as Megatron-LM's.
  void before_iteration(int64_t iteration);
  void after_iteration(int64_t iteration);

 private:
  void start();
  void stop();

  const Arguments& args_;
  bool enabled_ = false, cuda_ = false, running_ = false;
};

}  // namespace megatron::training::detail
