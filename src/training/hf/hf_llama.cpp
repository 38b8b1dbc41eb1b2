// The Llama family: LlamaForCausalLM (Llama 2 and 3, with Llama 3's RoPE scaling),
// Qwen2ForCausalLM (bias on q/k/v only), MistralForCausalLM (no biases, no sliding window) and
// Qwen3ForCausalLM (no biases, an RMSNorm on each head's query and key before RoPE). All share
// the tensor names; they differ in biases, the query and key norms and a few config.json keys.
#include <c10/util/Exception.h>

#include <sstream>

#include "input_files.h"
#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

std::vector<TensorRule> llama_tensors(const LlamaBiases& b) {
  const std::string L = "decoder.layers.{i}.", H = "model.layers.{i}.";
  return {
      {"embedding.word_embeddings.weight", {"model.embed_tokens.weight"}, Transform::kCopy, When::kAlways, true},
      {L + "input_layernorm.weight", {H + "input_layernorm.weight"}, Transform::kNormWeight},
      {L + "pre_mlp_layernorm.weight", {H + "post_attention_layernorm.weight"}, Transform::kNormWeight},
      {L + "self_attention.linear_qkv.weight",
       {H + "self_attn.q_proj.weight", H + "self_attn.k_proj.weight", H + "self_attn.v_proj.weight"},
       Transform::kQkv},
      {L + "self_attention.linear_proj.weight", {H + "self_attn.o_proj.weight"}},
      {L + "mlp.linear_fc1.weight",
       {H + "mlp.gate_proj.weight", H + "mlp.up_proj.weight"},
       Transform::kGateUp,
       When::kAlways,
       false,
       Layers::kDense},
      {L + "mlp.linear_fc2.weight",
       {H + "mlp.down_proj.weight"},
       Transform::kCopy,
       When::kAlways,
       false,
       Layers::kDense},
      {L + "self_attention.linear_qkv.bias",
       {H + "self_attn.q_proj.bias", H + "self_attn.k_proj.bias", H + "self_attn.v_proj.bias"},
       Transform::kQkv,
       b.qkv},
      {L + "self_attention.linear_proj.bias", {H + "self_attn.o_proj.bias"}, Transform::kCopy, b.proj},
      {L + "mlp.linear_fc1.bias",
       {H + "mlp.gate_proj.bias", H + "mlp.up_proj.bias"},
       Transform::kGateUp,
       b.mlp,
       false,
       Layers::kDense},
      {L + "mlp.linear_fc2.bias", {H + "mlp.down_proj.bias"}, Transform::kCopy, b.mlp, false, Layers::kDense},
      {"decoder.final_layernorm.weight", {"model.norm.weight"}, Transform::kNormWeight},
      {"output_layer.weight", {"lm_head.weight"}, Transform::kCopy, When::kUntied, true},
  };
}

namespace {

// RoPE's base and Llama 3's scaling. transformers 5 reads "rope_parameters", earlier versions
// and other readers "rope_theta" and "rope_scaling": all three are written, the same values.
std::string rope_dict(const Arguments& s) {
  std::ostringstream d;
  d << "{\"rope_type\": \"" << (s.use_rope_scaling ? "llama3" : "default")
    << "\", \"rope_theta\": " << json_number(s.rotary_base);
  if (s.use_rope_scaling)
    d << ", \"factor\": " << json_number(s.rope_scaling_factor)
      << ", \"low_freq_factor\": " << json_number(s.rope_scaling_low_freq_factor)
      << ", \"high_freq_factor\": " << json_number(s.rope_scaling_high_freq_factor)
      << ", \"original_max_position_embeddings\": " << s.rope_scaling_original_max_position_embeddings;
  return d.str() + "}";
}

void read_rope(const json* v, Arguments& s, const std::string& where) {
  if (v == nullptr || v->is_null()) return;
  if (const auto* theta = member(v, "rope_theta"); theta && theta->is_number()) s.rotary_base = theta->get<double>();
  const std::string type = string_or(member(v, "rope_type"), string_or(member(v, "type"), "default"));
  if (type == "default") return;
  TORCH_CHECK(type == "llama3", "[convert_checkpoint] ", where, ": rope_type \"", type,
              "\" is not supported (default or llama3)");
  s.use_rope_scaling = true;
  s.rope_scaling_factor = number_or(member(v, "factor"), 8.0);
  s.rope_scaling_low_freq_factor = number_or(member(v, "low_freq_factor"), 1.0);
  s.rope_scaling_high_freq_factor = number_or(member(v, "high_freq_factor"), 4.0);
  s.rope_scaling_original_max_position_embeddings =
      positive_int_or(member(v, "original_max_position_embeddings"), 8192, "original_max_position_embeddings", where);
}

}  // namespace

