// --check-weight-hash-across-dp-replicas-interval and --test-mode: every parameter bit-identical
// on the ranks that hold a copy of it, so a silent memory or network fault stops the run by name.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "megatron/parallel_state.h"

namespace megatron::training::detail {

// Hashes each parameter on the host and all-gathers the hashes over the data-parallel ranks (with
// context parallelism; the expert-data-parallel ones for experts) and, with tensor_parallel_copies,
// over the tensor-parallel ranks for the parameters they replicate. Collective over the world; a
// difference throws on every rank, naming the first parameter and which ranks hold which copy.
void check_param_hashes_across_replicas(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                                        const ParallelState& ps, bool tensor_parallel_copies, int64_t iteration);

}  // namespace megatron::training::detail
