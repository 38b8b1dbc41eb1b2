// BloomForCausalLM: ALiBi, a LayerNorm on the word embeddings, tanh GELU, biases everywhere, the
// MLP 4 x hidden. Its fused query_key_value rows are [head][q, k, v][head dim], which is
// megatron's grouped linear_qkv with one group per head: copied as they are.
#include <c10/util/Exception.h>

#include <sstream>

#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

Architecture bloom_architecture() {
  Architecture a;
  a.model_type = "bloom";
  a.class_name = "BloomForCausalLM";
  a.name_prefix = "transformer.";
  const std::string L = "decoder.layers.{i}.", H = "transformer.h.{i}.";
  a.tensors = {
      {"embedding.word_embeddings.weight",
       {"transformer.word_embeddings.weight"},
       Transform::kCopy,
       When::kAlways,
       true},
      {"embedding.word_embeddings.norm.weight",
       {"transformer.word_embeddings_layernorm.weight"},
       Transform::kNormWeight},
      {"embedding.word_embeddings.norm.bias", {"transformer.word_embeddings_layernorm.bias"}},
      {L + "input_layernorm.weight", {H + "input_layernorm.weight"}, Transform::kNormWeight},
      {L + "input_layernorm.bias", {H + "input_layernorm.bias"}},
      {L + "self_attention.linear_qkv.weight", {H + "self_attention.query_key_value.weight"}},
      {L + "self_attention.linear_qkv.bias", {H + "self_attention.query_key_value.bias"}},
      {L + "self_attention.linear_proj.weight", {H + "self_attention.dense.weight"}},
      {L + "self_attention.linear_proj.bias", {H + "self_attention.dense.bias"}},
      {L + "pre_mlp_layernorm.weight", {H + "post_attention_layernorm.weight"}, Transform::kNormWeight},
      {L + "pre_mlp_layernorm.bias", {H + "post_attention_layernorm.bias"}},
      {L + "mlp.linear_fc1.weight", {H + "mlp.dense_h_to_4h.weight"}},
      {L + "mlp.linear_fc1.bias", {H + "mlp.dense_h_to_4h.bias"}},
      {L + "mlp.linear_fc2.weight", {H + "mlp.dense_4h_to_h.weight"}},
      {L + "mlp.linear_fc2.bias", {H + "mlp.dense_4h_to_h.bias"}},
      {"decoder.final_layernorm.weight", {"transformer.ln_f.weight"}, Transform::kNormWeight},
      {"decoder.final_layernorm.bias", {"transformer.ln_f.bias"}},
      {"output_layer.weight", {"lm_head.weight"}, Transform::kCopy, When::kUntied, true},
  };
  a.config = {
      // BloomConfig also takes the hidden size as "n_embed" (BLOOM's published configs use it).
      {"hidden_size", [](const Arguments& s) { return std::to_string(s.hidden_size); },
       [](const json* v, Arguments& s, const std::string& where) {
         s.hidden_size = positive_int_or(v, 0, "hidden_size", where);
       }},
      {"n_embed", [](const Arguments&) { return std::string(); },
       [](const json* v, Arguments& s, const std::string& where) {
         if (v) s.hidden_size = positive_int_or(v, 0, "n_embed", where);
         TORCH_CHECK(s.hidden_size >= 1, "[convert_checkpoint] ", where,
                     " has no positive \"hidden_size\" (or \"n_embed\")");
       }},
      integer("n_layer", &Arguments::num_layers),
      integer("n_head", &Arguments::num_attention_heads),
      real("layer_norm_epsilon", &Arguments::norm_epsilon, 1e-5),
      {"apply_residual_connection_post_layernorm", [](const Arguments&) { return std::string("false"); },
       [](const json* v, Arguments&, const std::string& where) {
         TORCH_CHECK(!bool_or(v, false), "[convert_checkpoint] ", where,
                     ": apply_residual_connection_post_layernorm (residuals from the normalised input) is not "
                     "supported");
       }},
      constant("hidden_dropout", "0.0"),
      constant("attention_dropout", "0.0"),
      constant("pretraining_tp", "1"),
      constant("slow_but_exact", "false"),
  };
  common_tail(a.config, /*tied_by_default=*/true);
  a.fixed = [](Arguments& s) {
    s.position_embedding_type = "alibi";
    s.embed_layernorm = true;
    s.openai_gelu = true;
    s.num_query_groups = s.num_attention_heads;
    s.ffn_hidden_size = 4 * s.hidden_size;
    // ALiBi has no position table; BLOOM was trained on 2048-token sequences.
    if (s.max_position_embeddings == 0) s.max_position_embeddings = 2048;
  };
  a.mismatch = [](const Arguments& s) -> std::string {
    if (s.num_experts) return "has no mixture-of-experts layers (--num-experts)";
    if (s.position_embedding_type != "alibi") return "needs ALiBi (--position-embedding-type alibi)";
    if (s.qk_layernorm) return "has no query and key norms (--qk-layernorm)";
    if (!s.embed_layernorm) return "needs the LayerNorm on the word embeddings (--embed-layernorm)";
    if (s.normalization != "LayerNorm" || s.swiglu || !s.openai_gelu || s.disable_bias_linear)
      return "needs LayerNorm, the tanh GELU (--openai-gelu) and biases; this checkpoint has --normalization " +
             s.normalization + (s.swiglu ? " --swiglu" : "") + (s.openai_gelu ? "" : " exact GELU") +
             (s.disable_bias_linear ? " --disable-bias-linear" : "");
    if (s.num_query_groups != s.num_attention_heads ||
        (s.kv_channels && *s.kv_channels * s.num_attention_heads != s.hidden_size) ||
        s.ffn_hidden_size.value_or(4 * s.hidden_size) != 4 * s.hidden_size)
      return "needs multi-head attention, --kv-channels = hidden / heads and --ffn-hidden-size = 4 x hidden";
    return "";
  };
  return a;
}

}  // namespace megatron::training::hf
