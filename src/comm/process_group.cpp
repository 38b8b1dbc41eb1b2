// ProcessGroup: argument checks shared by every transport, the choice of transport per tensor
// (host: MPI, Gloo or single-process; CUDA: NCCL), and init_distributed().
#include "megatron/comm/process_group.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdlib>
#include <sstream>

#include "backend.h"
#include "megatron/cpu_math.h"

namespace megatron::comm {

using detail::Backend;
using detail::OpInfo;

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

class ProcessGroupImpl {
 public:
  std::string name;
  std::vector<int> global_ranks;
  std::shared_ptr<const std::vector<int>> shared_ranks;  // the same, for error messages
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  at::DeviceType device_type = at::kCPU;
  std::unique_ptr<Backend> host;                     // null in torchrun-style GPU jobs of builds without Gloo
  std::unique_ptr<Backend> cuda;                     // created on the first CUDA tensor
  detail::InjectedLink link;                         // under $MEGATRON_INJECT_COMM_LATENCY_US
  std::function<void(const std::string&)> observer;  // set_issue_observer
  int64_t observed = 0;                              // operations it was told of
#if MEGATRON_WITH_NCCL
  std::shared_ptr<detail::NcclRendezvous> rendezvous;
#endif

  static std::shared_ptr<ProcessGroup> wrap(std::unique_ptr<ProcessGroupImpl> impl) {
    impl->shared_ranks = std::make_shared<const std::vector<int>>(impl->global_ranks);
    return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
  }

  int size() const {
    return static_cast<int>(global_ranks.size());
  }

  // torchrun-style GPU jobs of builds without Gloo: host tensors (flags, metrics, timers)
  // travel through NCCL on the rank's current CUDA device, synchronously.
  bool staged_on_device(const at::Tensor& t) const {
    return t.defined() && t.is_cpu() && !host && device_type == at::kCUDA;
  }
  // Runs `start` (a blocking collective) on a CUDA copy of `out` and copies the result back.
  template <typename Start>
  static WorkHandle via_device(at::Tensor& out, Start start) {
    at::Tensor d = out.to(at::kCUDA);
    start(d)->wait();
    out.copy_(d);
    return detail::completed_work();
  }

  // An asynchronous operation just issued, which tells the observer when it is waited for.
  WorkHandle observed_async(WorkHandle work);

  WorkHandle start_all_reduce(at::Tensor& tensor, ReduceOp op, bool blocking);
  WorkHandle start_all_gather(at::Tensor& output, const at::Tensor& input, bool blocking);
  WorkHandle start_reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op, bool blocking);
  WorkHandle start_all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& output_splits,
                              const std::vector<int64_t>& input_splits, bool blocking);
  WorkHandle start_broadcast(at::Tensor& tensor, int src, bool blocking);
  WorkHandle start_reduce(at::Tensor& tensor, int dst, ReduceOp op, bool blocking);

  OpInfo info(std::string op, std::vector<int> peer_group_ranks = {}, bool blocking = false) const {
    return OpInfo{std::move(op), name, rank, shared_ranks, std::move(peer_group_ranks), blocking};
  }

  Backend& backend_for(const at::Tensor& tensor, const std::string& op) {
    TORCH_CHECK(tensor.defined(), "[comm] ", op, " on group '", name, "': undefined tensor");
    if (observer) {
      observer(op + " " + c10::str(tensor.sizes()));
      ++observed;
    }
    TORCH_CHECK(tensor.layout() == at::kStrided, "[comm] ", op, " on group '", name,
                "': only dense tensors can be communicated, got layout ", tensor.layout());
    static const at::ScalarType kSupported[] = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong,
                                                at::kInt,   at::kShort,  at::kChar, at::kByte,     at::kBool};
    TORCH_CHECK(std::find(std::begin(kSupported), std::end(kSupported), tensor.scalar_type()) != std::end(kSupported),
                "[comm] ", op, " on group '", name, "': collectives do not support dtype ", tensor.scalar_type());
    if (tensor.is_cuda()) {
#if MEGATRON_WITH_NCCL
      if (!cuda) {
        detail::BackendContext ctx{rank, size(), timeout};
        cuda = detail::make_nccl_backend(ctx, global_ranks, name, rendezvous, host.get());
      }
      return *cuda;
#else
      TORCH_CHECK(false, "[comm] ", op, " on group '", name,
                  "': CUDA tensor, but this build has "
                  "no NCCL (configure with MEGATRON_WITH_CUDA=ON and MEGATRON_WITH_NCCL=ON)");
#endif
    }
    TORCH_CHECK(tensor.is_cpu(), "[comm] ", op, " on group '", name,
                "': tensors must be on CPU (MPI) or CUDA (NCCL), got ", tensor.device());
    TORCH_CHECK(host, "[comm] ", op, " on group '", name,
                "': host tensors need MPI or Gloo, and this torchrun-style job of a build without Gloo has "
                "neither; move the tensor to CUDA or launch with mpirun");
    return *host;
  }
};

