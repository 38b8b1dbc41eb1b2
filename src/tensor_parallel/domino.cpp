#include "megatron/tensor_parallel/domino.h"

#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/custom_function.h>

#include "autograd_group.h"

namespace megatron::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct StartReduce : torch::autograd::Function<StartReduce> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& partial, GroupPtr g, PendingPtr pending) {
    TORCH_CHECK(!pending->work, "[domino] a reduce is already in flight on this handle");
    // The GEMM's fresh output: reduced where it lies, no copy.
    at::Tensor out = partial.is_contiguous() ? partial : partial.contiguous();
    if (group_size(g) > 1) pending->work = g->all_reduce_async(out);
    if (out.is_same(partial)) ctx->mark_dirty({out});
    return out;
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], at::Tensor(), at::Tensor()}; }
};

struct WaitForReduce : torch::autograd::Function<WaitForReduce> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, PendingPtr pending) {
    pending->wait();
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], at::Tensor()}; }
};

struct WaitForGradReduce : torch::autograd::Function<WaitForGradReduce> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, PendingPtr pending) {
    detail::save_pending(ctx, pending);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    detail::load_pending(ctx)->wait();
    return {grad[0], at::Tensor()};
  }
};

}  // namespace

void PendingReduce::wait() {
  if (!work) return;
  comm::WorkHandle w = std::move(work);
  work = nullptr;
  w->wait();
}

at::Tensor start_reduce_from_tensor_model_parallel_region(const at::Tensor& partial, const GroupPtr& group,
                                                          const PendingPtr& pending) {
  TORCH_CHECK(pending, "[domino] start_reduce needs a handle");
  return StartReduce::apply(partial, group, pending);
}

at::Tensor wait_for_reduce(const at::Tensor& x, const PendingPtr& pending) {
  TORCH_CHECK(pending, "[domino] wait_for_reduce needs a handle");
  return WaitForReduce::apply(x, pending);
}

at::Tensor wait_for_grad_reduce_in_backward(const at::Tensor& x, const PendingPtr& pending) {
  TORCH_CHECK(pending, "[domino] wait_for_grad_reduce_in_backward needs a handle");
  return WaitForGradReduce::apply(x, pending);
}

at::Tensor GradWaitChain::wait_for_grad_reduce_in_backward(const at::Tensor& x, const PendingPtr& pending) {
  at::Tensor out = tensor_parallel::wait_for_grad_reduce_in_backward(x, pending);
  if (!out.grad_fn()) return out;  // no graph (evaluation): nothing to order
  if (reserved_) out.grad_fn()->set_sequence_nr(*reserved_);
  reserved_ = at::sequence_number::get_and_increment();
  return out;
}

}  // namespace megatron::tensor_parallel
