// TransformerConfig: the architecture and parallelism of a transformer stack (Megatron's
// TransformerConfig). Set fields with the TORCH_ARG setters, then every module that takes it calls
// finalize(), which fills derived defaults and rejects inconsistent settings with a clear error.
#pragma once

#include "megatron/export.h"

#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/transformer/context_parallel.h"
#include "megatron/transformer/pipeline_split.h"

namespace megatron::tensor_parallel {
class RngTracker;
struct Fp8Config;
}  // namespace megatron::tensor_parallel

namespace megatron::transformer {

struct MoEAuxLossState;

enum class Normalization { kLayerNorm, kRMSNorm };
enum class Activation { kGelu, kGeluTanh, kSilu, kSquaredRelu };
enum class RecomputeGranularity { kNone, kFull, kSelective };
enum class RecomputeMethod { kUniform, kBlock };

struct MEGATRON_API TransformerConfig {
  TransformerConfig() = default;
  TransformerConfig(int64_t num_layers, int64_t hidden_size, int64_t num_attention_heads)
      : num_layers_(num_layers), hidden_size_(hidden_size), num_attention_heads_(num_attention_heads) {}

  // --- model shape
  TORCH_ARG(int64_t, num_layers) = 0;
  TORCH_ARG(int64_t, hidden_size) = 0;
  TORCH_ARG(int64_t, num_attention_heads) = 0;
  // Grouped-query attention: number of key/value heads (default: num_attention_heads, i.e. MHA).
  TORCH_ARG(std::optional<int64_t>, num_query_groups) = std::nullopt;
  // Default 4 * hidden_size.
  TORCH_ARG(std::optional<int64_t>, ffn_hidden_size) = std::nullopt;
  // Head dim; default hidden_size / num_attention_heads.
  TORCH_ARG(std::optional<int64_t>, kv_channels) = std::nullopt;

  // --- layer options
  TORCH_ARG(Normalization, normalization) = Normalization::kLayerNorm;
  TORCH_ARG(double, layernorm_epsilon) = 1e-5;
  // Norm weights centred on zero (--apply-layernorm-1p): stored as gamma - 1, applied as 1 + weight.
  TORCH_ARG(bool, layernorm_zero_centered_gamma) = false;
  TORCH_ARG(bool, add_bias_linear) = true;
  // Bias on the QKV projection even without add_bias_linear (Qwen-style); default add_bias_linear.
  TORCH_ARG(std::optional<bool>, add_qkv_bias) = std::nullopt;
  // SwiGLU = gated_linear_unit + Activation::kSilu.
  TORCH_ARG(bool, gated_linear_unit) = false;
  TORCH_ARG(Activation, activation) = Activation::kGelu;
  TORCH_ARG(double, hidden_dropout) = 0.1;
  TORCH_ARG(double, attention_dropout) = 0.1;
  // --- kernels on CUDA (fusions/): the norms with the residual add before them fused
  // (--no-persist-layer-norm: ATen's LayerNorm / RMSNorm kernels instead), and the MLP's bias add
  // and GELU fused with the bias gradient folded into GELU's backward (--no-bias-gelu-fusion).
  // No effect on the CPU, whose results they do not change.
  TORCH_ARG(bool, persist_layer_norm) = true;
  TORCH_ARG(bool, bias_gelu_fusion) = true;
  // Each head's query and key normalised (the layer's normalization) before RoPE (--qk-layernorm).
  TORCH_ARG(bool, qk_layernorm) = false;
  // With qk_layernorm: one RMSNorm over all the heads' queries (and one over the keys) instead of
  // one per head, OLMoE's; its weight split over TP with the heads (--qk-layernorm-across-heads).
  TORCH_ARG(bool, qk_layernorm_across_heads) = false;
  // Rotary positions rotate channel pairs (2i, 2i+1) instead of (i, i + d/2) (--rotary-interleaved).
  TORCH_ARG(bool, rotary_interleaved) = false;

  // --- initialisation: normal(0, init_method_std); the output projections (linear_proj,
  // linear_fc2) use init_method_std / sqrt(2 * num_layers) when use_scaled_init_method.
  TORCH_ARG(double, init_method_std) = 0.02;
  TORCH_ARG(bool, use_scaled_init_method) = true;
  // false: parameters are left as allocated (e.g. to load a checkpoint right away).
  TORCH_ARG(bool, perform_initialization) = true;

