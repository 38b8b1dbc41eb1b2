#include "megatron/training/timers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdio>

namespace megatron::training {

void Timers::start(const std::string& name) {
  auto& t = timers_[name];
  TORCH_INTERNAL_ASSERT(!t.running, "timer ", name, " started twice");
  t.running = true;
  t.started = std::chrono::steady_clock::now();
}

void Timers::stop(const std::string& name) {
  auto& t = timers_.at(name);
  TORCH_INTERNAL_ASSERT(t.running, "timer ", name, " stopped without start");
  t.elapsed_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.started).count();
  t.running = false;
}

std::string Timers::report(comm::ProcessGroup& group, double normalizer) {
  // Every rank has the same timer names (the loop is the same everywhere), in map order.
  const int64_t n = static_cast<int64_t>(timers_.size());
  auto mins = at::empty({n}, at::kDouble);
  int64_t i = 0;
  for (auto& [name, t] : timers_) mins[i++] = t.elapsed_ms / normalizer;
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
    t.elapsed_ms = 0;
    ++i;
  }
  return out;
}

}  // namespace megatron::training
