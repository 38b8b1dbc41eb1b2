#include "megatron/training/arguments.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <sstream>

namespace megatron::training {
namespace {

template <typename T>
CLI::Option* add_optional(CLI::App& app, const std::string& name, std::optional<T>& target,
                          const std::string& help) {
  // A flag given twice takes the last value, as with argparse in Megatron-LM.
  return app.add_option_function<T>(name, [&target](const T& v) { target = v; }, help)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// Binds every flag to `a`, in Megatron-LM's groups.
void bind(CLI::App& app, Arguments& a) {
  app.set_config("--config", "", "TOML file of settings (keys: long flag names); flags override it");
  app.allow_config_extras(false);

  std::string g = "network size";
  app.add_option("--num-layers", a.num_layers, "number of transformer layers")->group(g);
  app.add_option("--hidden-size", a.hidden_size, "transformer hidden size")->group(g);
  add_optional(app, "--ffn-hidden-size", a.ffn_hidden_size, "MLP hidden size (default 4 x hidden)")->group(g);
  app.add_option("--num-attention-heads", a.num_attention_heads, "attention heads")->group(g);
  app.add_flag("--group-query-attention", a.group_query_attention, "grouped-query attention")->group(g);
  app.add_option("--num-query-groups", a.num_query_groups, "key/value heads with --group-query-attention")
      ->capture_default_str()->group(g);
  add_optional(app, "--kv-channels", a.kv_channels, "head dim (default hidden / heads)")->group(g);
  app.add_option("--seq-length", a.seq_length, "tokens per sample")->group(g);
  app.add_option("--max-position-embeddings", a.max_position_embeddings,
                 "position table size (default --seq-length)")->group(g);
  app.add_option("--position-embedding-type", a.position_embedding_type, "learned_absolute | rope")
      ->capture_default_str()->check(CLI::IsMember({"learned_absolute", "rope"}))->group(g);
  app.add_option("--rotary-percent", a.rotary_percent, "fraction of head dim rotated")->capture_default_str()->group(g);
  app.add_option("--rotary-base", a.rotary_base, "RoPE base")->capture_default_str()->group(g);
  app.add_option("--normalization", a.normalization, "LayerNorm | RMSNorm")
      ->capture_default_str()->check(CLI::IsMember({"LayerNorm", "RMSNorm"}))->group(g);
  app.add_option("--norm-epsilon", a.norm_epsilon, "normalisation epsilon")->capture_default_str()->group(g);
  app.add_flag("--swiglu", a.swiglu, "SwiGLU MLP instead of GELU")->group(g);
  app.add_flag("--openai-gelu", a.openai_gelu, "tanh-approximated GELU, as OpenAI's GPT-2")->group(g);
  app.add_flag("--disable-bias-linear", a.disable_bias_linear, "no biases in linear layers")->group(g);
  app.add_flag("--untie-embeddings-and-output-weights", a.untie_embeddings_and_output_weights,
               "separate output layer weight")->group(g);
  app.add_option("--init-method-std", a.init_method_std, "std of the normal weight initialisation")
      ->capture_default_str()->group(g);
  app.add_option("--make-vocab-size-divisible-by", a.make_vocab_size_divisible_by,
                 "pad the vocabulary to a multiple of this x TP")->capture_default_str()->group(g);

  g = "regularization";
  app.add_option("--attention-dropout", a.attention_dropout, "dropout on attention probabilities")
      ->capture_default_str()->group(g);
  app.add_option("--hidden-dropout", a.hidden_dropout, "dropout on hidden states")->capture_default_str()->group(g);
  app.add_option("--weight-decay", a.weight_decay, "decoupled weight decay (not on biases and norms)")
      ->capture_default_str()->group(g);
  app.add_option("--clip-grad", a.clip_grad, "clip gradients to this global norm (0: off)")
      ->capture_default_str()->group(g);
  app.add_option("--adam-beta1", a.adam_beta1, "Adam beta1")->capture_default_str()->group(g);
  app.add_option("--adam-beta2", a.adam_beta2, "Adam beta2")->capture_default_str()->group(g);
  app.add_option("--adam-eps", a.adam_eps, "Adam epsilon")->capture_default_str()->group(g);
  app.add_option("--sgd-momentum", a.sgd_momentum, "SGD momentum")->capture_default_str()->group(g);

  g = "training";
  app.add_option("--micro-batch-size", a.micro_batch_size, "samples per micro-batch per rank")->group(g);
  add_optional(app, "--global-batch-size", a.global_batch_size,
               "samples per iteration over all ranks (default micro x data-parallel)")->group(g);
  add_optional(app, "--train-iters", a.train_iters, "iterations to train")->group(g);
  add_optional(app, "--train-samples", a.train_samples, "samples to train (instead of --train-iters)")->group(g);
  app.add_option("--optimizer", a.optimizer, "adam | sgd")->capture_default_str()
      ->check(CLI::IsMember({"adam", "sgd"}))->group(g);
  app.add_option("--recompute-granularity", a.recompute_granularity, "full | selective")
      ->check(CLI::IsMember({"full", "selective"}))->group(g);
  app.add_option("--recompute-method", a.recompute_method, "uniform | block")->capture_default_str()
      ->check(CLI::IsMember({"uniform", "block"}))->group(g);
  app.add_option("--recompute-num-layers", a.recompute_num_layers, "layers per recompute unit")
      ->capture_default_str()->group(g);
  app.add_option("--seed", a.seed, "random seed")->capture_default_str()->group(g);
  app.add_option("--device", a.device, "cpu | cuda (default cuda when a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "cuda"}))->group(g);
  app.add_flag("--no-cpu-allocator-cache", a.no_cpu_allocator_cache,
               "return freed host memory to the OS at once instead of keeping it for the next "
               "allocation of the same size")->group(g);

  g = "learning rate";
  add_optional(app, "--lr", a.lr, "peak learning rate")->group(g);
  app.add_option("--min-lr", a.min_lr, "floor of the decayed learning rate")->capture_default_str()->group(g);
  app.add_option("--lr-decay-style", a.lr_decay_style, "constant | linear | cosine | inverse-square-root | WSD")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "linear", "cosine", "inverse-square-root", "WSD"}))->group(g);
  add_optional(app, "--lr-decay-iters", a.lr_decay_iters, "iterations to decay over (default --train-iters)")->group(g);
  add_optional(app, "--lr-decay-samples", a.lr_decay_samples, "samples to decay over")->group(g);
  app.add_option("--lr-warmup-iters", a.lr_warmup_iters, "linear warm-up iterations")->capture_default_str()->group(g);
  add_optional(app, "--lr-warmup-fraction", a.lr_warmup_fraction, "warm-up as a fraction of the decay")->group(g);
  app.add_option("--lr-warmup-samples", a.lr_warmup_samples, "warm-up samples")->capture_default_str()->group(g);
  app.add_option("--lr-warmup-init", a.lr_warmup_init, "learning rate at the start of warm-up")
      ->capture_default_str()->group(g);
  app.add_option("--lr-wsd-decay-style", a.lr_wsd_decay_style, "exponential | linear | cosine")
      ->capture_default_str()->check(CLI::IsMember({"exponential", "linear", "cosine"}))->group(g);
  add_optional(app, "--lr-wsd-decay-iters", a.lr_wsd_decay_iters, "final decay iterations of WSD")->group(g);

