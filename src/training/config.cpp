#include "megatron/training/config.h"

namespace megatron::training {

transformer::TransformerConfig core_transformer_config_from_args(const TrainingContext& ctx) {
  const Arguments& a = ctx.args;
  transformer::TransformerConfig c(a.num_layers, a.hidden_size, a.num_attention_heads);
  c.num_query_groups(a.group_query_attention ? std::optional<int64_t>(a.num_query_groups) : std::nullopt)
      .ffn_hidden_size(a.ffn_hidden_size)
      .kv_channels(a.kv_channels)
      .normalization(a.normalization == "RMSNorm" ? transformer::Normalization::kRMSNorm
                                                  : transformer::Normalization::kLayerNorm)
      .layernorm_epsilon(a.norm_epsilon)
      .add_bias_linear(!a.disable_bias_linear)
      .gated_linear_unit(a.swiglu)
      .activation(a.swiglu ? transformer::Activation::kSilu
                           : (a.openai_gelu ? transformer::Activation::kGeluTanh : transformer::Activation::kGelu))
      .hidden_dropout(a.hidden_dropout)
      .attention_dropout(a.attention_dropout)
      .init_method_std(a.init_method_std)
      .tensor_model_parallel_size(a.tensor_model_parallel_size)
      .pipeline_model_parallel_size(a.pipeline_model_parallel_size)
      .virtual_pipeline_model_parallel_size(a.virtual_pipeline_model_parallel_size)
      .tp_group(ctx.parallel_state.tensor_model_parallel_group_ptr())
      .sequence_parallel(a.sequence_parallel)
      .rng_tracker(ctx.rng_tracker);
  if (a.recompute_granularity == "full") {
    c.recompute_granularity(transformer::RecomputeGranularity::kFull)
        .recompute_method(a.recompute_method == "block" ? transformer::RecomputeMethod::kBlock
                                                        : transformer::RecomputeMethod::kUniform)
        .recompute_num_layers(a.recompute_num_layers);
  } else if (a.recompute_granularity == "selective") {
    c.recompute_granularity(transformer::RecomputeGranularity::kSelective);
  }
  return c.finalize();
}

}  // namespace megatron::training
