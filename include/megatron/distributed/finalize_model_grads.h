// finalize_model_grads (megatron/core/distributed/finalize_model_grads.py): the gradient sums a
// model chunk cannot do alone, run after the backward passes of an iteration and before the
// optimizer's data-parallel reduce.
#pragma once

#include "megatron/export.h"

#include <memory>
#include <vector>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/parallel_state.h"

namespace torch::nn {
class Module;
}

namespace megatron::distributed {

// The data-parallel average first (ddp.finish_grad_sync()); then for every chunk that is a
// models::common::LanguageModule: with sequence parallelism, the replicated parameters' gradients
// summed over TP; with pipeline stages, the tied word embedding's gradient summed over the
// embedding group (first and last stage). Other modules are left alone.
MEGATRON_API void finalize_model_grads(const std::vector<std::shared_ptr<torch::nn::Module>>& model,
                                       DistributedDataParallel& ddp, const ParallelState& ps);

}  // namespace megatron::distributed
