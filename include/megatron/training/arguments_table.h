// The one table of Arguments' fields (arguments.h declares them with their defaults). Each line
// names a field once with the Megatron-LM argument group that binds it, whether checkpoints save
// it, its valid values and its --help text; the command line, the TOML config, the checkpoint's
// args dict, the Python attributes and the .pyi stub are derived from it. arguments_test fails on
// a struct field this table lacks.
#pragma once

#include "megatron/export.h"

#include <cstdint>

namespace megatron::training {

// Megatron-LM's argument groups (arguments.py's _add_<group>_args), plus the two groups of its
// launch-script flags: aliases, and switches that change nothing here.
enum class ArgGroup {
  network_size,
  regularization,
  training,
  initialization,
  learning_rate,
  checkpointing,
  mixed_precision,
  distributed,
  validation,
  data,
  tokenizer,
  logging,
  aliases,
  ignored,
  moe,
  derived  // set by validate(), not a flag
};

// The valid values of one setting; optional settings are checked only when set, strings with
// choices also accept their default (usually "", meaning unset).
struct MEGATRON_API ArgCheck {
  enum class Kind { kAny, kRequired, kRange, kChoices };
  Kind kind = Kind::kAny;
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
  const char* choices = nullptr;  // "a|b|c"
};
namespace arg {
constexpr double kInf = 1e308;
constexpr ArgCheck any() {
  return {};
}
// A positive number that has no default: "is required".
constexpr ArgCheck required() {
  return {ArgCheck::Kind::kRequired, 0, kInf, true, false, nullptr};
}
constexpr ArgCheck positive() {
  return {ArgCheck::Kind::kRange, 0, kInf, true, false, nullptr};
}
constexpr ArgCheck non_negative() {
  return {ArgCheck::Kind::kRange, 0, kInf, false, false, nullptr};
}
constexpr ArgCheck at_least(double lo) {
  return {ArgCheck::Kind::kRange, lo, kInf, false, false, nullptr};
}
constexpr ArgCheck between(double lo, double hi) {
  return {ArgCheck::Kind::kRange, lo, hi, false, false, nullptr};
}
// [lo, hi): probabilities and Adam's betas.
constexpr ArgCheck below(double lo, double hi) {
  return {ArgCheck::Kind::kRange, lo, hi, false, true, nullptr};
}
// (lo, hi]
constexpr ArgCheck above(double lo, double hi) {
  return {ArgCheck::Kind::kRange, lo, hi, true, false, nullptr};
}
constexpr ArgCheck one_of(const char* choices) {
  return {ArgCheck::Kind::kChoices, 0, 0, false, false, choices};
}
}  // namespace arg

// Whether a checkpoint's args dict records the field (the settings that describe the run, not
// where this process reads or writes).
enum class ArgSaved { kSaved, kNotSaved };

// The reason the attention switches of Megatron-LM's scripts change nothing here.
#define MEGATRON_ARG_SDPA "attention is at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA)"
#define MEGATRON_ARG_DIST_CKPT \
  "an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict"

// X(group, field, saved, check, help), in the struct's order: the checkpoint's args dict keeps it.
// clang-format off
#define MEGATRON_ARGUMENTS(X)                                                                                        \
  X(network_size, num_layers, kSaved, required(), "number of transformer layers")                                   \
  X(network_size, hidden_size, kSaved, required(), "transformer hidden size")                                       \
  X(network_size, ffn_hidden_size, kSaved, positive(), "MLP hidden size (default 4 x hidden)")                      \
  X(network_size, num_attention_heads, kSaved, required(), "attention heads")                                       \
  X(network_size, group_query_attention, kSaved, any(), "grouped-query attention")                                  \
  X(network_size, num_query_groups, kSaved, positive(), "key/value heads with --group-query-attention")             \
  X(network_size, kv_channels, kSaved, positive(), "head dim (default hidden / heads)")                             \
  X(network_size, seq_length, kSaved, required(), "tokens per sample")                                              \
  X(network_size, max_position_embeddings, kSaved, non_negative(), "position table size (default --seq-length)")    \
  X(network_size, position_embedding_type, kSaved, one_of("learned_absolute|rope|alibi|none"),                      \
    "learned_absolute | rope | alibi (BLOOM's linear attention biases) | none")                                      \
  X(network_size, rotary_percent, kSaved, above(0, 1), "fraction of head dim rotated")                              \
  X(network_size, rotary_base, kSaved, positive(), "RoPE base")                                                     \
  X(network_size, rotary_interleaved, kSaved, any(), "rotate channel pairs (2i, 2i+1) instead of the two halves")     \
  X(network_size, use_rope_scaling, kSaved, any(), "Llama 3's RoPE frequency scaling (Hugging Face rope_type llama3)") \
  X(network_size, rope_scaling_factor, kSaved, at_least(1), "with --use-rope-scaling: the low frequencies' divisor")  \
  X(network_size, rope_scaling_low_freq_factor, kSaved, positive(),                                                  \
    "with --use-rope-scaling: wavelengths above original context / this are scaled fully")                           \
  X(network_size, rope_scaling_high_freq_factor, kSaved, positive(),                                                 \
    "with --use-rope-scaling: wavelengths below original context / this are kept")                                   \
  X(network_size, rope_scaling_original_max_position_embeddings, kSaved, positive(),                                 \
    "with --use-rope-scaling: the context length the frequencies were trained for")                                  \
  X(network_size, normalization, kSaved, one_of("LayerNorm|RMSNorm"), "LayerNorm | RMSNorm")                        \
  X(network_size, apply_layernorm_1p, kSaved, any(),                                                                \
    "norm weights centred on zero: stored as gamma - 1, initialised to 0, applied as 1 + weight")                   \
  X(network_size, norm_epsilon, kSaved, positive(), "normalisation epsilon")                                        \
  X(network_size, swiglu, kSaved, any(), "SwiGLU MLP instead of GELU")                                              \
  X(network_size, qk_layernorm, kSaved, any(), "normalise each head's query and key (--normalization) before RoPE") \
  X(network_size, qk_layernorm_across_heads, kSaved, any(),                                                         \
    "with --qk-layernorm: one RMSNorm over all heads' queries and one over the keys (OLMoE), not per head")         \
  X(network_size, openai_gelu, kSaved, any(), "tanh-approximated GELU, as OpenAI's GPT-2")                          \
  X(network_size, squared_relu, kSaved, any(), "squared ReLU MLP activation, relu(x)^2, instead of GELU")            \
  X(network_size, disable_bias_linear, kSaved, any(), "no biases in linear layers")                                 \
  X(network_size, add_qkv_bias, kSaved, any(), "bias on the Q, K, V projection even with --disable-bias-linear")     \
  X(network_size, untie_embeddings_and_output_weights, kSaved, any(), "separate output layer weight")               \
  X(network_size, embed_layernorm, kSaved, any(), "LayerNorm on the word embeddings, as BLOOM")                      \
  X(moe, num_experts, kSaved, positive(), "experts per MoE layer (unset: dense MLPs)")                              \
  X(moe, moe_ffn_hidden_size, kSaved, positive(), "an expert's MLP hidden size (default --ffn-hidden-size)")        \
  X(moe, moe_layer_freq, kSaved, any(),                                                                              \
    "MoE layers: every N-th from layer 0, or a Python list of 0/1 per layer such as \"([1]*3+[0])*2\"")             \
  X(moe, moe_router_topk, kSaved, positive(), "experts each token is routed to")                                   \
  X(moe, moe_router_score_function, kSaved, one_of("softmax|sigmoid"), "softmax | sigmoid (DeepSeek-V3)")          \
  X(moe, moe_router_pre_softmax, kSaved, any(), "softmax over all experts before the top-k (else over the top-k)")   \
  X(moe, moe_router_topk_scaling_factor, kSaved, positive(), "multiplies the routing probabilities")               \
  X(moe, moe_router_dtype, kSaved, one_of("fp32|fp64"), "the router's GEMM and scores in this type")                \
  X(moe, moe_router_load_balancing_type, kSaved, one_of("aux_loss|seq_aux_loss|sinkhorn|none"),                              \
    "aux_loss (Switch Transformer's, over the micro-batch) | seq_aux_loss (per sequence) | none")                    \
  X(moe, moe_aux_loss_coeff, kSaved, non_negative(), "weight of the load-balancing loss")                            \
  X(moe, moe_z_loss_coeff, kSaved, non_negative(), "weight of the router z-loss (ST-MoE)")                           \
  X(moe, moe_router_enable_expert_bias, kSaved, any(), "aux-loss-free balancing with a per-expert selection bias")   \
  X(moe, moe_router_bias_update_rate, kSaved, non_negative(), "step of the expert-bias update")                     \
  X(moe, moe_router_num_groups, kSaved, positive(), "expert groups for group-limited routing")                      \
  X(moe, moe_router_group_topk, kSaved, positive(), "groups each token may be routed into")                         \
  X(moe, moe_shared_expert_intermediate_size, kSaved, positive(), "hidden size of the shared expert every token takes") \
  X(moe, moe_shared_expert_gate, kSaved, any(), "a sigmoid gate on the shared expert's output")                     \
  X(moe, moe_expert_capacity_factor, kSaved, positive(), "tokens an expert takes: ceil(tokens x topk / experts x this)") \
  X(moe, moe_token_drop_policy, kSaved, one_of("probs|position"),                                                   \
    "past capacity, keep the tokens of highest probability | the earliest")                                          \
  X(moe, moe_pad_expert_input_to_capacity, kSaved, any(), "every expert takes exactly its capacity")                \
  X(moe, moe_token_dispatcher_type, kSaved, one_of("allgather|alltoall|flex"),                                     \
    "how tokens reach their experts (flex: alltoall's exchange; DeepEP / HybridEP kernels are not in this build)")  \
  X(ignored, moe_flex_dispatcher_backend, kNotSaved, one_of("deepep|hybridep|ncclep"),                                   \
    "accepted, no effect: DeepEP / HybridEP kernels are not in this build; flex runs the alltoall dispatcher")      \
  X(ignored, moe_enable_deepep, kNotSaved, any(), "accepted, no effect: --moe-token-dispatcher-type flex with DeepEP") \
  X(moe, moe_grouped_gemm, kSaved, any(), "the local experts' GEMMs grouped into one call each (at::_grouped_mm)")   \
  X(moe, expert_model_parallel_size, kSaved, positive(), "ranks the experts are split over")                         \
  X(moe, expert_tensor_parallel_size, kSaved, positive(), "tensor-parallel ranks of each expert (default TP)")       \
  X(ignored, moe_permute_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")                       \
  X(ignored, moe_router_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")                        \
  X(regularization, attention_dropout, kSaved, below(0, 1), "dropout on attention probabilities")                   \
  X(regularization, hidden_dropout, kSaved, below(0, 1), "dropout on hidden states")                                \
  X(initialization, init_method_std, kSaved, positive(), "std of the normal weight initialisation")             \
  X(network_size, make_vocab_size_divisible_by, kSaved, positive(), "pad the vocabulary to a multiple of this x TP") \
  X(network_size, pad_vocab_size_to, kSaved, positive(),                                                            \
    "pad the vocabulary to exactly this size (a multiple of TP; BLOOM's 250880)")                                   \
  X(training, recompute_granularity, kSaved, one_of("full|selective"), "full | selective")                          \
  X(training, recompute_method, kSaved, one_of("uniform|block"), "uniform | block")                                 \
  X(training, recompute_num_layers, kSaved, positive(), "layers per recompute unit")                                \
  X(training, recompute_modules, kNotSaved,                                                                            \
    one_of("core_attn|mlp|shared_experts|moe|moe_act|layernorm|mla_up_proj|gdn_norm_out|gdp_in_proj|gdp_qkv|mhc"),     \
    "with --recompute-granularity selective: core_attn (default), mlp (dense MLPs), shared_experts; the rest are "     \
    "refused with the reason")                                                                                         \
  X(training, no_persist_layer_norm, kNotSaved, any(),                                                              \
    "CUDA: ATen's LayerNorm / RMSNorm kernels and a separate residual add instead of the fused kernels")            \
  X(training, no_bias_gelu_fusion, kNotSaved, any(),                                                                \
    "CUDA: ATen's bias add, GELU and bias-gradient sum instead of the fused bias-GELU kernels")                     \
  X(distributed, tensor_model_parallel_size, kSaved, positive(), "tensor-parallel ranks")                           \
  X(distributed, pipeline_model_parallel_size, kSaved, positive(), "pipeline stages")                               \
  X(distributed, context_parallel_size, kSaved, positive(),                                                         \
    "ranks the sequence is split over: each holds 2 of its 2 x N chunks, attention exchanges keys and values")       \
  X(distributed, cp_comm_type, kSaved, one_of("p2p|all_gather|a2a|a2a+p2p"),                                       \
    "p2p (a ring, overlapped) | all_gather | a2a (all-to-all over heads): how attention exchanges keys and "        \
    "values over the context-parallel ranks; one value, or one per layer")                                          \
  X(distributed, hierarchical_context_parallel_sizes, kSaved, positive(),                                           \
    "with --cp-comm-type a2a+p2p: the inner (all-to-all) and outer (ring) sizes, inner first")                         \
  X(distributed, use_tp_pp_dp_mapping, kNotSaved, any(),                                                            \
    "order the ranks TP, CP, PP, DP instead of TP, CP, DP, PP (a pipeline's stages on adjacent ranks)")             \
  X(distributed, num_layers_per_virtual_pipeline_stage, kSaved, positive(),                                         \
    "layers per model chunk: the interleaved 1F1B schedule")                                                        \
  X(distributed, num_virtual_stages_per_pipeline_rank, kSaved, positive(),                                          \
    "model chunks per pipeline stage: the interleaved 1F1B schedule")                                               \
  X(distributed, decoder_first_pipeline_num_layers, kSaved, non_negative(),                                         \
    "the transformer layers of the first pipeline stage; the others' split evenly (with "                         \
    "--decoder-last-pipeline-num-layers, between the stages in the middle)")                                        \
  X(distributed, decoder_last_pipeline_num_layers, kSaved, non_negative(),                                          \
    "the transformer layers of the last pipeline stage; the others' split evenly")                                  \
  X(distributed, account_for_embedding_in_pipeline_split, kSaved, any(),                                            \
    "count the embedding as a layer when splitting the layers over the stages: the first chunk holds one fewer")   \
  X(distributed, account_for_loss_in_pipeline_split, kSaved, any(),                                                 \
    "count the output layer and loss as a layer when splitting: the last chunk holds one fewer")                   \
  X(distributed, pipeline_model_parallel_layout, kSaved, any(),                                                        \
    "each virtual stage's layers, as Megatron-Core's layout string: '|' between stages (virtual rank major), E "       \
    "embedding, t transformer layer, L loss, (...)*n and x*n repeat; sets the virtual stages per rank")                \
  X(distributed, sequence_parallel, kSaved, any(), "split norms and dropout along the sequence over TP")            \
  X(distributed, use_distributed_optimizer, kSaved, any(), "shard optimizer state over data-parallel ranks (ZeRO-1)") \
  X(distributed, use_megatron_fsdp, kNotSaved, any(),                                                               \
    "fully sharded data parallelism: shard what --data-parallel-sharding-strategy says over data-parallel ranks")   \
  X(distributed, data_parallel_sharding_strategy, kNotSaved, one_of("no_shard|optim|optim_grads|optim_grads_params"), \
    "no_shard | optim (ZeRO-1, the distributed optimizer) | optim_grads (ZeRO-2: also the gradients) | "            \
    "optim_grads_params (ZeRO-3: also the parameters, gathered per layer before use); the last two need "          \
    "--use-megatron-fsdp")                                                                                          \
  X(distributed, no_fsdp_prefetch, kNotSaved, any(),                                                                \
    "with optim_grads_params: gather each layer's parameters when it runs, not one layer ahead")                    \
  X(distributed, megatron_fsdp_main_params_dtype, kNotSaved, one_of("fp32|bf16|fp16|auto"),                        \
    "Megatron-FSDP's main parameters: fp32 (the only one here)")                                                    \
  X(distributed, megatron_fsdp_main_grads_dtype, kNotSaved, one_of("fp32|bf16|fp16|auto"),                         \
    "Megatron-FSDP's main gradients: fp32 (the only one here)")                                                     \
  X(distributed, megatron_fsdp_grad_comm_dtype, kNotSaved, one_of("fp32|bf16|fp16|auto"),                          \
    "Megatron-FSDP's gradient reduction: fp32 (the only one here)")                                                 \
  X(distributed, outer_dp_sharding_strategy, kNotSaved, one_of("no_shard|optim"),                                   \
    "hybrid FSDP's outer level: no_shard (the only one here: one sharded group over all data-parallel ranks)")       \
  X(distributed, overlap_grad_reduce, kNotSaved, any(),                                                             \
    "all-reduce each data-parallel gradient bucket during the backward pass, as soon as the last micro-batch "       \
    "completes it (with --use-distributed-optimizer each bucket is reduced to the ranks whose shards hold it)")          \
  X(distributed, overlap_param_gather, kNotSaved, any(),                                                            \
    "with --use-distributed-optimizer and --overlap-grad-reduce: gather the updated parameters under the next "     \
    "forward pass, each bucket waited for by the first layer that reads it (optim_grads_params prefetches anyway)") \
  X(distributed, ddp_bucket_size, kNotSaved, positive(),                                                            \
    "elements per data-parallel gradient bucket (default max(40M, 1M x data-parallel size))")                      \
  X(distributed, ddp_num_buckets, kNotSaved, positive(),                                                               \
    "split each data-parallel gradient buffer into about N buckets instead of by --ddp-bucket-size")                   \
  X(distributed, grad_reduce_in_bf16, kNotSaved, any(),                                                                \
    "reduce the data-parallel gradient buckets as bfloat16 copies (half the traffic); gradients still accumulate "     \
    "in fp32")                                                                                                         \
  X(distributed, accumulate_allreduce_grads_in_fp32, kNotSaved, any(),                                                 \
    "accumulate and reduce gradients in fp32: always so here unless --grad-reduce-in-bf16")                            \
  X(distributed, domino, kNotSaved, any(),                                                                          \
    "DeepSpeed-Domino: split each micro-batch in two along the batch, one half's tensor-parallel all-reduces "      \
    "under the other half's compute (even --micro-batch-size; no --sequence-parallel, no full recompute)")         \
  X(distributed, domino_intra_layer_overlap, kNotSaved, any(),                                                      \
    "with --domino: overlap within each layer only (DeepSpeed's domino_intra_layer_overlap), not across layers")   \
  X(distributed, distributed_timeout_minutes, kNotSaved, positive(), "collective timeout")                          \
  X(distributed, local_rank, kNotSaved, non_negative(),                                                             \
    "this process's rank on its node, as deepspeed (--local_rank=N) and torch.distributed.launch pass it; must "    \
    "agree with the launcher's LOCAL_RANK")                                                                         \
  X(distributed, deepspeed, kNotSaved, any(), "Megatron-DeepSpeed's switch: read --deepspeed_config")               \
  X(distributed, deepspeed_config, kNotSaved, any(),                                                                \
    "DeepSpeed JSON config: batch sizes, clipping, ZeRO stage, fp16/bf16, Adam (docs/migrating.md)")                \
  X(distributed, zero_stage, kNotSaved, between(0, 3),                                                              \
    "Megatron-DeepSpeed's ZeRO stage: 0-3 = --data-parallel-sharding-strategy no_shard, optim, optim_grads, "      \
    "optim_grads_params")                                                                                           \
  X(data, data_path, kSaved, any(), "dataset prefix, or weight prefix weight prefix ...")                           \
  X(data, data_args_path, kSaved, any(), "a file holding --data-path's words (for long blends)")                       \
  X(data, train_data_path, kSaved, any(), "the training split's own blend, as --data-path (no --split)")               \
  X(data, valid_data_path, kSaved, any(), "the validation split's own blend, as --data-path")                          \
  X(data, test_data_path, kSaved, any(), "the test split's own blend, as --data-path")                                 \
  X(data, per_split_data_args_path, kSaved, any(),                                                                     \
    "a JSON file of the three: {\"train\": [...], \"valid\": [...], \"test\": [...]}, each a list or one string")      \
  X(data, split, kSaved, any(), "train, valid, test proportions")                                                   \
  X(data, mock_data, kSaved, any(), "synthetic data instead of --data-path")                                        \
  X(tokenizer, tokenizer_type, kSaved,                                                                              \
    one_of("GPT2BPETokenizer|HuggingFaceTokenizer|TikTokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer|"   \
           "Llama2Tokenizer|NullTokenizer|PretrainedFromHF"),                                                         \
    "GPT2BPETokenizer | HuggingFaceTokenizer | TikTokenizer | SentencePieceTokenizer | GPTSentencePieceTokenizer | " \
    "Llama2Tokenizer | NullTokenizer (PretrainedFromHF, Megatron-DeepSpeed's name: = HuggingFaceTokenizer)")        \
  X(tokenizer, vocab_file, kSaved, any(), "GPT-2 vocab.json")                                                       \
  X(tokenizer, merge_file, kSaved, any(), "GPT-2 merges.txt")                                                       \
  X(tokenizer, tokenizer_model, kSaved, any(),                                                                      \
    "HuggingFaceTokenizer: a tokenizer.json, or the folder holding it; TikTokenizer: Megatron-LM's tiktoken JSON; " \
    "the SentencePiece types: a .model file")                                                                      \
  X(tokenizer, tokenizer_hf_no_include_special_tokens, kSaved, any(),                                              \
    "HuggingFaceTokenizer: leave out the post-processor's tokens (BOS/EOS) when tokenizing")                        \
  X(tokenizer, tiktoken_pattern, kSaved, one_of("v1|v2"), "TikTokenizer's split pattern (default v2)")              \
  X(tokenizer, tiktoken_num_special_tokens, kSaved, at_least(7), "TikTokenizer: special tokens before the vocabulary") \
  X(tokenizer, tokenizer_special_tokens, kSaved, any(),                                                             \
    "TikTokenizer: its special tokens in id order (all of <unk> <s> </s> <mask> <pad> <cls> <sep> among them); "  \
    "HuggingFaceTokenizer / GPT2BPETokenizer: tokens added after the vocabulary, matched whole in the text")      \
  X(tokenizer, vocab_size, kSaved, at_least(2),                                                                     \
    "vocabulary size of NullTokenizer / mock data; TikTokenizer's with its special tokens (default 131072)")        \
  X(data, data_cache_path, kNotSaved, any(), "where index caches go (default next to the data)")                    \
  X(data, no_mmap_bin_files, kNotSaved, any(), "read the .bin files instead of memory-mapping them")                 \
  X(data, reset_position_ids, kSaved, any(), "restart positions after each EOD")                                    \
  X(data, reset_attention_mask, kSaved, any(), "no attention across EOD")                                           \
  X(data, eod_mask_loss, kSaved, any(), "no loss on EOD tokens")                                                    \
  X(data, num_workers, kNotSaved, non_negative(), "batches prefetched in the background")                           \
  X(data, dataloader_type, kNotSaved, one_of("single|cyclic|external"),                                                \
    "single: consecutive global batches (default); cyclic: a permutation seeded by the epoch, repeated without "       \
    "end; external is refused (pretrain_gpt builds its own loader)")                                                   \
  X(data, no_data_sharding, kNotSaved, any(),                                                                          \
    "cyclic: deal one permutation of the whole epoch round-robin, not each rank's own bucket shuffled")                \
  X(training, micro_batch_size, kSaved, required(), "samples per micro-batch per rank")                             \
  X(training, global_batch_size, kSaved, positive(),                                                                \
    "samples per iteration over all ranks (default micro x data-parallel)")                                         \
  X(training, rampup_batch_size, kSaved, non_negative(),                                                            \
    "START INCREMENT SAMPLES: the global batch grows from START by INCREMENT over SAMPLES")                         \
  X(training, train_iters, kSaved, non_negative(), "iterations to train")                                           \
  X(training, train_samples, kSaved, non_negative(), "samples to train (instead of --train-iters)")                 \
  X(initialization, seed, kSaved, any(), "random seed")                                                             \
  X(training, optimizer, kSaved, one_of("adam|sgd"), "adam | sgd")                                                  \
  X(learning_rate, lr, kSaved, non_negative(), "peak learning rate")                                                \
  X(learning_rate, min_lr, kSaved, non_negative(), "floor of the decayed learning rate")                            \
  X(learning_rate, decoupled_lr, kSaved, non_negative(), "learning rate of the input and output layer")             \
  X(learning_rate, decoupled_min_lr, kSaved, non_negative(), "floor of --decoupled-lr (default --min-lr)")          \
  X(learning_rate, lr_decay_style, kSaved, one_of("constant|linear|cosine|inverse-square-root|WSD"),                \
    "constant | linear | cosine | inverse-square-root | WSD")                                                       \
  X(learning_rate, lr_decay_iters, kSaved, non_negative(), "iterations to decay over (default --train-iters)")      \
  X(learning_rate, lr_decay_samples, kSaved, non_negative(), "samples to decay over")                               \
  X(learning_rate, lr_warmup_iters, kSaved, non_negative(), "linear warm-up iterations")                            \
  X(learning_rate, lr_warmup_fraction, kSaved, between(0, 1), "warm-up as a fraction of the decay")                 \
  X(learning_rate, lr_warmup_samples, kSaved, non_negative(), "warm-up samples")                                    \
  X(learning_rate, lr_warmup_init, kSaved, non_negative(), "learning rate at the start of warm-up")                 \
  X(learning_rate, lr_wsd_decay_style, kSaved, one_of("exponential|linear|cosine"), "exponential | linear | cosine") \
  X(learning_rate, lr_wsd_decay_iters, kSaved, non_negative(), "final decay iterations of WSD")                     \
  X(learning_rate, lr_wsd_decay_samples, kSaved, non_negative(), "final decay samples of WSD")                         \
  X(learning_rate, override_opt_param_scheduler, kNotSaved, any(),                                                  \
    "on resume, keep this run's learning-rate schedule where the checkpoint's differs")                            \
  X(learning_rate, use_checkpoint_opt_param_scheduler, kNotSaved, any(),                                            \
    "on resume, take the checkpoint's learning-rate schedule (--lr, --min-lr, warm-up, decay length and style)")    \
  X(regularization, weight_decay, kSaved, non_negative(), "decoupled weight decay (not on biases and norms)")       \
  X(regularization, adam_beta1, kSaved, below(0, 1), "Adam beta1")                                                  \
  X(regularization, adam_beta2, kSaved, below(0, 1), "Adam beta2")                                                  \
  X(regularization, adam_eps, kSaved, positive(), "Adam epsilon")                                                   \
  X(regularization, sgd_momentum, kSaved, below(0, 1), "SGD momentum")                                              \
  X(regularization, clip_grad, kSaved, non_negative(), "clip gradients to this global norm (0: off)")               \
  X(mixed_precision, bf16, kSaved, any(), "bfloat16 model, fp32 master weights")                                    \
  X(mixed_precision, fp16, kSaved, any(), "float16 model, fp32 master weights, loss scaling")                       \
  X(mixed_precision, loss_scale, kSaved, positive(), "fixed loss scale (default: dynamic with --fp16)")             \
  X(mixed_precision, initial_loss_scale, kSaved, positive(), "first dynamic loss scale")                            \
  X(mixed_precision, min_loss_scale, kSaved, positive(), "dynamic loss scale floor")                                \
  X(mixed_precision, loss_scale_window, kSaved, positive(), "good iterations before the scale grows")               \
  X(mixed_precision, hysteresis, kSaved, positive(), "overflows tolerated before the scale shrinks")                \
  X(ignored, use_precision_aware_optimizer, kNotSaved, any(),                                                          \
    "accepted, no effect: the main parameters, gradients and Adam moments are fp32 (what their dtype flags take here)")    \
  X(mixed_precision, main_grads_dtype, kNotSaved, one_of("fp32|bf16"), "fp32: the only one here")                      \
  X(mixed_precision, main_params_dtype, kNotSaved, one_of("fp32|fp16"), "fp32: the only one here")                     \
  X(mixed_precision, exp_avg_dtype, kNotSaved, one_of("fp32|fp16|bf16|fp8"), "fp32: the only one here")                \
  X(mixed_precision, exp_avg_sq_dtype, kNotSaved, one_of("fp32|fp16|bf16|fp8"), "fp32: the only one here")             \
  X(logging, log_interval, kSaved, positive(), "iterations between log lines")                                      \
  X(validation, eval_interval, kSaved, positive(), "iterations between evaluations")                                \
  X(validation, eval_iters, kSaved, non_negative(), "iterations per evaluation")                                    \
  X(logging, metrics_file, kNotSaved, any(), "JSONL file of logged metrics")                                        \
  X(logging, tensorboard_dir, kNotSaved, any(),                                                                    \
    "TensorBoard event file of the run's scalars (last rank), and where --use-pytorch-profiler writes its trace")   \
  X(logging, tensorboard_log_interval, kNotSaved, positive(), "iterations between TensorBoard scalars")             \
  X(logging, tensorboard_queue_size, kNotSaved, positive(), "scalars held before the event file is flushed")        \
  X(logging, log_timers_to_tensorboard, kNotSaved, any(),                                                           \
    "iteration-time (s) and, with --log-throughput, throughput (TFLOP/s/GPU) at each log interval")                 \
  X(logging, no_log_loss_scale_to_tensorboard, kNotSaved, any(), "no loss-scale scalars")                            \
  X(logging, log_validation_ppl_to_tensorboard, kNotSaved, any(), "validation PPL scalars too")                     \
  X(logging, log_memory_to_tensorboard, kNotSaved, any(), "the CUDA caching allocator's counters (GPU runs)")       \
  X(logging, log_memory_interval, kNotSaved, positive(),                                                               \
    "the memory report (allocated, reserved, peaks) every N iterations, a multiple of --log-interval")                 \
  X(logging, log_world_size_to_tensorboard, kNotSaved, any(), "world-size scalars")                                 \
  X(logging, log_throughput, kNotSaved, any(),                                                                      \
    "with --log-timers-to-tensorboard, a throughput scalar (the iteration line always reports it)")                 \
  X(logging, log_params_norm, kNotSaved, any(),                                                                     \
    "the norm of the updated parameters in the iteration line and TensorBoard (params-norm)")                       \
  X(logging, log_num_zeros_in_grad, kNotSaved, any(),                                                               \
    "the zeros in the clipped gradients in the iteration line and TensorBoard (num-zeros)")                        \
  X(logging, logging_level, kNotSaved, between(0, 50),                                                              \
    "Python's logging level: 10 (DEBUG) or lower adds debug lines; higher keeps the iteration and start-up lines, "  \
    "which Megatron-LM prints without its logger; default $MEGATRON_LOGGING_LEVEL")                                \
  X(logging, timing_log_option, kNotSaved, one_of("max|minmax|all"),                                                \
    "how the timers report across ranks: the maximum, the minimum and maximum, or every rank's time")               \
  X(training, check_weight_hash_across_dp_replicas_interval, kNotSaved, positive(),                                  \
    "every N iterations, check that each parameter is bit-identical on all its data-parallel replicas; stop with "  \
    "the parameter and the ranks if not")                                                                          \
  X(training, test_mode, kNotSaved, any(),                                                                          \
    "check each iteration that every parameter is bit-identical on its data-parallel replicas and its "            \
    "tensor-parallel copies (norms, biases); stop with the parameter and the ranks if not")                         \
  X(logging, wandb_project, kNotSaved, any(), "refused: Weights & Biases needs network access; use --tensorboard-dir") \
  X(logging, profile, kNotSaved, any(),                                                                             \
    "profile the iterations after --profile-step-start up to --profile-step-end on --profile-ranks")                \
  X(logging, use_pytorch_profiler, kNotSaved, any(),                                                                \
    "with --profile: a Kineto trace (CPU and CUDA) into --tensorboard-dir; without: CUDA profiler ranges for nsys")  \
  X(logging, profile_step_start, kNotSaved, non_negative(), "profiling starts after this many iterations")          \
  X(logging, profile_step_end, kNotSaved, non_negative(), "profiling stops after this iteration")                   \
  X(logging, profile_ranks, kNotSaved, non_negative(), "global ranks to profile")                                   \
  X(training, skip_nan_iterations, kNotSaved, any(),                                                                \
    "skip the update of an iteration whose loss is NaN/Inf instead of stopping")                                    \
  X(training, calculate_per_token_loss, kNotSaved, any(),                                                           \
    "sum the loss over tokens and divide by the token count of the whole batch, not average micro-batch means")     \
  X(checkpointing, save, kSaved, any(), "directory to save checkpoints to")                                         \
  X(checkpointing, save_interval, kSaved, positive(),                                                               \
    "iterations between checkpoints to --save (one is also saved when training ends); without --save, none")        \
  X(checkpointing, no_save_optim, kNotSaved, any(), "leave the optimizer state out of saved checkpoints")           \
  X(checkpointing, no_save_rng, kNotSaved, any(), "leave the RNG states out of saved checkpoints")                  \
  X(checkpointing, async_save, kNotSaved, any(),                                                                    \
    "copy each checkpoint to host memory and write it on a background thread while training goes on; it becomes "  \
    "the latest once every rank has written it")                                                                    \
  X(checkpointing, load, kNotSaved, any(), "directory to resume from (latest_checkpointed_iteration.txt names the iteration)") \
  X(checkpointing, no_load_optim, kNotSaved, any(), "do not load the optimizer state and learning-rate schedule")   \
  X(checkpointing, no_load_rng, kNotSaved, any(), "do not load the RNG states")                                     \
  X(checkpointing, finetune, kNotSaved, any(), "load the model weights only; iteration and consumed samples start at 0") \
  X(checkpointing, ckpt_step, kNotSaved, non_negative(), "load this iteration instead of the tracker's")            \
  X(checkpointing, use_checkpoint_args, kNotSaved, any(),                                                           \
    "the model's shape and tokenizer settings not given here, and the parallel sizes, from --load's saved args")    \
  X(checkpointing, load_fallback, kNotSaved, any(),                                                                 \
    "if the checkpoint to load is missing, truncated or corrupt, load the newest older complete one")               \
  X(checkpointing, keep_last_checkpoints, kNotSaved, non_negative(),                                                \
    "keep only the newest N checkpoints in --save, deleting older ones after each save (0: keep all)")              \
  X(checkpointing, save_retain_interval, kNotSaved, positive(),                                                     \
    "after each save, delete the older checkpoints whose iteration is not a multiple of N (a multiple of "          \
    "--save-interval)")                                                                                            \
  X(checkpointing, allow_save_rewind, kNotSaved, any(),                                                             \
    "let this run save into a --save whose tracker names a later iteration (moving it back, replacing those)")     \
  X(checkpointing, override_data_check, kNotSaved, any(),                                                           \
    "resume although the data files, split, sequence length or seed differ from the checkpoint's")                 \
  X(training, ignore_memory_check, kNotSaved, any(),                                                                \
    "train even when the theoretical memory at start-up exceeds the memory free on the device")                    \
  X(training, exit_signal_handler, kNotSaved, any(),                                                                \
    "on SIGTERM, finish the current iteration, save a checkpoint to --save and stop")                               \
  X(training, kill_switch_path, kNotSaved, any(),                                                                   \
    "stop, without saving, before the next iteration once this file exists (Megatron-DeepSpeed's)")                 \
  X(checkpointing, ckpt_format, kNotSaved, one_of("torch|torch_dist"),                                              \
    "the format --save writes: torch (default), Megatron-LM's per-rank model_optim_rng.pt files; torch_dist, "      \
    "megatron-core's sharded files, which load at any TP/PP/DP. --load reads either")                              \
  X(checkpointing, verify_integrity, kNotSaved, any(),                                                              \
    "torch_dist: write integrity.json (every file's SHA-256) with each save and check it before loading")          \
  X(training, exit_interval, kNotSaved, positive(),                                                                 \
    "stop when the iteration is a multiple of this, saving a checkpoint to --save first")                           \
  X(training, exit_duration_in_mins, kNotSaved, positive(),                                                         \
    "stop once training has run this many minutes (slowest rank), saving first")                                    \
  X(mixed_precision, fp8_format, kSaved, one_of("e4m3|hybrid"),                                                    \
    "FP8 GEMMs (at::_scaled_mm, no Transformer Engine) in the attention and dense MLP linear layers: e4m3 "         \
    "everywhere, or hybrid (e5m2 output gradients); needs FP8 tensor cores (sm_89+) on CUDA")                      \
  X(mixed_precision, fp8_recipe, kSaved, one_of("delayed|tensorwise|mxfp8|blockwise|custom"),                       \
    "delayed: scales from each tensor's amax history, updated once per iteration; tensorwise: each tensor "        \
    "scaled by its own amax (mxfp8, blockwise and custom are not implemented)")                                    \
  X(mixed_precision, fp8_margin, kSaved, any(), "delayed: scales leave 2^margin of headroom")                       \
  X(mixed_precision, fp8_amax_history_len, kSaved, at_least(1), "delayed: iterations of amax history kept")         \
  X(mixed_precision, fp8_amax_compute_algo, kSaved, one_of("most_recent|max"),                                      \
    "delayed: the scale follows the newest amax or the history's largest")                                         \
  X(mixed_precision, no_fp8_wgrad, kSaved, any(), "weight-gradient GEMMs in the model's precision, not FP8")        \
  X(mixed_precision, tp_only_amax_red, kSaved, any(), "reduce FP8 amaxes over tensor-parallel ranks only, not DP x CP") \
  X(mixed_precision, first_last_layers_bf16, kSaved, any(), "keep the first and last layers' GEMMs out of FP8")     \
  X(mixed_precision, num_layers_at_start_in_bf16, kSaved, non_negative(), "with --first-last-layers-bf16: first layers kept") \
  X(mixed_precision, num_layers_at_end_in_bf16, kSaved, non_negative(), "with --first-last-layers-bf16: last layers kept") \
  X(training, device, kNotSaved, one_of("cpu|cuda"), "cpu | cuda (default cuda when a GPU is visible)")             \
  X(mixed_precision, tf32, kNotSaved, any(), "TF32 tensor cores for fp32 matmuls and convolutions on CUDA")         \
  X(mixed_precision, disable_bf16_reduced_precision_matmul, kNotSaved, any(),                                          \
    "cuBLAS bf16 GEMMs without reduced-precision reductions (fp32 throughout), on CUDA")                               \
  X(training, no_cpu_allocator_cache, kNotSaved, any(),                                                             \
    "return freed host memory to the OS at once instead of keeping it for the next allocation of the same size")    \
  X(training, deterministic_mode, kNotSaved, any(),                                                                 \
    "only deterministic algorithms (ATen's, cuDNN's, cuBLAS with a fixed workspace): reruns are bit-identical")     \
  X(training, empty_unused_memory_level, kNotSaved, between(0, 2),                                                  \
    "1: return the allocator's unused memory after forward-backward; 2: also after the optimizer step")             \
  X(aliases, recompute_activations, kNotSaved, any(), "= --recompute-granularity selective")                        \
  X(aliases, use_rotary_position_embeddings, kNotSaved, any(), "= --position-embedding-type rope")                  \
  X(aliases, no_position_embedding, kNotSaved, any(),                                                               \
    "Megatron-LM's deprecated switch: accepted with --position-embedding-type rope (no learned positions)")           \
  X(aliases, layernorm_epsilon, kNotSaved, positive(), "= --norm-epsilon")                                          \
  X(aliases, persistent_save_interval, kNotSaved, positive(), "= --save-interval")                                  \
  X(aliases, tokenizer_name_or_path, kNotSaved, any(), "= --tokenizer-model (Megatron-DeepSpeed's PretrainedFromHF)") \
  X(aliases, use_torch_fsdp2, kNotSaved, any(),                                                                     \
    "= --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params (one FSDP implementation here)")     \
  X(aliases, checkpoint_activations, kNotSaved, any(),                                                              \
    "= --recompute-granularity full (each layer's activations recomputed in backward)")                              \
  X(ignored, use_mcore_models, kNotSaved, any(), "accepted, no effect: there is one model implementation")          \
  X(ignored, transformer_impl, kNotSaved, one_of("local|transformer_engine"), "accepted, no effect: kernels are LibTorch's") \
  X(ignored, spec, kNotSaved, any(),                                                                                   \
    "local, or a GPT layer spec of megatron.core.models.gpt.gpt_layer_specs: accepted, no effect (the layers "         \
    "follow the flags); other specs are refused")                                                                      \
  X(ignored, use_flash_attn, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_SDPA)                           \
  X(ignored, attention_backend, kNotSaved, one_of("flash|fused|unfused|local|auto"),                                \
    "accepted, no effect: " MEGATRON_ARG_SDPA)                                                                      \
  X(ignored, no_masked_softmax_fusion, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_SDPA)                 \
  X(ignored, attention_softmax_in_fp32, kNotSaved, any(),                                                           \
    "accepted, no effect: the attention softmax accumulates in fp32 already")                                       \
  X(ignored, apply_query_key_layer_scaling, kNotSaved, any(),                                                       \
    "accepted, no effect: with an fp32 softmax the scaling cancels out")                                            \
  X(ignored, no_bias_dropout_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")               \
  X(ignored, no_bias_swiglu_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")                \
  X(ignored, no_rope_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")                       \
  X(ignored, no_gradient_accumulation_fusion, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")      \
  X(distributed, distributed_backend, kNotSaved, one_of("nccl|gloo"),                                               \
    "nccl: CUDA tensors through NCCL; gloo: a CPU job. Host tensors: MPI under mpirun, Gloo under torchrun/deepspeed") \
  X(ignored, deepspeed_activation_checkpointing, kNotSaved, any(),                                                  \
    "accepted, no effect: activations are recomputed as --recompute-granularity says")                              \
  X(ignored, no_create_attention_mask_in_dataloader, kNotSaved, any(),                                              \
    "accepted, no effect: batches carry a mask only with --reset-attention-mask")                                   \
  X(ignored, llama_model, kNotSaved, any(),                                                                         \
    "accepted, no effect: the layers follow --normalization, --swiglu, --position-embedding-type, --disable-bias-linear") \
  X(ignored, causal_lm, kNotSaved, any(), "accepted, no effect: the GPT model is always a causal language model")   \
  X(ignored, manual_gc, kNotSaved, any(), "accepted, no effect: there is no Python garbage collector")              \
  X(ignored, manual_gc_interval, kNotSaved, non_negative(), "accepted, no effect: there is no Python garbage collector") \
  X(ignored, fp8_interval, kNotSaved, positive(), "accepted, no effect: deprecated, Megatron-LM ignores it too")     \
  X(ignored, cross_entropy_loss_fusion, kNotSaved, any(),                                                           \
    "accepted, no effect: the vocab-parallel cross entropy is one fused kernel on CUDA with or without it")          \
  X(ignored, cross_entropy_fusion_impl, kNotSaved, one_of("native|te"),                                             \
    "accepted, no effect: the cross entropy kernel is the library's own")                                           \
  X(ignored, ddp_average_in_collective, kNotSaved, any(),                                                           \
    "accepted, no effect: data-parallel gradients are always averaged in the collective (ReduceOp AVG)")            \
  X(ignored, async_strategy, kNotSaved, one_of("nvrx|mcore"),                                                        \
    "accepted, no effect: --async-save writes from a thread of the training process")                              \
  X(ignored, rerun_mode, kNotSaved, one_of("disabled|validate_results|report_stats"),                               \
    "accepted, no effect: a NaN or Inf loss or gradient norm stops the run with one line (as a reproducible one "  \
    "does under Megatron-LM's validate_results; its rerun to tell a transient fault apart is not implemented); "   \
    "report_stats is refused")                                                                                      \
  X(distributed, num_distributed_optimizer_instances, kNotSaved, positive(),                                        \
    "with --use-distributed-optimizer: the data-parallel ranks in N blocks, each holding a whole optimizer state " \
    "sharded over its ranks; the gradients reduced in each block, then averaged across the blocks")               \
  X(ignored, timing_log_level, kNotSaved, between(0, 2),                                                            \
    "accepted, no effect: forward-backward and optimizer times are always logged")                                  \
  X(ignored, dist_ckpt_strictness, kNotSaved,                                                                       \
    one_of("assume_ok_unexpected|log_unexpected|log_all|raise_unexpected|raise_all|return_unexpected|return_all|"   \
           "ignore_all"),                                                                                           \
    "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)                                                                 \
  X(ignored, dist_ckpt_optim_fully_reshardable, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)   \
  X(ignored, ckpt_fully_parallel_save, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)            \
  X(ignored, no_ckpt_fully_parallel_save, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)         \
  X(ignored, ckpt_fully_parallel_load, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)            \
  X(ignored, ckpt_assume_constant_structure, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)      \
  X(ignored, auto_detect_ckpt_format, kNotSaved, any(),                                                             \
    "accepted, no effect: --load's format is always detected from its files")                                     \
  X(ignored, use_persistent_ckpt_worker, kNotSaved, any(),                                                          \
    "accepted, no effect: --async-save always writes on a background thread of the training process")               \
  X(ignored, async_ckpt_use_cpu_shm, kNotSaved, any(),                                                              \
    "accepted, no effect: --async-save already copies the state to (pinned) host memory in the training process")   \
  X(ignored, pp_partition_method, kNotSaved, any(),                                                                \
    "type:transformer accepted, no effect: each pipeline stage holds an equal share of the transformer layers")     \
  X(ignored, sync_tp_duplicated_parameters, kNotSaved, any(),                                                       \
    "accepted, no effect: parameters replicated over tensor-parallel ranks get the same gradients and stay equal")  \
  X(ignored, abort_on_unmet_fused_kernel_constraints, kNotSaved, any(),                                             \
    "accepted, no effect: where a fused kernel does not apply (CPU, an unsupported size) ATen's path runs")          \
  X(ignored, te_rng_tracker, kNotSaved, any(), "accepted, no effect: dropout streams come from the library's RNG tracker") \
  X(ignored, tp_comm_overlap, kNotSaved, any(),                                                                     \
    "accepted, no effect: Transformer Engine's userbuffers overlap is not built; --domino hides TP communication")   \
  X(ignored, tp_comm_overlap_cfg, kNotSaved, any(), "accepted, no effect: a --tp-comm-overlap configuration")       \
  X(ignored, overlap_p2p_communication_warmup_flush, kNotSaved, any(),                                              \
    "accepted, no effect: the pipeline's sends and receives are not split from its warm-up and flush")              \
  X(ignored, microbatch_group_size_per_virtual_pipeline_stage, kNotSaved, positive(),                               \
    "accepted, no effect: the interleaved schedule groups micro-batches by the pipeline size (the order changes, "  \
    "not the result)")                                                                                             \
  X(ignored, disable_gloo_process_groups, kNotSaved, any(),                                                         \
    "accepted, no effect: host-side collectives use the transport the launcher gives (MPI or Gloo)")                \
  X(ignored, overlap_param_gather_with_optimizer_step, kNotSaved, any(),                                            \
    "accepted, no effect: the parameter all-gather starts once the whole optimizer step is done")                    \
  X(ignored, no_check_for_nan_in_loss_and_grad, kNotSaved, any(),                                                   \
    "accepted, no effect: the NaN check rides on the step's one read-back and stays; --skip-nan-iterations skips "  \
    "such updates instead of stopping")                                                                            \
  X(ignored, defer_embedding_wgrad_compute, kNotSaved, any(),                                                       \
    "accepted, no effect: the output layer's weight gradient is computed in its own backward step")                 \
  X(ignored, wgrad_deferral_limit, kNotSaved, non_negative(),                                                       \
    "accepted, no effect: the output layer's weight gradient is computed in its own backward step")                 \
  X(ignored, log_batch_size_to_tensorboard, kNotSaved, any(), "accepted, no effect: batch-size is always written")  \
  X(ignored, valid_num_workers, kNotSaved, non_negative(), "accepted, no effect: validation reads as --num-workers says") \
  X(ignored, data_impl, kNotSaved, one_of("mmap|infer"),                                                            \
    "accepted, no effect: .bin/.idx files are read memory-mapped (--no-mmap-bin-files: with reads)")                \
  X(ignored, enable_experimental, kNotSaved, any(), "accepted, no effect: no feature here is gated by it")             \
  X(ignored, overlap_moe_expert_parallel_comm, kNotSaved, any(),                                                       \
    "accepted, no effect: the expert all-to-alls are not overlapped with another micro-batch's compute")               \
  X(ignored, delay_wgrad_compute, kNotSaved, any(),                                                                    \
    "accepted, no effect: weight gradients are computed in each layer's backward, not deferred")                       \
  X(ignored, use_transformer_engine_op_fuser, kNotSaved, any(), "accepted, no effect: kernels are LibTorch's")         \
  X(ignored, use_fused_weighted_squared_relu, kNotSaved, any(),                                                        \
    "accepted, no effect: the experts' squared ReLU and routing weights are LibTorch's kernels, same result")          \
  X(ignored, moe_shared_expert_overlap, kNotSaved, any(),                                                              \
    "accepted, no effect: the shared experts run before the routed ones, not under their token exchange")              \
  X(ignored, moe_flex_dispatcher_num_sms, kNotSaved, positive(),                                                       \
    "accepted, no effect: DeepEP / HybridEP kernels are not in this build")                                            \
  X(ignored, moe_hybridep_num_sms, kNotSaved, positive(), "accepted, no effect: HybridEP kernels are not in this build") \
  X(ignored, ddp_pad_buckets_for_high_nccl_busbw, kNotSaved, any(),                                                    \
    "accepted, no effect: buckets are cut by --ddp-bucket-size only")                                                  \
  X(ignored, high_priority_stream_groups, kNotSaved, any(),                                                            \
    "accepted, no effect: communicators are created without NCCL stream priorities")                                   \
  X(ignored, use_nccl_ub, kNotSaved, any(), "accepted, no effect: NCCL user buffers are not registered")               \
  X(ignored, fsdp_double_buffer, kNotSaved, any(),                                                                     \
    "accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks")                                         \
  X(ignored, fsdp_db_use_persist_buf_on_alloc_fail, kNotSaved, any(),                                                  \
    "accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks")                                         \
  X(ignored, megatron_fsdp_max_pool_double_buffer, kNotSaved, any(),                                                   \
    "accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks")                                         \
  X(ignored, fsdp_manual_registration, kNotSaved, any(), "accepted, no effect: NCCL user buffers are not registered")  \
  X(ignored, init_model_with_meta_device, kNotSaved, any(),                                                            \
    "accepted, no effect: parameters are initialised on the device they train on, as without it")                      \
  X(ignored, ckpt_fully_parallel_load_per_rank_objects, kNotSaved, any(), "accepted, no effect: " MEGATRON_ARG_DIST_CKPT) \
  X(ignored, no_ckpt_load_validate_sharding_integrity, kNotSaved, any(),                                               \
    "accepted, no effect: " MEGATRON_ARG_DIST_CKPT)                                                                    \
  X(ignored, ckpt_drop_redundant_extra_state, kNotSaved, any(),                                                        \
    "accepted, no effect: checkpoints hold no Transformer Engine _extra_state")                                        \
  X(derived, world_size, kSaved, positive(), "ranks in the job")                                                    \
  X(derived, data_parallel_size, kSaved, positive(), "world size / (TP x PP)")                                      \
  X(derived, num_microbatches, kNotSaved, positive(), "global batch / (micro batch x DP)")                           \
  X(derived, virtual_pipeline_model_parallel_size, kSaved, positive(), "model chunks per pipeline stage")           \
  X(derived, config_file, kNotSaved, any(), "the --config file")
// clang-format on

}  // namespace megatron::training
