#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "backend.h"

namespace megatron::comm::detail {

std::string describe_timeout(const OpInfo& info, std::chrono::milliseconds timeout) {
  std::ostringstream out;
  const auto& ranks = *info.group_ranks;
  std::vector<int> peers = info.peer_group_ranks;
  if (peers.empty()) {
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
      if (r != info.rank) peers.push_back(r);
  }
  out << "[comm] " << info.op << " on group '" << info.group << "' timed out after " << timeout.count() / 1000.0
      << " s at group rank " << info.rank << " (world rank " << ranks.at(info.rank) << "), waiting on world ranks [";
  for (size_t i = 0; i < peers.size(); ++i) out << (i ? "," : "") << ranks.at(peers[i]);
  out << "]; a peer has not reached the same call (crashed, hung, or calls it in another order). "
         "Raise the limit with MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS if it is just slow";
  return out.str();
}

std::string describe_failure(const OpInfo& info, const std::string& why) {
  std::ostringstream out;
  out << "[comm] " << info.op << " on group '" << info.group << "' failed at group rank " << info.rank
      << " (world rank " << info.group_ranks->at(info.rank) << "): " << why
      << "; a peer's connection closed (its process died?)";
  return out.str();
}

PollingWork::PollingWork(OpInfo info, std::chrono::milliseconds timeout, std::function<bool()> test,
                         std::function<void()> finish)
    : Work(timeout), info_(std::move(info)), test_(std::move(test)), finish_(std::move(finish)) {}

void PollingWork::complete() {
  done_ = true;
  if (finish_) finish_();
  finish_ = nullptr;
  test_ = nullptr;
}

bool PollingWork::is_completed() {
  if (!done_ && test_()) complete();
  return done_;
}

void PollingWork::wait(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // Spin (yielding) for the first milliseconds, as MPI's own blocking calls do, then back off
  // so that long waits leave the CPU to the peers they wait for.
  const auto spin_until = clock::now() + std::chrono::milliseconds(5);
  while (!is_completed()) {
    auto now = clock::now();
    if (now >= deadline) throw CollectiveError(describe_timeout(info_, timeout));
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

namespace {
class CompletedWork : public Work {
 public:
  explicit CompletedWork(std::chrono::milliseconds timeout) : Work(timeout) {}
  bool is_completed() override { return true; }
  void wait(std::chrono::milliseconds) override {}
};
}  // namespace

std::chrono::microseconds injected_latency() {
  static const std::chrono::microseconds latency = [] {
    const char* value = std::getenv("MEGATRON_INJECT_COMM_LATENCY_US");
    if (value == nullptr || *value == '\0') return std::chrono::microseconds(0);
    char* end = nullptr;
    const long long us = std::strtoll(value, &end, 10);
    TORCH_CHECK(*end == '\0' && us >= 0 && us <= 60'000'000, "[comm] MEGATRON_INJECT_COMM_LATENCY_US='", value,
                "': expected whole microseconds from 0 to 60000000");
    return std::chrono::microseconds(us);
  }();
  return latency;
}

double injected_us_per_mib() {
  static const double rate = [] {
    const char* value = std::getenv("MEGATRON_INJECT_COMM_US_PER_MB");
    if (value == nullptr || *value == '\0') return 0.0;
    char* end = nullptr;
    const double us = std::strtod(value, &end);
    TORCH_CHECK(end != value && *end == '\0' && us >= 0 && us <= 60'000'000, "[comm] MEGATRON_INJECT_COMM_US_PER_MB='",
                value, "': expected microseconds per MiB from 0 to 60000000");
    return us;
  }();
  return rate;
}

std::chrono::steady_clock::time_point InjectedLink::ready_after(std::chrono::steady_clock::time_point launched,
                                                                int64_t bytes) {
  const auto transfer = std::chrono::microseconds(
      static_cast<int64_t>(injected_us_per_mib() * static_cast<double>(bytes) / (1024.0 * 1024.0)));
  std::lock_guard<std::mutex> lock(mutex_);
  free_ = std::max(launched, free_) + injected_latency() + transfer;
  return free_;
}

namespace {
class DelayedWork : public Work {
 public:
  DelayedWork(WorkHandle inner, std::chrono::steady_clock::time_point ready, std::chrono::milliseconds timeout)
      : Work(timeout), inner_(std::move(inner)), ready_(ready) {}
  bool is_completed() override { return std::chrono::steady_clock::now() >= ready_ && inner_->is_completed(); }
  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    std::this_thread::sleep_until(ready_);
  }

 private:
  WorkHandle inner_;
  std::chrono::steady_clock::time_point ready_;
};
}  // namespace

WorkHandle complete_no_earlier_than(WorkHandle work, std::chrono::steady_clock::time_point ready,
                                    std::chrono::milliseconds timeout) {
  return std::make_shared<DelayedWork>(std::move(work), ready, timeout);
}

WorkHandle completed_work() {
  // Blocking collectives return this on every call: one shared instance, no allocation.
  static const WorkHandle kDone = std::make_shared<CompletedWork>(std::chrono::milliseconds(0));
  return kDone;
}

}  // namespace megatron::comm::detail
