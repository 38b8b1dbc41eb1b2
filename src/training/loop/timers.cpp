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

std::string Timers::report(comm::ProcessGroup& group, double normalizer, const std::string& option) {
  // Every rank has the same timer names (the loop is the same everywhere), in map order.
  const int64_t n = static_cast<int64_t>(timers_.size());
  auto mine = at::empty({n}, at::kDouble);
  int64_t i = 0;
  for (auto& [name, t] : timers_) {
    t.elapsed_ms += take_pending_ms(t);
    mine[i++] = t.elapsed_ms / normalizer;
    t.elapsed_ms = 0;
  }
  auto all = at::empty({group.size() * n}, at::kDouble);
  group.all_gather(all, mine);
  const at::Tensor by_rank = all.view({group.size(), n});
  const at::Tensor mins = std::get<0>(by_rank.min(0)), maxs = std::get<0>(by_rank.max(0));
  std::string out = option == "all"   ? "times across ranks (ms):"
                    : option == "max" ? "max time across ranks (ms):"
                                      : "(min, max) time across ranks (ms):";
  i = 0;
  char line[200];
  for (const auto& [name, t] : timers_) {
    std::string label = name + " ";  // Megatron-LM's (name + ' ').ljust(48, '.')
    if (label.size() < 48) label.append(48 - label.size(), '.');
    if (option == "all") {
      out += "\n  " + name + ":";
      for (int64_t r = 0; r < group.size(); ++r) {
        std::snprintf(line, sizeof(line), "\n     rank %2lld: %.2f", static_cast<long long>(r),
                      by_rank[r][i].item<double>());
        out += line;
      }
    } else if (option == "max") {
      std::snprintf(line, sizeof(line), "\n    %s: %.2f", label.c_str(), maxs[i].item<double>());
      out += line;
    } else {
      std::snprintf(line, sizeof(line), "\n    %s: (%.2f, %.2f)", label.c_str(), mins[i].item<double>(),
                    maxs[i].item<double>());
      out += line;
    }
    last_max_ms_[name] = maxs[i].item<double>();
    ++i;
  }
  return out;
}

}  // namespace megatron::training
