#include "megatron/transformer/transformer_config.h"

#include <algorithm>
#include <cmath>

#include "megatron/transformer/moe/moe_utils.h"

namespace megatron::transformer {

const char* to_string(Normalization n) {
  return n == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm";
}
const char* to_string(Activation a) {
  switch (a) {
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kSilu: return "silu";
    case Activation::kSquaredRelu: return "squared_relu";
  }
  return "?";
}

double TransformerConfig::output_layer_init_std() const {
  return use_scaled_init_method_ ? init_method_std_ / std::sqrt(2.0 * num_layers_) : init_method_std_;
}

bool TransformerConfig::is_moe_layer(int64_t layer) const {
  if (!num_moe_experts_) return false;
  return moe_layer_pattern_.empty() || moe_layer_pattern_.at(static_cast<size_t>(layer)) != 0;
}

bool TransformerConfig::recomputes(const std::string& module) const {
  return recompute_granularity_ == RecomputeGranularity::kSelective &&
         std::find(recompute_modules_.begin(), recompute_modules_.end(), module) != recompute_modules_.end();
}

std::shared_ptr<const tensor_parallel::Fp8Config> TransformerConfig::fp8_of(int64_t layer) const {
  if (first_last_layers_bf16_ &&
      (layer < num_layers_at_start_in_bf16_ || layer >= num_layers_ - num_layers_at_end_in_bf16_))
    return nullptr;
  return fp8_;
}

int TransformerConfig::context_parallel_size() const {
  return cp_group_ ? cp_group_->size() : 1;
}

int TransformerConfig::context_parallel_rank() const {
  return cp_group_ ? cp_group_->rank() : 0;
}

CPCommType TransformerConfig::cp_comm_type_of(int64_t layer) const {
  return parse_cp_comm_type(cp_comm_type_.size() == 1 ? cp_comm_type_[0]
                                                      : cp_comm_type_.at(static_cast<size_t>(layer)));
}

int64_t TransformerConfig::local_expert_offset() const {
  return ep_group_ ? ep_group_->rank() * num_local_experts() : 0;
}

TransformerConfig TransformerConfig::expert_mlp_config() const {
  TransformerConfig e = *this;
  e.num_moe_experts(std::nullopt)
      .tensor_model_parallel_size(expert_tensor_parallel_size_.value_or(tensor_model_parallel_size_))
      .tp_group(etp_group_)
      .sequence_parallel(false)
      .fp8(nullptr);
  return e;
}

namespace {
// Megatron-Core's rules for the MoE settings (TransformerConfig.__post_init__), and what this
// build does not compute yet, refused by name.
void finalize_moe(TransformerConfig& c) {
  if (!c.num_moe_experts()) return;
  const int64_t experts = *c.num_moe_experts(), topk = c.moe_router_topk();
  TORCH_CHECK(experts > 0, "[transformer_config] num_moe_experts must be positive, got ", experts);
  TORCH_CHECK(topk >= 1 && topk <= experts, "[transformer_config] moe_router_topk (", topk, ") must be in [1, ",
              experts, "]");
  TORCH_CHECK(c.moe_router_score_function() == "softmax" || c.moe_router_score_function() == "sigmoid",
              "[transformer_config] moe_router_score_function must be softmax or sigmoid, got '",
              c.moe_router_score_function(), "'");
  const auto& balancing = c.moe_router_load_balancing_type();
  TORCH_CHECK(balancing == "aux_loss" || balancing == "seq_aux_loss" || balancing == "sinkhorn" || balancing == "none",
              "[transformer_config] moe_router_load_balancing_type must be aux_loss, seq_aux_loss, sinkhorn or none, "
              "got '",
              balancing, "'");
  TORCH_CHECK(!c.moe_router_enable_expert_bias() || c.moe_router_score_function() == "sigmoid",
              "[transformer_config] moe_router_enable_expert_bias needs moe_router_score_function sigmoid");
  TORCH_CHECK(balancing != "sinkhorn" || c.moe_aux_loss_coeff() == 0,
              "[transformer_config] sinkhorn routing takes no auxiliary loss: moe_aux_loss_coeff must be 0, got ",
              c.moe_aux_loss_coeff());
  const auto& dtype = c.moe_router_dtype();
  TORCH_CHECK(dtype.empty() || dtype == "fp32" || dtype == "fp64",
              "[transformer_config] moe_router_dtype must be fp32, fp64 or empty, got '", dtype, "'");
  TORCH_CHECK(c.moe_token_drop_policy() == "probs" || c.moe_token_drop_policy() == "position",
              "[transformer_config] moe_token_drop_policy must be probs or position, got '", c.moe_token_drop_policy(),
              "'");
  TORCH_CHECK(c.moe_token_dispatcher_type() == "allgather" || c.moe_token_dispatcher_type() == "alltoall",
              "[transformer_config] moe_token_dispatcher_type must be allgather or alltoall, got '",
              c.moe_token_dispatcher_type(), "'");
  const int64_t ep = c.expert_model_parallel_size();
  TORCH_CHECK(ep >= 1 && experts % ep == 0, "[transformer_config] num_moe_experts (", experts,
              ") must be divisible by expert_model_parallel_size (", ep, ")");
  TORCH_CHECK((c.ep_group() ? c.ep_group()->size() : 1) == ep, "[transformer_config] ep_group has ",
              c.ep_group() ? c.ep_group()->size() : 1, " ranks; expert_model_parallel_size is ", ep);
  TORCH_CHECK(c.moe_layer_pattern().empty() || static_cast<int64_t>(c.moe_layer_pattern().size()) == c.num_layers(),
              "[transformer_config] moe_layer_pattern has ", c.moe_layer_pattern().size(), " entries for ",
              c.num_layers(), " layers");
  if (!c.moe_ffn_hidden_size()) c.moe_ffn_hidden_size(c.ffn_hidden_size());
  TORCH_CHECK(*c.moe_ffn_hidden_size() > 0, "[transformer_config] moe_ffn_hidden_size must be positive");
  if (c.moe_router_group_topk()) {
    const int64_t groups = c.moe_router_num_groups().value_or(0), group_topk = *c.moe_router_group_topk();
    TORCH_CHECK(groups > 0 && experts % groups == 0 && group_topk <= groups && topk % group_topk == 0,
                "[transformer_config] group-limited routing needs moe_router_num_groups dividing the experts (",
                experts, "), moe_router_group_topk (", group_topk, ") at most the groups (", groups,
                ") and dividing moe_router_topk (", topk, ")");
  }
  TORCH_CHECK(!c.moe_expert_capacity_factor() || *c.moe_expert_capacity_factor() > 0,
              "[transformer_config] moe_expert_capacity_factor must be positive");
  TORCH_CHECK(!c.moe_pad_expert_input_to_capacity() || c.moe_expert_capacity_factor(),
              "[transformer_config] moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor");
  TORCH_CHECK(!c.moe_shared_expert_gate() || c.moe_shared_expert_intermediate_size(),
              "[transformer_config] moe_shared_expert_gate needs moe_shared_expert_intermediate_size");
  const int64_t tp = c.tensor_model_parallel_size();
  TORCH_CHECK(tp == 1 || c.sequence_parallel(),
              "[transformer_config] MoE layers with tensor parallelism need sequence_parallel (as Megatron-Core's)");
  auto size_of = [](const std::shared_ptr<comm::ProcessGroup>& g) { return g ? g->size() : 1; };
  if (!c.expert_tensor_parallel_size()) c.expert_tensor_parallel_size(tp);
  const int64_t etp = *c.expert_tensor_parallel_size();
  if (!c.etp_group() && etp == tp) c.etp_group(c.tp_group());
  TORCH_CHECK(etp >= 1 && size_of(c.etp_group()) == etp, "[transformer_config] etp_group has ", size_of(c.etp_group()),
              " ranks; expert_tensor_parallel_size is ", etp);
  if (!c.etp_ep_group()) c.etp_ep_group(ep == 1 ? c.etp_group() : etp == 1 ? c.ep_group() : nullptr);
  TORCH_CHECK(size_of(c.etp_ep_group()) == etp * ep, "[transformer_config] etp_ep_group has ",
              size_of(c.etp_ep_group()), " ranks; expert_tensor_parallel_size x expert_model_parallel_size is ",
              etp * ep);
  TORCH_CHECK(*c.moe_ffn_hidden_size() % etp == 0, "[transformer_config] moe_ffn_hidden_size (",
              *c.moe_ffn_hidden_size(), ") must be divisible by expert_tensor_parallel_size (", etp, ")");
  TORCH_CHECK(etp == 1 || !c.add_bias_linear(),
              "[transformer_config] biases in MoE layers need expert_tensor_parallel_size 1 (as Megatron-Core's)");
  TORCH_CHECK(!c.domino(), "[transformer_config] domino with MoE layers is not implemented");
  if (!c.moe_aux_loss_state()) c.moe_aux_loss_state(std::make_shared<MoEAuxLossState>());
}

void finalize_fp8(TransformerConfig& c) {
  const std::string problem =
      fp8_gemm_size_problem(c.hidden_size(), c.num_attention_heads(), *c.num_query_groups(), *c.kv_channels(),
                            *c.ffn_hidden_size(), c.tensor_model_parallel_size());
  TORCH_CHECK(problem.empty(), "[transformer_config] ", problem);
  TORCH_CHECK(!c.domino(), "[transformer_config] FP8 (--fp8-format) with --domino is not implemented");
  TORCH_CHECK(c.num_layers_at_start_in_bf16() >= 0 && c.num_layers_at_end_in_bf16() >= 0,
              "[transformer_config] num_layers_at_start_in_bf16 and num_layers_at_end_in_bf16 must be >= 0");
}
}  // namespace

std::string fp8_gemm_size_problem(int64_t hidden, int64_t heads, int64_t groups, int64_t kv, int64_t ffn, int64_t tp) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"the hidden size", hidden},
      {"the QKV projection's width per tensor-parallel rank ((heads + 2 x query groups) x kv channels / TP)",
       (heads + 2 * groups) * kv / tp},
      {"the attention output's width per tensor-parallel rank (heads x kv channels / TP)", heads * kv / tp},
      {"the FFN hidden size per tensor-parallel rank", ffn / tp}};
  for (const auto& [what, n] : sizes)
    if (n % 16 != 0)
      return std::string("FP8 GEMMs (--fp8-format, at::_scaled_mm) need sizes that are multiples of 16; ") + what +
             " is " + std::to_string(n);
  return "";
}