namespace {

// Runs `start` on a contiguous version of `tensor` and, if that was a copy, writes the result
// back when the operation completes.
class CopyBackWork : public Work {
 public:
  CopyBackWork(WorkHandle inner, at::Tensor target, at::Tensor staging, std::chrono::milliseconds timeout)
      : Work(timeout), inner_(std::move(inner)), target_(target), staging_(staging) {}
  bool is_completed() override {
    if (!done_ && inner_->is_completed()) finish();
    return done_;
  }
  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    if (!done_) finish();
  }

 private:
  void finish() {
    target_.copy_(staging_);
    done_ = true;
  }
  WorkHandle inner_;
  at::Tensor target_, staging_;
  bool done_ = false;
};

// Reports its wait to the issue observer (set_issue_observer).
class ObservedWork : public Work {
 public:
  ObservedWork(WorkHandle inner, std::function<void(const std::string&)> observer, int64_t index,
               std::chrono::milliseconds timeout)
      : Work(timeout), inner_(std::move(inner)), observer_(std::move(observer)), index_(index) {}
  bool is_completed() override { return inner_->is_completed(); }
  void wait(std::chrono::milliseconds timeout) override {
    observer_("wait " + std::to_string(index_));
    inner_->wait(timeout);
  }

 private:
  WorkHandle inner_;
  std::function<void(const std::string&)> observer_;
  int64_t index_;
};

template <typename Start>
WorkHandle in_place(at::Tensor& tensor, std::chrono::milliseconds timeout, detail::InjectedLink& link, Start start) {
  const auto launched = std::chrono::steady_clock::now();
  WorkHandle work;
  if (tensor.is_contiguous()) {
    work = start(tensor);
  } else {
    at::Tensor staging = tensor.contiguous();
    work = std::make_shared<CopyBackWork>(start(staging), tensor, staging, timeout);
  }
  if ((detail::injected_latency().count() == 0 && detail::injected_us_per_mib() == 0) || !tensor.is_cpu()) return work;
  return detail::complete_no_earlier_than(std::move(work), link.ready_after(launched, tensor.nbytes()), timeout);
}

void check_same_kind(const at::Tensor& a, const at::Tensor& b, const OpInfo& info) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "[comm] ", info.op, " on group '", info.group, "': input dtype ",
              a.scalar_type(), " differs from output dtype ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), "[comm] ", info.op, " on group '", info.group, "': input on ", a.device(),
              " but output on ", b.device());
}

void check_reduce_op(ReduceOp op, const at::Tensor& t, const OpInfo& info) {
  TORCH_CHECK(op != ReduceOp::kAvg || at::isFloatingType(t.scalar_type()), "[comm] ", info.op, " on group '",
              info.group, "': avg needs a floating-point tensor, got ", t.scalar_type(), "; use sum and divide");
}

