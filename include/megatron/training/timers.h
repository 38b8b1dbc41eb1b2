// Named timers of the training loop (Megatron-LM's Timers): accumulated between log lines and
// reported as "(min, max) time across ranks (ms)" per iteration. On a GPU they time CUDA events
// on the current stream, read when the report is made, so that timing never makes the host wait
// for the device in the middle of an iteration; on the CPU they read the wall clock.
#pragma once

#include "megatron/export.h"

#include <c10/core/Device.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron::training {

class MEGATRON_API Timers {
 public:
  explicit Timers(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}
  ~Timers();
  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;

  void start(const std::string& name);
  void stop(const std::string& name);
  // The per-iteration times (accumulated / normalizer) over `group`'s ranks as Megatron-LM's
  // --timing-log-option prints them: "minmax", "max" or "all" (each rank's); resets the timers.
  // Collective over group.
  std::string report(comm::ProcessGroup& group, double normalizer, const std::string& option = "minmax");
  // Each timer's maximum over the ranks in the last report (ms), for the `<name>-time` scalars.
  const std::map<std::string, double>& last_max_ms() const { return last_max_ms_; }

 private:
  struct Events;  // a started (and stopped) pair of CUDA events
  struct Timer {
    double elapsed_ms = 0;
    std::chrono::steady_clock::time_point started;
    bool running = false;
    std::vector<std::shared_ptr<Events>> pending;  // GPU: read at report()
  };
  double take_pending_ms(Timer& t);
  c10::Device device_;
  std::map<std::string, Timer> timers_;
  std::map<std::string, double> last_max_ms_;
};

}  // namespace megatron::training
