// pretrain()'s first phase (Megatron-LM's initialize_megatron): device, threads, CPU allocator,
// process groups and seeds.
#pragma once

#include <memory>

#include "megatron/comm/process_group.h"
#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"

namespace megatron::tensor_parallel {
class RngTracker;
}

namespace megatron::training::detail {

struct Initialized {
  c10::Device device = c10::Device(c10::kCPU);
  ParallelState parallel_state;
  std::shared_ptr<tensor_parallel::RngTracker> rng_tracker;  // TP-region dropout states
};

// Megatron-LM's _set_random_seed: one seed per pipeline stage (torch's, Python's, numpy's).
uint64_t stage_seed(const Arguments& args, const ParallelState& ps);

// world: nullptr to init_distributed from the launcher environment.
Initialized initialize_megatron(const Arguments& args, std::shared_ptr<comm::ProcessGroup> world);

}  // namespace megatron::training::detail