// A window no shorter than the context changes nothing; a shorter one is attention this
// project does not compute. Without the key MistralConfig uses 4096 tokens.
void refuse_sliding_window(const json* v, Arguments& s, const std::string& where) {
  if (v != nullptr && v->is_null()) return;
  const json window = v ? *v : json(4096);
  TORCH_CHECK(window.is_number() && window.get<double>() >= static_cast<double>(s.max_position_embeddings),
              "[convert_checkpoint] ", where, ": sliding-window attention (sliding_window ",
              megatron::detail::excerpt(window.dump()), " < max_position_embeddings ", s.max_position_embeddings,
              ") is not supported");
}

// The keys every table of the family has (the table's own come after).
std::vector<ConfigRule> llama_config() {
  return {
      integer("hidden_size", &Arguments::hidden_size),
      ffn_size("intermediate_size", true),
      integer("num_hidden_layers", &Arguments::num_layers),
      integer("num_attention_heads", &Arguments::num_attention_heads),
      {"num_key_value_heads", [](const Arguments& s) { return std::to_string(s.num_query_groups); },
       [](const json* v, Arguments& s, const std::string& where) {
         s.num_query_groups = positive_int_or(v, s.num_attention_heads, "num_key_value_heads", where);
         s.group_query_attention = s.num_query_groups != s.num_attention_heads;
       }},
      {"head_dim",
       [](const Arguments& s) { return std::to_string(s.kv_channels.value_or(s.hidden_size / s.num_attention_heads)); },
       [](const json* v, Arguments& s, const std::string& where) {
         const auto d = positive_int_or(v, s.hidden_size / s.num_attention_heads, "head_dim", where);
         if (d * s.num_attention_heads != s.hidden_size) s.kv_channels = d;
       }},
      integer("max_position_embeddings", &Arguments::max_position_embeddings),
      real("rms_norm_eps", &Arguments::norm_epsilon, 1e-6),
      {"rope_theta", [](const Arguments& s) { return json_number(s.rotary_base); },
       [](const json* v, Arguments& s, const std::string&) { s.rotary_base = number_or(v, 10000.0); }},
      {"rope_scaling", [](const Arguments& s) { return s.use_rope_scaling ? rope_dict(s) : std::string("null"); },
       read_rope},
      {"rope_parameters", rope_dict, read_rope},
      {"hidden_act", [](const Arguments&) { return std::string("\"silu\""); },
       [](const json* v, Arguments&, const std::string& where) {
         const std::string act = string_or(v, "silu");
         TORCH_CHECK(act == "silu", "[convert_checkpoint] ", where, ": hidden_act \"", act, "\" is not silu");
       }},
      constant("attention_dropout", "0.0"),
  };
}

void llama_fixed(Arguments& s) {
  s.normalization = "RMSNorm";
  s.swiglu = true;
  s.position_embedding_type = "rope";
}

std::string llama_mismatch(const Arguments& s, bool with_experts, QkNorm qk_norm) {
  if (s.num_experts.has_value() != with_experts)
    return with_experts ? "has mixture-of-experts layers (--num-experts)"
                        : "has no mixture-of-experts layers (--num-experts)";
  const QkNorm has = !s.qk_layernorm               ? QkNorm::kNone
                     : s.qk_layernorm_across_heads ? QkNorm::kAcrossHeads
                                                   : QkNorm::kPerHead;
  if (has != qk_norm) switch (qk_norm) {
      case QkNorm::kNone: return "has no query and key norms (--qk-layernorm)";
      case QkNorm::kPerHead: return "normalises each head's query and key (--qk-layernorm, not across heads)";
      case QkNorm::kAcrossHeads: return "normalises the queries and keys across heads (--qk-layernorm-across-heads)";
    }
  if (s.position_embedding_type != "rope") return "needs rotary positions";
  if (s.normalization != "RMSNorm" || !s.swiglu || s.rotary_percent != 1.0) {
    std::ostringstream m;
    m << "needs --normalization RMSNorm, --swiglu and --rotary-percent 1; this checkpoint has --normalization "
      << s.normalization << (s.swiglu ? "" : " without --swiglu") << " --rotary-percent " << s.rotary_percent;
    return m.str();
  }
  if (s.rotary_interleaved) return "rotates the two halves of each head, not interleaved pairs (--rotary-interleaved)";
  if (s.embed_layernorm) return "has no LayerNorm on the word embeddings (--embed-layernorm)";
  return "";
}