  // --- parallelism
  TORCH_ARG(int64_t, tensor_model_parallel_size) = 1;
  TORCH_ARG(int64_t, pipeline_model_parallel_size) = 1;
  // Model chunks per pipeline stage for the interleaved schedule (nullopt: one chunk).
  TORCH_ARG(std::optional<int64_t>, virtual_pipeline_model_parallel_size) = std::nullopt;
  // An uneven split of the layers over the stages (pipeline_split.h): the first and last stages'
  // own counts, or the embedding and the loss counted as a layer each.
  TORCH_ARG(std::optional<int64_t>, num_layers_in_first_pipeline_stage) = std::nullopt;
  TORCH_ARG(std::optional<int64_t>, num_layers_in_last_pipeline_stage) = std::nullopt;
  TORCH_ARG(bool, account_for_embedding_in_pipeline_split) = false;
  TORCH_ARG(bool, account_for_loss_in_pipeline_split) = false;
  // Megatron-Core's layout string (pipeline_split.h); it sets the virtual stages per rank.
  TORCH_ARG(std::string, pipeline_model_parallel_layout) = "";
  // The TP group (nullptr: no tensor parallelism); its size must equal tensor_model_parallel_size.
  TORCH_ARG(std::shared_ptr<comm::ProcessGroup>, tp_group) = nullptr;
  TORCH_ARG(bool, sequence_parallel) = false;
  // Domino (DeepSpeed-Domino): each micro-batch split in two along the batch inside the block,
  // one half's tensor-parallel all-reduces running under the other half's compute; across layers
  // too unless domino_intra_layer_overlap. Needs an even micro-batch, no sequence parallelism and
  // no full recompute.
  // Context parallelism (context_parallel.h): the sequence split over cp_group's ranks (nullptr:
  // one rank holds it whole); attention exchanges keys and values by cp_comm_type, one value for
  // every layer or one per layer of the whole model ("p2p" | "all_gather" | "a2a").
  TORCH_ARG(std::shared_ptr<comm::ProcessGroup>, cp_group) = nullptr;
  TORCH_ARG(std::vector<std::string>, cp_comm_type) = {"p2p"};
  // For "a2a+p2p": the a2a group of consecutive CP ranks and the p2p group across them
  // (ParallelState::get_hierarchical_context_parallel_groups).
  TORCH_ARG(std::vector<std::shared_ptr<comm::ProcessGroup>>, hierarchical_cp_groups) = {};
  TORCH_ARG(bool, domino) = false;
  TORCH_ARG(bool, domino_intra_layer_overlap) = false;
  // RNG states for dropout inside TP regions (see tensor_parallel/random.h); nullptr: the
  // default generator everywhere.
  TORCH_ARG(std::shared_ptr<tensor_parallel::RngTracker>, rng_tracker) = nullptr;

  // --- activation recompute
  TORCH_ARG(RecomputeGranularity, recompute_granularity) = RecomputeGranularity::kNone;
  TORCH_ARG(RecomputeMethod, recompute_method) = RecomputeMethod::kUniform;
  TORCH_ARG(int64_t, recompute_num_layers) = 1;
  // With selective granularity, the parts recomputed in backward (Megatron-Core's names): core_attn,
  // mlp (a dense layer's MLP), shared_experts.
  TORCH_ARG(std::vector<std::string>, recompute_modules) = {"core_attn"};

  // --- mixture of experts: Megatron-Core's MoE layer in place of the MLP (moe/moe_layer.h)
  TORCH_ARG(std::optional<int64_t>, num_moe_experts) = std::nullopt;
  // One 0/1 per layer of the whole model (empty: every layer is MoE when there are experts).
  TORCH_ARG(std::vector<int64_t>, moe_layer_pattern) = {};
  TORCH_ARG(std::optional<int64_t>, moe_ffn_hidden_size) = std::nullopt;  // default ffn_hidden_size
  TORCH_ARG(int64_t, moe_router_topk) = 2;
  TORCH_ARG(std::string, moe_router_score_function) = "softmax";  // | sigmoid
  TORCH_ARG(bool, moe_router_pre_softmax) = false;
  TORCH_ARG(std::optional<double>, moe_router_topk_scaling_factor) = std::nullopt;
  TORCH_ARG(std::string, moe_router_dtype) = "";                        // the input's | fp32 | fp64
  TORCH_ARG(std::string, moe_router_load_balancing_type) = "aux_loss";  // | seq_aux_loss | sinkhorn | none
  TORCH_ARG(double, moe_aux_loss_coeff) = 0.0;
  TORCH_ARG(std::optional<double>, moe_z_loss_coeff) = std::nullopt;
  TORCH_ARG(std::optional<int64_t>, moe_router_num_groups) = std::nullopt;
  TORCH_ARG(std::optional<int64_t>, moe_router_group_topk) = std::nullopt;
  // DeepSeek-V3's aux-loss-free balancing (sigmoid scores): a per-expert bias added to the scores
  // for choosing only, moved by the update rate against each expert's load once an iteration.
  TORCH_ARG(bool, moe_router_enable_expert_bias) = false;
  TORCH_ARG(double, moe_router_bias_update_rate) = 1e-3;
  TORCH_ARG(std::optional<int64_t>, moe_shared_expert_intermediate_size) = std::nullopt;
  TORCH_ARG(bool, moe_shared_expert_gate) = false;
  TORCH_ARG(std::optional<double>, moe_expert_capacity_factor) = std::nullopt;
  TORCH_ARG(std::string, moe_token_drop_policy) = "probs";  // | position
  TORCH_ARG(bool, moe_pad_expert_input_to_capacity) = false;
  // How tokens reach the experts of other expert-parallel ranks (moe/token_dispatcher.h).
  TORCH_ARG(std::string, moe_token_dispatcher_type) = "allgather";  // | alltoall
  // The local experts' linear layers as two grouped GEMMs (at::_grouped_mm) instead of one GEMM
  // pair per expert; the parameters stay SequentialMLP's, so checkpoints are alike with or without.
  TORCH_ARG(bool, moe_grouped_gemm) = false;
  // Expert parallelism: the experts split over the ep_group's ranks, num_moe_experts /
  // expert_model_parallel_size on each (nullptr group: one rank holds them all).
  TORCH_ARG(int64_t, expert_model_parallel_size) = 1;
  TORCH_ARG(std::shared_ptr<comm::ProcessGroup>, ep_group) = nullptr;
  // Expert tensor parallelism: each expert's linear_fc1 and linear_fc2 split over etp_group's
  // ranks (default: tensor_model_parallel_size and tp_group); the dispatchers move tokens over
  // etp_ep_group, the ETP x EP ranks (default: whichever of the two is not one rank).
  TORCH_ARG(std::optional<int64_t>, expert_tensor_parallel_size) = std::nullopt;
  TORCH_ARG(std::shared_ptr<comm::ProcessGroup>, etp_group) = nullptr;
  TORCH_ARG(std::shared_ptr<comm::ProcessGroup>, etp_ep_group) = nullptr;
  // Shared by the MoE layers built from one config (finalize() makes it): the backward scale of
  // their auxiliary losses, which the schedule sets, and the values they record for the log.
  TORCH_ARG(std::shared_ptr<MoEAuxLossState>, moe_aux_loss_state) = nullptr;