std::chrono::milliseconds timeout_from_env(std::chrono::milliseconds fallback) {
  const char* value = std::getenv("MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS");
  if (!value) return fallback;
  char* end = nullptr;
  double seconds = std::strtod(value, &end);
  TORCH_CHECK(end != value && *end == '\0' && seconds > 0, "[comm] MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS='", value,
              "' is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<ProcessGroupImpl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

const std::string& ProcessGroup::name() const {
  return impl_->name;
}
int ProcessGroup::rank() const {
  return impl_->rank;
}
int ProcessGroup::size() const {
  return impl_->size();
}
const std::vector<int>& ProcessGroup::global_ranks() const {
  return impl_->global_ranks;
}
std::chrono::milliseconds ProcessGroup::timeout() const {
  return impl_->timeout;
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const std::string& name) {
  TORCH_CHECK(!ranks.empty(), "[comm] new_group '", name, "': empty rank list");
  std::vector<bool> seen(size(), false);
  for (int r : ranks) {
    TORCH_CHECK(r >= 0 && r < size(), "[comm] new_group '", name, "': rank ", r, " is not in group '", impl_->name,
                "' of size ", size());
    TORCH_CHECK(!seen[r], "[comm] new_group '", name, "': rank ", r, " listed twice");
    seen[r] = true;
  }
  auto it = std::find(ranks.begin(), ranks.end(), impl_->rank);
  if (it == ranks.end()) return nullptr;

  auto impl = std::make_unique<ProcessGroupImpl>();
  impl->name = name;
  for (int r : ranks) impl->global_ranks.push_back(impl_->global_ranks[r]);
  impl->rank = static_cast<int>(it - ranks.begin());
  impl->timeout = impl_->timeout;
  impl->device_type = impl_->device_type;
  if (impl_->host) impl->host = impl_->host->split(ranks, name);
#if MEGATRON_WITH_NCCL
  impl->rendezvous = impl_->rendezvous;
#endif
  return ProcessGroupImpl::wrap(std::move(impl));
}

WorkHandle ProcessGroupImpl::start_all_reduce(at::Tensor& tensor, ReduceOp op, bool blocking) {
  if (staged_on_device(tensor)) return via_device(tensor, [&](at::Tensor& d) { return start_all_reduce(d, op, true); });
  auto info = this->info(std::string("all_reduce(") + to_string(op) + ")", {}, blocking);
  Backend& backend = backend_for(tensor, info.op);
  check_reduce_op(op, tensor, info);
  return in_place(tensor, timeout, link, [&](at::Tensor& t) { return backend.all_reduce(t, op, info); });
}

WorkHandle ProcessGroupImpl::start_all_gather(at::Tensor& output, const at::Tensor& input, bool blocking) {
  if (staged_on_device(input))
    return via_device(output, [&](at::Tensor& d) { return start_all_gather(d, input.to(at::kCUDA), true); });
  auto info = this->info("all_gather", {}, blocking);
  Backend& backend = backend_for(input, info.op);
  check_same_kind(input, output, info);
  TORCH_CHECK(output.numel() == input.numel() * size(), "[comm] all_gather on group '", name,
              "': output must hold group size ", size(), " x input's ", input.numel(),
              " elements = ", input.numel() * size(), ", but has ", output.numel());
  at::Tensor in = input.contiguous();
  return in_place(output, timeout, link, [&](at::Tensor& out) { return backend.all_gather(out, in, info); });
}

WorkHandle ProcessGroupImpl::start_reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op,
                                                  bool blocking) {
  if (staged_on_device(input))
    return via_device(output, [&](at::Tensor& d) { return start_reduce_scatter(d, input.to(at::kCUDA), op, true); });
  auto info = this->info(std::string("reduce_scatter(") + to_string(op) + ")", {}, blocking);
  Backend& backend = backend_for(input, info.op);
  check_same_kind(input, output, info);
  check_reduce_op(op, input, info);
  TORCH_CHECK(input.numel() == output.numel() * size(), "[comm] reduce_scatter on group '", name, "': input of ",
              input.numel(), " elements does not split into group size ", size(), " x output's ", output.numel(),
              " elements");
  at::Tensor in = input.contiguous();
  return in_place(output, timeout, link, [&](at::Tensor& out) { return backend.reduce_scatter(out, in, op, info); });
}

WorkHandle ProcessGroupImpl::start_all_to_all(at::Tensor& output, const at::Tensor& input,
                                              const std::vector<int64_t>& output_splits,
                                              const std::vector<int64_t>& input_splits, bool blocking) {
  if (staged_on_device(input))
    return via_device(output, [&](at::Tensor& d) {
      return start_all_to_all(d, input.to(at::kCUDA), output_splits, input_splits, true);
    });
  auto info = this->info("all_to_all", {}, blocking);
  Backend& backend = backend_for(input, info.op);
  check_same_kind(input, output, info);
  TORCH_CHECK(input.dim() >= 1 && output.dim() >= 1 && input.sizes().slice(1) == output.sizes().slice(1), "[comm] ",
              info.op, " on group '", name, "': input ", input.sizes(), " and output ", output.sizes(),
              " must be rows of one shape");
  // Rows -> element counts, each list checked against its tensor.
  const int64_t row = c10::multiply_integers(input.sizes().slice(1));
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    std::vector<int64_t> c(size(), t.size(0) / size() * row);
    if (splits.empty()) {
      TORCH_CHECK(t.size(0) % size() == 0, "[comm] ", info.op, " on group '", name, "': ", which, " of ", t.size(0),
                  " rows does not split evenly over ", size(), " ranks; give its splits");
      return c;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size(), "[comm] ", info.op, " on group '", name,
                "': ", splits.size(), " ", which, " splits for a group of ", size());
    int64_t total = 0;
    for (int i = 0; i < size(); ++i) {
      TORCH_CHECK(splits[i] >= 0, "[comm] ", info.op, " on group '", name, "': negative ", which, " split ", splits[i]);
      total += splits[i];
      c[i] = splits[i] * row;
    }
    TORCH_CHECK(total == t.size(0), "[comm] ", info.op, " on group '", name, "': ", which, " splits sum to ", total,
                " rows, but the ", which, " has ", t.size(0));
    return c;
  };
  const auto recv = counts(output, output_splits, "output"), send = counts(input, input_splits, "input");
  at::Tensor in = input.contiguous();
  return in_place(output, timeout, link,
                  [&](at::Tensor& out) { return backend.all_to_all(out, in, recv, send, info); });
}

