// The single-process backend: a world of one rank needs no transport. Collectives reduce over
// one contribution (identity or copy); p2p only pairs a send to itself with a receive.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "backend.h"

namespace megatron::comm::detail {
namespace {

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(BackendContext ctx) : ctx_(ctx) {}

  WorkHandle all_reduce(at::Tensor&, ReduceOp, const OpInfo&) override { return done(); }

  WorkHandle all_gather(at::Tensor& output, const at::Tensor& input, const OpInfo&) override {
    output.view(input.sizes()).copy_(input);
    return done();
  }

  WorkHandle reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp, const OpInfo&) override {
    output.copy_(input.view(output.sizes()));
    return done();
  }

  WorkHandle all_to_all(at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>&,
                        const std::vector<int64_t>&, const OpInfo&) override {
    output.copy_(input);
    return done();
  }

  WorkHandle broadcast(at::Tensor&, int, const OpInfo&) override { return done(); }
  WorkHandle reduce(at::Tensor&, int, ReduceOp, const OpInfo&) override { return done(); }

  WorkHandle batch_p2p(const std::vector<P2POp>& ops, const OpInfo& info) override {
    // Sends to self are matched with receives from self in order, like MPI's non-overtaking rule.
    std::vector<const P2POp*> sends, recvs;
    for (const auto& op : ops) (op.kind == P2POp::kSend ? sends : recvs).push_back(&op);
    TORCH_CHECK(sends.size() == recvs.size(), "[comm] ", info.op, " on a single-process group: ", sends.size(),
                " sends but ", recvs.size(),
                " receives; a send to itself needs a "
                "matching receive in the same batch");
    for (size_t i = 0; i < sends.size(); ++i) {
      TORCH_CHECK(sends[i]->tensor.numel() == recvs[i]->tensor.numel(), "[comm] ", info.op, ": receive of ",
                  recvs[i]->tensor.numel(), " elements for a send of ", sends[i]->tensor.numel());
      recvs[i]->tensor.view(sends[i]->tensor.sizes()).copy_(sends[i]->tensor);
    }
    return done();
  }

  WorkHandle barrier(const OpInfo&) override { return done(); }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string&) override {
    if (ranks != std::vector<int>{0}) return nullptr;
    return std::make_unique<LocalBackend>(ctx_);
  }

 private:
  WorkHandle done() { return completed_work(); }
  BackendContext ctx_;
};

}  // namespace

std::unique_ptr<Backend> make_local_backend(BackendContext ctx) {
  return std::make_unique<LocalBackend>(ctx);
}

}  // namespace megatron::comm::detail
