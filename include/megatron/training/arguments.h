// Arguments: every setting of a training run in one validated structure, with Megatron-LM's
// flag names (--num-layers, --tensor-model-parallel-size, ...). Settings come from the command
// line and optionally from a TOML file (--config, keys are the long flag names without dashes,
// e.g. `num-layers = 12`); the command line wins.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "megatron/training/arguments_table.h"

namespace megatron::training {

struct MEGATRON_API Arguments {
  // --- model
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  std::optional<int64_t> ffn_hidden_size;
  int64_t num_attention_heads = 0;
  bool group_query_attention = false;
  int64_t num_query_groups = 1;
  std::optional<int64_t> kv_channels;
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;
  std::string position_embedding_type = "learned_absolute";  // | rope | alibi | none
  double rotary_percent = 1.0;
  double rotary_base = 10000.0;
  bool rotary_interleaved = false;
  // Llama 3's RoPE frequency scaling (Hugging Face's rope_type "llama3").
  bool use_rope_scaling = false;
  double rope_scaling_factor = 8.0;
  double rope_scaling_low_freq_factor = 1.0;
  double rope_scaling_high_freq_factor = 4.0;
  int64_t rope_scaling_original_max_position_embeddings = 8192;
  std::string normalization = "LayerNorm";  // | RMSNorm
  bool apply_layernorm_1p = false;          // norm weights stored as gamma - 1
  double norm_epsilon = 1e-5;
  bool swiglu = false;
  bool qk_layernorm = false;               // each head's query and key normalised before RoPE
  bool qk_layernorm_across_heads = false;  // one norm over all heads' queries, one over the keys (OLMoE)
  bool openai_gelu = false;                // tanh-approximated GELU, as GPT-2 (Hugging Face's gelu_new)
  bool squared_relu = false;               // relu(x)^2 (Primer; Nemotron)
  bool disable_bias_linear = false;
  bool add_qkv_bias = false;  // bias on Q, K, V even with --disable-bias-linear (Qwen 2)
  bool untie_embeddings_and_output_weights = false;
  bool embed_layernorm = false;  // LayerNorm on the word embeddings (BLOOM)
  // --- mixture of experts (Megatron-Core's MoE; docs/moe.md)
  std::optional<int64_t> num_experts;
  std::optional<int64_t> moe_ffn_hidden_size;  // default --ffn-hidden-size
  std::string moe_layer_freq = "1";            // N (every N-th layer from 0) or a Python list "[1,0]*2"
  int64_t moe_router_topk = 2;
  std::string moe_router_score_function = "softmax";  // | sigmoid
  bool moe_router_pre_softmax = false;
  std::optional<double> moe_router_topk_scaling_factor;
  std::string moe_router_dtype;                             // "" (the model's) | fp32 | fp64
  std::string moe_router_load_balancing_type = "aux_loss";  // | seq_aux_loss | none
  double moe_aux_loss_coeff = 0.0;
  std::optional<double> moe_z_loss_coeff;
  bool moe_router_enable_expert_bias = false;
  double moe_router_bias_update_rate = 1e-3;
  std::optional<int64_t> moe_router_num_groups;
  std::optional<int64_t> moe_router_group_topk;
  std::optional<int64_t> moe_shared_expert_intermediate_size;
  bool moe_shared_expert_gate = false;
  std::optional<double> moe_expert_capacity_factor;
  std::string moe_token_drop_policy = "probs";  // | position
  bool moe_pad_expert_input_to_capacity = false;
  std::string moe_token_dispatcher_type = "allgather";  // | alltoall | flex (alltoall here)
  std::string moe_flex_dispatcher_backend;              // deepep | hybridep | ncclep: no effect
  bool moe_enable_deepep = false;                       // flex with deepep: no effect
  bool moe_grouped_gemm = false;
  int64_t expert_model_parallel_size = 1;
  std::optional<int64_t> expert_tensor_parallel_size;  // default --tensor-model-parallel-size
  bool moe_permute_fusion = false;
  bool moe_router_fusion = false;
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  double init_method_std = 0.02;
  int64_t make_vocab_size_divisible_by = 128;
  std::optional<int64_t> pad_vocab_size_to;  // the padded vocabulary exactly (BLOOM: 250880)
  std::string recompute_granularity;         // "" | full | selective
  std::string recompute_method = "uniform";
  int64_t recompute_num_layers = 1;
  // With selective granularity: what is recomputed (Megatron-LM's names; default core_attn).
  std::vector<std::string> recompute_modules;
  // The CUDA kernels of fusions/ (on by default, as Megatron-LM's fusions are); no effect on the CPU.
  bool no_persist_layer_norm = false;  // ATen's LayerNorm / RMSNorm and a separate residual add
  bool no_bias_gelu_fusion = false;    // ATen's bias add, GELU and bias-gradient reduction