  g = "mixed precision";
  app.add_flag("--bf16", a.bf16, "bfloat16 model, fp32 master weights")->group(g);
  app.add_flag("--fp16", a.fp16, "float16 model, fp32 master weights, loss scaling")->group(g);
  app.add_flag("--tf32", a.tf32, "TF32 tensor cores for fp32 matmuls and convolutions on CUDA")->group(g);
  add_optional(app, "--loss-scale", a.loss_scale, "fixed loss scale (default: dynamic with --fp16)")->group(g);
  app.add_option("--initial-loss-scale", a.initial_loss_scale, "first dynamic loss scale")->capture_default_str()->group(g);
  app.add_option("--min-loss-scale", a.min_loss_scale, "dynamic loss scale floor")->capture_default_str()->group(g);
  app.add_option("--loss-scale-window", a.loss_scale_window, "good iterations before the scale grows")
      ->capture_default_str()->group(g);
  app.add_option("--hysteresis", a.hysteresis, "overflows tolerated before the scale shrinks")
      ->capture_default_str()->group(g);

  g = "distributed";
  app.add_option("--tensor-model-parallel-size", a.tensor_model_parallel_size, "tensor-parallel ranks")
      ->capture_default_str()->group(g);
  app.add_option("--pipeline-model-parallel-size", a.pipeline_model_parallel_size, "pipeline stages")
      ->capture_default_str()->group(g);
  add_optional(app, "--num-layers-per-virtual-pipeline-stage", a.num_layers_per_virtual_pipeline_stage,
               "layers per model chunk: the interleaved 1F1B schedule")->group(g);
  add_optional(app, "--num-virtual-stages-per-pipeline-rank", a.num_virtual_stages_per_pipeline_rank,
               "model chunks per pipeline stage: the interleaved 1F1B schedule")->group(g);
  app.add_flag("--sequence-parallel", a.sequence_parallel, "split norms and dropout along the sequence over TP")->group(g);
  app.add_flag("--use-distributed-optimizer", a.use_distributed_optimizer,
               "shard optimizer state over data-parallel ranks (ZeRO-1)")->group(g);
  app.add_option("--distributed-timeout-minutes", a.distributed_timeout_minutes,
                 "collective timeout")->capture_default_str()->group(g);

