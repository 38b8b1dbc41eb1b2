#include "megatron/tensor_parallel/random.h"

#include <ATen/Context.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>

namespace megatron::tensor_parallel {
namespace {

at::Generator default_generator(c10::Device device) {
  return at::globalContext().defaultGenerator(c10::Device(device.type()));
}

at::Tensor get_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_state(at::Generator& gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

void RngTracker::add(const std::string& name, uint64_t seed) {
  TORCH_CHECK(!states_.count(name), "[rng_tracker] state '", name, "' already exists");
  TORCH_CHECK(!seeds_.count(seed), "[rng_tracker] seed ", seed, " already used by '", seeds_[seed], "'");
  seeds_[seed] = name;
  at::Generator gen = default_generator(device_);
  at::Tensor saved = get_state(gen);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  states_[name] = get_state(gen);
  set_state(gen, saved);
}

void RngTracker::fork(const std::function<void()>& fn, const std::string& name) {
  auto it = states_.find(name);
  TORCH_CHECK(it != states_.end(), "[rng_tracker] state '", name, "' is not added");
  at::Generator gen = default_generator(device_);
  at::Tensor saved = get_state(gen);
  set_state(gen, it->second);
  try {
    fn();
  } catch (...) {
    it->second = get_state(gen);
    set_state(gen, saved);
    throw;
  }
  it->second = get_state(gen);
  set_state(gen, saved);
}

std::shared_ptr<RngTracker> model_parallel_manual_seed(uint64_t seed, int tp_rank, c10::Device device) {
  at::Generator gen = default_generator(device);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  auto tracker = std::make_shared<RngTracker>(device);
  tracker->add(kModelParallelRngTrackerName, seed + kTensorModelParallelSeedOffset + tp_rank);
  return tracker;
}

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return x;
  return at::dropout(x, p, true);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using CheckpointFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

struct CheckpointState : torch::CustomClassHolder {
  CheckpointFn fn;
  std::shared_ptr<RngTracker> tracker;
  c10::Device device{c10::kCPU};
  at::Tensor rng_state;
  std::map<std::string, at::Tensor> tracker_states;
  std::vector<bool> requires_grad;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, c10::intrusive_ptr<CheckpointState> state) {
    state->rng_state = get_state(default_generator(state->device));
    if (state->tracker) state->tracker_states = state->tracker->get_states();
    for (const auto& t : inputs) state->requires_grad.push_back(t.defined() && t.requires_grad());
    std::vector<at::Tensor> in(inputs.begin(), inputs.end());
    variable_list outputs = state->fn(in);  // grad mode is off here
    ctx->save_for_backward(in);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    auto saved = ctx->get_saved_variables();
    std::vector<at::Tensor> detached;
    for (size_t i = 0; i < saved.size(); ++i) {
      at::Tensor d = saved[i].defined() ? saved[i].detach() : saved[i];
      if (state->requires_grad[i]) d.requires_grad_(true);
      detached.push_back(d);
    }
    // Replay the forward with the RNG as it was, then put the current RNG back.
    at::Generator gen = default_generator(state->device);
    at::Tensor rng_now = get_state(gen);
    std::map<std::string, at::Tensor> tracker_now;
    if (state->tracker) {
      tracker_now = state->tracker->get_states();
      state->tracker->set_states(state->tracker_states);
    }
    set_state(gen, state->rng_state);
    variable_list outputs;
    {
      at::AutoGradMode enable(true);
      outputs = state->fn(detached);
    }
    set_state(gen, rng_now);
    if (state->tracker) state->tracker->set_states(tracker_now);

    variable_list outs, grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].requires_grad() && grad_outputs[i].defined()) {
        outs.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (!outs.empty()) torch::autograd::backward(outs, grads);
    variable_list result;
    for (const auto& d : detached) result.push_back(d.defined() && d.requires_grad() ? d.grad() : at::Tensor());
    result.push_back(at::Tensor());  // state
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> checkpoint(const CheckpointFn& fn, const std::vector<at::Tensor>& inputs,
                                   const std::shared_ptr<RngTracker>& tracker, c10::Device device) {
  // Autograd functions take defined tensors only: pass those, put the undefined back for fn.
  std::vector<at::Tensor> defined;
  std::vector<bool> is_defined;
  for (const auto& t : inputs) {
    is_defined.push_back(t.defined());
    if (t.defined()) defined.push_back(t);
  }
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = [fn, is_defined](const std::vector<at::Tensor>& in) {
    std::vector<at::Tensor> all;
    size_t next = 0;
    for (bool d : is_defined) all.push_back(d ? in[next++] : at::Tensor());
    return fn(all);
  };
  state->tracker = tracker;
  state->device = device;
  return CheckpointFunction::apply(at::TensorList(defined), state);
}

}  // namespace megatron::tensor_parallel
