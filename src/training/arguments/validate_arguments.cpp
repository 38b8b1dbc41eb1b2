// Arguments::validate (Megatron-LM's validate_args): every value against its range in the table
// (argument_ranges.cpp), then the combinations, one function per argument group, each filling
// what it derives.
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <utility>

#include "megatron/datasets/blended_dataset.h"
#include "megatron/datasets/gpt_dataset.h"
#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/logging.h"
#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"
#include "megatron/training/config.h"
#include "megatron/training/num_microbatches_calculator.h"
#include "training/arguments/aliases.h"
#include "training/arguments/argument_ranges.h"
#include "training/arguments/context_parallel_arguments.h"
#include "training/arguments/data_blends.h"
#include "training/arguments/fp8_arguments.h"
#include "training/arguments/implementation_arguments.h"
#include "training/arguments/moe_arguments.h"

namespace megatron::training {

using distributed::ShardingStrategy;
using distributed::to_string;

namespace {

// --data-parallel-sharding-strategy as the enum (its words are read in one place).
ShardingStrategy sharding_strategy(const Arguments& a) {
  return distributed::sharding_strategy_from_string(a.data_parallel_sharding_strategy);
}

#define ARG_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

void validate_network_size(Arguments& a) {
  if (a.max_position_embeddings == 0) a.max_position_embeddings = a.seq_length;
  ARG_CHECK(a.position_embedding_type != "learned_absolute" || a.max_position_embeddings >= a.seq_length,
            "--max-position-embeddings (", a.max_position_embeddings, ") is smaller than --seq-length (", a.seq_length,
            ")");
  ARG_CHECK(a.position_embedding_type == "rope" || (!a.use_rope_scaling && !a.rotary_interleaved),
            "--use-rope-scaling and --rotary-interleaved need --position-embedding-type rope (it is ",
            a.position_embedding_type, ")");
  ARG_CHECK(!a.use_rope_scaling || a.rope_scaling_high_freq_factor > a.rope_scaling_low_freq_factor,
            "--rope-scaling-high-freq-factor (", a.rope_scaling_high_freq_factor,
            ") must exceed --rope-scaling-low-freq-factor (", a.rope_scaling_low_freq_factor, ")");
  ARG_CHECK(!a.pad_vocab_size_to || *a.pad_vocab_size_to % a.tensor_model_parallel_size == 0, "--pad-vocab-size-to (",
            a.pad_vocab_size_to.value_or(0), ") is not divisible by --tensor-model-parallel-size (",
            a.tensor_model_parallel_size, ")");
  ARG_CHECK(a.kv_channels || a.hidden_size % a.num_attention_heads == 0, "--hidden-size (", a.hidden_size,
            ") is not divisible by --num-attention-heads (", a.num_attention_heads, "); set --kv-channels");
  ARG_CHECK(!a.qk_layernorm_across_heads || (a.qk_layernorm && a.normalization == "RMSNorm"),
            "--qk-layernorm-across-heads needs --qk-layernorm and --normalization RMSNorm");
  if (!a.group_query_attention) a.num_query_groups = a.num_attention_heads;
  ARG_CHECK(!a.squared_relu || !(a.swiglu || a.openai_gelu), "--squared-relu excludes --swiglu and --openai-gelu");
  ARG_CHECK(a.num_attention_heads % a.num_query_groups == 0, "--num-attention-heads (", a.num_attention_heads,
            ") is not divisible by --num-query-groups (", a.num_query_groups, ")");
}

void validate_distributed(Arguments& a, int64_t world) {
  const int64_t tp = a.tensor_model_parallel_size, pp = a.pipeline_model_parallel_size, cp = a.context_parallel_size;
  ARG_CHECK(world % (tp * pp * cp) == 0, "world size (", world, ") is not divisible by --tensor-model-parallel-size (",
            tp, ") x --pipeline-model-parallel-size (", pp, ") x --context-parallel-size (", cp, ")");
  ARG_CHECK(a.pp_partition_method.empty() || a.pp_partition_method == "type:transformer", "--pp-partition-method ",
            a.pp_partition_method,
            ": pipeline stages here hold an equal share of the transformer layers (type:transformer); an uneven "
            "split, such as one counting the embedding as a layer, is not implemented");
  ARG_CHECK(!(a.num_layers_per_virtual_pipeline_stage && a.num_virtual_stages_per_pipeline_rank),
            "give only one of --num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank");
  // An uneven split checks its own counts below; an even one counts the embedding and loss as
  // layers if asked.
  const bool uneven = a.decoder_first_pipeline_num_layers || a.decoder_last_pipeline_num_layers ||
                      !a.pipeline_model_parallel_layout.empty();
  ARG_CHECK(!uneven || !a.num_layers_per_virtual_pipeline_stage,
            "with --decoder-first/last-pipeline-num-layers give the virtual stages as "
            "--num-virtual-stages-per-pipeline-rank (the stages hold different numbers of layers)");
  const int64_t counted = a.num_layers + (a.account_for_embedding_in_pipeline_split ? 1 : 0) +
                          (a.account_for_loss_in_pipeline_split ? 1 : 0);
  ARG_CHECK(uneven || counted % pp == 0, "--num-layers (", a.num_layers, ")",
            counted != a.num_layers ? " with the embedding and loss counted" : "",
            " is not divisible by --pipeline-model-parallel-size (", pp, ")");
  const int64_t stage_layers = counted / pp;
  a.virtual_pipeline_model_parallel_size.reset();
  if (a.num_layers_per_virtual_pipeline_stage) {
    const int64_t per_chunk = *a.num_layers_per_virtual_pipeline_stage;
    ARG_CHECK(stage_layers % per_chunk == 0, "--num-layers-per-virtual-pipeline-stage (", per_chunk,
              ") does not divide the ", stage_layers, " layers of each pipeline stage (--num-layers ", a.num_layers,
              " / --pipeline-model-parallel-size ", pp, ")");
    a.virtual_pipeline_model_parallel_size = stage_layers / per_chunk;
  } else if (a.num_virtual_stages_per_pipeline_rank) {
    const int64_t chunks = *a.num_virtual_stages_per_pipeline_rank;
    ARG_CHECK(uneven || stage_layers % chunks == 0, "--num-virtual-stages-per-pipeline-rank (", chunks,
              ") does not divide the ", stage_layers, " layers of each pipeline stage (--num-layers ", a.num_layers,
              " / --pipeline-model-parallel-size ", pp, ")");
    a.virtual_pipeline_model_parallel_size = chunks;
  }
  if (!a.pipeline_model_parallel_layout.empty()) {  // the layout's stages give the chunks per rank
    ARG_CHECK(!a.num_layers_per_virtual_pipeline_stage && !a.num_virtual_stages_per_pipeline_rank,
              "--pipeline-model-parallel-layout sets the virtual stages itself; drop --num-virtual-stages-per-pipeline-"
              "rank");
    std::string why;
    const int64_t stages = transformer::PipelineSplit::layout_stages(a.pipeline_model_parallel_layout, &why);
    ARG_CHECK(why.empty(), why);
    ARG_CHECK(stages % pp == 0, "--pipeline-model-parallel-layout names ", stages,
              " stages, not a multiple of --pipeline-model-parallel-size (", pp, ")");
    if (stages > pp) a.virtual_pipeline_model_parallel_size = stages / pp;
  }
  ARG_CHECK(!a.virtual_pipeline_model_parallel_size || pp > 1,
            "the interleaved schedule (--num-layers-per-virtual-pipeline-stage) needs "
            "--pipeline-model-parallel-size > 1 (got ",
            pp, ")");
  const std::string split = pipeline_split_from_args(a).problem();
  ARG_CHECK(split.empty(), split);
  a.data_parallel_size = world / (tp * pp * cp);
  const std::pair<const char*, const std::string*> fsdp_dtypes[] = {
      {"--megatron-fsdp-main-params-dtype", &a.megatron_fsdp_main_params_dtype},
      {"--megatron-fsdp-main-grads-dtype", &a.megatron_fsdp_main_grads_dtype},
      {"--megatron-fsdp-grad-comm-dtype", &a.megatron_fsdp_grad_comm_dtype}};
  for (const auto& [flag, dtype] : fsdp_dtypes)
    ARG_CHECK(dtype->empty() || *dtype == "fp32" || *dtype == "auto", flag, " ", *dtype,
              ": Megatron-FSDP keeps its main parameters and gradients, and reduces them, in fp32 here (fp32 or auto)");
  ARG_CHECK(a.outer_dp_sharding_strategy == "no_shard", "--outer-dp-sharding-strategy ", a.outer_dp_sharding_strategy,
            ": hybrid sharding (HSDP) is not implemented; the data-parallel ranks form one sharded group (no_shard)");
  const int64_t instances = a.num_distributed_optimizer_instances;
  ARG_CHECK(instances == 1 || (a.use_distributed_optimizer && !a.use_megatron_fsdp),
            "--num-distributed-optimizer-instances ", instances,
            " needs --use-distributed-optimizer (and not --use-megatron-fsdp)");
  ARG_CHECK(a.data_parallel_size * cp % instances == 0, "--num-distributed-optimizer-instances (", instances,
            ") does not divide the ", a.data_parallel_size * cp, " data-parallel (x context-parallel) ranks");
  ARG_CHECK(a.num_attention_heads % tp == 0, "--num-attention-heads (", a.num_attention_heads,
            ") is not divisible by --tensor-model-parallel-size (", tp, ")");
  ARG_CHECK(a.num_query_groups % tp == 0, "--num-query-groups (", a.num_query_groups,
            ") is not divisible by --tensor-model-parallel-size (", tp, ")");
  if (tp == 1 && a.sequence_parallel) {  // as Megatron-LM does, and says
    log_rank_0(LogLevel::kWarn, "Disabling sequence parallelism because tensor model parallelism is disabled");
    a.sequence_parallel = false;
  }
  if (a.domino) {
    ARG_CHECK(a.micro_batch_size % 2 == 0, "--domino splits each micro-batch in two: --micro-batch-size (",
              a.micro_batch_size, ") must be even");
    ARG_CHECK(!a.sequence_parallel, "--domino does not support --sequence-parallel yet; drop one of them");
    ARG_CHECK(a.recompute_granularity != "full",
              "--domino does not support --recompute-granularity full (or --checkpoint-activations); drop one");
  }
  ARG_CHECK(!a.domino_intra_layer_overlap || a.domino, "--domino-intra-layer-overlap needs --domino");
  // Gradient and parameter sharding are Megatron-FSDP's; optim is the distributed optimizer either way.
  const ShardingStrategy strategy = sharding_strategy(a);
  const bool fsdp = strategy == ShardingStrategy::kOptimGrads || strategy == ShardingStrategy::kOptimGradsParams;
  ARG_CHECK(a.use_megatron_fsdp || !fsdp, "--data-parallel-sharding-strategy ", to_string(strategy),
            " needs --use-megatron-fsdp (or --zero-stage ", static_cast<int>(strategy), ")");
  if (strategy != ShardingStrategy::kNoShard) a.use_distributed_optimizer = true;
  if (a.use_distributed_optimizer && strategy == ShardingStrategy::kNoShard)
    a.data_parallel_sharding_strategy = to_string(ShardingStrategy::kOptim);
  ARG_CHECK(!fsdp || !a.domino, "--data-parallel-sharding-strategy ", to_string(strategy),
            " does not support --domino yet; drop one");
  // As Megatron-LM: the gather it overlaps is the distributed optimizer's.
  ARG_CHECK(!a.overlap_param_gather || a.use_distributed_optimizer,
            "--overlap-param-gather needs --use-distributed-optimizer (or a --data-parallel-sharding-strategy "
            "other than no_shard)");
  ARG_CHECK(!a.overlap_param_gather || a.overlap_grad_reduce, "--overlap-param-gather needs --overlap-grad-reduce");
}

// --rampup-batch-size START INCREMENT SAMPLES, as Megatron-LM checks it: START below --global-batch-size, the
// difference a whole number of INCREMENTs, and every batch a whole number of micro-batches on every data-parallel rank
// (Megatron-LM asserts that as it goes).
void validate_rampup(Arguments& a, int64_t per_step) {
  const auto& r = a.rampup_batch_size;
  ARG_CHECK(r.size() == 3, "--rampup-batch-size takes 3 numbers, START INCREMENT SAMPLES (got ", r.size(), ")");
  const int64_t gbs = *a.global_batch_size, start = r[0], increment = r[1];
  ARG_CHECK(start > 0 && start < gbs, "--rampup-batch-size START (", start,
            ") must be between 1 and --global-batch-size (", gbs, ") - 1");
  ARG_CHECK(increment > 0 && (gbs - start) % increment == 0, "--rampup-batch-size INCREMENT (", increment,
            ") must divide --global-batch-size - START (", gbs - start, ")");
  ARG_CHECK(start % per_step == 0 && increment % per_step == 0, "--rampup-batch-size START (", start,
            ") and INCREMENT (", increment, ") must be multiples of --micro-batch-size x data-parallel size (",
            per_step, ")");
  const int64_t pp = a.pipeline_model_parallel_size;
  ARG_CHECK(
      !a.virtual_pipeline_model_parallel_size || ((start / per_step) % pp == 0 && (increment / per_step) % pp == 0),
      "the interleaved schedule needs every ramp-up batch to hold a multiple of --pipeline-model-parallel-size (", pp,
      ") micro-batches");
  // With --train-samples: the iterations until then, the last partial batch dropped as Megatron-LM
  // drops it. With --train-iters the ramp runs inside that many iterations (GPT-3's script).
  if (!a.train_samples) return;
  int64_t iterations = 0;
  for (int64_t consumed = 0; consumed + get_current_global_batch_size(a, consumed) <= *a.train_samples; ++iterations)
    consumed += get_current_global_batch_size(a, consumed);
  a.train_iters = iterations;
}

void validate_training(Arguments& a) {
  const int64_t per_step = a.micro_batch_size * a.data_parallel_size;
  if (!a.global_batch_size) a.global_batch_size = per_step;
  ARG_CHECK(*a.global_batch_size % per_step == 0, "--global-batch-size (", *a.global_batch_size,
            ") is not divisible by --micro-batch-size (", a.micro_batch_size, ") x data-parallel size (",
            a.data_parallel_size, ") = ", per_step);
  a.num_microbatches = *a.global_batch_size / per_step;
  // The interleaved schedule walks micro-batches in groups of one per stage.
  const int64_t pp = a.pipeline_model_parallel_size;
  ARG_CHECK(!a.virtual_pipeline_model_parallel_size || a.num_microbatches % pp == 0,
            "the interleaved schedule needs the number of micro-batches (", a.num_microbatches,
            " = --global-batch-size / (--micro-batch-size x data-parallel size)) to be a multiple of "
            "--pipeline-model-parallel-size (",
            pp, ")");
  ARG_CHECK(a.train_iters.has_value() != a.train_samples.has_value(),
            "give exactly one of --train-iters and --train-samples");
  if (!a.rampup_batch_size.empty()) validate_rampup(a, per_step);
  if (a.train_samples && a.rampup_batch_size.empty()) {
    ARG_CHECK(*a.train_samples % *a.global_batch_size == 0, "--train-samples (", *a.train_samples,
              ") is not a multiple of --global-batch-size (", *a.global_batch_size, ")");
    a.train_iters = *a.train_samples / *a.global_batch_size;
  }
  // Sample counts are int64 everywhere (the sampler, the index caches): the run's must fit.
  const int64_t gbs = *a.global_batch_size, limit = std::numeric_limits<int64_t>::max();
  ARG_CHECK(*a.train_iters <= limit / gbs, "--train-iters (", *a.train_iters, ") x --global-batch-size (", gbs,
            ") does not fit a 64-bit sample count");
  const int64_t evaluations = *a.train_iters / a.eval_interval + 1;  // Megatron-LM's count, the test split's included
  ARG_CHECK(a.eval_iters <= limit / gbs / evaluations, "--eval-iters (", a.eval_iters, ") x ", evaluations,
            " evaluations (--train-iters / --eval-interval + 1) x --global-batch-size (", gbs,
            ") does not fit a 64-bit sample count");
}

void validate_learning_rate(const Arguments& a) {
  ARG_CHECK(a.lr.has_value(), "--lr is required");
  ARG_CHECK(!(a.override_opt_param_scheduler && a.use_checkpoint_opt_param_scheduler),
            "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other");
  ARG_CHECK(a.min_lr <= *a.lr, "--min-lr (", a.min_lr, ") must be between 0 and --lr (", *a.lr, ")");
  ARG_CHECK(!a.decoupled_lr || a.decoupled_min_lr.value_or(a.min_lr) <= *a.decoupled_lr,
            a.decoupled_min_lr ? "--decoupled-min-lr (" : "--min-lr (", a.decoupled_min_lr.value_or(a.min_lr),
            ") must not exceed --decoupled-lr (", *a.decoupled_lr, ")");
  ARG_CHECK(!(a.lr_warmup_fraction && a.lr_warmup_iters > 0),
            "give only one of --lr-warmup-fraction and --lr-warmup-iters");
  const int64_t decay_iters = a.lr_decay_iters.value_or(*a.train_iters);
  const bool warms_up = a.lr_decay_style != "constant" && a.lr_decay_style != "inverse-square-root";
  const int64_t decay_samples = a.lr_decay_samples.value_or(decay_iters * *a.global_batch_size);
  ARG_CHECK(!warms_up || a.lr_warmup_samples == 0 || a.lr_warmup_samples < decay_samples, "--lr-warmup-samples (",
            a.lr_warmup_samples, ") must be smaller than the decay length (", decay_samples, " samples)");
  ARG_CHECK(a.lr_decay_style == "constant" || a.lr_decay_style == "inverse-square-root" || a.lr_warmup_fraction ||
                a.lr_warmup_samples > 0 || a.lr_warmup_iters < decay_iters,
            "--lr-warmup-iters (", a.lr_warmup_iters, ") must be smaller than the decay length (",
            a.lr_decay_iters ? "--lr-decay-iters" : "--train-iters", " = ", decay_iters, ")");
}

void validate_mixed_precision(const Arguments& a) {
  ARG_CHECK(!(a.bf16 && a.fp16), "--bf16 and --fp16 exclude each other");
  ARG_CHECK(!a.loss_scale || a.fp16, "--loss-scale applies to --fp16 only");
}

void validate_data(const Arguments& a) {
  detail::validate_data_sources(a);
  ARG_CHECK(a.mock_data || !a.tokenizer_type.empty(), "--tokenizer-type is required with --data-path");
  if (a.tokenizer_type == "GPT2BPETokenizer") {
    ARG_CHECK(!a.vocab_file.empty() && !a.merge_file.empty(),
              "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
  } else if (a.tokenizer_type != "NullTokenizer" && !a.tokenizer_type.empty()) {
    ARG_CHECK(!a.tokenizer_model.empty(), "--tokenizer-type ", a.tokenizer_type,
              " needs --tokenizer-model (HuggingFaceTokenizer: a tokenizer.json or its folder; TikTokenizer: "
              "Megatron-LM's tiktoken JSON; the SentencePiece types: a .model file)");
  } else {
    ARG_CHECK(a.vocab_size.has_value(), a.tokenizer_type.empty() ? "--mock-data" : "--tokenizer-type NullTokenizer",
              " needs --vocab-size (> 1)");
  }
}

void validate_checkpointing(const Arguments& a) {
  ARG_CHECK(!a.exit_signal_handler || !a.save.empty(), "--exit-signal-handler needs --save (where to save on SIGTERM)");
  ARG_CHECK(!a.load.empty() || !(a.finetune || a.ckpt_step || a.load_fallback),
            a.finetune ? "--finetune" : (a.ckpt_step ? "--ckpt-step" : "--load-fallback"), " needs --load");
  ARG_CHECK(!(a.ckpt_step && a.load_fallback), "--ckpt-step and --load-fallback exclude each other");
  ARG_CHECK(!a.save_retain_interval || (a.save_interval && *a.save_retain_interval % *a.save_interval == 0),
            "--save-retain-interval (", a.save_retain_interval.value_or(0), ") must be a multiple of --save-interval (",
            a.save_interval.value_or(0), ")");
  ARG_CHECK(a.rerun_mode != "report_stats",
            "--rerun-mode report_stats (rerunning iterations to measure their nondeterminism) is not implemented");
  ARG_CHECK(!a.verify_integrity || a.ckpt_format == "torch_dist",
            "--verify-integrity needs --ckpt-format torch_dist (as Megatron-LM's), got ", a.ckpt_format);
}

}  // namespace

void validate_logging(const Arguments& a) {
  ARG_CHECK(a.wandb_project.empty(), "--wandb-project ", a.wandb_project,
            ": Weights & Biases needs network access, which this build does not use; --tensorboard-dir writes "
            "the same scalars to an event file");
  ARG_CHECK(!(a.log_timers_to_tensorboard || a.log_validation_ppl_to_tensorboard || a.log_memory_to_tensorboard ||
              a.log_world_size_to_tensorboard) ||
                !a.tensorboard_dir.empty(),
            "the --log-*-to-tensorboard flags need --tensorboard-dir");
  ARG_CHECK(!a.log_memory_interval || *a.log_memory_interval % a.log_interval == 0, "--log-memory-interval (",
            a.log_memory_interval.value_or(0), ") must be a multiple of --log-interval (", a.log_interval, ")");
  if (!a.profile) return;
  ARG_CHECK(a.profile_step_end > a.profile_step_start, "--profile-step-end (", a.profile_step_end,
            ") must be after --profile-step-start (", a.profile_step_start, ")");
  ARG_CHECK(!a.use_pytorch_profiler || !a.tensorboard_dir.empty(),
            "--use-pytorch-profiler writes its trace into --tensorboard-dir; give one");
  for (int64_t r : a.profile_ranks)
    ARG_CHECK(r < a.world_size, "--profile-ranks names rank ", r, ", but the world has ", a.world_size, " ranks");
}

void Arguments::validate(int64_t world) {
  ARG_CHECK(world > 0, "the world size must be positive (got ", world, ")");
  world_size = world;
  detail::check_ranges(*this);  // first, so that an alias's error names the flag given
  detail::resolve_aliases(*this);
  validate_network_size(*this);
  validate_distributed(*this, world);
  detail::validate_context_parallel(*this);
  detail::validate_moe(*this);  // after the data-parallel size, which the experts fold into
  detail::validate_implementation_choices(*this);
  // The groups the job would build, so that --check-args reports what initialization would refuse.
  ParallelState::rank_layout(static_cast<int>(world), static_cast<int>(tensor_model_parallel_size),
                             static_cast<int>(pipeline_model_parallel_size), static_cast<int>(context_parallel_size),
                             static_cast<int>(expert_model_parallel_size), expert_tp_size_of(*this),
                             use_tp_pp_dp_mapping);
  validate_training(*this);
  validate_learning_rate(*this);
  validate_mixed_precision(*this);
  detail::validate_fp8(*this);
  validate_data(*this);
  validate_checkpointing(*this);
  validate_logging(*this);
}

}  // namespace megatron::training
