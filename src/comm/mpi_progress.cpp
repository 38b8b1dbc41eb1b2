// Open MPI advances a nonblocking collective (its libnbc schedules, a large message's fragments)
// only inside MPI calls, so an operation launched before compute would mostly run inside its
// wait. One thread tests every operation in flight until it completes, which drives MPI's
// progress engine, and sleeps while none is; an operation already done costs nothing.
#include "build_config.h"
#if MEGATRON_WITH_MPI

#include "mpi_progress.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <string>
#include <thread>

namespace megatron::comm::detail {
namespace {

// Tests come 50 us apart after a launch and back off to 1 ms while nothing completes (a peer
// that has not launched yet), so that waiting on a late peer costs a busy CPU little.
constexpr auto kFirstInterval = std::chrono::microseconds(50);
constexpr auto kLongestInterval = std::chrono::microseconds(1000);

class Progress {
 public:
  static Progress& instance() {
    static Progress* progress = new Progress();  // never destroyed: the thread may outlive exit
    return *progress;
  }

  void init(int provided) {
    std::lock_guard<std::mutex> lock(mutex_);
    // MEGATRON_MPI_PROGRESS=0 leaves progress to the owners, for benchmarks that measure the thread.
    const char* env = std::getenv("MEGATRON_MPI_PROGRESS");
    if (provided < MPI_THREAD_MULTIPLE || started_ || (env != nullptr && std::string(env) == "0")) return;
    started_ = true;
    std::thread([this] { run(); }).detach();
  }

  void track(const std::shared_ptr<TrackedRequests>& r) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!started_ || stopped_) return;
      tracked_.push_back(r);
      interval_ = kFirstInterval;
    }
    cv_.notify_one();
  }

  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);  // the thread is outside MPI while this is held
    stopped_ = true;
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [this] { return stopped_ || !tracked_.empty(); });
      if (stopped_) return;
      bool completed = false;
      for (size_t i = 0; i < tracked_.size();) {
        if (in_flight(tracked_[i])) {
          ++i;
          continue;
        }
        completed = true;
        tracked_[i] = std::move(tracked_.back());
        tracked_.pop_back();
      }
      interval_ = completed ? kFirstInterval : std::min(interval_ * 2, kLongestInterval);
      const auto interval = interval_;
      lock.unlock();
      std::this_thread::sleep_for(interval);
      lock.lock();
    }
  }

  // Tests r unless its owner is testing it right now; false once done or dropped by its owner
  // (a failure is the owner's to report).
  static bool in_flight(const std::weak_ptr<TrackedRequests>& tracked) {
    auto r = tracked.lock();
    if (!r) return false;
    std::unique_lock<std::mutex> owner(r->mutex, std::try_to_lock);
    if (!owner.owns_lock()) return true;
    int flag = 0;
    const int rc = MPI_Testall(static_cast<int>(r->requests.size()), r->requests.data(), &flag, MPI_STATUSES_IGNORE);
    return flag == 0 && rc == MPI_SUCCESS;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::weak_ptr<TrackedRequests>> tracked_;
  std::chrono::microseconds interval_ = kFirstInterval;
  bool started_ = false, stopped_ = false;
};

}  // namespace

void init_mpi_progress(int provided) {
  Progress::instance().init(provided);
}
void track_mpi_requests(const std::shared_ptr<TrackedRequests>& r) {
  Progress::instance().track(r);
}
void stop_mpi_progress() {
  Progress::instance().stop();
}

}  // namespace megatron::comm::detail

#endif  // MEGATRON_WITH_MPI