  g = "data and dataloader";
  app.add_option("--data-path", a.data_path, "dataset prefix, or weight prefix weight prefix ...")->group(g);
  app.add_option("--split", a.split, "train, valid, test proportions")->capture_default_str()->group(g);
  app.add_flag("--mock-data", a.mock_data, "synthetic data instead of --data-path")->group(g);
  app.add_option("--tokenizer-type", a.tokenizer_type, "GPT2BPETokenizer | NullTokenizer")
      ->check(CLI::IsMember({"GPT2BPETokenizer", "NullTokenizer"}))->group(g);
  app.add_option("--vocab-file", a.vocab_file, "GPT-2 vocab.json")->group(g);
  app.add_option("--merge-file", a.merge_file, "GPT-2 merges.txt")->group(g);
  add_optional(app, "--vocab-size", a.vocab_size, "vocabulary size of NullTokenizer / mock data")->group(g);
  app.add_option("--data-cache-path", a.data_cache_path, "where index caches go (default next to the data)")->group(g);
  app.add_flag("--reset-position-ids", a.reset_position_ids, "restart positions after each EOD")->group(g);
  app.add_flag("--reset-attention-mask", a.reset_attention_mask, "no attention across EOD")->group(g);
  app.add_flag("--eod-mask-loss", a.eod_mask_loss, "no loss on EOD tokens")->group(g);
  app.add_option("--num-workers", a.num_workers, "batches prefetched in the background")->capture_default_str()->group(g);

  g = "logging";
  app.add_option("--log-interval", a.log_interval, "iterations between log lines")->capture_default_str()->group(g);
  app.add_option("--metrics-file", a.metrics_file, "JSONL file of logged metrics")->group(g);
  app.add_flag("--skip-nan-iterations", a.skip_nan_iterations,
               "skip the update of an iteration whose loss is NaN/Inf instead of stopping")->group(g);

  g = "checkpointing";
  app.add_option("--save", a.save, "directory to save checkpoints to")->group(g);
  add_optional(app, "--save-interval", a.save_interval,
               "iterations between checkpoints (one is also saved when training ends)")->group(g);
  app.add_flag("--no-save-optim", a.no_save_optim, "leave the optimizer state out of saved checkpoints")->group(g);
  app.add_flag("--no-save-rng", a.no_save_rng, "leave the RNG states out of saved checkpoints")->group(g);
  app.add_option("--load", a.load, "directory to resume from (latest_checkpointed_iteration.txt names the iteration)")
      ->group(g);
  app.add_flag("--no-load-optim", a.no_load_optim,
               "do not load the optimizer state and learning-rate schedule")->group(g);
  app.add_flag("--no-load-rng", a.no_load_rng, "do not load the RNG states")->group(g);
  app.add_flag("--finetune", a.finetune,
               "load the model weights only; iteration and consumed samples start at 0")->group(g);
  add_optional(app, "--ckpt-step", a.ckpt_step, "load this iteration instead of the tracker's")->group(g);
  app.add_flag("--load-fallback", a.load_fallback,
               "if the checkpoint to load is missing, truncated or corrupt, load the newest older complete one")
      ->group(g);
  app.add_option("--keep-last-checkpoints", a.keep_last_checkpoints,
                 "keep only the newest N checkpoints in --save, deleting older ones after each save (0: keep all)")
      ->capture_default_str()->group(g);
  app.add_flag("--exit-signal-handler", a.exit_signal_handler,
               "on SIGTERM, finish the current iteration, save a checkpoint to --save and stop")->group(g);