PipelineSplit TransformerConfig::pipeline_split() const {
  return {num_layers_,
          pipeline_model_parallel_size_,
          virtual_pipeline_model_parallel_size_.value_or(1),
          num_layers_in_first_pipeline_stage_,
          num_layers_in_last_pipeline_stage_,
          account_for_embedding_in_pipeline_split_,
          account_for_loss_in_pipeline_split_,
          pipeline_model_parallel_layout_};
}

TransformerConfig TransformerConfig::finalize() const {
  TransformerConfig c = *this;
  const int64_t tp = c.tensor_model_parallel_size_;
  TORCH_CHECK(c.num_layers_ > 0, "[transformer_config] num_layers must be positive, got ", c.num_layers_);
  TORCH_CHECK(c.hidden_size_ > 0, "[transformer_config] hidden_size must be positive, got ", c.hidden_size_);
  TORCH_CHECK(c.num_attention_heads_ > 0, "[transformer_config] num_attention_heads must be positive, got ",
              c.num_attention_heads_);
  TORCH_CHECK(tp >= 1, "[transformer_config] tensor_model_parallel_size must be >= 1, got ", tp);
  TORCH_CHECK(c.pipeline_model_parallel_size_ >= 1,
              "[transformer_config] pipeline_model_parallel_size must be >= 1, got ", c.pipeline_model_parallel_size_);
  if (!c.pipeline_model_parallel_layout_.empty() && !c.virtual_pipeline_model_parallel_size_) {
    // As Megatron-LM: the layout's stages over the pipeline size are the chunks per rank.
    const int64_t stages = PipelineSplit::layout_stages(c.pipeline_model_parallel_layout_);
    if (stages > c.pipeline_model_parallel_size_ && stages % c.pipeline_model_parallel_size_ == 0)
      c.virtual_pipeline_model_parallel_size_ = stages / c.pipeline_model_parallel_size_;
  }
  const int64_t vpp = c.virtual_pipeline_model_parallel_size_.value_or(1);
  TORCH_CHECK(vpp >= 1, "[transformer_config] virtual_pipeline_model_parallel_size must be >= 1, got ", vpp);
  const std::string split = c.pipeline_split().problem();
  TORCH_CHECK(split.empty(), "[transformer_config] ", split);
  TORCH_CHECK(c.num_attention_heads_ % tp == 0, "[transformer_config] num_attention_heads (", c.num_attention_heads_,
              ") must be divisible by tensor_model_parallel_size (", tp, ")");
  if (!c.kv_channels_) {
    TORCH_CHECK(c.hidden_size_ % c.num_attention_heads_ == 0, "[transformer_config] hidden_size (", c.hidden_size_,
                ") must be divisible by num_attention_heads (", c.num_attention_heads_, ") unless kv_channels is set");
    c.kv_channels_ = c.hidden_size_ / c.num_attention_heads_;
  }
  TORCH_CHECK(*c.kv_channels_ > 0, "[transformer_config] kv_channels must be positive");
  TORCH_CHECK(!c.domino_ || !c.sequence_parallel_,
              "[transformer_config] domino (--domino) does not support sequence_parallel (--sequence-parallel)");
  TORCH_CHECK(!c.domino_ || c.recompute_granularity_ != RecomputeGranularity::kFull,
              "[transformer_config] domino (--domino) does not support --recompute-granularity full");
  if (!c.num_query_groups_) c.num_query_groups_ = c.num_attention_heads_;
  const int64_t groups = *c.num_query_groups_;
  TORCH_CHECK(groups > 0 && c.num_attention_heads_ % groups == 0, "[transformer_config] num_attention_heads (",
              c.num_attention_heads_, ") must be divisible by num_query_groups (", groups, ")");
  TORCH_CHECK(groups % tp == 0, "[transformer_config] num_query_groups (", groups,
              ") must be divisible by tensor_model_parallel_size (", tp, ")");
  if (!c.ffn_hidden_size_) c.ffn_hidden_size_ = 4 * c.hidden_size_;
  TORCH_CHECK(*c.ffn_hidden_size_ > 0 && *c.ffn_hidden_size_ % tp == 0, "[transformer_config] ffn_hidden_size (",
              *c.ffn_hidden_size_, ") must be positive and divisible by tensor_model_parallel_size (", tp, ")");
  if (!c.add_qkv_bias_) c.add_qkv_bias_ = c.add_bias_linear_;
  TORCH_CHECK(c.hidden_dropout_ >= 0.0 && c.hidden_dropout_ < 1.0,
              "[transformer_config] hidden_dropout must be in [0, 1), got ", c.hidden_dropout_);
  TORCH_CHECK(c.attention_dropout_ >= 0.0 && c.attention_dropout_ < 1.0,
              "[transformer_config] attention_dropout must be in [0, 1), got ", c.attention_dropout_);
  TORCH_CHECK(c.layernorm_epsilon_ > 0.0, "[transformer_config] layernorm_epsilon must be positive");
  TORCH_CHECK(c.init_method_std_ > 0.0, "[transformer_config] init_method_std must be positive");
  if (c.recompute_granularity_ == RecomputeGranularity::kFull) {
    TORCH_CHECK(c.recompute_num_layers_ >= 1 && c.recompute_num_layers_ <= c.num_layers_,
                "[transformer_config] recompute_num_layers (", c.recompute_num_layers_, ") must be in [1, num_layers (",
                c.num_layers_, ")] with full recompute");
  }
  for (const auto& m : c.recompute_modules_)
    TORCH_CHECK(m == "core_attn" || m == "mlp" || m == "shared_experts", "[transformer_config] recompute_modules: ", m,
                " is not one of core_attn, mlp, shared_experts");
  TORCH_CHECK(!c.domino_ || !c.recomputes("mlp"),
              "[transformer_config] domino (--domino) does not support recomputing the mlp module");
  // A recomputed FP8 GEMM would record its amax a second time in the same step.
  TORCH_CHECK(!c.fp8_ || !c.recomputes("mlp"),
              "[transformer_config] recomputing the mlp module is not implemented "
              "with FP8 GEMMs (--fp8-format)");
  finalize_moe(c);
  if (c.fp8_) finalize_fp8(c);
  TORCH_CHECK(c.cp_comm_type_.size() == 1 || static_cast<int64_t>(c.cp_comm_type_.size()) == c.num_layers_,
              "[transformer_config] cp_comm_type takes one value or one per layer (", c.num_layers_, "), got ",
              c.cp_comm_type_.size());
  for (const auto& type : c.cp_comm_type_) parse_cp_comm_type(type);
  const bool hierarchical =
      std::find(c.cp_comm_type_.begin(), c.cp_comm_type_.end(), "a2a+p2p") != c.cp_comm_type_.end();
  if (hierarchical && c.context_parallel_size() > 1) {
    const auto& h = c.hierarchical_cp_groups_;
    TORCH_CHECK(h.size() == 2 && h[0] && h[1] && h[0]->size() * h[1]->size() == c.context_parallel_size(),
                "[transformer_config] cp_comm_type a2a+p2p needs hierarchical_cp_groups: an a2a and a p2p group "
                "whose sizes multiply to the context-parallel size (",
                c.context_parallel_size(), ")");
  }
  if (c.context_parallel_size() > 1) {
    TORCH_CHECK(c.attention_dropout_ == 0.0, "[transformer_config] attention_dropout (", c.attention_dropout_,
                ") must be 0 with context parallelism");
    TORCH_CHECK(!c.domino_, "[transformer_config] domino with context parallelism is not implemented");
  }
  if (c.tp_group_) {
    TORCH_CHECK(c.tp_group_->size() == tp, "[transformer_config] tp_group has ", c.tp_group_->size(),
                " ranks but tensor_model_parallel_size is ", tp);
  } else {
    TORCH_CHECK(tp == 1, "[transformer_config] tensor_model_parallel_size is ", tp, " but no tp_group was given");
  }
  return c;
}

}  // namespace megatron::transformer