Architecture llama_architecture() {
  Architecture a;
  a.model_type = "llama";
  a.class_name = "LlamaForCausalLM";
  a.tensors = llama_tensors({When::kWithBias, When::kWithBias, When::kWithBias});
  a.config = llama_config();
  a.config.push_back(
      {"attention_bias", [](const Arguments& s) { return json_bool(!s.disable_bias_linear); },
       [](const json* v, Arguments& s, const std::string&) { s.disable_bias_linear = !bool_or(v, false); }});
  a.config.push_back({"mlp_bias", [](const Arguments& s) { return json_bool(!s.disable_bias_linear); },
                      [](const json* v, Arguments& s, const std::string& where) {
                        TORCH_CHECK(bool_or(v, false) == !s.disable_bias_linear, "[convert_checkpoint] ", where,
                                    ": attention_bias and mlp_bias differ; megatron has one --disable-bias-linear");
                      }});
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = llama_fixed;
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = llama_mismatch(s); !m.empty()) return m;
    if (s.add_qkv_bias && s.disable_bias_linear) return "has no bias on q/k/v alone (--add-qkv-bias)";
    return "";
  };
  return a;
}

ConfigRule qwen2_sliding_window() {
  return {"use_sliding_window", [](const Arguments&) { return std::string("false"); },
          [](const json* v, Arguments&, const std::string& where) {
            TORCH_CHECK(!bool_or(v, false), "[convert_checkpoint] ", where,
                        ": sliding-window attention (use_sliding_window) is not supported");
          }};
}

void qwen2_fixed(Arguments& s) {
  llama_fixed(s);
  s.disable_bias_linear = true;
  s.add_qkv_bias = true;
}

std::string qwen2_biases_mismatch(const Arguments& s) {
  if (!s.disable_bias_linear || !s.add_qkv_bias)
    return "needs biases on q/k/v only (--disable-bias-linear --add-qkv-bias)";
  return "";
}

Architecture qwen2_architecture() {
  Architecture a;
  a.model_type = "qwen2";
  a.class_name = "Qwen2ForCausalLM";
  a.tensors = llama_tensors({When::kAlways, When::kNever, When::kNever});
  a.config = llama_config();
  a.config.push_back(qwen2_sliding_window());
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = qwen2_fixed;
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = llama_mismatch(s); !m.empty()) return m;
    return qwen2_biases_mismatch(s);
  };
  return a;
}

Architecture mistral_architecture() {
  Architecture a;
  a.model_type = "mistral";
  a.class_name = "MistralForCausalLM";
  a.tensors = llama_tensors({When::kNever, When::kNever, When::kNever});
  a.config = llama_config();
  // MistralConfig defaults to a 4096-token window when the key is absent: written as null.
  a.config.push_back({"sliding_window", [](const Arguments&) { return std::string("null"); }, refuse_sliding_window});
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = [](Arguments& s) {
    llama_fixed(s);
    s.disable_bias_linear = true;
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = llama_mismatch(s); !m.empty()) return m;
    if (!s.disable_bias_linear || s.add_qkv_bias) return "has no biases (--disable-bias-linear, no --add-qkv-bias)";
    return "";
  };
  return a;
}

std::vector<TensorRule> qwen3_qk_norms() {
  const std::string L = "decoder.layers.{i}.self_attention.", H = "model.layers.{i}.self_attn.";
  return {{L + "q_layernorm.weight", {H + "q_norm.weight"}, Transform::kNormWeight},
          {L + "k_layernorm.weight", {H + "k_norm.weight"}, Transform::kNormWeight}};
}

void qwen3_fixed(Arguments& s) {
  llama_fixed(s);
  s.disable_bias_linear = true;
  s.qk_layernorm = true;
}

// Qwen 3's attention_bias puts biases on q, k, v and o: a layout --add-qkv-bias does not make.
ConfigRule qwen3_attention_bias() {
  return {"attention_bias", [](const Arguments&) { return std::string("false"); },
          [](const json* v, Arguments&, const std::string& where) {
            TORCH_CHECK(!bool_or(v, false), "[convert_checkpoint] ", where,
                        ": attention_bias true (biases on q, k, v and o) is not supported");
          }};
}

Architecture qwen3_architecture() {
  Architecture a;
  a.model_type = "qwen3";
  a.class_name = "Qwen3ForCausalLM";
  a.tensors = llama_tensors({When::kNever, When::kNever, When::kNever});
  for (auto& r : qwen3_qk_norms()) a.tensors.push_back(std::move(r));
  a.config = llama_config();
  a.config.push_back(qwen3_attention_bias());
  a.config.push_back(qwen2_sliding_window());
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = qwen3_fixed;
  a.mismatch = [](const Arguments& s) -> std::string {
    if (auto m = llama_mismatch(s, /*with_experts=*/false, QkNorm::kPerHead); !m.empty()) return m;
    if (!s.disable_bias_linear || s.add_qkv_bias) return "has no biases (--disable-bias-linear, no --add-qkv-bias)";
    return "";
  };
  return a;
}

}  // namespace megatron::training::hf
