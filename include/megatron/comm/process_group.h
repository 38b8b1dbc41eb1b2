// ProcessGroup: collectives and point-to-point over an ordered set of ranks. Host tensors go
// through MPI (one communicator per group), CUDA tensors through NCCL (one communicator per
// group, on its own stream). Every wait has a timeout that names the operation, group and peers:
// Work::wait() throws it; a blocking host collective, which runs MPI's own blocking call, has a
// watchdog print it and end the job. Every rank of a group calls a collective in the same form,
// blocking or _async: MPI never matches one with the other.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "megatron/comm/launcher_env.h"

namespace megatron::comm {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

MEGATRON_API const char* to_string(ReduceOp op);

// Handle of an operation in flight. wait() blocks until it completes; past the timeout it throws
// c10::Error naming the operation, group, rank and peers, and the operation stays pending (a
// later wait() may still complete it). CUDA tensors under NCCL are the exception: wait() makes
// the caller's CUDA stream wait and returns at once, and past the timeout a watchdog aborts the
// communicator and ends the job with the same message.
class MEGATRON_API Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  void wait() { wait(timeout_); }
  virtual void wait(std::chrono::milliseconds timeout) = 0;

 protected:
  explicit Work(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  std::chrono::milliseconds timeout_;
};
using WorkHandle = std::shared_ptr<Work>;

// One send or receive of a batch (Megatron's P2POp); peer is a rank within the group.
struct MEGATRON_API P2POp {
  enum Kind { kSend, kRecv };
  Kind kind;
  at::Tensor tensor;
  int peer;
};

struct MEGATRON_API DistributedOptions {
  // Default 10 minutes; $MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS overrides it when set.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // Where the job's tensors live: CPU jobs of several ranks need MPI (mpirun); CUDA jobs use
  // NCCL and may also be launched torchrun-style.
  at::DeviceType device_type = at::kCPU;
};

class ProcessGroupImpl;

class MEGATRON_API ProcessGroup {
 public:
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const std::string& name() const;
  int rank() const;  // this process's rank within the group
  int size() const;
  const std::vector<int>& global_ranks() const;  // group rank i -> world rank
  int global_rank(int group_rank) const { return global_ranks().at(group_rank); }
  std::chrono::milliseconds timeout() const;

  // A subgroup of this group (ranks given as this group's ranks, in the new group's order).
  // Collective over the new group's members only; returns nullptr on ranks outside it.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const std::string& name);

  // All collectives act in place on contiguous tensors that live on one device type (CPU: MPI,
  // CUDA: NCCL); each rank passes the same shape and dtype.
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  WorkHandle all_reduce_async(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  // Many small tensors (one dtype and device, any layout) reduced in place by one all-reduce of
  // their concatenation.
  void all_reduce_coalesced(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::kSum);
  // output: [size * n, ...] = concatenation of every rank's input [n, ...] along dim 0.
  void all_gather(at::Tensor& output, const at::Tensor& input);
  WorkHandle all_gather_async(at::Tensor& output, const at::Tensor& input);
  // input: [size * n, ...]; output: [n, ...] = this rank's slice of the reduction.
  void reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op = ReduceOp::kSum);
  WorkHandle reduce_scatter_async(at::Tensor& output, const at::Tensor& input, ReduceOp op = ReduceOp::kSum);
  // torch.distributed.all_to_all_single, which MoE's token dispatch uses: input's rows (dim 0)
  // go in runs, input_splits[i] rows to group rank i; output receives output_splits[j] rows from
  // each rank j, in rank order. Empty lists: dim 0 split evenly. Rank i's input_splits[j] must
  // equal rank j's output_splits[i] (exchanged first, as Megatron-Core's dispatcher does).
  void all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& output_splits = {},
                  const std::vector<int64_t>& input_splits = {});
  WorkHandle all_to_all_async(at::Tensor& output, const at::Tensor& input,
                              const std::vector<int64_t>& output_splits = {},
                              const std::vector<int64_t>& input_splits = {});
  void broadcast(at::Tensor& tensor, int src);  // src: group rank
  WorkHandle broadcast_async(at::Tensor& tensor, int src);
  // In place: `dst` (group rank) ends with the sum (or average) over the group; the others' tensors are unchanged.
  void reduce(at::Tensor& tensor, int dst, ReduceOp op = ReduceOp::kSum);
  WorkHandle reduce_async(at::Tensor& tensor, int dst, ReduceOp op = ReduceOp::kSum);
  void send(const at::Tensor& tensor, int dst);  // dst/src: group ranks
  void recv(at::Tensor& tensor, int src);
  // Megatron's batch_isend_irecv: all operations are started together, so neighbours may send
  // to each other at once without deadlock.
  WorkHandle batch_isend_irecv(const std::vector<P2POp>& ops);
  void barrier();
  // Called with each operation's name and tensor shape as this rank issues it, and with "wait N"
  // as it waits for an operation issued asynchronously, N being that operation's place among all
  // those reported (from 0, since the observer was set); the wait goes to the observer the
  // operation was issued under. nullptr: none. Tests use it to check that every rank issues the
  // same collectives in the same order, and where each asynchronous one is waited for.
  void set_issue_observer(std::function<void(const std::string&)> observer);

 private:
  friend class ProcessGroupImpl;
  explicit ProcessGroup(std::unique_ptr<ProcessGroupImpl> impl);
  std::unique_ptr<ProcessGroupImpl> impl_;
};

// Starts the communication runtime for this process (MPI, and NCCL lazily on first CUDA
// tensor) and returns the world group. Call once per process. A torchrun-style CPU job of more
// than one rank is refused: run it under mpirun.
MEGATRON_API std::shared_ptr<ProcessGroup> init_distributed(const LauncherEnv& env, DistributedOptions options = {});

// For a program's error path: ends every rank of the job (MPI_Abort), so that no rank is left
// waiting on one that failed. Without MPI it returns and the caller exits.
MEGATRON_API void abort_job(int exit_code);

}  // namespace megatron::comm
