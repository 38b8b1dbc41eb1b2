// LlamaForCausalLM: rotary positions, RMSNorm, SwiGLU, grouped-query attention, optional biases.
#include <c10/util/Exception.h>

#include <sstream>

#include "hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

Architecture llama_architecture() {
  Architecture a;
  a.model_type = "llama";
  a.class_name = "LlamaForCausalLM";
  const std::string L = "decoder.layers.{i}.", H = "model.layers.{i}.";
  a.tensors = {
      {"embedding.word_embeddings.weight", {"model.embed_tokens.weight"}, Transform::kCopy, When::kAlways, true},
      {L + "input_layernorm.weight", {H + "input_layernorm.weight"}, Transform::kNormWeight},
      {L + "pre_mlp_layernorm.weight", {H + "post_attention_layernorm.weight"}, Transform::kNormWeight},
      {L + "self_attention.linear_qkv.weight",
       {H + "self_attn.q_proj.weight", H + "self_attn.k_proj.weight", H + "self_attn.v_proj.weight"},
       Transform::kQkv},
      {L + "self_attention.linear_proj.weight", {H + "self_attn.o_proj.weight"}},
      {L + "mlp.linear_fc1.weight", {H + "mlp.gate_proj.weight", H + "mlp.up_proj.weight"}, Transform::kGateUp},
      {L + "mlp.linear_fc2.weight", {H + "mlp.down_proj.weight"}},
      {L + "self_attention.linear_qkv.bias",
       {H + "self_attn.q_proj.bias", H + "self_attn.k_proj.bias", H + "self_attn.v_proj.bias"},
       Transform::kQkv,
       When::kWithBias},
      {L + "self_attention.linear_proj.bias", {H + "self_attn.o_proj.bias"}, Transform::kCopy, When::kWithBias},
      {L + "mlp.linear_fc1.bias",
       {H + "mlp.gate_proj.bias", H + "mlp.up_proj.bias"},
       Transform::kGateUp,
       When::kWithBias},
      {L + "mlp.linear_fc2.bias", {H + "mlp.down_proj.bias"}, Transform::kCopy, When::kWithBias},
      {"decoder.final_layernorm.weight", {"model.norm.weight"}, Transform::kNormWeight},
      {"output_layer.weight", {"lm_head.weight"}, Transform::kCopy, When::kUntied, true},
  };
  a.config = {
      integer("hidden_size", &Arguments::hidden_size),
      ffn_size("intermediate_size", true),
      integer("num_hidden_layers", &Arguments::num_layers),
      integer("num_attention_heads", &Arguments::num_attention_heads),
      {"num_key_value_heads", [](const Arguments& s) { return std::to_string(s.num_query_groups); },
       [](const json* v, Arguments& s, const std::string&) {
         s.num_query_groups = static_cast<int64_t>(number_or(v, static_cast<double>(s.num_attention_heads)));
         s.group_query_attention = s.num_query_groups != s.num_attention_heads;
       }},
      {"head_dim",
       [](const Arguments& s) { return std::to_string(s.kv_channels.value_or(s.hidden_size / s.num_attention_heads)); },
       [](const json* v, Arguments& s, const std::string&) {
         const auto d = static_cast<int64_t>(number_or(v, static_cast<double>(s.hidden_size / s.num_attention_heads)));
         if (d * s.num_attention_heads != s.hidden_size) s.kv_channels = d;
       }},
      integer("max_position_embeddings", &Arguments::max_position_embeddings),
      real("rms_norm_eps", &Arguments::norm_epsilon, 1e-6),
      real("rope_theta", &Arguments::rotary_base, 10000.0),
      {"rope_parameters",
       [](const Arguments& s) {
         return "{\"rope_type\": \"default\", \"rope_theta\": " + json_number(s.rotary_base) + "}";
       },
       [](const json* v, Arguments& s, const std::string&) {
         if (const auto* theta = member(v, "rope_theta"); theta && theta->is_number())
           s.rotary_base = theta->get<double>();
       }},
      {"attention_bias", [](const Arguments& s) { return json_bool(!s.disable_bias_linear); },
       [](const json* v, Arguments& s, const std::string&) { s.disable_bias_linear = !bool_or(v, false); }},
      {"mlp_bias", [](const Arguments& s) { return json_bool(!s.disable_bias_linear); },
       [](const json* v, Arguments& s, const std::string& where) {
         TORCH_CHECK(bool_or(v, false) == !s.disable_bias_linear, "[convert_checkpoint] ", where,
                     ": attention_bias and mlp_bias differ; megatron has one --disable-bias-linear");
       }},
      {"hidden_act", [](const Arguments&) { return std::string("\"silu\""); },
       [](const json* v, Arguments&, const std::string& where) {
         const std::string act = string_or(v, "silu");
         TORCH_CHECK(act == "silu", "[convert_checkpoint] ", where, ": hidden_act \"", act, "\" is not silu");
       }},
      constant("attention_dropout", "0.0"),
  };
  common_tail(a.config, /*tied_by_default=*/false);
  a.fixed = [](Arguments& s) {
    s.normalization = "RMSNorm";
    s.swiglu = true;
    s.position_embedding_type = "rope";
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (s.position_embedding_type != "rope") return "needs rotary positions";
    if (s.normalization != "RMSNorm" || !s.swiglu || s.rotary_percent != 1.0) {
      std::ostringstream m;
      m << "needs --normalization RMSNorm, --swiglu and --rotary-percent 1; this checkpoint has --normalization "
        << s.normalization << (s.swiglu ? "" : " without --swiglu") << " --rotary-percent " << s.rotary_percent;
      return m.str();
    }
    return "";
  };
  return a;
}

}  // namespace megatron::training::hf
