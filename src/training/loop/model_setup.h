// pretrain()'s set-up of the model and what updates it (Megatron-LM's get_model and
// setup_model_and_optimizer): the chunks, their DistributedDataParallel wrapper with the hooks it
// installs, and the optimizer over its buffers.
#pragma once

#include <memory>
#include <optional>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/training/training.h"
#include "training/loop/trainer.h"

namespace megatron::training::detail {

// One model chunk per virtual stage, each told which it is, in the run's dtype and device.
Model get_model(const TrainingContext& ctx, const ModelBuilder& model_builder);

// The data-parallel wrapper over every chunk's trainable parameters, its hooks installed in the
// chunks that take them (LanguageModule::set_param_gather).
std::unique_ptr<distributed::DistributedDataParallel> wrap_with_ddp(const TrainingContext& ctx, const Model& model);
// The hooks removed again: the model outlives the wrapper (the caller may hold it).
void detach_ddp_hooks(const Model& model);

// The optimizer over the wrapper's buffers, and the set-up lines Megatron-LM logs.
std::unique_ptr<optimizer::MegatronOptimizer> get_megatron_optimizer(const TrainingContext& ctx,
                                                                     distributed::DistributedDataParallel& ddp,
                                                                     std::optional<int64_t> model_peak_bytes);

// The most the allocator has held so far (the GPU's, or the CPU allocator cache's blocks).
std::optional<int64_t> peak_allocated(c10::Device device);

}  // namespace megatron::training::detail