  // --- parallelism
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t context_parallel_size = 1;
  std::vector<std::string> cp_comm_type = {"p2p"};  // one, or one per layer
  std::vector<int64_t> hierarchical_context_parallel_sizes;
  bool use_tp_pp_dp_mapping = false;  // ranks ordered TP, CP, PP, DP (a pipeline's stages adjacent)
  // Interleaved 1F1B: layers per model chunk (or chunks per stage); sets
  // virtual_pipeline_model_parallel_size.
  std::optional<int64_t> num_layers_per_virtual_pipeline_stage;
  std::optional<int64_t> num_virtual_stages_per_pipeline_rank;
  std::optional<int64_t> decoder_first_pipeline_num_layers;  // an uneven split: the first stage's layers
  std::optional<int64_t> decoder_last_pipeline_num_layers;   // and the last's; the rest evenly between
  bool account_for_embedding_in_pipeline_split = false;      // the embedding counts as a layer
  bool account_for_loss_in_pipeline_split = false;           // the loss counts as a layer
  std::string pipeline_model_parallel_layout;                // each virtual stage's layers, e.g. "Et|tt|tL"
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  bool use_megatron_fsdp = false;
  std::string data_parallel_sharding_strategy = "no_shard";  // | optim | optim_grads | optim_grads_params
  bool no_fsdp_prefetch = false;
  // Megatron-FSDP's precisions: main parameters, main gradients and their reduction are fp32 here.
  std::string megatron_fsdp_main_params_dtype;
  std::string megatron_fsdp_main_grads_dtype;
  std::string megatron_fsdp_grad_comm_dtype;
  std::string outer_dp_sharding_strategy = "no_shard";  // HSDP's outer level: not sharded
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  std::optional<int64_t> ddp_bucket_size;           // elements; default max(40M, 1M x data-parallel size)
  std::optional<int64_t> ddp_num_buckets;           // or: this many buckets per gradient buffer
  bool grad_reduce_in_bf16 = false;                 // buckets reduced as bf16 copies (accumulated in fp32)
  bool accumulate_allreduce_grads_in_fp32 = false;  // fp32 accumulation and reduction: always so here
  bool domino = false;
  bool domino_intra_layer_overlap = false;
  double distributed_timeout_minutes = 10;
  std::optional<int64_t> local_rank;  // as the launcher passes it (deepspeed: --local_rank=N)
  // Megatron-DeepSpeed's: a DeepSpeed JSON config read into these settings (deepspeed_config.cpp).
  bool deepspeed = false;
  std::string deepspeed_config;
  std::optional<int64_t> zero_stage;  // 0-3: --data-parallel-sharding-strategy no_shard ... optim_grads_params