WorkHandle ProcessGroupImpl::start_broadcast(at::Tensor& tensor, int src, bool blocking) {
  if (staged_on_device(tensor)) return via_device(tensor, [&](at::Tensor& d) { return start_broadcast(d, src, true); });
  TORCH_CHECK(src >= 0 && src < size(), "[comm] broadcast on group '", name, "': source rank ", src,
              " is outside the group of size ", size());
  auto info = this->info("broadcast(src " + std::to_string(src) + ")",
                         src == rank ? std::vector<int>{} : std::vector<int>{src}, blocking);
  Backend& backend = backend_for(tensor, info.op);
  return in_place(tensor, timeout, link, [&](at::Tensor& t) { return backend.broadcast(t, src, info); });
}

WorkHandle ProcessGroupImpl::start_reduce(at::Tensor& tensor, int dst, ReduceOp op, bool blocking) {
  if (staged_on_device(tensor))
    return via_device(tensor, [&](at::Tensor& d) { return start_reduce(d, dst, op, true); });
  TORCH_CHECK(dst >= 0 && dst < size(), "[comm] reduce on group '", name, "': destination rank ", dst,
              " is outside the group of size ", size());
  auto info = this->info(std::string("reduce(") + to_string(op) + ", dst " + std::to_string(dst) + ")", {}, blocking);
  Backend& backend = backend_for(tensor, info.op);
  check_reduce_op(op, tensor, info);
  return in_place(tensor, timeout, link, [&](at::Tensor& t) { return backend.reduce(t, dst, op, info); });
}

