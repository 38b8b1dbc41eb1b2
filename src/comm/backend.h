// Private to src/comm: one group's communicator on one transport (MPI, NCCL, or the
// single-process one). ProcessGroup checks arguments, then hands tensors to a Backend.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "build_config.h"
#include "megatron/comm/collective_error.h"
#include "megatron/comm/process_group.h"

namespace c10d {
class Store;
}

namespace megatron::comm::detail {

// What an operation is, for the timeout message: "all_reduce(sum) on group 'tp' ...".
// Cheap to build on every call: the peer list is only worked out for the message.
struct OpInfo {
  std::string op;                                       // "all_reduce(sum)", "send", ...
  std::string group;                                    // group name
  int rank = 0;                                         // this process's rank in the group
  std::shared_ptr<const std::vector<int>> group_ranks;  // group rank -> world rank
  std::vector<int> peer_group_ranks;                    // the ranks waited on; empty: every other member
  // The caller waits right away: a backend may run its blocking call (faster in MPI) under a
  // watchdog that ends the job at the timeout, instead of polling a non-blocking one.
  bool blocking = false;
};

std::string describe_timeout(const OpInfo& info, std::chrono::milliseconds timeout);
// "[comm] all_reduce(sum) on group 'world' failed at group rank 0 (world rank 0) ...: <why>".
std::string describe_failure(const OpInfo& info, const std::string& why);

// A Work whose wait() polls `test` until it returns true or the timeout passes; `finish` runs
// once after completion (copy-back, averaging).
class PollingWork : public Work {
 public:
  PollingWork(OpInfo info, std::chrono::milliseconds timeout, std::function<bool()> test, std::function<void()> finish);
  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout) override;

 private:
  void complete();
  OpInfo info_;
  std::function<bool()> test_;
  std::function<void()> finish_;
  bool done_ = false;
};

// An operation that is already done (shared; waiting on it returns at once).
WorkHandle completed_work();

// $MEGATRON_INJECT_COMM_LATENCY_US = D (default 0): every collective on host tensors completes no
// earlier than D microseconds after its launch, its wait sleeping (no CPU) until then. On a
// machine whose real communication is nearly free, a wait in the wrong place or work that should
// overlap but runs in series then shows as time, in tests and benchmarks.
std::chrono::microseconds injected_latency();
// $MEGATRON_INJECT_COMM_US_PER_MB = T (default 0): each also takes T microseconds per MiB of its
// tensor, as a link of limited bandwidth would (half a tensor, half the time).
double injected_us_per_mib();
// The collectives of one group share one link, as NCCL's run in order on the group's stream:
// under an injected latency each completes D (+ its bytes' time) after the later of its launch
// and the completion of the group's previous one, so that k collectives in flight together still
// take k x D.
class InjectedLink {
 public:
  std::chrono::steady_clock::time_point ready_after(std::chrono::steady_clock::time_point launched, int64_t bytes);

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point free_{};
};
// `work` held back until `ready`.
WorkHandle complete_no_earlier_than(WorkHandle work, std::chrono::steady_clock::time_point ready,
                                    std::chrono::milliseconds timeout);

class Backend {
 public:
  virtual ~Backend() = default;
  // Tensors are contiguous and checked; `info` describes the call for errors.
  virtual WorkHandle all_reduce(at::Tensor& tensor, ReduceOp op, const OpInfo& info) = 0;
  virtual WorkHandle all_gather(at::Tensor& output, const at::Tensor& input, const OpInfo& info) = 0;
  virtual WorkHandle reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op, const OpInfo& info) = 0;
  // Counts in elements: send_counts[i] of input go to rank i, recv_counts[j] from rank j land in
  // output, each in rank order.
  virtual WorkHandle all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& recv_counts,
                                const std::vector<int64_t>& send_counts, const OpInfo& info) = 0;
  virtual WorkHandle broadcast(at::Tensor& tensor, int src, const OpInfo& info) = 0;
  // In place: the sum (or average) over the group lands in `tensor` on `dst`; elsewhere it is unchanged.
  virtual WorkHandle reduce(at::Tensor& tensor, int dst, ReduceOp op, const OpInfo& info) = 0;
  virtual WorkHandle batch_p2p(const std::vector<P2POp>& ops, const OpInfo& info) = 0;
  virtual WorkHandle barrier(const OpInfo& info) = 0;
  // The backend of a subgroup (`ranks` are this group's ranks); nullptr outside it.
  virtual std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string& name) = 0;
};

struct BackendContext {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
};

// Single process: every collective is the identity (or a copy), p2p only to itself.
std::unique_ptr<Backend> make_local_backend(BackendContext ctx);

#if MEGATRON_WITH_MPI
// MPI_COMM_WORLD, after init_mpi().
void init_mpi();
std::unique_ptr<Backend> make_mpi_world_backend(BackendContext ctx);
void mpi_abort(int exit_code);
#endif

// torchrun/deepspeed-style jobs: the TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it
// unless torchrun's agent does), under a prefix per restart.
c10::intrusive_ptr<c10d::Store> make_launcher_store(const LauncherEnv& env, std::chrono::milliseconds timeout);

#if MEGATRON_WITH_GLOO
// Host tensors in jobs without MPI: c10d::ProcessGroupGloo over `store`.
std::unique_ptr<Backend> make_gloo_world_backend(BackendContext ctx, c10::intrusive_ptr<c10d::Store> store);
#endif

#if MEGATRON_WITH_NCCL
struct NcclRendezvous;  // how a new NCCL communicator gets its unique id
std::unique_ptr<Backend> make_nccl_backend(BackendContext ctx, std::vector<int> global_ranks, std::string name,
                                           std::shared_ptr<NcclRendezvous> rendezvous, Backend* host_backend);
// `store`: the launcher's (torchrun-style jobs), or null to pass ids through the host world.
std::shared_ptr<NcclRendezvous> make_nccl_rendezvous(c10::intrusive_ptr<c10d::Store> store);
#endif

}  // namespace megatron::comm::detail