  // --- FP8 GEMMs (tensor_parallel/fp8.h) for the attention's and dense MLPs' linear layers
  // (nullptr: none; experts keep the model's precision). With first_last_layers_bf16 the first
  // num_layers_at_start_in_bf16 and last num_layers_at_end_in_bf16 layers of the whole model do too.
  TORCH_ARG(std::shared_ptr<const tensor_parallel::Fp8Config>, fp8) = nullptr;
  TORCH_ARG(bool, first_last_layers_bf16) = false;
  TORCH_ARG(int64_t, num_layers_at_start_in_bf16) = 1;
  TORCH_ARG(int64_t, num_layers_at_end_in_bf16) = 1;

  // Copy with derived defaults filled in; throws c10::Error naming the field on bad input.
 public:
  TransformerConfig finalize() const;

  // Valid only after finalize().
  int64_t query_groups() const { return num_query_groups_.value(); }
  int64_t ffn_size() const { return ffn_hidden_size_.value(); }
  int64_t head_dim() const { return kv_channels_.value(); }
  bool qkv_bias() const { return add_qkv_bias_.value(); }
  double output_layer_init_std() const;
  // The experts this expert-parallel rank holds, and the global index of its first one.
  int64_t num_local_experts() const { return num_moe_experts_.value_or(0) / expert_model_parallel_size_; }
  int64_t local_expert_offset() const;
  // What one expert's MLP is built from: a dense config over the expert-TP group, whose layers
  // leave the communication to the token dispatcher (is_expert), in the model's precision.
  TransformerConfig expert_mlp_config() const;
  // How the layers divide over the pipeline stages and their chunks.
  PipelineSplit pipeline_split() const;
  // Whether layer `layer` (0-based, of the whole model) holds an MoE layer.
  bool is_moe_layer(int64_t layer) const;
  // Whether selective recompute covers `module` (a recompute_modules name).
  bool recomputes(const std::string& module) const;
  // The FP8 config layer `layer` (0-based, of the whole model) runs its GEMMs with, or nullptr.
  std::shared_ptr<const tensor_parallel::Fp8Config> fp8_of(int64_t layer) const;
  // The context-parallel ranks (1 without a cp_group), this rank's place among them, and how
  // layer `layer` attends over them.
  int context_parallel_size() const;
  int context_parallel_rank() const;
  CPCommType cp_comm_type_of(int64_t layer) const;
};

// FP8 GEMMs (at::_scaled_mm) need every size that is a multiple of 16: "" when the dense layers'
// GEMMs on each of tp ranks have them, else which size does not and what it is.
MEGATRON_API std::string fp8_gemm_size_problem(int64_t hidden_size, int64_t num_attention_heads,
                                               int64_t num_query_groups, int64_t kv_channels, int64_t ffn_hidden_size,
                                               int64_t tp);

MEGATRON_API const char* to_string(Normalization n);
MEGATRON_API const char* to_string(Activation a);

}  // namespace megatron::transformer