WorkHandle ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  TORCH_CHECK(!ops.empty(), "[comm] batch_isend_irecv on group '", name(), "': no operations");
  std::vector<int> peers;
  std::ostringstream what;
  what << "batch_isend_irecv(";
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    TORCH_CHECK(op.peer >= 0 && op.peer < size(), "[comm] batch_isend_irecv on group '", name(), "': peer ", op.peer,
                " is outside the group of size ", size());
    TORCH_CHECK(op.tensor.is_contiguous(), "[comm] batch_isend_irecv on group '", name(),
                "': tensors must be contiguous");
    what << (i ? ", " : "") << (op.kind == P2POp::kSend ? "send to " : "recv from ") << op.peer;
    peers.push_back(op.peer);
  }
  what << ")";
  auto info = impl_->info(what.str(), peers);
  Backend& backend = impl_->backend_for(ops.front().tensor, info.op);
  for (const auto& op : ops) {
    TORCH_CHECK(op.tensor.device().type() == ops.front().tensor.device().type(), "[comm] ", info.op,
                ": all tensors of a batch must be on the same kind of device");
  }
  return backend.batch_p2p(ops, info);
}

WorkHandle ProcessGroupImpl::observed_async(WorkHandle work) {
  if (!observer) return work;
  return std::make_shared<ObservedWork>(std::move(work), observer, observed - 1, timeout);
}

WorkHandle ProcessGroup::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  return impl_->observed_async(impl_->start_all_reduce(tensor, op, false));
}
WorkHandle ProcessGroup::all_gather_async(at::Tensor& output, const at::Tensor& input) {
  return impl_->observed_async(impl_->start_all_gather(output, input, false));
}
WorkHandle ProcessGroup::reduce_scatter_async(at::Tensor& output, const at::Tensor& input, ReduceOp op) {
  return impl_->observed_async(impl_->start_reduce_scatter(output, input, op, false));
}
WorkHandle ProcessGroup::broadcast_async(at::Tensor& tensor, int src) {
  return impl_->observed_async(impl_->start_broadcast(tensor, src, false));
}
WorkHandle ProcessGroup::reduce_async(at::Tensor& tensor, int dst, ReduceOp op) {
  return impl_->observed_async(impl_->start_reduce(tensor, dst, op, false));
}
void ProcessGroup::all_reduce(at::Tensor& tensor, ReduceOp op) {
  impl_->start_all_reduce(tensor, op, true)->wait();
}
void ProcessGroup::all_reduce_coalesced(const std::vector<at::Tensor>& tensors, ReduceOp op) {
  if (tensors.empty()) return;
  std::vector<at::Tensor> flat_parts;
  for (const auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  all_reduce(flat, op);
  int64_t offset = 0;
  for (const auto& t : tensors) {
    at::Tensor target = t;  // a handle to the caller's storage
    target.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}
void ProcessGroup::all_gather(at::Tensor& output, const at::Tensor& input) {
  impl_->start_all_gather(output, input, true)->wait();
}
void ProcessGroup::all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& output_splits,
                              const std::vector<int64_t>& input_splits) {
  impl_->start_all_to_all(output, input, output_splits, input_splits, true)->wait();
}
WorkHandle ProcessGroup::all_to_all_async(at::Tensor& output, const at::Tensor& input,
                                          const std::vector<int64_t>& output_splits,
                                          const std::vector<int64_t>& input_splits) {
  return impl_->observed_async(impl_->start_all_to_all(output, input, output_splits, input_splits, false));
}
void ProcessGroup::reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op) {
  impl_->start_reduce_scatter(output, input, op, true)->wait();
}
void ProcessGroup::broadcast(at::Tensor& tensor, int src) {
  impl_->start_broadcast(tensor, src, true)->wait();
}
void ProcessGroup::reduce(at::Tensor& tensor, int dst, ReduceOp op) {
  impl_->start_reduce(tensor, dst, op, true)->wait();
}
void ProcessGroup::send(const at::Tensor& tensor, int dst) {
  batch_isend_irecv({{P2POp::kSend, tensor.contiguous(), dst}})->wait();
}
void ProcessGroup::recv(at::Tensor& tensor, int src) {
  in_place(tensor, impl_->timeout, impl_->link, [&](at::Tensor& t) {
    return batch_isend_irecv({{P2POp::kRecv, t, src}});
  })->wait();
}

