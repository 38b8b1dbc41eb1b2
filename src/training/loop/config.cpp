#include "megatron/training/config.h"

#include <algorithm>

#include "megatron/tensor_parallel/fp8.h"
#include "training/arguments/moe_arguments.h"

namespace megatron::training {

transformer::PipelineSplit pipeline_split_from_args(const Arguments& a) {
  return {a.num_layers,
          a.pipeline_model_parallel_size,
          a.virtual_pipeline_model_parallel_size.value_or(1),
          a.decoder_first_pipeline_num_layers,
          a.decoder_last_pipeline_num_layers,
          a.account_for_embedding_in_pipeline_split,
          a.account_for_loss_in_pipeline_split,
          a.pipeline_model_parallel_layout};
}

transformer::TransformerConfig core_transformer_config_from_args(const TrainingContext& ctx) {
  const Arguments& a = ctx.args;
  transformer::TransformerConfig c(a.num_layers, a.hidden_size, a.num_attention_heads);
  c.num_query_groups(a.group_query_attention ? std::optional<int64_t>(a.num_query_groups) : std::nullopt)
      .ffn_hidden_size(a.ffn_hidden_size)
      .kv_channels(a.kv_channels)
      .normalization(a.normalization == "RMSNorm" ? transformer::Normalization::kRMSNorm
                                                  : transformer::Normalization::kLayerNorm)
      .layernorm_epsilon(a.norm_epsilon)
      .layernorm_zero_centered_gamma(a.apply_layernorm_1p)
      .add_bias_linear(!a.disable_bias_linear)
      .add_qkv_bias(!a.disable_bias_linear || a.add_qkv_bias)
      .rotary_interleaved(a.rotary_interleaved)
      .qk_layernorm(a.qk_layernorm)
      .qk_layernorm_across_heads(a.qk_layernorm_across_heads)
      .gated_linear_unit(a.swiglu)
      .activation(a.swiglu         ? transformer::Activation::kSilu
                  : a.squared_relu ? transformer::Activation::kSquaredRelu
                  : a.openai_gelu  ? transformer::Activation::kGeluTanh
                                   : transformer::Activation::kGelu)
      .hidden_dropout(a.hidden_dropout)
      .attention_dropout(a.attention_dropout)
      .init_method_std(a.init_method_std)
      .tensor_model_parallel_size(a.tensor_model_parallel_size)
      .pipeline_model_parallel_size(a.pipeline_model_parallel_size)
      .virtual_pipeline_model_parallel_size(a.virtual_pipeline_model_parallel_size)
      .num_layers_in_first_pipeline_stage(a.decoder_first_pipeline_num_layers)
      .num_layers_in_last_pipeline_stage(a.decoder_last_pipeline_num_layers)
      .account_for_embedding_in_pipeline_split(a.account_for_embedding_in_pipeline_split)
      .account_for_loss_in_pipeline_split(a.account_for_loss_in_pipeline_split)
      .pipeline_model_parallel_layout(a.pipeline_model_parallel_layout)
      .tp_group(ctx.parallel_state.tensor_model_parallel_group_ptr())
      .sequence_parallel(a.sequence_parallel)
      .cp_group(ctx.parallel_state.context_parallel_group_ptr())
      .cp_comm_type(a.cp_comm_type)
      .hierarchical_cp_groups(ctx.parallel_state.get_hierarchical_context_parallel_groups())
      .persist_layer_norm(!a.no_persist_layer_norm)
      .bias_gelu_fusion(!a.no_bias_gelu_fusion)
      .domino(a.domino)
      .domino_intra_layer_overlap(a.domino_intra_layer_overlap)
      .rng_tracker(ctx.rng_tracker);
  if (a.recompute_granularity == "full") {
    c.recompute_granularity(transformer::RecomputeGranularity::kFull)
        .recompute_method(a.recompute_method == "block" ? transformer::RecomputeMethod::kBlock
                                                        : transformer::RecomputeMethod::kUniform)
        .recompute_num_layers(a.recompute_num_layers);
  } else if (a.recompute_granularity == "selective") {
    c.recompute_granularity(transformer::RecomputeGranularity::kSelective);
    if (!a.recompute_modules.empty()) c.recompute_modules(a.recompute_modules);
  }
  if (!a.fp8_format.empty()) {
    c.fp8(std::make_shared<const tensor_parallel::Fp8Config>(
              tensor_parallel::Fp8Config::from_flags(a.fp8_format, a.fp8_recipe, a.fp8_margin, a.fp8_amax_history_len,
                                                     a.fp8_amax_compute_algo, !a.no_fp8_wgrad)))
        .first_last_layers_bf16(a.first_last_layers_bf16)
        .num_layers_at_start_in_bf16(a.num_layers_at_start_in_bf16)
        .num_layers_at_end_in_bf16(a.num_layers_at_end_in_bf16);
  }
  if (a.num_experts) {
    c.num_moe_experts(a.num_experts)
        .moe_layer_pattern(detail::moe_layer_pattern(a.moe_layer_freq, a.num_layers))
        .moe_ffn_hidden_size(a.moe_ffn_hidden_size)
        .moe_router_topk(a.moe_router_topk)
        .moe_router_score_function(a.moe_router_score_function)
        .moe_router_pre_softmax(a.moe_router_pre_softmax)
        .moe_router_topk_scaling_factor(a.moe_router_topk_scaling_factor)
        .moe_router_dtype(a.moe_router_dtype)
        .moe_router_load_balancing_type(a.moe_router_load_balancing_type)
        .moe_aux_loss_coeff(a.moe_aux_loss_coeff)
        .moe_z_loss_coeff(a.moe_z_loss_coeff)
        .moe_router_num_groups(a.moe_router_num_groups)
        .moe_router_group_topk(a.moe_router_group_topk)
        .moe_router_enable_expert_bias(a.moe_router_enable_expert_bias)
        .moe_router_bias_update_rate(a.moe_router_bias_update_rate)
        .moe_shared_expert_intermediate_size(a.moe_shared_expert_intermediate_size)
        .moe_shared_expert_gate(a.moe_shared_expert_gate)
        .moe_expert_capacity_factor(a.moe_expert_capacity_factor)
        .moe_token_drop_policy(a.moe_token_drop_policy)
        .moe_pad_expert_input_to_capacity(a.moe_pad_expert_input_to_capacity)
        .moe_token_dispatcher_type(a.moe_token_dispatcher_type == "flex" ? "alltoall" : a.moe_token_dispatcher_type)
        .moe_grouped_gemm(a.moe_grouped_gemm)
        .expert_model_parallel_size(a.expert_model_parallel_size)
        .ep_group(ctx.parallel_state.expert_model_parallel_group_ptr())
        .expert_tensor_parallel_size(ctx.parallel_state.get_expert_tensor_parallel_world_size())
        .etp_group(ctx.parallel_state.expert_tensor_parallel_group_ptr())
        .etp_ep_group(ctx.parallel_state.expert_tensor_and_model_parallel_group_ptr());
  }
  return c.finalize();
}

optimizer::OptimizerConfig optimizer_config_from_args(const Arguments& args) {
  optimizer::OptimizerConfig oc;
  oc.optimizer = args.optimizer;
  oc.lr = *args.lr;
  oc.weight_decay = args.weight_decay;
  oc.adam_beta1 = args.adam_beta1;
  oc.adam_beta2 = args.adam_beta2;
  oc.adam_eps = args.adam_eps;
  oc.sgd_momentum = args.sgd_momentum;
  oc.clip_grad = args.clip_grad;
  oc.log_num_zeros_in_grad = args.log_num_zeros_in_grad;
  oc.log_params_norm = args.log_params_norm;
  oc.decoupled_lr = args.decoupled_lr.has_value();
  if (args.fp16) {
    optimizer::GradScalerConfig sc;
    sc.initial_scale = args.loss_scale.value_or(args.initial_loss_scale);
    sc.dynamic = !args.loss_scale;
    sc.min_scale = std::min(args.min_loss_scale, sc.initial_scale);
    sc.growth_interval = args.loss_scale_window;
    sc.hysteresis = args.hysteresis;
    oc.grad_scaler = sc;
  }
  return oc;
}

distributed::DistributedDataParallelConfig ddp_config_from_args(const Arguments& args) {
  distributed::DistributedDataParallelConfig c;
  c.overlap_grad_reduce = args.overlap_grad_reduce;
  c.overlap_param_gather = args.overlap_param_gather;
  c.use_distributed_optimizer = args.use_distributed_optimizer;
  c.data_parallel_sharding_strategy = distributed::sharding_strategy_from_string(args.data_parallel_sharding_strategy);
  c.fsdp_prefetch = !args.no_fsdp_prefetch;
  c.bucket_size = args.ddp_bucket_size.value_or(std::max<int64_t>(40'000'000, 1'000'000 * args.data_parallel_size));
  c.grad_reduce_in_fp32 = !args.grad_reduce_in_bf16;
  return c;
}

at::ScalarType params_dtype(const Arguments& args) {
  return args.bf16 ? at::kBFloat16 : (args.fp16 ? at::kHalf : at::kFloat);
}

optimizer::ParamSchedulerConfig scheduler_config_from_args(const Arguments& args) {
  const int64_t gbs = *args.global_batch_size;
  optimizer::ParamSchedulerConfig c;
  c.init_lr = args.lr_warmup_init;
  c.max_lr = *args.lr;
  c.min_lr = args.min_lr;
  c.decoupled_max_lr = args.decoupled_lr;
  c.decoupled_min_lr = args.decoupled_min_lr;
  c.lr_decay_style = args.lr_decay_style;
  c.lr_wsd_decay_style = args.lr_wsd_decay_style;
  c.lr_decay_steps = args.lr_decay_samples ? *args.lr_decay_samples
                                           : (args.lr_decay_iters ? *args.lr_decay_iters : *args.train_iters) * gbs;
  c.lr_decay_steps = std::max<int64_t>(c.lr_decay_steps, 1);
  if (args.lr_warmup_fraction) {
    c.lr_warmup_steps = static_cast<int64_t>(*args.lr_warmup_fraction * c.lr_decay_steps);
  } else if (args.lr_warmup_samples > 0) {
    c.lr_warmup_steps = args.lr_warmup_samples;
  } else {
    c.lr_warmup_steps = args.lr_warmup_iters * gbs;
  }
  if (args.lr_wsd_decay_samples)
    c.wsd_decay_steps = *args.lr_wsd_decay_samples;
  else if (args.lr_wsd_decay_iters)
    c.wsd_decay_steps = *args.lr_wsd_decay_iters * gbs;
  return c;
}

}  // namespace megatron::training
