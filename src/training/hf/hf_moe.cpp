// The Llama family's mixture-of-experts members: MixtralForCausalLM (every layer MoE, a softmax
// over each token's top-k experts), Qwen2MoeForCausalLM (q/k/v biases, a softmax over all
// experts with the top-k renormalised or not, a gated shared expert, dense layers where
// mlp_only_layers or decoder_sparse_step say), Qwen3MoeForCausalLM (Qwen 2-MoE's routing and
// layers without biases or a shared expert, Qwen 3's query and key norms) and OlmoeForCausalLM
// (every layer MoE, Qwen's expert names, one RMSNorm over all the heads' queries and one over
// the keys). Tensor names are the hub files'
// (transformers writes them too, whatever it holds in memory).
#include <c10/util/Exception.h>

#include <sstream>

#include "training/arguments/moe_arguments.h"
#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

namespace {

const std::string L = "decoder.layers.{i}.mlp.", H = "model.layers.{i}.";

TensorRule moe_rule(const std::string& megatron, std::vector<std::string> hf, Transform t = Transform::kCopy) {
  return {L + megatron, std::move(hf), t, When::kAlways, false, Layers::kMoE};
}

// The family's config keys with `key` carrying the experts' MLP width in place of intermediate_size.
std::vector<ConfigRule> config_with_expert_width(const std::string& key) {
  std::vector<ConfigRule> rules;
  for (auto& r : llama_config())
    if (r.key != "intermediate_size" || key != "intermediate_size") rules.push_back(std::move(r));
  rules.push_back(
      {key, [](const Arguments& s) { return std::to_string(s.moe_ffn_hidden_size.value_or(*s.ffn_hidden_size)); },
       [key](const json* v, Arguments& s, const std::string& where) {
         s.moe_ffn_hidden_size = positive_int_or(v, 0, key, where);
         TORCH_CHECK(*s.moe_ffn_hidden_size > 0, "[convert_checkpoint] ", where, " has no \"", key, "\"");
       }});
  return rules;
}

// required false: another key may have given the count already (read before this one).
void expert_keys(std::vector<ConfigRule>& rules, const std::string& experts_key, bool required = true) {
  rules.push_back({experts_key, [](const Arguments& s) { return std::to_string(*s.num_experts); },
                   [experts_key, required](const json* v, Arguments& s, const std::string& where) {
                     if (!required && (v == nullptr || v->is_null()) && s.num_experts) return;
                     s.num_experts = positive_int_or(v, 0, experts_key, where);
                     TORCH_CHECK(*s.num_experts > 0, "[convert_checkpoint] ", where, " has no \"", experts_key, "\"");
                   }});
  rules.push_back({"num_experts_per_tok", [](const Arguments& s) { return std::to_string(s.moe_router_topk); },
                   [](const json* v, Arguments& s, const std::string& where) {
                     s.moe_router_topk = positive_int_or(v, 2, "num_experts_per_tok", where);
                   }});
  rules.push_back(real("router_aux_loss_coef", &Arguments::moe_aux_loss_coeff, 0.001));
  rules.push_back(constant("output_router_logits", "false"));
}

// What every MoE member needs beyond the family's: a plain top-k router and experts without
// biases (what Megatron-LM's flags can say and the Hugging Face classes cannot is named).
std::string moe_mismatch(const Arguments& s, QkNorm qk_norm = QkNorm::kNone) {
  if (auto m = llama_mismatch(s, /*with_experts=*/true, qk_norm); !m.empty()) return m;
  if (s.moe_router_score_function != "softmax") return "routes with a softmax (--moe-router-score-function softmax)";
  if (s.moe_router_group_topk || s.moe_router_topk_scaling_factor)
    return "routes without expert groups or a top-k scaling factor";
  if (s.moe_router_enable_expert_bias) return "has no expert bias (--moe-router-enable-expert-bias)";
  return "";
}

// moe_mismatch for the members without biases or a shared expert (every_layer: and with experts
// in every layer).
std::string plain_moe_mismatch(const Arguments& s, QkNorm qk_norm, bool every_layer) {
  if (auto m = moe_mismatch(s, qk_norm); !m.empty()) return m;
  if (!s.disable_bias_linear || s.add_qkv_bias) return "has no biases (--disable-bias-linear, no --add-qkv-bias)";
  if (s.moe_shared_expert_intermediate_size) return "has no shared expert";
  if (every_layer)
    for (int64_t on : detail::moe_layer_pattern(s.moe_layer_freq, s.num_layers))
      if (!on) return "has experts in every layer (--moe-layer-freq 1)";
  return "";
}

// moe_layer_freq as the list of its 0/1 entries (import writes it this way).
std::string layer_list(const std::vector<int64_t>& pattern) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < pattern.size(); ++i) out << (i ? "," : "") << pattern[i];
  return out.str() + "]";
}