void ProcessGroup::set_issue_observer(std::function<void(const std::string&)> observer) {
  impl_->observer = std::move(observer);
  impl_->observed = 0;
}

void ProcessGroup::barrier() {
  auto info = impl_->info("barrier", {}, true);
  if (impl_->host) {
    impl_->host->barrier(info)->wait();
    return;
  }
  // torchrun-style GPU jobs without Gloo: a one-element all-reduce on the device.
  auto flag = at::zeros({1}, at::TensorOptions().device(impl_->device_type));
  all_reduce(flag);
}

std::shared_ptr<ProcessGroup> init_distributed(const LauncherEnv& env, DistributedOptions options) {
  warm_up_cpu_math();
  auto impl = std::make_unique<ProcessGroupImpl>();
  impl->name = "world";
  for (int r = 0; r < env.world_size; ++r) impl->global_ranks.push_back(r);
  impl->rank = env.rank;
  impl->timeout = timeout_from_env(options.timeout);
  impl->device_type = options.device_type;
  detail::BackendContext ctx{env.rank, env.world_size, impl->timeout};
  c10::intrusive_ptr<c10d::Store> store;  // torchrun-style jobs only

  // srun starts MPI processes too (with --mpi=pmix); without MPI in the build, an srun CUDA job
  // meets like a torchrun one.
  const bool mpi_launch = env.launcher == Launcher::kOpenMPI || env.launcher == Launcher::kPMI ||
                          (env.launcher == Launcher::kSlurm && MEGATRON_WITH_MPI);
  if (mpi_launch) {
#if MEGATRON_WITH_MPI
    detail::init_mpi();
    impl->host = detail::make_mpi_world_backend(ctx);
#else
    TORCH_CHECK(env.world_size == 1, "[comm] launched by ", to_string(env.launcher), " with ", env.world_size,
                " ranks, but this build has no MPI; rebuild with MEGATRON_WITH_MPI=ON");
    impl->host = detail::make_local_backend(ctx);
#endif
  } else if (env.world_size == 1) {
    impl->host = detail::make_local_backend(ctx);
  } else {
    // torchrun/deepspeed: no MPI. Host tensors go through Gloo (or, in builds without it,
    // through NCCL on the rank's device); NCCL communicators meet through the same store.
#if !MEGATRON_WITH_GLOO
    TORCH_CHECK(options.device_type == at::kCUDA, "[comm] torchrun-style launch with WORLD_SIZE=", env.world_size,
                " for a CPU job, but this build has no Gloo (install libgloo-dev and reconfigure), so host "
                "tensors can only travel over MPI: launch it as `mpirun -np ",
                env.world_size, " ...` instead");
#endif
#if !MEGATRON_WITH_NCCL
    TORCH_CHECK(options.device_type != at::kCUDA, "[comm] torchrun-style CUDA job of ", env.world_size,
                " ranks, but this build has no NCCL (configure with MEGATRON_WITH_NCCL=ON)");
#endif
    store = detail::make_launcher_store(env, impl->timeout);
#if MEGATRON_WITH_GLOO
    impl->host = detail::make_gloo_world_backend(ctx, store);
#endif
  }
#if MEGATRON_WITH_NCCL
  impl->rendezvous = detail::make_nccl_rendezvous(store);
#endif
  return ProcessGroupImpl::wrap(std::move(impl));
}

void abort_job(int exit_code) {
#if MEGATRON_WITH_MPI
  detail::mpi_abort(exit_code);
#endif
}

}  // namespace megatron::comm
