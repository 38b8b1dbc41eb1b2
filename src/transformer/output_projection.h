// Private to src/transformer: the row-parallel output projection that closes both the attention
// (linear_proj) and the MLP (linear_fc2), configured the same way from the TransformerConfig.
#pragma once

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer::detail {

// in_features -> hidden_size, input split over TP, scaled init (init_method_std / sqrt(2L)).
inline tensor_parallel::RowParallelLinearOptions output_projection_options(const TransformerConfig& config,
                                                                           int64_t in_features) {
  return tensor_parallel::RowParallelLinearOptions(in_features, config.hidden_size())
      .bias(config.add_bias_linear())
      .input_is_parallel(true)
      .sequence_parallel(config.sequence_parallel())
      .init_method_std(config.output_layer_init_std())
      .perform_initialization(config.perform_initialization())
      .tp_group(config.tp_group())
      .fp8(config.fp8());
}

}  // namespace megatron::transformer::detail