  // --- data and tokenizer
  std::vector<std::string> data_path;  // prefix, or weight prefix weight prefix ...
  std::string data_args_path;          // a file holding --data-path's words
  // A blend per split instead (Megatron-LM's blend_per_split), or a JSON file of the three.
  std::vector<std::string> train_data_path;
  std::vector<std::string> valid_data_path;
  std::vector<std::string> test_data_path;
  std::string per_split_data_args_path;
  std::string split = "969, 30, 1";
  bool mock_data = false;
  std::string tokenizer_type;  // arguments_table.h lists the types
  std::string vocab_file;
  std::string merge_file;
  std::string tokenizer_model;  // the file (or folder) of a HuggingFace, TikToken or SentencePiece tokenizer
  bool tokenizer_hf_no_include_special_tokens = false;
  std::string tiktoken_pattern;  // empty: v2
  int64_t tiktoken_num_special_tokens = 1000;
  std::vector<std::string> tokenizer_special_tokens;
  // NullTokenizer: ids 0..vocab_size-1, EOD = vocab_size - 1; TikTokenizer: with its special tokens
  std::optional<int64_t> vocab_size;
  std::string data_cache_path;
  bool no_mmap_bin_files = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  int64_t num_workers = 1;        // batches prefetched on a background thread (0: none)
  std::string dataloader_type;    // single (default) | cyclic (a seeded shuffle per epoch) | external
  bool no_data_sharding = false;  // cyclic: one permutation dealt round-robin, not one bucket per rank

  // --- training
  int64_t micro_batch_size = 0;
  std::optional<int64_t> global_batch_size;  // default micro_batch_size * data-parallel size
  std::vector<int64_t> rampup_batch_size;    // start, increment, ramp-up samples; empty: none
  std::optional<int64_t> train_iters;
  std::optional<int64_t> train_samples;
  uint64_t seed = 1234;

  // --- optimizer and learning rate
  std::string optimizer = "adam";  // adam (AdamW) | sgd
  std::optional<double> lr;
  double min_lr = 0.0;
  std::optional<double> decoupled_lr;      // the word embedding's and output layer's own peak
  std::optional<double> decoupled_min_lr;  // and floor (default --min-lr)
  std::string lr_decay_style = "linear";   // constant | linear | cosine | inverse-square-root | WSD
  std::optional<int64_t> lr_decay_iters;
  std::optional<int64_t> lr_decay_samples;
  int64_t lr_warmup_iters = 0;
  std::optional<double> lr_warmup_fraction;
  int64_t lr_warmup_samples = 0;
  double lr_warmup_init = 0.0;
  std::string lr_wsd_decay_style = "exponential";  // exponential | linear | cosine
  std::optional<int64_t> lr_wsd_decay_iters;
  std::optional<int64_t> lr_wsd_decay_samples;
  bool override_opt_param_scheduler = false;        // on resume: this run's schedule, not the checkpoint's
  bool use_checkpoint_opt_param_scheduler = false;  // on resume: the checkpoint's schedule
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  double clip_grad = 1.0;

  // --- precision
  bool bf16 = false;
  bool fp16 = false;
  std::optional<double> loss_scale;  // fixed scale; default dynamic for fp16
  double initial_loss_scale = 4294967296.0;
  double min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  // The precision-aware optimizer's state types: fp32 (the only ones here).
  bool use_precision_aware_optimizer = false;
  std::string main_grads_dtype = "fp32";
  std::string main_params_dtype = "fp32";
  std::string exp_avg_dtype = "fp32";
  std::string exp_avg_sq_dtype = "fp32";

