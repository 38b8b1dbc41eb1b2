// Megatron-LM's other names for settings (and DeepSpeed's --zero-stage), resolved into the
// fields they stand for.
#include "training/arguments/aliases.h"

#include <c10/util/Exception.h>

#include "megatron/distributed/distributed_data_parallel.h"
#include "training/arguments/moe_arguments.h"

namespace megatron::training::detail {

using distributed::ShardingStrategy;
using distributed::to_string;

#define ARG_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

namespace {
bool sharding_strategy_is(const Arguments& a, const char* strategy) {
  return a.data_parallel_sharding_strategy == strategy;
}
}  // namespace

// Megatron-LM's aliases take their meaning before anything reads the fields they set.
void resolve_aliases(Arguments& a) {
  if (a.recompute_activations) {
    ARG_CHECK(a.recompute_granularity.empty() || a.recompute_granularity == "selective",
              "--recompute-activations means --recompute-granularity selective, but it is ", a.recompute_granularity);
    a.recompute_granularity = "selective";
  }
  if (a.use_rotary_position_embeddings) a.position_embedding_type = "rope";
  resolve_moe_aliases(a);
  // Megatron-LM's rule: with rope there is no learned position table to turn off.
  ARG_CHECK(!a.no_position_embedding || a.position_embedding_type == "rope",
            "--no-position-embedding is deprecated, use --position-embedding-type");
  if (a.tokenizer_type == "PretrainedFromHF") a.tokenizer_type = "HuggingFaceTokenizer";
  if (!a.tokenizer_name_or_path.empty()) {
    ARG_CHECK(a.tokenizer_model.empty() || a.tokenizer_model == a.tokenizer_name_or_path,
              "--tokenizer-name-or-path and --tokenizer-model are the same setting; give one");
    a.tokenizer_model = a.tokenizer_name_or_path;
  }
  if (a.layernorm_epsilon) {
    ARG_CHECK(a.norm_epsilon == Arguments().norm_epsilon || a.norm_epsilon == *a.layernorm_epsilon,
              "--layernorm-epsilon (", *a.layernorm_epsilon, ") and --norm-epsilon (", a.norm_epsilon,
              ") are the same setting; give one");
    a.norm_epsilon = *a.layernorm_epsilon;
  }
  if (a.zero_stage) {
    const std::string strategy = to_string(static_cast<ShardingStrategy>(*a.zero_stage));  // stages 0-3 in order
    ARG_CHECK(
        distributed::sharding_strategy_from_string(a.data_parallel_sharding_strategy) == ShardingStrategy::kNoShard ||
            a.data_parallel_sharding_strategy == strategy,
        "--zero-stage ", *a.zero_stage, " means --data-parallel-sharding-strategy ", strategy, ", but it is ",
        a.data_parallel_sharding_strategy);
    ARG_CHECK(*a.zero_stage != 0 || !a.use_distributed_optimizer,
              "--zero-stage 0 and --use-distributed-optimizer (ZeRO stage 1) exclude each other");
    a.data_parallel_sharding_strategy = strategy;
    if (*a.zero_stage >= 2) a.use_megatron_fsdp = true;
  }
  if (a.use_torch_fsdp2) {  // one FSDP here; torch's FSDP2 shards parameters, gradients and state
    ARG_CHECK(sharding_strategy_is(a, "no_shard") || sharding_strategy_is(a, "optim_grads_params"),
              "--use-torch-fsdp2 shards the parameters (optim_grads_params), but --data-parallel-sharding-strategy is ",
              a.data_parallel_sharding_strategy);
    a.use_megatron_fsdp = true;
    a.data_parallel_sharding_strategy = "optim_grads_params";
  }
  if (a.checkpoint_activations) {
    ARG_CHECK(a.recompute_granularity.empty() || a.recompute_granularity == "full",
              "--checkpoint-activations means --recompute-granularity full, but it is ", a.recompute_granularity);
    a.recompute_granularity = "full";
  }
  if (a.persistent_save_interval) {
    ARG_CHECK(!a.save_interval || *a.save_interval == *a.persistent_save_interval, "--persistent-save-interval (",
              *a.persistent_save_interval, ") and --save-interval (", *a.save_interval,
              ") are the same setting; give one");
    a.save_interval = a.persistent_save_interval;
  }
  // Megatron-LM's pretrain_gpt.py (and DeepSpeed-Domino's) read GPT-2's vocabulary and merges when
  // no tokenizer is named.
  if (a.tokenizer_type.empty() && !a.vocab_file.empty() && !a.merge_file.empty()) a.tokenizer_type = "GPT2BPETokenizer";
  // A launch script's quotes inside the value ("'99,1,0'") reach the program; Megatron-LM's
  // parser skips them.
  if (a.split.size() >= 2 && (a.split.front() == '\'' || a.split.front() == '"') && a.split.back() == a.split.front())
    a.split = a.split.substr(1, a.split.size() - 2);
}

}  // namespace megatron::training::detail