// Qwen's router and routed experts (mlp.gate, mlp.experts.E.gate_proj/up_proj/down_proj).
void qwen_moe_experts(std::vector<TensorRule>& rules) {
  const std::string E = H + "mlp.experts.{e}.";
  rules.push_back(moe_rule("router.weight", {H + "mlp.gate.weight"}));
  rules.push_back(moe_rule("experts.local_experts.{e}.linear_fc1.weight",
                           {E + "gate_proj.weight", E + "up_proj.weight"}, Transform::kGateUp));
  rules.push_back(moe_rule("experts.local_experts.{e}.linear_fc2.weight", {E + "down_proj.weight"}));
}

// Qwen's MoE keys: how the top-k probabilities are normalised and which layers have experts.
void qwen_moe_routing_and_layers(std::vector<ConfigRule>& rules) {
  // Renormalising the top-k of the softmax over all experts is the softmax over the top-k.
  rules.push_back(
      {"norm_topk_prob", [](const Arguments& s) { return json_bool(!s.moe_router_pre_softmax); },
       [](const json* v, Arguments& s, const std::string&) { s.moe_router_pre_softmax = !bool_or(v, false); }});
  // Layer i has experts when (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers;
  // written back as step 1 and the dense layers listed.
  rules.push_back({"decoder_sparse_step", [](const Arguments&) { return std::string("1"); },
                   [](const json* v, Arguments& s, const std::string& where) {
                     const int64_t step = positive_int_or(v, 1, "decoder_sparse_step", where);
                     std::vector<int64_t> pattern;
                     for (int64_t i = 0; i < s.num_layers; ++i) pattern.push_back((i + 1) % step == 0);
                     s.moe_layer_freq = layer_list(pattern);
                   }});
  rules.push_back(
      {"mlp_only_layers",
       [](const Arguments& s) {
         std::string dense;
         const auto pattern = detail::moe_layer_pattern(s.moe_layer_freq, s.num_layers);
         for (size_t i = 0; i < pattern.size(); ++i)
           if (!pattern[i]) dense += (dense.empty() ? "" : ", ") + std::to_string(i);
         return "[" + dense + "]";
       },
       [](const json* v, Arguments& s, const std::string& where) {
         if (v == nullptr || v->is_null()) return;
         TORCH_CHECK(v->is_array(), "[convert_checkpoint] ", where, ": \"mlp_only_layers\" must be a list of layers");
         auto pattern = detail::moe_layer_pattern(s.moe_layer_freq, s.num_layers);
         for (const auto& layer : *v) {
           TORCH_CHECK(layer.is_number_unsigned() && layer.get<uint64_t>() < static_cast<uint64_t>(s.num_layers),
                       "[convert_checkpoint] ", where, ": \"mlp_only_layers\" names ", layer.dump(), "; the model has ",
                       s.num_layers, " layers");
           pattern[layer.get<size_t>()] = 0;
         }
         s.moe_layer_freq = layer_list(pattern);
       }});
}

}  // namespace

Architecture mixtral_architecture() {
  Architecture a;
  a.model_type = "mixtral";
  a.class_name = "MixtralForCausalLM";
  a.tensors = llama_tensors({When::kNever, When::kNever, When::kNever});
  const std::string E = H + "block_sparse_moe.experts.{e}.";
  a.tensors.push_back(moe_rule("router.weight", {H + "block_sparse_moe.gate.weight"}));
  a.tensors.push_back(
      moe_rule("experts.local_experts.{e}.linear_fc1.weight", {E + "w1.weight", E + "w3.weight"}, Transform::kGateUp));
  a.tensors.push_back(moe_rule("experts.local_experts.{e}.linear_fc2.weight", {E + "w2.weight"}));
  a.config = config_with_expert_width("intermediate_size");
  expert_keys(a.config, "num_local_experts");
  a.config.push_back({"sliding_window", [](const Arguments&) { return std::string("null"); }, refuse_sliding_window});
  // Noise on the router's input in training only; the weights mean the same without it.
  a.config.push_back(constant("router_jitter_noise", "0.0"));
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = [](Arguments& s) {
    llama_fixed(s);
    s.disable_bias_linear = true;
    s.ffn_hidden_size = s.moe_ffn_hidden_size;
    s.moe_layer_freq = "1";
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = plain_moe_mismatch(s, QkNorm::kNone, /*every_layer=*/true); !m.empty()) return m;
    if (s.moe_router_pre_softmax) return "takes the softmax over the top-k only (no --moe-router-pre-softmax)";
    return "";
  };
  return a;
}

