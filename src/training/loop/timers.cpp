#include "megatron/training/timers.h"

#include "build_config.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#if MEGATRON_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdio>

namespace megatron::training {

#if MEGATRON_WITH_CUDA
struct Timers::Events {
  at::cuda::CUDAEvent start{cudaEventDefault}, stop{cudaEventDefault};  // timing enabled
};
#else
struct Timers::Events {};
#endif

Timers::~Timers() = default;

void Timers::start(const std::string& name) {
  auto& t = timers_[name];
  TORCH_INTERNAL_ASSERT(!t.running, "timer ", name, " started twice");
  t.running = true;
#if MEGATRON_WITH_CUDA
  if (device_.is_cuda()) {
    t.pending.push_back(std::make_shared<Events>());
    t.pending.back()->start.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    return;
  }
#endif
  t.started = std::chrono::steady_clock::now();
}

void Timers::stop(const std::string& name) {
  auto& t = timers_.at(name);
  TORCH_INTERNAL_ASSERT(t.running, "timer ", name, " stopped without start");
  t.running = false;
#if MEGATRON_WITH_CUDA
  if (device_.is_cuda()) {
    t.pending.back()->stop.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    return;
  }
#endif
  t.elapsed_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.started).count();
}

// The device time of the timer's finished start/stop pairs (waits for the last one).
double Timers::take_pending_ms(Timer& t) {
  double ms = 0;
#if MEGATRON_WITH_CUDA
  for (auto& e : t.pending) {
    e->stop.synchronize();
    ms += e->start.elapsed_time(e->stop);
  }
#endif
  t.pending.clear();
  return ms;
}

std::string Timers::report(comm::ProcessGroup& group, double normalizer) {
  // Every rank has the same timer names (the loop is the same everywhere), in map order.
  const int64_t n = static_cast<int64_t>(timers_.size());
  auto mins = at::empty({n}, at::kDouble);
  int64_t i = 0;
  for (auto& [name, t] : timers_) {
    t.elapsed_ms += take_pending_ms(t);
    mins[i++] = t.elapsed_ms / normalizer;
  }
  auto maxs = mins.clone();
  group.all_reduce(mins, comm::ReduceOp::kMin);
  group.all_reduce(maxs, comm::ReduceOp::kMax);
  std::string out = "(min, max) time across ranks (ms):";
  i = 0;
  for (auto& [name, t] : timers_) {
    std::string dots(std::max<int64_t>(2, 48 - static_cast<int64_t>(name.size())), '.');
    char line[160];
    std::snprintf(line, sizeof(line), "\n    %s %s: (%.2f, %.2f)", name.c_str(), dots.c_str(), mins[i].item<double>(),
                  maxs[i].item<double>());
    out += line;
    last_max_ms_[name] = maxs[i].item<double>();
    t.elapsed_ms = 0;
    ++i;
  }
  return out;
}

}  // namespace megatron::training