  // --- logging and evaluation
  int64_t log_interval = 100;
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  std::string metrics_file;     // JSONL, one line per logged iteration and evaluation
  std::string tensorboard_dir;  // event file of scalars; also where --use-pytorch-profiler writes
  int64_t tensorboard_log_interval = 1;
  int64_t tensorboard_queue_size = 1000;
  bool log_timers_to_tensorboard = false;
  bool no_log_loss_scale_to_tensorboard = false;
  bool log_validation_ppl_to_tensorboard = false;
  bool log_memory_to_tensorboard = false;
  std::optional<int64_t> log_memory_interval;  // the memory report every N iterations too
  bool log_world_size_to_tensorboard = false;
  bool log_throughput = false;               // a TensorBoard scalar; the iteration line always has it
  bool log_params_norm = false;              // the updated parameters' norm: iteration line and TensorBoard
  bool log_num_zeros_in_grad = false;        // zeros in the clipped gradients: iteration line and TensorBoard
  std::optional<int64_t> logging_level;      // Python's numbers: 10 shows debug lines
  std::string timing_log_option = "minmax";  // max | minmax | all
  std::optional<int64_t> check_weight_hash_across_dp_replicas_interval;
  bool test_mode = false;             // the replica check each iteration, tensor-parallel copies too
  std::string wandb_project;          // refused with a clear error (no network here)
  bool profile = false;               // profile iterations profile_step_start + 1 .. profile_step_end
  bool use_pytorch_profiler = false;  // a Kineto trace (else CUDA profiler ranges for nsys)
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<int64_t> profile_ranks = {0};
  bool skip_nan_iterations = false;       // default: a NaN/Inf loss stops training
  bool calculate_per_token_loss = false;  // the loss summed over tokens, divided by the global count

  // --- checkpointing (docs/checkpoints.md)
  std::string save;                      // directory to save checkpoints to
  std::optional<int64_t> save_interval;  // iterations between checkpoints (also saved at the end)
  bool no_save_optim = false;
  bool no_save_rng = false;
  bool async_save = false;     // write checkpoints on a background thread from a host copy
  std::string load;            // directory to resume from (its tracker file names the iteration)
  bool no_load_optim = false;  // also skips the learning-rate schedule, as Megatron-LM
  bool no_load_rng = false;
  bool finetune = false;                        // model weights only; iteration and samples start at 0
  std::optional<int64_t> ckpt_step;             // load this iteration instead of the tracker's
  bool use_checkpoint_args = false;             // model shape and layout from --load's saved args
  bool load_fallback = false;                   // an unreadable checkpoint: load the newest older complete one
  int64_t keep_last_checkpoints = 0;            // 0: keep all
  std::optional<int64_t> save_retain_interval;  // older checkpoints off this interval are deleted
  bool allow_save_rewind = false;               // saves may move --save's tracker backwards
  bool override_data_check = false;             // resume on data other than the checkpoint's
  bool ignore_memory_check = false;             // train even when the estimate exceeds free memory
  bool exit_signal_handler = false;             // SIGTERM: save a checkpoint after the current iteration, stop
  std::string kill_switch_path;                 // stop without saving once this file exists
  std::string ckpt_format = "torch";            // what --save writes: torch (per-rank files) or torch_dist
  bool verify_integrity = false;                // torch_dist: integrity.json written with each save, checked on load
  std::optional<int64_t> exit_interval;         // stop (saving to --save first) when iteration % N == 0
  std::optional<double> exit_duration_in_mins;  // stop (saving first) once training has run this long

  // --- FP8 GEMMs without Transformer Engine (tensor_parallel/fp8.h)
  std::string fp8_format;                             // e4m3 | hybrid; "": off
  std::string fp8_recipe = "delayed";                 // delayed | tensorwise
  int64_t fp8_margin = 0;                             // delayed: scales leave 2^margin of headroom
  int64_t fp8_amax_history_len = 1;                   // delayed: iterations of amax kept
  std::string fp8_amax_compute_algo = "most_recent";  // delayed: most_recent | max
  bool no_fp8_wgrad = false;                          // weight gradients in the model's precision
  bool tp_only_amax_red = false;                      // amaxes reduced over TP only, not DP x CP too
  bool first_last_layers_bf16 = false;                // the first and last layers without FP8
  int64_t num_layers_at_start_in_bf16 = 1;
  int64_t num_layers_at_end_in_bf16 = 1;

  // --- device
  std::string device;                                  // cpu | cuda; default cuda when a GPU is visible
  bool tf32 = false;                                   // TF32 for fp32 matmuls on CUDA
  bool disable_bf16_reduced_precision_matmul = false;  // cuBLAS bf16 GEMMs reduce in fp32 throughout
  bool no_cpu_allocator_cache = false;                 // freed host blocks go back to the OS at once (memory.h)
  bool deterministic_mode = false;        // deterministic algorithms only (bit-identical reruns on a GPU too)
  int64_t empty_unused_memory_level = 0;  // 1: allocator caches emptied after forward-backward; 2: also after the step

