// CUDA-tensor collectives over NCCL: one communicator per group, created on the group's first
// CUDA operation, running on its own stream. wait() makes the waiting thread's current stream
// wait for the communication's end event (cudaStreamWaitEvent) and returns at once: the host
// never waits for NCCL. A watchdog thread enforces the timeout instead: it aborts the communicator and ends the
// job with the message a polled wait would give (collective, group, ranks, how to raise it).
#include "build_config.h"
#if MEGATRON_WITH_NCCL

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "backend.h"
#include "megatron/program.h"

namespace megatron::comm::detail {

// The unique id of a new communicator reaches its members through the launcher's store in
// torchrun-style jobs, else through the host world (MPI, or the single-process backend).
struct NcclRendezvous {
  c10::intrusive_ptr<c10d::Store> store;
  // Communicators created so far per group name on this rank, for store keys: members of a group
  // create its communicator in the same order, but not every rank creates every group.
  std::map<std::string, int> created;
  std::string prefix;
};

namespace {

void check_nccl(ncclResult_t rc, const char* call, const std::string& group) {
  TORCH_CHECK(rc == ncclSuccess, "[comm] ", call, " on group '", group, "' failed: ", ncclGetErrorString(rc), " (",
              ncclGetLastError(nullptr), ")");
}

ncclDataType_t nccl_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte:
    case at::kBool: return ncclUint8;
    default: TORCH_CHECK(false, "[comm] NCCL collectives do not support dtype ", type);
  }
}

ncclRedOp_t nccl_op(ReduceOp op, at::ScalarType type) {
  if (type == at::kBool) return op == ReduceOp::kMin ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// Watches the collectives that callers have waited on (their streams wait; the host does not):
// each one either completes, or fails asynchronously, or outlives its timeout, in which case the
// communicator is aborted (its kernels return) and the job ends with one clear line. Never
// destroyed: the thread may still be sleeping while the process exits.
class NcclWatchdog {
 public:
  struct Entry {
    std::shared_ptr<at::cuda::CUDAEvent> done;
    ncclComm_t comm;
    OpInfo info;
    std::chrono::milliseconds timeout;
    std::chrono::steady_clock::time_point deadline;
  };

  static NcclWatchdog& instance() {
    static NcclWatchdog* watchdog = new NcclWatchdog();
    return *watchdog;
  }

  void watch(Entry e) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(e));
  }

 private:
  NcclWatchdog() {
    std::thread([this] { run(); }).detach();
  }

  [[noreturn]] static void fail(const Entry& e, const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    ncclCommAbort(e.comm);
    std::_Exit(program::kCollectiveFailed);
  }

  void run() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::lock_guard<std::mutex> lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      for (auto it = entries_.begin(); it != entries_.end();) {
        ncclResult_t async_error = ncclSuccess;
        if (ncclCommGetAsyncError(it->comm, &async_error) != ncclSuccess || async_error != ncclSuccess) {
          fail(*it, "[comm] " + it->info.op + " on group '" + it->info.group +
                        "' failed: " + ncclGetErrorString(async_error) + " (" + ncclGetLastError(nullptr) + ")");
        }
        if (it->done->query()) {
          it = entries_.erase(it);
          continue;
        }
        if (now >= it->deadline) fail(*it, describe_timeout(it->info, it->timeout));
        ++it;
      }
    }
  }

  std::mutex mutex_;
  std::list<Entry> entries_;
};

// A launched NCCL operation: waiting on it is a stream wait plus the watchdog's deadline.
class NcclWork : public Work {
 public:
  NcclWork(OpInfo info, std::chrono::milliseconds timeout, std::shared_ptr<at::cuda::CUDAEvent> done, ncclComm_t comm,
           c10::DeviceIndex device)
      : Work(timeout), info_(std::move(info)), done_(std::move(done)), comm_(comm), device_(device) {}

  bool is_completed() override { return done_->query(); }

  // The stream current where the wait is called, as c10d's: the autograd engine's device thread
  // waits for backward collectives launched from another thread, on its own current stream.
  void wait(std::chrono::milliseconds timeout) override {
    done_->block(c10::cuda::getCurrentCUDAStream(device_));  // every stream that waits
    if (waited_) return;
    waited_ = true;
    NcclWatchdog::instance().watch({done_, comm_, info_, timeout, std::chrono::steady_clock::now() + timeout});
  }

 private:
  OpInfo info_;
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  ncclComm_t comm_;
  c10::DeviceIndex device_;
  bool waited_ = false;
};