  add_optional(app, "--exit-interval", a.exit_interval,
               "stop when the iteration is a multiple of this, saving a checkpoint to --save first")->group(g);
  add_optional(app, "--exit-duration-in-mins", a.exit_duration_in_mins,
               "stop once training has run this many minutes (slowest rank), saving first")->group(g);

  g = "Megatron-LM compatibility";
  app.add_flag("--recompute-activations", a.recompute_activations,
               "= --recompute-granularity selective")->group(g);
  app.add_flag("--use-rotary-position-embeddings", a.use_rotary_position_embeddings,
               "= --position-embedding-type rope")->group(g);
  const std::string none = "accepted, no effect: ";
  const std::string sdpa = none + "attention is at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA)";
  const std::string fused = none + "kernels are LibTorch's";
  app.add_flag("--use-mcore-models", a.use_mcore_models, none + "there is one model implementation")->group(g);
  app.add_option("--transformer-impl", a.transformer_impl, fused)
      ->capture_default_str()->check(CLI::IsMember({"local", "transformer_engine"}))->group(g);
  app.add_flag("--use-flash-attn", a.use_flash_attn, sdpa)->group(g);
  app.add_option("--attention-backend", a.attention_backend, sdpa)
      ->capture_default_str()->check(CLI::IsMember({"flash", "fused", "unfused", "local", "auto"}))->group(g);
  app.add_flag("--no-masked-softmax-fusion", a.no_masked_softmax_fusion, sdpa)->group(g);
  app.add_flag("--attention-softmax-in-fp32", a.attention_softmax_in_fp32,
               none + "the attention softmax accumulates in fp32 already")->group(g);
  app.add_flag("--apply-query-key-layer-scaling", a.apply_query_key_layer_scaling,
               none + "with an fp32 softmax the scaling cancels out")->group(g);
  app.add_flag("--no-bias-gelu-fusion", a.no_bias_gelu_fusion, fused)->group(g);
  app.add_flag("--no-bias-dropout-fusion", a.no_bias_dropout_fusion, fused)->group(g);
  app.add_flag("--no-bias-swiglu-fusion", a.no_bias_swiglu_fusion, fused)->group(g);
  app.add_flag("--no-rope-fusion", a.no_rope_fusion, fused)->group(g);
  app.add_flag("--no-gradient-accumulation-fusion", a.no_gradient_accumulation_fusion, fused)->group(g);
  app.add_flag("--no-persist-layer-norm", a.no_persist_layer_norm, fused)->group(g);
  app.add_flag("--overlap-grad-reduce", a.overlap_grad_reduce,
               none + "data-parallel gradients are reduced after the backward pass")->group(g);
  app.add_flag("--overlap-param-gather", a.overlap_param_gather,
               none + "the distributed optimizer gathers parameters after its step")->group(g);
  app.add_option("--distributed-backend", a.distributed_backend,
                 none + "host tensors go through MPI, CUDA tensors through NCCL")
      ->capture_default_str()->check(CLI::IsMember({"nccl", "gloo"}))->group(g);
  app.add_flag("--no-create-attention-mask-in-dataloader", a.no_create_attention_mask_in_dataloader,
               none + "batches carry a mask only with --reset-attention-mask")->group(g);
  app.add_flag("--manual-gc", a.manual_gc, none + "there is no Python garbage collector")->group(g);
  app.add_option("--manual-gc-interval", a.manual_gc_interval, none + "there is no Python garbage collector")
      ->capture_default_str()->group(g);
  app.add_flag("--log-throughput", a.log_throughput, none + "the iteration line always reports it")->group(g);
  app.add_option("--timing-log-level", a.timing_log_level, none + "forward-backward and optimizer times are always logged")
      ->capture_default_str()->check(CLI::Range(0, 2))->group(g);

  g = "validation";
  app.add_option("--eval-interval", a.eval_interval, "iterations between evaluations")->capture_default_str()->group(g);
  app.add_option("--eval-iters", a.eval_iters, "iterations per evaluation")->capture_default_str()->group(g);
}

#define ARG_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

}  // namespace

