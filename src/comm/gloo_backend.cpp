// Host-tensor collectives in torchrun/deepspeed-launched jobs (no MPI there): LibTorch's own
// c10d::ProcessGroupGloo over the launcher's TCPStore, one process group per group. Every
// operation runs on Gloo's worker threads; a timeout in wait() gets our message.
#include "build_config.h"
#if MEGATRON_WITH_GLOO

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
// LibTorch was built with Gloo; this macro is how its header knows.
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "backend.h"

namespace megatron::comm::detail {
namespace {

c10d::ReduceOp gloo_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;  // avg = sum, then divide (as the MPI backend does)
  }
}

// Gloo has no int16 kernels: such tensors travel as int32, outputs copied back when done.
at::Tensor staged(const at::Tensor& t) {
  return t.scalar_type() == at::kShort ? t.to(at::kInt) : t;
}
at::Tensor staged_output(const at::Tensor& t) {
  return t.scalar_type() == at::kShort ? at::empty(t.sizes(), t.options().dtype(at::kInt)) : t;
}

// Finished c10d works, kept until Gloo's worker thread has let go of them: the worker drops its
// reference while holding the group's queue lock, and if that were the last one, freeing a tensor
// that Python also holds would take the GIL there, while a Python caller holding the GIL waits
// for that lock (a deadlock). Swept on the calling thread instead.
class RetiredWorks {
 public:
  void add(std::vector<c10::intrusive_ptr<c10d::Work>> works) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : works) works_.push_back(std::move(w));
  }
  void sweep() {
    std::vector<c10::intrusive_ptr<c10d::Work>> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto last = std::partition(works_.begin(), works_.end(), [](const auto& w) { return w.use_count() > 1; });
      done.assign(std::make_move_iterator(last), std::make_move_iterator(works_.end()));
      works_.erase(last, works_.end());
    }
  }

 private:
  std::mutex mutex_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

// Waits on c10d's works with what is left of the timeout: some of Gloo's works (send, recv,
// reduce_scatter) complete only inside their own wait(), so polling them would never end.
class GlooWork : public Work {
 public:
  GlooWork(OpInfo info, std::chrono::milliseconds timeout, std::vector<c10::intrusive_ptr<c10d::Work>> works,
           std::function<void()> finish, std::shared_ptr<RetiredWorks> retired)
      : Work(timeout),
        info_(std::move(info)),
        works_(std::move(works)),
        finish_(std::move(finish)),
        retired_(std::move(retired)) {}
  ~GlooWork() override { retired_->add(std::move(works_)); }
  // Done once every c10d work says so (Gloo's threads run them); those that complete only inside
  // their wait keep it false until then.
  bool is_completed() override {
    if (!done_ && std::all_of(works_.begin(), works_.end(), [](const auto& w) { return w->isCompleted(); }))
      wait(timeout_);
    return done_;
  }
  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const auto& w : works_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      bool ok = false;
      try {
        ok = w->wait(std::max(left, std::chrono::milliseconds(1)));
      } catch (const std::exception& e) {
        // c10d and Gloo say "timed out"; anything else is a peer's connection gone.
        const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
        const std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
        if (what.find("imed out") != std::string::npos) throw CollectiveError(describe_timeout(info_, timeout));
        throw CollectiveError(describe_failure(info_, what));
      }
      if (!ok) throw CollectiveError(describe_timeout(info_, timeout));
    }
    done_ = true;
    if (finish_) finish_();
  }

 private:
  OpInfo info_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::function<void()> finish_;  // averaging, copy-back
  std::shared_ptr<RetiredWorks> retired_;
  bool done_ = false;
};