class NcclBackend : public Backend {
 public:
  NcclBackend(ncclComm_t comm, BackendContext ctx, std::string name, int device)
      : comm_(comm),
        ctx_(ctx),
        name_(std::move(name)),
        device_(device),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device)) {}
  ~NcclBackend() override { ncclCommDestroy(comm_); }

  WorkHandle all_reduce(at::Tensor& t, ReduceOp op, const OpInfo& info) override {
    return run(info, {t}, [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()),
                           nccl_op(op, t.scalar_type()), comm_, s);
    });
  }
  WorkHandle all_gather(at::Tensor& out, const at::Tensor& in, const OpInfo& info) override {
    return run(info, {out, in}, [&](cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.scalar_type()), comm_, s);
    });
  }
  // NCCL's all-to-all is grouped sends and receives, one pair per peer.
  WorkHandle all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& recv_counts,
                        const std::vector<int64_t>& send_counts, const OpInfo& info) override {
    return run(info, {out, in}, [&](cudaStream_t s) {
      auto type = nccl_type(in.scalar_type());
      const auto bytes = static_cast<int64_t>(in.element_size());
      auto* send = static_cast<char*>(in.data_ptr());
      auto* recv = static_cast<char*>(out.data_ptr());
      ncclResult_t rc = ncclGroupStart();
      for (size_t peer = 0; peer < send_counts.size() && rc == ncclSuccess; ++peer) {
        if (send_counts[peer] > 0) rc = ncclSend(send, send_counts[peer], type, static_cast<int>(peer), comm_, s);
        if (rc == ncclSuccess && recv_counts[peer] > 0)
          rc = ncclRecv(recv, recv_counts[peer], type, static_cast<int>(peer), comm_, s);
        send += send_counts[peer] * bytes;
        recv += recv_counts[peer] * bytes;
      }
      ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  WorkHandle reduce_scatter(at::Tensor& out, const at::Tensor& in, ReduceOp op, const OpInfo& info) override {
    return run(info, {out, in}, [&](cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(in.scalar_type()),
                               nccl_op(op, in.scalar_type()), comm_, s);
    });
  }
  WorkHandle broadcast(at::Tensor& t, int src, const OpInfo& info) override {
    return run(info, {t}, [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), src, comm_, s);
    });
  }
  WorkHandle reduce(at::Tensor& t, int dst, ReduceOp op, const OpInfo& info) override {
    return run(info, {t}, [&](cudaStream_t s) {
      return ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op, t.scalar_type()),
                        dst, comm_, s);
    });
  }
  WorkHandle batch_p2p(const std::vector<P2POp>& ops, const OpInfo& info) override {
    std::vector<at::Tensor> tensors;
    for (const auto& op : ops) tensors.push_back(op.tensor);
    return run(info, tensors, [&](cudaStream_t s) {
      // Grouped so that sends and receives between the same pair of ranks cannot deadlock.
      ncclResult_t rc = ncclGroupStart();
      for (const auto& op : ops) {
        if (rc != ncclSuccess) break;
        auto type = nccl_type(op.tensor.scalar_type());
        rc = op.kind == P2POp::kSend ? ncclSend(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, s)
                                     : ncclRecv(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, s);
      }
      ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  WorkHandle barrier(const OpInfo& info) override {
    auto flag = at::zeros({1}, at::TensorOptions().device(at::kCUDA, device_));
    return all_reduce(flag, ReduceOp::kSum, info);
  }
  std::unique_ptr<Backend> split(const std::vector<int>&, const std::string&) override {
    return nullptr;  // each group makes its own communicator when it first meets a CUDA tensor
  }

 private:
  template <typename Launch>
  WorkHandle run(const OpInfo& info, const std::vector<at::Tensor>& tensors, Launch launch) {
    c10::cuda::CUDAGuard guard(device_);
    auto current = c10::cuda::getCurrentCUDAStream(device_);
    at::cuda::CUDAEvent inputs_ready;
    inputs_ready.record(current);
    inputs_ready.block(stream_);
    check_nccl(launch(stream_.stream()), info.op.c_str(), name_);
    for (const auto& t : tensors) {
      // The caching allocator must not hand this memory out again before NCCL is done with it.
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
    }
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(stream_);
    return std::make_shared<NcclWork>(info, ctx_.timeout, std::move(done), comm_,
                                      static_cast<c10::DeviceIndex>(device_));
  }

  ncclComm_t comm_;
  BackendContext ctx_;
  std::string name_;
  int device_;
  c10::cuda::CUDAStream stream_;
};

}  // namespace

std::shared_ptr<NcclRendezvous> make_nccl_rendezvous(c10::intrusive_ptr<c10d::Store> store) {
  auto rendezvous = std::make_shared<NcclRendezvous>();
  rendezvous->store = std::move(store);
  rendezvous->prefix = "nccl/";
  return rendezvous;
}

std::unique_ptr<Backend> make_nccl_backend(BackendContext ctx, std::vector<int> global_ranks, std::string name,
                                           std::shared_ptr<NcclRendezvous> rendezvous, Backend* host_backend) {
  ncclUniqueId id;
  if (ctx.rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", name);
  if (rendezvous->store) {
    // Key by group name (which lists its ranks) and how many communicators of that name this
    // rank has created.
    std::string key = rendezvous->prefix + name + "/" + std::to_string(rendezvous->created[name]++);
    if (ctx.rank == 0) {
      std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
      rendezvous->store->set(key, bytes);
    } else {
      auto bytes = rendezvous->store->get(key);
      TORCH_CHECK(bytes.size() == sizeof(id), "[comm] bad NCCL id for group '", name, "' in store");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } else {
    TORCH_INTERNAL_ASSERT(host_backend != nullptr);
    auto bytes = at::empty({static_cast<int64_t>(sizeof(id))}, at::kByte);
    if (ctx.rank == 0) std::memcpy(bytes.data_ptr(), &id, sizeof(id));
    OpInfo info{
        "broadcast(NCCL unique id)", name, ctx.rank, std::make_shared<const std::vector<int>>(global_ranks), {}, true};
    host_backend->broadcast(bytes, 0, info)->wait();
    std::memcpy(&id, bytes.data_ptr(), sizeof(id));
  }
  int device = c10::cuda::current_device();
  c10::cuda::CUDAGuard guard(device);
  ncclComm_t comm;
  check_nccl(ncclCommInitRank(&comm, ctx.size, id, ctx.rank), "ncclCommInitRank", name);
  return std::make_unique<NcclBackend>(comm, ctx, std::move(name), device);
}

}  // namespace megatron::comm::detail

#endif  // MEGATRON_WITH_NCCL
