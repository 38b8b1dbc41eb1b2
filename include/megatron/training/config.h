// From Arguments to the model's configuration (Megatron-LM's core_transformer_config_from_args).
#pragma once

#include "megatron/training/training.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::training {

// The transformer configuration the flags describe, with this rank's TP group and RNG tracker.
transformer::TransformerConfig core_transformer_config_from_args(const TrainingContext& ctx);

}  // namespace megatron::training