class GlooBackend : public Backend {
 public:
  GlooBackend(c10::intrusive_ptr<c10d::Store> store, BackendContext ctx) : store_(std::move(store)), ctx_(ctx) {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = ctx.timeout;
    // As torch.distributed does: GLOO_SOCKET_IFNAME names the interface, else the host's name.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    options->devices.push_back(ifname && *ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                                 : c10d::ProcessGroupGloo::createDefaultDevice());
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, ctx.rank, ctx.size, options);
  }

  // Gloo hangs on empty collectives; every member passes the same sizes, so all skip them.
  WorkHandle all_reduce(at::Tensor& tensor, ReduceOp op, const OpInfo& info) override {
    retired_->sweep();
    if (tensor.numel() == 0) return completed_work();
    at::Tensor t = staged(tensor);
    std::vector<at::Tensor> list{t};
    c10d::AllreduceOptions options;
    options.reduceOp = gloo_op(op);
    auto work = group_->allreduce(list, options);
    return track(work, info, [tensor, t, op, n = ctx_.size]() mutable {
      if (op == ReduceOp::kAvg) t.div_(n);
      if (!t.is_same(tensor)) tensor.copy_(t);
    });
  }

  WorkHandle all_gather(at::Tensor& output, const at::Tensor& input, const OpInfo& info) override {
    retired_->sweep();
    if (output.numel() == 0) return completed_work();
    at::Tensor out = staged_output(output);
    at::Tensor in = staged(input);
    auto work = group_->_allgather_base(out, in);
    return track(work, info, [output, out, in]() mutable {
      if (!out.is_same(output)) output.copy_(out);
    });
  }

  WorkHandle reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op, const OpInfo& info) override {
    retired_->sweep();
    if (input.numel() == 0) return completed_work();
    at::Tensor out = staged_output(output);
    at::Tensor in = staged(input);
    c10d::ReduceScatterOptions options;
    options.reduceOp = gloo_op(op);
    auto work = group_->_reduce_scatter_base(out, in, options);
    return track(work, info, [output, out, in, op, n = ctx_.size]() mutable {
      if (op == ReduceOp::kAvg) out.div_(n);
      if (!out.is_same(output)) output.copy_(out);
    });
  }

  // Flat views: the counts are elements. Not skipped when empty (a rank may send nothing and
  // still receive).
  WorkHandle all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& recv_counts,
                        const std::vector<int64_t>& send_counts, const OpInfo& info) override {
    retired_->sweep();
    const bool widened = output.scalar_type() == at::kShort;
    at::Tensor out = staged_output(output).view({-1});
    at::Tensor in = staged(input).reshape({-1});
    auto recv = recv_counts, send = send_counts;  // c10d takes them by reference
    auto work = group_->alltoall_base(out, in, recv, send);
    return track(work, info, [output, out, in, widened]() mutable {
      if (widened) output.view({-1}).copy_(out);
    });
  }

  WorkHandle broadcast(at::Tensor& tensor, int src, const OpInfo& info) override {
    retired_->sweep();
    if (tensor.numel() == 0) return completed_work();
    at::Tensor t = staged(tensor);
    std::vector<at::Tensor> list{t};
    c10d::BroadcastOptions options;
    options.rootRank = src;
    auto work = group_->broadcast(list, options);
    return track(work, info, [tensor, t]() mutable {
      if (!t.is_same(tensor)) tensor.copy_(t);
    });
  }

  WorkHandle reduce(at::Tensor& tensor, int dst, ReduceOp op, const OpInfo& info) override {
    retired_->sweep();
    if (tensor.numel() == 0) return completed_work();
    // Gloo's reduce works in the other ranks' buffers too: they give it a copy.
    at::Tensor t = ctx_.rank == dst ? staged(tensor) : tensor.clone();
    std::vector<at::Tensor> list{t};
    c10d::ReduceOptions options;
    options.reduceOp = gloo_op(op);
    options.rootRank = dst;
    auto work = group_->reduce(list, options);
    return track(work, info, [tensor, t, op, root = ctx_.rank == dst, n = ctx_.size]() mutable {
      if (!root) return;
      if (op == ReduceOp::kAvg) t.div_(n);
      if (!t.is_same(tensor)) tensor.copy_(t);
    });
  }

  WorkHandle batch_p2p(const std::vector<P2POp>& ops, const OpInfo& info) override {
    retired_->sweep();
    // Gloo matches messages by (peer, tag) in the order they are posted, as MPI does.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;
    for (const auto& p : ops) {
      if (p.tensor.numel() == 0) continue;
      at::Tensor t = p.kind == P2POp::kSend ? staged(p.tensor) : staged_output(p.tensor);
      std::vector<at::Tensor> list{t};
      if (p.kind == P2POp::kSend) {
        works.push_back(group_->send(list, p.peer, kP2PTag));
      } else {
        works.push_back(group_->recv(list, p.peer, kP2PTag));
        if (!t.is_same(p.tensor)) copy_back.emplace_back(p.tensor, t);
      }
    }
    return std::make_shared<GlooWork>(
        info, ctx_.timeout, std::move(works),
        [copy_back]() mutable {
          for (auto& [target, staging] : copy_back) target.copy_(staging);
        },
        retired_);
  }

  WorkHandle barrier(const OpInfo& info) override {
    retired_->sweep();
    return track(group_->barrier(), info, nullptr);
  }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string& name) override {
    // Only the members build the group; their keys are apart from every other group's because
    // the name lists the ranks, and the count tells repeated creations of one name apart.
    auto it = std::find(ranks.begin(), ranks.end(), ctx_.rank);
    if (it == ranks.end()) return nullptr;
    const std::string prefix = name + "/" + std::to_string(created_[name]++);
    BackendContext ctx = ctx_;
    ctx.rank = static_cast<int>(it - ranks.begin());
    ctx.size = static_cast<int>(ranks.size());
    return std::make_unique<GlooBackend>(c10::make_intrusive<c10d::PrefixStore>(prefix, store_), ctx);
  }

 private:
  static constexpr int kP2PTag = 7;

  WorkHandle track(c10::intrusive_ptr<c10d::Work> work, const OpInfo& info, std::function<void()> finish) {
    return std::make_shared<GlooWork>(info, ctx_.timeout, std::vector<c10::intrusive_ptr<c10d::Work>>{work},
                                      std::move(finish), retired_);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  BackendContext ctx_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::shared_ptr<RetiredWorks> retired_ = std::make_shared<RetiredWorks>();
  std::map<std::string, int> created_;
};

}  // namespace

std::unique_ptr<Backend> make_gloo_world_backend(BackendContext ctx, c10::intrusive_ptr<c10d::Store> store) {
  return std::make_unique<GlooBackend>(c10::make_intrusive<c10d::PrefixStore>("gloo", std::move(store)), ctx);
}

}  // namespace megatron::comm::detail

#endif  // MEGATRON_WITH_GLOO
