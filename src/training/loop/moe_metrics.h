// The MoE layers' auxiliary losses of one iteration, as Megatron-LM logs them beside the lm loss
// (load_balancing_loss or seq_load_balancing_loss, z_loss): each loss over its coefficient,
// summed over the model's layers (every pipeline stage), averaged over micro-batches, data-parallel
// ranks and MoE layers.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"

namespace megatron::training::detail {

struct MoeAuxLosses {
  std::vector<std::string> names;  // empty without MoE losses to log
  at::Tensor values;               // [names.size()], on the device, the same on every rank
};

// Takes what the chunks' MoE layers recorded since the last call; a collective over the pipeline
// and data-parallel groups when there is something to log.
MoeAuxLosses reduce_moe_aux_losses(const Arguments& args, const ParallelState& ps,
                                   const std::vector<torch::nn::Module*>& chunks, int64_t num_microbatches,
                                   const c10::Device& device);

}  // namespace megatron::training::detail
