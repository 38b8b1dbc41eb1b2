// RNG handling for tensor parallelism (Megatron's random.py). Dropout outside tensor-parallel
// regions draws from the device's default generator, seeded identically on every TP rank; inside
// them (attention dropout) it draws from the tracker's "model-parallel-rng" state, seeded
// differently per TP rank. fork() swaps that state into the default generator for a scope.
// Activation checkpointing saves and restores both, so a recomputed forward sees the same masks.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace megatron::tensor_parallel {

constexpr const char* kModelParallelRngTrackerName = "model-parallel-rng";
constexpr int64_t kTensorModelParallelSeedOffset = 2718;

class MEGATRON_API RngTracker {
 public:
  explicit RngTracker(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}

  // Adds a named state seeded with `seed`; names and seeds must be unique.
  void add(const std::string& name, uint64_t seed);
  bool has(const std::string& name) const { return states_.count(name) > 0; }
  void reset() {
    states_.clear();
    seeds_.clear();
  }

  // Runs fn with the default generator of the tracker's device set to state `name`; afterwards
  // the advanced state is stored back and the default generator restored.
  void fork(const std::function<void()>& fn, const std::string& name = kModelParallelRngTrackerName);

  std::map<std::string, at::Tensor> get_states() const { return states_; }
  void set_states(const std::map<std::string, at::Tensor>& states) { states_ = states; }
  c10::Device device() const { return device_; }

 private:
  c10::Device device_;
  std::map<std::string, at::Tensor> states_;
  std::map<uint64_t, std::string> seeds_;
};

// Megatron's model_parallel_cuda_manual_seed, for any device: seeds the device's default generator
// with `seed` (same on all TP ranks) and returns a tracker whose "model-parallel-rng" state is
// seeded with seed + 2718 + tp_rank.
MEGATRON_API std::shared_ptr<RngTracker> model_parallel_manual_seed(uint64_t seed, int tp_rank,
                                                                    c10::Device device = c10::Device(c10::kCPU));

// Dropout drawn from the current default generator (at::dropout); identity when !train or p == 0.
MEGATRON_API at::Tensor dropout(const at::Tensor& x, double p, bool train);

// Activation checkpointing (Megatron's CheckpointFunction): runs fn without keeping its
// activations and reruns it in backward, with the default generator of `device` and the tracker's
// states (if any) reset to what they were in forward. Gradients flow to the inputs that require
// grad and to whatever parameters fn uses. Non-tensor state must be captured by fn.
MEGATRON_API std::vector<at::Tensor> checkpoint(
    const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& fn,
    const std::vector<at::Tensor>& inputs, const std::shared_ptr<RngTracker>& tracker, c10::Device device);

}  // namespace megatron::tensor_parallel
