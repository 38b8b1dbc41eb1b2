// The per-layer activation counts are those of Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (2022), which Megatron-LM's report also uses.
#include "megatron/training/theoretical_memory.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/common/language_module.h"
#include "megatron/training/config.h"
#include "training/arguments/moe_arguments.h"

namespace megatron::training {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}

}  // namespace

MemoryEstimate theoretical_memory(const Arguments& a, int64_t pipeline_rank, int64_t vocab_size) {
  // What selective recompute covers (--recompute-modules; core_attn when none is named).
  auto recomputes = [&a](const std::string& module) {
    const auto& m = a.recompute_modules;
    return a.recompute_granularity == "selective" &&
           (m.empty() ? module == "core_attn" : std::find(m.begin(), m.end(), module) != m.end());
  };
  const double h = static_cast<double>(a.hidden_size), heads = static_cast<double>(a.num_attention_heads);
  const double t = static_cast<double>(a.tensor_model_parallel_size);
  const double pp = static_cast<double>(a.pipeline_model_parallel_size);
  const double d = a.kv_channels ? static_cast<double>(*a.kv_channels) : h / heads;
  const double q = heads * d, kv = static_cast<double>(a.num_query_groups) * d;
  const double ffn = a.ffn_hidden_size ? static_cast<double>(*a.ffn_hidden_size) : 4 * h;
  const double fc1 = a.swiglu ? 2 * ffn : ffn;
  const double v = static_cast<double>(models::common::vocab_size_with_padding(
      vocab_size, a.make_vocab_size_divisible_by, a.tensor_model_parallel_size, a.pad_vocab_size_to));
  // A context-parallel rank holds 1/CP of the sequence (attention's gathered keys aside).
  const double s = static_cast<double>(a.seq_length / a.context_parallel_size),
               b = static_cast<double>(a.micro_batch_size);
  const bool first = pipeline_rank == 0, last = pipeline_rank + 1 == a.pipeline_model_parallel_size;
  const auto split = pipeline_split_from_args(a);
  const double layers = static_cast<double>(split.stage_layers(pipeline_rank));

  MemoryEstimate m;
  // Parameters: the layer's matrices split over TP, its norms and biases replicated. An MoE layer
  // (of this stage's layers, those --moe-layer-freq marks) has its experts, router and shared
  // expert in place of the MLP.
  const bool bias = !a.disable_bias_linear;
  const double layer = (h * (q + 2 * kv) + q * h + fc1 * h + ffn * h + (bias ? q + 2 * kv + fc1 : 0)) / t +
                       (bias ? 2 * h : 0) + (a.normalization == "RMSNorm" ? 2 * h : 4 * h);
  double moe_layers = 0, moe_extra = 0, moe_mlp_activations = 0;
  if (a.num_experts) {
    const auto pattern = detail::moe_layer_pattern(a.moe_layer_freq, a.num_layers);
    for (int64_t v = 0; v < split.virtual_size; ++v) {
      const auto chunk = split.layers(pipeline_rank, v);
      const auto begin = pattern.begin() + static_cast<std::ptrdiff_t>(chunk.offset);
      moe_layers +=
          static_cast<double>(std::count(begin, begin + static_cast<std::ptrdiff_t>(chunk.count), int64_t{1}));
    }
    const double experts = static_cast<double>(*a.num_experts), unit = a.swiglu ? 3 : 2;
    const double expert_ffn = static_cast<double>(a.moe_ffn_hidden_size.value_or(static_cast<int64_t>(ffn)));
    const double shared = static_cast<double>(a.moe_shared_expert_intermediate_size.value_or(0));
    moe_extra = experts * unit * expert_ffn * h + experts * h + unit * shared * h + (a.moe_shared_expert_gate ? h : 0) -
                (fc1 + ffn) * h;
    // Each token passes through top-k experts (and the shared one) instead of one MLP.
    moe_mlp_activations =
        4 * (static_cast<double>(a.moe_router_topk) * expert_ffn + (recomputes("shared_experts") ? 0 : shared)) / h;
  }
  m.parameters = layers * layer + moe_layers * moe_extra;
  if (first)
    m.parameters += v * h / t + (a.position_embedding_type == "learned_absolute" ? a.max_position_embeddings * h : 0);
  if (last && (a.untie_embeddings_and_output_weights || a.pipeline_model_parallel_size > 1)) m.parameters += v * h / t;
  if (last) m.parameters += a.normalization == "RMSNorm" ? h : 2 * h;  // the final norm

  const bool mixed = a.bf16 || a.fp16;
  const double dp = static_cast<double>(a.data_parallel_size);
  const double dp_shard = a.use_distributed_optimizer ? dp : 1;
  // Held between steps: ZeRO-2 keeps the gradients' shard, ZeRO-3 the parameters' too (as their
  // fp32 main shard, also for fp32 models; a layer or two are whole while they run).
  const auto ddp = ddp_config_from_args(a);
  const bool shard_grads = ddp.shards_grads(), shard_params = ddp.shards_params();
  const double optimizer_words = a.optimizer == "sgd" ? (a.sgd_momentum > 0 ? 1 : 0) : 2;  // Adam: m and v
  m.weights = shard_params ? 0 : m.parameters * (mixed ? 2 : 4);
  m.gradients = m.parameters * 4 / (shard_grads ? dp : 1);  // fp32 gradient buffers
  m.main_weights = mixed || shard_params ? m.parameters * 4 / dp_shard : 0;
  m.optimizer_state = m.parameters * 4 * optimizer_words / dp_shard;

  // Activations of one layer for one micro-batch, in 2-byte units (Korthikanti et al., Table 2,
  // with the MLP's 4h generalised to ffn): sequence parallelism splits all of it over TP,
  // selective recompute drops the attention scores (core_attn) or the MLP's hidden activations
  // (mlp, shared_experts), full recompute keeps only the layer input.
  const double scores = 5 * heads * s / h;
  const double dense_mlp = recomputes("mlp") ? 0 : 4 * ffn / h;
  const double mlp = (dense_mlp * (layers - moe_layers) + moe_mlp_activations * moe_layers) / layers;
  double per_layer;
  if (a.recompute_granularity == "full") {
    per_layer = a.sequence_parallel ? 2 / t : 2;
  } else {
    const double attention = recomputes("core_attn") ? 0 : scores / t;
    per_layer = a.sequence_parallel ? (18 + mlp) / t + attention : 10 + (8 + mlp) / t + attention;
  }
  const double unit = s * b * h * (mixed ? 2 : 4) / 2;
  // The first stage of 1F1B holds one micro-batch per stage in flight.
  const double in_flight =
      std::min<double>(pp - static_cast<double>(pipeline_rank), static_cast<double>(a.num_microbatches));
  m.activations = unit * per_layer * layers * std::max(1.0, in_flight);
  if (a.recompute_granularity == "full") m.activations += unit * ((18 + mlp) / t + scores / t);  // one layer recomputed
  if (last) m.activations += s * b * v / t * 4 * 2;  // fp32 logits and their grad
  return m;
}

