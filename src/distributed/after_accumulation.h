// The signal that gradient buckets and fsdp units count: a post hook on a parameter's gradient
// accumulator runs after AccumulateGrad has added a backward pass's gradient into its .grad.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <memory>
#include <utility>

namespace megatron::distributed::detail {

class AfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

// Hooks `param`'s accumulator (a leaf that requires a gradient) with `fn`; the caller keeps the
// returned accumulator alive, or autograd makes a new one without the hook.
inline std::shared_ptr<torch::autograd::Node> after_accumulation(const at::Tensor& param, std::function<void()> fn) {
  auto accumulator = torch::autograd::impl::grad_accumulator(param);
  accumulator->add_post_hook(std::make_unique<AfterAccumulation>(std::move(fn)));
  return accumulator;
}

}  // namespace megatron::distributed::detail