void Arguments::validate(int64_t world) {
  world_size = world;
  if (recompute_activations) {
    ARG_CHECK(recompute_granularity.empty() || recompute_granularity == "selective",
              "--recompute-activations means --recompute-granularity selective, but it is ", recompute_granularity);
    recompute_granularity = "selective";
  }
  if (use_rotary_position_embeddings) position_embedding_type = "rope";
  ARG_CHECK(!exit_interval || *exit_interval > 0, "--exit-interval must be positive (got ", exit_interval.value_or(0), ")");
  ARG_CHECK(!exit_duration_in_mins || *exit_duration_in_mins > 0, "--exit-duration-in-mins must be positive (got ",
            exit_duration_in_mins.value_or(0), ")");
  ARG_CHECK(num_layers > 0, "--num-layers is required and must be positive (got ", num_layers, ")");
  ARG_CHECK(hidden_size > 0, "--hidden-size is required and must be positive (got ", hidden_size, ")");
  ARG_CHECK(num_attention_heads > 0, "--num-attention-heads is required and must be positive (got ",
            num_attention_heads, ")");
  ARG_CHECK(seq_length > 0, "--seq-length is required and must be positive (got ", seq_length, ")");
  if (max_position_embeddings == 0) max_position_embeddings = seq_length;
  ARG_CHECK(position_embedding_type != "learned_absolute" || max_position_embeddings >= seq_length,
            "--max-position-embeddings (", max_position_embeddings, ") is smaller than --seq-length (",
            seq_length, ")");
  ARG_CHECK(kv_channels || hidden_size % num_attention_heads == 0, "--hidden-size (", hidden_size,
            ") is not divisible by --num-attention-heads (", num_attention_heads, "); set --kv-channels");
  ARG_CHECK(tensor_model_parallel_size >= 1 && pipeline_model_parallel_size >= 1,
            "--tensor-model-parallel-size and --pipeline-model-parallel-size must be at least 1");
  ARG_CHECK(world % (tensor_model_parallel_size * pipeline_model_parallel_size) == 0, "world size (",
            world, ") is not divisible by --tensor-model-parallel-size (", tensor_model_parallel_size,
            ") x --pipeline-model-parallel-size (", pipeline_model_parallel_size, ")");
  const int64_t pp = pipeline_model_parallel_size;
  ARG_CHECK(num_layers % pp == 0, "--num-layers (", num_layers, ") is not divisible by --pipeline-model-parallel-size (",
            pp, ")");
  ARG_CHECK(!(num_layers_per_virtual_pipeline_stage && num_virtual_stages_per_pipeline_rank),
            "give only one of --num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank");
  virtual_pipeline_model_parallel_size.reset();
  if (num_layers_per_virtual_pipeline_stage) {
    const int64_t per_chunk = *num_layers_per_virtual_pipeline_stage;
    ARG_CHECK(per_chunk > 0 && (num_layers / pp) % per_chunk == 0, "--num-layers-per-virtual-pipeline-stage (",
              per_chunk, ") does not divide the ", num_layers / pp, " layers of each pipeline stage (--num-layers ",
              num_layers, " / --pipeline-model-parallel-size ", pp, ")");
    virtual_pipeline_model_parallel_size = num_layers / pp / per_chunk;
  } else if (num_virtual_stages_per_pipeline_rank) {
    const int64_t chunks = *num_virtual_stages_per_pipeline_rank;
    ARG_CHECK(chunks > 0 && (num_layers / pp) % chunks == 0, "--num-virtual-stages-per-pipeline-rank (", chunks,
              ") does not divide the ", num_layers / pp, " layers of each pipeline stage (--num-layers ", num_layers,
              " / --pipeline-model-parallel-size ", pp, ")");
    virtual_pipeline_model_parallel_size = chunks;
  }
  if (virtual_pipeline_model_parallel_size) {
    ARG_CHECK(pp > 1, "the interleaved schedule (--num-layers-per-virtual-pipeline-stage) needs "
              "--pipeline-model-parallel-size > 1 (got ", pp, ")");
  }
  data_parallel_size = world / (tensor_model_parallel_size * pipeline_model_parallel_size);
  ARG_CHECK(num_attention_heads % tensor_model_parallel_size == 0, "--num-attention-heads (",
            num_attention_heads, ") is not divisible by --tensor-model-parallel-size (",
            tensor_model_parallel_size, ")");
  if (!group_query_attention) num_query_groups = num_attention_heads;
  ARG_CHECK(num_query_groups > 0 && num_attention_heads % num_query_groups == 0,
            "--num-attention-heads (", num_attention_heads, ") is not divisible by --num-query-groups (",
            num_query_groups, ")");
  ARG_CHECK(num_query_groups % tensor_model_parallel_size == 0, "--num-query-groups (", num_query_groups,
            ") is not divisible by --tensor-model-parallel-size (", tensor_model_parallel_size, ")");
  if (tensor_model_parallel_size == 1) sequence_parallel = false;  // as Megatron-LM does

  ARG_CHECK(micro_batch_size > 0, "--micro-batch-size is required and must be positive (got ",
            micro_batch_size, ")");
  if (!global_batch_size) global_batch_size = micro_batch_size * data_parallel_size;
  ARG_CHECK(*global_batch_size > 0 && *global_batch_size % (micro_batch_size * data_parallel_size) == 0,
            "--global-batch-size (", *global_batch_size, ") is not divisible by --micro-batch-size (",
            micro_batch_size, ") x data-parallel size (", data_parallel_size, ") = ",
            micro_batch_size * data_parallel_size);
  num_microbatches = *global_batch_size / (micro_batch_size * data_parallel_size);
  // The interleaved schedule walks micro-batches in groups of one per stage.
  ARG_CHECK(!virtual_pipeline_model_parallel_size || num_microbatches % pp == 0, "the interleaved schedule needs "
            "the number of micro-batches (", num_microbatches, " = --global-batch-size / (--micro-batch-size x "
            "data-parallel size)) to be a multiple of --pipeline-model-parallel-size (", pp, ")");
  ARG_CHECK(train_iters.has_value() != train_samples.has_value(),
            "give exactly one of --train-iters and --train-samples");
  if (train_samples) {
    ARG_CHECK(*train_samples % *global_batch_size == 0, "--train-samples (", *train_samples,
              ") is not a multiple of --global-batch-size (", *global_batch_size, ")");
    train_iters = *train_samples / *global_batch_size;
  }
  ARG_CHECK(*train_iters >= 0, "--train-iters must not be negative (got ", *train_iters, ")");
  const int64_t decay_iters = lr_decay_iters.value_or(*train_iters);
  ARG_CHECK(lr_decay_style == "constant" || lr_decay_style == "inverse-square-root" ||
                lr_warmup_fraction || lr_warmup_samples > 0 || lr_warmup_iters < decay_iters,
            "--lr-warmup-iters (", lr_warmup_iters, ") must be smaller than the decay length (",
            lr_decay_iters ? "--lr-decay-iters" : "--train-iters", " = ", decay_iters, ")");

  ARG_CHECK(lr.has_value(), "--lr is required");
  ARG_CHECK(*lr >= 0 && min_lr >= 0 && min_lr <= *lr, "--min-lr (", min_lr,
            ") must be between 0 and --lr (", *lr, ")");
  ARG_CHECK(!(lr_warmup_fraction && lr_warmup_iters > 0),
            "give only one of --lr-warmup-fraction and --lr-warmup-iters");
  ARG_CHECK(!lr_warmup_fraction || (*lr_warmup_fraction >= 0 && *lr_warmup_fraction <= 1),
            "--lr-warmup-fraction (", *lr_warmup_fraction, ") must be between 0 and 1");
  ARG_CHECK(clip_grad >= 0, "--clip-grad must not be negative (got ", clip_grad, ")");
  ARG_CHECK(!(bf16 && fp16), "--bf16 and --fp16 exclude each other");
  ARG_CHECK(!loss_scale || fp16, "--loss-scale applies to --fp16 only");
  ARG_CHECK(loss_scale_window > 0 && hysteresis > 0 && min_loss_scale > 0,
            "--loss-scale-window, --hysteresis and --min-loss-scale must be positive");

  ARG_CHECK(mock_data != !data_path.empty(), mock_data ? "--mock-data and --data-path exclude each other"
                                                      : "give --data-path (or --mock-data)");
  if (!data_path.empty()) {
    ARG_CHECK(!tokenizer_type.empty(), "--tokenizer-type is required with --data-path");
  }
  if (tokenizer_type == "GPT2BPETokenizer") {
    ARG_CHECK(!vocab_file.empty() && !merge_file.empty(),
              "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
  } else {
    ARG_CHECK(vocab_size.has_value() && *vocab_size > 1, tokenizer_type.empty() ? "--mock-data" : "--tokenizer-type NullTokenizer",
              " needs --vocab-size (> 1)");
  }
  ARG_CHECK(log_interval > 0 && eval_interval > 0 && eval_iters >= 0,
            "--log-interval and --eval-interval must be positive, --eval-iters not negative");
  ARG_CHECK(num_workers >= 0, "--num-workers must not be negative");
  ARG_CHECK(distributed_timeout_minutes > 0, "--distributed-timeout-minutes must be positive");
  ARG_CHECK(!save_interval || *save_interval > 0, "--save-interval must be positive (got ", save_interval.value_or(0),
            ")");
  ARG_CHECK(!save_interval || !save.empty(), "--save-interval needs --save");
  ARG_CHECK(!exit_signal_handler || !save.empty(), "--exit-signal-handler needs --save (where to save on SIGTERM)");
  ARG_CHECK(keep_last_checkpoints >= 0, "--keep-last-checkpoints must not be negative (got ", keep_last_checkpoints,
            ")");
  ARG_CHECK(load.empty() == false || !(finetune || ckpt_step || load_fallback),
            finetune ? "--finetune" : (ckpt_step ? "--ckpt-step" : "--load-fallback"), " needs --load");
  ARG_CHECK(!(ckpt_step && load_fallback), "--ckpt-step and --load-fallback exclude each other");
}

std::vector<std::string> ignored_megatron_flags(const Arguments& a) {
  std::vector<std::string> out;
  auto flag = [&](bool given, const char* name) {
    if (given) out.push_back(name);
  };
  flag(a.use_mcore_models, "--use-mcore-models");
  flag(a.transformer_impl != "local", "--transformer-impl");
  flag(a.use_flash_attn, "--use-flash-attn");
  flag(a.attention_backend != "auto", "--attention-backend");
  flag(a.no_masked_softmax_fusion, "--no-masked-softmax-fusion");
  flag(a.attention_softmax_in_fp32, "--attention-softmax-in-fp32");
  flag(a.apply_query_key_layer_scaling, "--apply-query-key-layer-scaling");
  flag(a.no_bias_gelu_fusion, "--no-bias-gelu-fusion");
  flag(a.no_bias_dropout_fusion, "--no-bias-dropout-fusion");
  flag(a.no_bias_swiglu_fusion, "--no-bias-swiglu-fusion");
  flag(a.no_rope_fusion, "--no-rope-fusion");
  flag(a.no_gradient_accumulation_fusion, "--no-gradient-accumulation-fusion");
  flag(a.no_persist_layer_norm, "--no-persist-layer-norm");
  flag(a.overlap_grad_reduce, "--overlap-grad-reduce");
  flag(a.overlap_param_gather, "--overlap-param-gather");
  flag(a.distributed_backend != "nccl", "--distributed-backend");
  flag(a.no_create_attention_mask_in_dataloader, "--no-create-attention-mask-in-dataloader");
  flag(a.manual_gc, "--manual-gc");
  flag(a.manual_gc_interval != 0, "--manual-gc-interval");
  flag(a.log_throughput, "--log-throughput");
  flag(a.timing_log_level != 0, "--timing-log-level");
  return out;
}

std::optional<Arguments> parse_arguments(const std::vector<std::string>& args, int64_t world_size,
                                         const std::string& program) {
  Arguments a;
  CLI::App app{"Megatron-style GPT pretraining (megatron-cpp)", program};
  bind(app, a);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    TORCH_CHECK(false, "[arguments] ", e.what(), "; see ", program, " --help");
  }
  if (auto* config = app.get_config_ptr(); config && config->count()) a.config_file = config->as<std::string>();
  a.validate(world_size);
  return a;
}

std::string arguments_help(const std::string& program) {
  Arguments a;
  CLI::App app{"Megatron-style GPT pretraining (megatron-cpp)", program};
  bind(app, a);
  return app.help();
}

}  // namespace megatron::training
