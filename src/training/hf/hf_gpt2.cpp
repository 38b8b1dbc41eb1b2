// GPT2LMHeadModel: learned positions, LayerNorm, GELU, biases; Conv1D weights stored [in, out].
#include <c10/util/Exception.h>

#include <sstream>

#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

Architecture gpt2_architecture() {
  Architecture a;
  a.model_type = "gpt2";
  a.class_name = "GPT2LMHeadModel";
  a.name_prefix = "transformer.";
  const std::string L = "decoder.layers.{i}.", H = "transformer.h.{i}.";
  a.tensors = {
      {"embedding.word_embeddings.weight", {"transformer.wte.weight"}, Transform::kCopy, When::kAlways, true},
      {"embedding.position_embeddings.weight", {"transformer.wpe.weight"}},
      {L + "input_layernorm.weight", {H + "ln_1.weight"}, Transform::kNormWeight},
      {L + "input_layernorm.bias", {H + "ln_1.bias"}},
      {L + "pre_mlp_layernorm.weight", {H + "ln_2.weight"}, Transform::kNormWeight},
      {L + "pre_mlp_layernorm.bias", {H + "ln_2.bias"}},
      {L + "self_attention.linear_qkv.weight", {H + "attn.c_attn.weight"}, Transform::kQkvConcatConv1D},
      {L + "self_attention.linear_qkv.bias", {H + "attn.c_attn.bias"}, Transform::kQkvConcat},
      {L + "self_attention.linear_proj.weight", {H + "attn.c_proj.weight"}, Transform::kTranspose},
      {L + "self_attention.linear_proj.bias", {H + "attn.c_proj.bias"}},
      {L + "mlp.linear_fc1.weight", {H + "mlp.c_fc.weight"}, Transform::kTranspose},
      {L + "mlp.linear_fc1.bias", {H + "mlp.c_fc.bias"}},
      {L + "mlp.linear_fc2.weight", {H + "mlp.c_proj.weight"}, Transform::kTranspose},
      {L + "mlp.linear_fc2.bias", {H + "mlp.c_proj.bias"}},
      {"decoder.final_layernorm.weight", {"transformer.ln_f.weight"}, Transform::kNormWeight},
      {"decoder.final_layernorm.bias", {"transformer.ln_f.bias"}},
      {"output_layer.weight", {"lm_head.weight"}, Transform::kCopy, When::kUntied, true},
  };
  a.config = {
      integer("n_embd", &Arguments::hidden_size),
      ffn_size("n_inner", false),
      integer("n_layer", &Arguments::num_layers),
      integer("n_head", &Arguments::num_attention_heads),
      integer("n_positions", &Arguments::max_position_embeddings),
      real("layer_norm_epsilon", &Arguments::norm_epsilon, 1e-5),
      {"activation_function", [](const Arguments& a) { return json_string(a.openai_gelu ? "gelu_new" : "gelu"); },
       [](const json* v, Arguments& a, const std::string& where) {
         const std::string act = string_or(v, "gelu_new");
         TORCH_CHECK(act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh", "[convert_checkpoint] ", where,
                     ": activation_function \"", act, "\" is not gelu, gelu_new or gelu_pytorch_tanh");
         a.openai_gelu = act != "gelu";
       }},
      constant("resid_pdrop", "0.0"),
      constant("embd_pdrop", "0.0"),
      constant("attn_pdrop", "0.0"),
  };
  common_tail(a.config, /*tied_by_default=*/true);
  a.fixed = [](Arguments& s) { s.num_query_groups = s.num_attention_heads; };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (s.num_experts) return "has no mixture-of-experts layers (--num-experts)";
    if (s.qk_layernorm) return "has no query and key norms (--qk-layernorm)";
    if (s.position_embedding_type != "learned_absolute") return "needs learned positions";
    if (s.embed_layernorm) return "has no LayerNorm on the word embeddings (--embed-layernorm)";
    if (s.normalization != "LayerNorm" || s.swiglu || s.disable_bias_linear)
      return "needs LayerNorm, GELU and biases; this checkpoint has --normalization " + s.normalization +
             (s.swiglu ? " --swiglu" : "") + (s.disable_bias_linear ? " --disable-bias-linear" : "");
    if (s.num_query_groups != s.num_attention_heads ||
        (s.kv_channels && *s.kv_channels * s.num_attention_heads != s.hidden_size))
      return "needs plain multi-head attention (no --group-query-attention, --kv-channels = hidden / heads)";
    return "";
  };
  return a;
}

}  // namespace megatron::training::hf
