// Host-tensor collectives over MPI: one communicator per group, every operation non-blocking
// (MPI-3 I-collectives) so that waits can time out. bf16/fp16 reduce through user-defined ops
// that accumulate in float.
#include "build_config.h"
#if MEGATRON_WITH_MPI

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
// The C API only: OpenMPI's and MPICH's C++ bindings are deprecated and need extra libraries.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backend.h"
#include "megatron/program.h"
#include "mpi_progress.h"

namespace megatron::comm::detail {
namespace {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  TORCH_CHECK(false, "[comm] ", call, " failed: ", std::string(text, length));
}

MPI_Datatype mpi_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kBool: return MPI_C_BOOL;
    case at::kBFloat16:
    case at::kHalf: return MPI_UINT16_T;  // moved as bits; reduced by the ops below
    default: TORCH_CHECK(false, "[comm] MPI collectives do not support dtype ", type);
  }
}

template <typename T, typename Combine>
void reduce_16bit(void* in, void* inout, int* len, Combine combine) {
  auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(combine(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

struct Sum {
  float operator()(float a, float b) const { return a + b; }
};
struct Max {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
struct Min {
  float operator()(float a, float b) const { return a < b ? a : b; }
};

template <typename T, typename Combine>
void reduce_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_16bit<T>(in, inout, len, Combine{});
}

// User ops for 16-bit floats, created once after MPI_Init.
struct HalfOps {
  MPI_Op bf16[3], fp16[3];  // sum, max, min
};
HalfOps g_half_ops;

void create_half_ops() {
  MPI_Op_create(&reduce_fn<c10::BFloat16, Sum>, 1, &g_half_ops.bf16[0]);
  MPI_Op_create(&reduce_fn<c10::BFloat16, Max>, 1, &g_half_ops.bf16[1]);
  MPI_Op_create(&reduce_fn<c10::BFloat16, Min>, 1, &g_half_ops.bf16[2]);
  MPI_Op_create(&reduce_fn<c10::Half, Sum>, 1, &g_half_ops.fp16[0]);
  MPI_Op_create(&reduce_fn<c10::Half, Max>, 1, &g_half_ops.fp16[1]);
  MPI_Op_create(&reduce_fn<c10::Half, Min>, 1, &g_half_ops.fp16[2]);
}

MPI_Op mpi_op(ReduceOp op, at::ScalarType type) {
  int index = op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0;  // avg = sum, then divide
  if (type == at::kBFloat16) return g_half_ops.bf16[index];
  if (type == at::kHalf) return g_half_ops.fp16[index];
  if (type == at::kBool) return index == 0 ? MPI_LOR : index == 1 ? MPI_LOR : MPI_LAND;
  return index == 0 ? MPI_SUM : index == 1 ? MPI_MAX : MPI_MIN;
}

// Ends the job when a blocking MPI call outlives its timeout: a blocked call cannot be
// interrupted, so the watchdog thread prints the message a polled wait would throw and calls
// MPI_Abort. Each calling thread owns one slot, so arming is two stores, with no lock and no
// allocation on the collective's path; the watchdog looks at the slots a few times a second.
class Watchdog {
 public:
  struct Slot {
    std::atomic<const OpInfo*> info{nullptr};  // set while a blocking call is in flight
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout{0};
  };

  // This thread's slot, registered on first use. Slots and the watchdog are never destroyed:
  // the thread may still be sleeping while the process exits.
  static Slot& slot() {
    thread_local Slot* mine = instance().register_slot();
    return *mine;
  }

 private:
  static Watchdog& instance() {
    static Watchdog* watchdog = new Watchdog();
    return *watchdog;
  }

  Watchdog() {
    std::thread([this] { run(); }).detach();
  }

  Slot* register_slot() {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_.push_back(new Slot());
    return slots_.back();
  }

  void run() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      for (Slot* slot : slots_) {
        const OpInfo* info = slot->info.load(std::memory_order_acquire);
        if (info == nullptr || now < slot->deadline) continue;
        std::fprintf(stderr, "%s\n", describe_timeout(*info, slot->timeout).c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, program::kCollectiveFailed);
      }
    }
  }

  std::mutex mutex_;
  std::vector<Slot*> slots_;
};

class WatchdogGuard {
 public:
  WatchdogGuard(const OpInfo& info, std::chrono::milliseconds timeout) : slot_(Watchdog::slot()) {
    slot_.deadline = std::chrono::steady_clock::now() + timeout;
    slot_.timeout = timeout;
    slot_.info.store(&info, std::memory_order_release);
  }
  ~WatchdogGuard() { slot_.info.store(nullptr, std::memory_order_release); }

 private:
  Watchdog::Slot& slot_;
};

int mpi_count(const at::Tensor& t) {
  TORCH_CHECK(t.numel() <= INT_MAX, "[comm] tensor of ", t.numel(), " elements exceeds MPI's count limit (", INT_MAX,
              "); split it");
  return static_cast<int>(t.numel());
}

class MpiBackend : public Backend {
 public:
  MpiBackend(MPI_Comm comm, BackendContext ctx) : comm_(comm), ctx_(ctx) {}
  ~MpiBackend() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Comm_free(&comm_);
    }
  }

  WorkHandle all_reduce(at::Tensor& tensor, ReduceOp op, const OpInfo& info) override {
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), mpi_count(tensor), mpi_type(tensor.scalar_type()),
                              mpi_op(op, tensor.scalar_type()), comm_),
                "MPI_Allreduce");
      if (op == ReduceOp::kAvg) tensor.div_(ctx_.size);
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), mpi_count(tensor), mpi_type(tensor.scalar_type()),
                             mpi_op(op, tensor.scalar_type()), comm_, requests.data()),
              "MPI_Iallreduce");
    std::function<void()> finish;
    if (op == ReduceOp::kAvg) finish = [tensor, n = ctx_.size]() mutable { tensor.div_(n); };
    return make_work(std::move(requests), info, std::move(finish), {tensor});
  }

  WorkHandle all_gather(at::Tensor& output, const at::Tensor& input, const OpInfo& info) override {
    auto type = mpi_type(input.scalar_type());
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(
          MPI_Allgather(input.data_ptr(), mpi_count(input), type, output.data_ptr(), mpi_count(input), type, comm_),
          "MPI_Allgather");
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(MPI_Iallgather(input.data_ptr(), mpi_count(input), type, output.data_ptr(), mpi_count(input), type, comm_,
                             requests.data()),
              "MPI_Iallgather");
    return make_work(std::move(requests), info, nullptr, {output, input});
  }

  WorkHandle all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& recv_counts,
                        const std::vector<int64_t>& send_counts, const OpInfo& info) override {
    // MPI's counts and displacements are ints, kept alive with the request as int32 tensors.
    auto ints = [](const std::vector<int64_t>& counts) {
      at::Tensor c = at::tensor(counts, at::kLong);
      at::Tensor displs = c.cumsum(0) - c;
      TORCH_CHECK(c.sum().item<int64_t>() <= INT_MAX, "[comm] all_to_all of ", c.sum().item<int64_t>(),
                  " elements exceeds MPI's count limit (", INT_MAX, "); split it");
      return std::make_pair(c.to(at::kInt), displs.to(at::kInt));
    };
    auto [recv, recv_displs] = ints(recv_counts);
    auto [send, send_displs] = ints(send_counts);
    auto type = mpi_type(input.scalar_type());
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Alltoallv(input.data_ptr(), send.data_ptr<int>(), send_displs.data_ptr<int>(), type,
                              output.data_ptr(), recv.data_ptr<int>(), recv_displs.data_ptr<int>(), type, comm_),
                "MPI_Alltoallv");
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(
        MPI_Ialltoallv(input.data_ptr(), send.data_ptr<int>(), send_displs.data_ptr<int>(), type, output.data_ptr(),
                       recv.data_ptr<int>(), recv_displs.data_ptr<int>(), type, comm_, requests.data()),
        "MPI_Ialltoallv");
    return make_work(std::move(requests), info, nullptr, {output, input, recv, recv_displs, send, send_displs});
  }

  WorkHandle reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op, const OpInfo& info) override {
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(), mpi_count(output),
                                         mpi_type(input.scalar_type()), mpi_op(op, input.scalar_type()), comm_),
                "MPI_Reduce_scatter_block");
      if (op == ReduceOp::kAvg) output.div_(ctx_.size);
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(
        MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(), mpi_count(output), mpi_type(input.scalar_type()),
                                  mpi_op(op, input.scalar_type()), comm_, requests.data()),
        "MPI_Ireduce_scatter_block");
    std::function<void()> finish;
    if (op == ReduceOp::kAvg) finish = [output, n = ctx_.size]() mutable { output.div_(n); };
    return make_work(std::move(requests), info, std::move(finish), {output, input});
  }

  WorkHandle broadcast(at::Tensor& tensor, int src, const OpInfo& info) override {
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Bcast(tensor.data_ptr(), mpi_count(tensor), mpi_type(tensor.scalar_type()), src, comm_),
                "MPI_Bcast");
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(
        MPI_Ibcast(tensor.data_ptr(), mpi_count(tensor), mpi_type(tensor.scalar_type()), src, comm_, requests.data()),
        "MPI_Ibcast");
    return make_work(std::move(requests), info, nullptr, {tensor});
  }

  WorkHandle reduce(at::Tensor& tensor, int dst, ReduceOp op, const OpInfo& info) override {
    // MPI takes the root's input in place; the others' receive buffer is not used.
    const bool root = ctx_.rank == dst;
    void* send = root ? MPI_IN_PLACE : tensor.data_ptr();
    void* recv = root ? tensor.data_ptr() : nullptr;
    auto type = mpi_type(tensor.scalar_type());
    auto mop = mpi_op(op, tensor.scalar_type());
    std::function<void()> finish;
    if (root && op == ReduceOp::kAvg) finish = [tensor, n = ctx_.size]() mutable { tensor.div_(n); };
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Reduce(send, recv, mpi_count(tensor), type, mop, dst, comm_), "MPI_Reduce");
      if (finish) finish();
      return completed_work();
    }
    // Open MPI's nonblocking reduce (libnbc) is an unsegmented tree, several times slower than its
    // nonblocking all-reduce on large tensors: the others all-reduce a copy they drop (in place on
    // every rank, as MPI requires of MPI_IN_PLACE).
    std::vector<MPI_Request> requests(1);
    at::Tensor result = root ? tensor : tensor.clone();
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, result.data_ptr(), mpi_count(tensor), type, mop, comm_, requests.data()),
              "MPI_Iallreduce");
    return make_work(std::move(requests), info, std::move(finish), {tensor, result});
  }

  WorkHandle batch_p2p(const std::vector<P2POp>& ops, const OpInfo& info) override {
    std::vector<MPI_Request> requests(ops.size());
    std::vector<at::Tensor> keep;
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& p = ops[i];
      auto type = mpi_type(p.tensor.scalar_type());
      if (p.kind == P2POp::kSend) {
        check_mpi(MPI_Isend(p.tensor.data_ptr(), mpi_count(p.tensor), type, p.peer, kP2PTag, comm_, &requests[i]),
                  "MPI_Isend");
      } else {
        check_mpi(MPI_Irecv(p.tensor.data_ptr(), mpi_count(p.tensor), type, p.peer, kP2PTag, comm_, &requests[i]),
                  "MPI_Irecv");
      }
      keep.push_back(p.tensor);
    }
    return make_work(std::move(requests), info, nullptr, std::move(keep));
  }

  WorkHandle barrier(const OpInfo& info) override {
    if (info.blocking) {
      WatchdogGuard guard(info, ctx_.timeout);
      check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
      return completed_work();
    }
    std::vector<MPI_Request> requests(1);
    check_mpi(MPI_Ibarrier(comm_, requests.data()), "MPI_Ibarrier");
    return make_work(std::move(requests), info, nullptr, {});
  }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string& name) override {
    // MPI_Comm_create_group is collective over the new group only, so ranks outside it
    // never take part (and need not create every group of the job).
    auto it = std::find(ranks.begin(), ranks.end(), ctx_.rank);
    if (it == ranks.end()) return nullptr;
    MPI_Group parent, child;
    check_mpi(MPI_Comm_group(comm_, &parent), "MPI_Comm_group");
    check_mpi(MPI_Group_incl(parent, static_cast<int>(ranks.size()), ranks.data(), &child), "MPI_Group_incl");
    MPI_Comm comm;
    // The tag keeps concurrent creations of different groups apart.
    int tag = static_cast<int>(std::hash<std::string>{}(name)&0x3fff);
    check_mpi(MPI_Comm_create_group(comm_, child, tag, &comm), "MPI_Comm_create_group");
    MPI_Group_free(&child);
    MPI_Group_free(&parent);
    BackendContext ctx = ctx_;
    ctx.rank = static_cast<int>(it - ranks.begin());
    ctx.size = static_cast<int>(ranks.size());
    return std::make_unique<MpiBackend>(comm, ctx);
  }

 private:
  static constexpr int kP2PTag = 7;

  WorkHandle make_work(std::vector<MPI_Request> requests, const OpInfo& info, std::function<void()> finish,
                       std::vector<at::Tensor> keep_alive) {
    auto tracked = std::make_shared<TrackedRequests>();
    tracked->requests = std::move(requests);
    track_mpi_requests(tracked);
    auto test = [tracked, keep_alive = std::move(keep_alive)]() {
      std::lock_guard<std::mutex> lock(tracked->mutex);
      int flag = 0;
      check_mpi(
          MPI_Testall(static_cast<int>(tracked->requests.size()), tracked->requests.data(), &flag, MPI_STATUSES_IGNORE),
          "MPI_Testall");
      return flag != 0;
    };
    return std::make_shared<PollingWork>(info, ctx_.timeout, std::move(test), std::move(finish));
  }

  MPI_Comm comm_;
  BackendContext ctx_;
};

void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  stop_mpi_progress();
  MPI_Finalize();
}

}  // namespace

void init_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  // Errors come back as return codes and become exceptions naming the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  create_half_ops();
  init_mpi_progress(provided);
  std::atexit(finalize_mpi_at_exit);
}

std::unique_ptr<Backend> make_mpi_world_backend(BackendContext ctx) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  TORCH_CHECK(rank == ctx.rank && size == ctx.size, "[comm] MPI says rank ", rank, " of ", size,
              " but the launcher environment says rank ", ctx.rank, " of ", ctx.size,
              size == 1 ? " (under srun, pass --mpi=pmix so that MPI sees the step's tasks)" : "");
  return std::make_unique<MpiBackend>(MPI_COMM_WORLD, ctx);
}

void mpi_abort(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace megatron::comm::detail

#endif  // MEGATRON_WITH_MPI