std::string theoretical_memory_report(const Arguments& args, int64_t pipeline_rank, int64_t vocab_size) {
  const MemoryEstimate m = theoretical_memory(args, pipeline_rank, vocab_size);
  char line[256];
  std::snprintf(line, sizeof line,
                "Theoretical memory footprints: weight and optimizer=%.2f MB, activation=%.2f MB, total=%.2f MB",
                m.weights_and_optimizer() / (1024.0 * 1024), m.activations / (1024.0 * 1024),
                m.total() / (1024.0 * 1024));
  return line;
}

void check_memory(const Arguments& args, int64_t pipeline_rank, int64_t vocab_size, c10::Device device,
                  int ranks_on_host) {
  const MemoryEstimate m = theoretical_memory(args, pipeline_rank, vocab_size);
  auto available = available_memory_bytes(device);
  if (!available || args.ignore_memory_check) return;
  const bool host = !device.is_cuda();
  const double free = static_cast<double>(*available) / (host ? std::max(1, ranks_on_host) : 1);
  TORCH_CHECK(m.total() <= free, "[memory] this rank needs about ", gib(m.total()), " (weights and optimizer ",
              gib(m.weights_and_optimizer()), ", activations ", gib(m.activations), ") but ", gib(free), " is free ",
              host ? "in host memory per rank" : "on " + device.str(),
              "; raise --tensor-model-parallel-size or --pipeline-model-parallel-size, add "
              "--use-distributed-optimizer or --recompute-granularity full, or lower --micro-batch-size "
              "(--ignore-memory-check trains anyway)");
}

}  // namespace megatron::training