  // --- Megatron-LM flags accepted so that its launch scripts run unchanged
  bool recompute_activations = false;               // = --recompute-granularity selective
  bool use_rotary_position_embeddings = false;      // = --position-embedding-type rope
  bool no_position_embedding = false;               // deprecated; only beside rope, where it changes nothing
  std::optional<double> layernorm_epsilon;          // = --norm-epsilon (Megatron-DeepSpeed's name)
  std::optional<int64_t> persistent_save_interval;  // = --save-interval (Megatron-LM's other name)
  std::string tokenizer_name_or_path;               // = --tokenizer-model (Megatron-DeepSpeed's)
  bool use_torch_fsdp2 = false;                     // = --use-megatron-fsdp ... optim_grads_params
  bool checkpoint_activations = false;              // = --recompute-granularity full (Megatron-DeepSpeed)
  // No effect here (ignored_megatron_flags() names the ones given): attention is always
  // at::scaled_dot_product_attention with an fp32 softmax, kernels are LibTorch's, host and CUDA
  // collectives are MPI/Gloo and NCCL, and there is no Python garbage collector.
  bool use_mcore_models = false;
  std::string transformer_impl = "local";  // local | transformer_engine
  std::vector<std::string> spec;           // a GPT layer spec (local or Transformer Engine's); others refused
  bool use_flash_attn = false;
  std::string attention_backend = "auto";  // flash | fused | unfused | local | auto
  bool no_masked_softmax_fusion = false;
  bool attention_softmax_in_fp32 = false;
  bool apply_query_key_layer_scaling = false;
  bool no_bias_dropout_fusion = false;
  bool no_bias_swiglu_fusion = false;
  bool no_rope_fusion = false;
  bool no_gradient_accumulation_fusion = false;
  std::string distributed_backend = "nccl";  // nccl | gloo (gloo: a CPU job)
  bool deepspeed_activation_checkpointing = false;
  bool no_create_attention_mask_in_dataloader = false;
  bool llama_model = false;  // DeepSpeed-Domino's scripts
  bool causal_lm = false;
  bool manual_gc = false;
  int64_t manual_gc_interval = 0;
  int64_t fp8_interval = 1;  // deprecated in Megatron-LM, which ignores it
  bool cross_entropy_loss_fusion = false;
  std::string cross_entropy_fusion_impl = "native";
  bool ddp_average_in_collective = false;
  std::string async_strategy = "nvrx";
  std::string rerun_mode = "disabled";  // validate_results is named in the start-up warning; report_stats refused
  int64_t num_distributed_optimizer_instances = 1;  // > 1: the optimizer state sharded within each block of DP
  int64_t timing_log_level = 0;
  // Options of Megatron-LM's torch_dist checkpoints (not written or read here: --ckpt-format torch).
  std::string dist_ckpt_strictness = "assume_ok_unexpected";
  bool dist_ckpt_optim_fully_reshardable = false;
  bool ckpt_fully_parallel_save = false;
  bool no_ckpt_fully_parallel_save = false;
  bool ckpt_fully_parallel_load = false;
  bool ckpt_assume_constant_structure = false;
  bool auto_detect_ckpt_format = false;
  bool use_persistent_ckpt_worker = false;
  bool async_ckpt_use_cpu_shm = false;
  std::string pp_partition_method;  // Megatron-DeepSpeed's (BLOOM's scripts)
  bool sync_tp_duplicated_parameters = false;
  bool abort_on_unmet_fused_kernel_constraints = false;
  bool te_rng_tracker = false;
  bool tp_comm_overlap = false;
  std::string tp_comm_overlap_cfg;
  bool overlap_p2p_communication_warmup_flush = false;
  std::optional<int64_t> microbatch_group_size_per_virtual_pipeline_stage;
  bool disable_gloo_process_groups = false;
  bool overlap_param_gather_with_optimizer_step = false;
  bool no_check_for_nan_in_loss_and_grad = false;
  bool defer_embedding_wgrad_compute = false;
  int64_t wgrad_deferral_limit = 0;
  bool log_batch_size_to_tensorboard = false;
  int64_t valid_num_workers = 0;
  std::string data_impl = "mmap";
  bool enable_experimental = false;
  bool overlap_moe_expert_parallel_comm = false;
  bool delay_wgrad_compute = false;
  bool use_transformer_engine_op_fuser = false;
  bool use_fused_weighted_squared_relu = false;
  bool moe_shared_expert_overlap = false;
  std::optional<int64_t> moe_flex_dispatcher_num_sms;
  std::optional<int64_t> moe_hybridep_num_sms;
  bool ddp_pad_buckets_for_high_nccl_busbw = false;
  std::vector<std::string> high_priority_stream_groups;
  bool use_nccl_ub = false;
  bool fsdp_double_buffer = false;
  bool fsdp_db_use_persist_buf_on_alloc_fail = false;
  bool megatron_fsdp_max_pool_double_buffer = false;
  bool fsdp_manual_registration = false;
  bool init_model_with_meta_device = false;
  bool ckpt_fully_parallel_load_per_rank_objects = false;
  bool no_ckpt_load_validate_sharding_integrity = false;
  bool ckpt_drop_redundant_extra_state = false;