Architecture qwen2_moe_architecture() {
  Architecture a;
  a.model_type = "qwen2_moe";
  a.class_name = "Qwen2MoeForCausalLM";
  a.tensors = llama_tensors({When::kAlways, When::kNever, When::kNever});
  qwen_moe_experts(a.tensors);
  const std::string S = H + "mlp.shared_expert.";
  a.tensors.push_back(
      moe_rule("shared_experts.linear_fc1.weight", {S + "gate_proj.weight", S + "up_proj.weight"}, Transform::kGateUp));
  a.tensors.push_back(moe_rule("shared_experts.linear_fc2.weight", {S + "down_proj.weight"}));
  a.tensors.push_back(moe_rule("shared_experts.gate_weight", {H + "mlp.shared_expert_gate.weight"}));
  a.config = config_with_expert_width("moe_intermediate_size");  // intermediate_size: the dense layers'
  expert_keys(a.config, "num_experts");
  a.config.push_back({"shared_expert_intermediate_size",
                      [](const Arguments& s) { return std::to_string(*s.moe_shared_expert_intermediate_size); },
                      [](const json* v, Arguments& s, const std::string& where) {
                        s.moe_shared_expert_intermediate_size =
                            positive_int_or(v, 0, "shared_expert_intermediate_size", where);
                        TORCH_CHECK(*s.moe_shared_expert_intermediate_size > 0, "[convert_checkpoint] ", where,
                                    " has no \"shared_expert_intermediate_size\"");
                      }});
  qwen_moe_routing_and_layers(a.config);
  a.config.push_back(qwen2_sliding_window());
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = [](Arguments& s) {
    qwen2_fixed(s);
    s.moe_shared_expert_gate = true;
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = moe_mismatch(s); !m.empty()) return m;
    if (auto m = qwen2_biases_mismatch(s); !m.empty()) return m;
    if (!s.moe_shared_expert_intermediate_size || !s.moe_shared_expert_gate)
      return "has a gated shared expert (--moe-shared-expert-intermediate-size, --moe-shared-expert-gate)";
    return "";
  };
  return a;
}

Architecture qwen3_moe_architecture() {
  Architecture a;
  a.model_type = "qwen3_moe";
  a.class_name = "Qwen3MoeForCausalLM";
  a.tensors = llama_tensors({When::kNever, When::kNever, When::kNever});
  for (auto& r : qwen3_qk_norms()) a.tensors.push_back(std::move(r));
  qwen_moe_experts(a.tensors);
  a.config = config_with_expert_width("moe_intermediate_size");  // intermediate_size: the dense layers'
  // The hub's files say num_experts; transformers 5 writes num_local_experts (either is read).
  a.config.push_back({"num_local_experts", [](const Arguments&) { return std::string(); },
                      [](const json* v, Arguments& s, const std::string& where) {
                        if (v != nullptr && !v->is_null())
                          s.num_experts = positive_int_or(v, 0, "num_local_experts", where);
                      }});
  expert_keys(a.config, "num_experts", /*required=*/false);
  qwen_moe_routing_and_layers(a.config);
  a.config.push_back(qwen3_attention_bias());
  a.config.push_back(qwen2_sliding_window());
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = qwen3_fixed;
  a.mismatch = [](const Arguments& s) { return plain_moe_mismatch(s, QkNorm::kPerHead, /*every_layer=*/false); };
  return a;
}

Architecture olmoe_architecture() {
  Architecture a;
  a.model_type = "olmoe";
  a.class_name = "OlmoeForCausalLM";
  a.tensors = llama_tensors({When::kNever, When::kNever, When::kNever});
  for (auto& r : qwen3_qk_norms()) a.tensors.push_back(std::move(r));
  qwen_moe_experts(a.tensors);
  a.config = config_with_expert_width("intermediate_size");
  expert_keys(a.config, "num_experts");
  a.config.push_back(
      {"norm_topk_prob", [](const Arguments& s) { return json_bool(!s.moe_router_pre_softmax); },
       [](const json* v, Arguments& s, const std::string&) { s.moe_router_pre_softmax = !bool_or(v, false); }});
  a.config.push_back({"clip_qkv", [](const Arguments&) { return std::string("null"); },
                      [](const json* v, Arguments&, const std::string& where) {
                        TORCH_CHECK(v == nullptr || v->is_null(), "[convert_checkpoint] ", where,
                                    ": clip_qkv (clamping q, k and v) is not supported");
                      }});
  a.config.push_back(qwen3_attention_bias());
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = [](Arguments& s) {
    qwen3_fixed(s);
    s.qk_layernorm_across_heads = true;
    s.ffn_hidden_size = s.moe_ffn_hidden_size;
    s.moe_layer_freq = "1";
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = plain_moe_mismatch(s, QkNorm::kAcrossHeads, /*every_layer=*/true); !m.empty()) return m;
    if (s.kv_channels && *s.kv_channels * s.num_attention_heads != s.hidden_size)
      return "has heads of hidden / heads channels (no other --kv-channels)";
    return "";
  };
  return a;
}

}  // namespace megatron::training::hf
