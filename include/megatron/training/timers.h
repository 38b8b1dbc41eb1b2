// Named wall-clock timers of the training loop (Megatron-LM's Timers): accumulated between log
// lines and reported as "(min, max) time across ranks (ms)" per iteration.
#pragma once

#include "megatron/export.h"

#include <chrono>
#include <map>
#include <string>

#include "megatron/comm/process_group.h"

namespace megatron::training {

class MEGATRON_API Timers {
 public:
  void start(const std::string& name);
  void stop(const std::string& name);
  // The per-iteration times (accumulated / normalizer) with their minimum and maximum over
  // `group`'s ranks, as Megatron-LM prints them; resets the timers. Collective over group.
  std::string report(comm::ProcessGroup& group, double normalizer);

 private:
  struct Timer {
    double elapsed_ms = 0;
    std::chrono::steady_clock::time_point started;
    bool running = false;
  };
  std::map<std::string, Timer> timers_;
};

}  // namespace megatron::training