  // --- set by validate()
  int64_t world_size = 1;
  int64_t data_parallel_size = 1;
  int64_t num_microbatches = 1;
  std::optional<int64_t> virtual_pipeline_model_parallel_size;  // model chunks per stage
  std::string config_file;

  // Checks every value against its range in the table, then every combination against
  // world_size, and fills the derived values; each problem throws c10::Error with one line
  // naming the flags and their values.
  void validate(int64_t world_size);
};

// The flags of the table's `ignored` group that were given (differ from their defaults): they
// change nothing here and are named in one warning line at start-up.
MEGATRON_API std::vector<std::string> ignored_megatron_flags(const Arguments& args);

// --expert-tensor-parallel-size as ParallelState takes it (unset: the tensor-parallel size).
inline std::optional<int> expert_tp_size_of(const Arguments& a) {
  return a.expert_tensor_parallel_size ? std::optional<int>(static_cast<int>(*a.expert_tensor_parallel_size))
                                       : std::nullopt;
}

// One line of the table (arguments_table.h), for code that walks every setting.
struct MEGATRON_API ArgumentField {
  const char* name;  // the struct field: "num_layers"
  std::string flag;  // "--num-layers"; "" for values validate() derives
  ArgGroup group;
  bool saved;               // in a checkpoint's args dict
  const char* python_type;  // "int", "Optional[float]", "List[str]", ...
  const char* help;
  ArgCheck check;  // its valid values
};
MEGATRON_API const std::vector<ArgumentField>& argument_fields();

// "num_layers" -> "--num-layers".
MEGATRON_API std::string flag_of(const std::string& field);

// Parses args (without the program name). --help prints the flag list and returns nullopt;
// bad flags throw c10::Error. The result is validated against world_size.
MEGATRON_API std::optional<Arguments> parse_arguments(const std::vector<std::string>& args, int64_t world_size,
                                                      const std::string& program = "pretrain_gpt");

// Will this launch line start? (pretrain_gpt --check-args): parses and validates `args` for a job
// of `world_size` ranks without building or reading anything but a --config or --deepspeed_config
// file, and writes to `out` every flag refused (with the reason, or the closest known flag) and
// every flag accepted without effect (with what it would have picked), then the layout the run
// would have. True when the run would start.
MEGATRON_API bool check_arguments(const std::vector<std::string>& args, int64_t world_size, std::ostream& out,
                                  const std::string& program = "pretrain_gpt");

// The flag list --help prints.
MEGATRON_API std::string arguments_help(const std::string& program = "pretrain_gpt");

}  // namespace megatron::training
