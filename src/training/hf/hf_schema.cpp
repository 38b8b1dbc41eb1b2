// The walks over the Hugging Face tables: tensors out and in, config.json out and in.
#include "training/hf/hf_schema.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <array>
#include <sstream>

#include "training/arguments/moe_arguments.h"

namespace megatron::training::hf {

using nlohmann::json;

namespace {

// The shape of one of our parameters at TP 1 for these settings (nullopt: not a parameter the
// schema knows), against which every imported tensor is checked.
std::optional<std::vector<int64_t>> expected_shape(const std::string& name, const Arguments& a) {
  const int64_t h = a.hidden_size, v = a.vocab_size.value_or(0);
  const int64_t d = a.kv_channels.value_or(h / a.num_attention_heads);
  const int64_t q = a.num_attention_heads * d, kv = a.num_query_groups * d;
  auto ends = [&](const char* suffix) {
    const std::string s = suffix;
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  // An MoE layer's MLPs: the experts', the shared expert's, each of its own width.
  const int64_t dense_ffn = a.ffn_hidden_size.value_or(4 * h);
  const int64_t ffn = has(".mlp.experts.")          ? a.moe_ffn_hidden_size.value_or(dense_ffn)
                      : has(".mlp.shared_experts.") ? a.moe_shared_expert_intermediate_size.value_or(0)
                                                    : dense_ffn;
  const int64_t fc1 = a.swiglu ? 2 * ffn : ffn;
  if (ends("mlp.router.weight")) return {{a.num_experts.value_or(0), h}};
  if (ends("shared_experts.gate_weight")) return {{1, h}};
  if (name == "embedding.word_embeddings.weight" || name == "output_layer.weight") return {{v, h}};
  if (name == "embedding.position_embeddings.weight") return {{a.max_position_embeddings, h}};
  if (ends("q_layernorm.weight")) return {{a.qk_layernorm_across_heads ? q : d}};
  if (ends("k_layernorm.weight")) return {{a.qk_layernorm_across_heads ? kv : d}};
  if (ends("norm.weight") || ends("norm.bias")) return {{h}};
  if (ends("linear_qkv.weight")) return {{q + 2 * kv, h}};
  if (ends("linear_qkv.bias")) return {{q + 2 * kv}};
  if (ends("linear_proj.weight")) return {{h, q}};
  if (ends("linear_fc1.weight")) return {{fc1, h}};
  if (ends("linear_fc1.bias")) return {{fc1}};
  if (ends("linear_fc2.weight")) return {{h, ffn}};
  if (ends("linear_proj.bias") || ends("linear_fc2.bias")) return {{h}};
  return std::nullopt;
}

std::string shape_text(c10::IntArrayRef shape) {
  std::ostringstream s;
  s << shape;
  return s.str();
}

}  // namespace

namespace {

// The {i} of a layer rule, or the {e} of an expert's.
std::string at_index(const std::string& pattern, const char* field, int64_t i) {
  const size_t at = pattern.find(field);
  return at == std::string::npos ? pattern : pattern.substr(0, at) + std::to_string(i) + pattern.substr(at + 3);
}

bool present(const TensorRule& r, const Arguments& a) {
  switch (r.when) {
    case When::kWithBias: return !a.disable_bias_linear;
    case When::kUntied: return a.untie_embeddings_and_output_weights;
    case When::kAlways: return true;
    case When::kNever: return false;
  }
  return true;
}

// megatron's grouped linear_qkv rows [groups, per + 2, d (, h)] <-> q [heads*d], k, v [groups*d].
struct QkvShape {
  int64_t groups, per, d;
};
QkvShape qkv_shape(const Arguments& a) {
  const int64_t d = a.kv_channels.value_or(a.hidden_size / a.num_attention_heads);
  return {a.num_query_groups, a.num_attention_heads / a.num_query_groups, d};
}
std::array<at::Tensor, 3> split_qkv(const at::Tensor& t, const QkvShape& s) {
  const bool weight = t.dim() == 2;
  auto g = weight ? t.view({s.groups, s.per + 2, s.d, t.size(1)}) : t.view({s.groups, s.per + 2, s.d});
  auto rows = [&](const at::Tensor& x) { return weight ? x.reshape({-1, t.size(1)}) : x.reshape({-1}); };
  return {rows(g.narrow(1, 0, s.per)), rows(g.narrow(1, s.per, 1)), rows(g.narrow(1, s.per + 1, 1))};
}
at::Tensor fuse_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const QkvShape& s) {
  const bool weight = q.dim() == 2;
  auto shape = [&](int64_t n) {
    return weight ? std::vector<int64_t>{s.groups, n, s.d, q.size(1)} : std::vector<int64_t>{s.groups, n, s.d};
  };
  auto fused = at::cat({q.reshape(shape(s.per)), k.reshape(shape(1)), v.reshape(shape(1))}, 1);
  return weight ? fused.reshape({-1, q.size(1)}) : fused.reshape({-1});
}

std::vector<at::Tensor> to_hf(const TensorRule& r, const at::Tensor& t, const Arguments& a) {
  const auto s = qkv_shape(a);
  switch (r.transform) {
    case Transform::kCopy: return {t};
    case Transform::kTranspose: return {t.t()};
    case Transform::kQkv: {
      const auto p = split_qkv(t, s);
      return {p[0], p[1], p[2]};
    }
    case Transform::kQkvConcat: {
      const auto p = split_qkv(t, s);
      return {at::cat({p[0], p[1], p[2]})};
    }
    case Transform::kQkvConcatConv1D: {
      const auto p = split_qkv(t, s);
      return {at::cat({p[0], p[1], p[2]}).t()};
    }
    case Transform::kGateUp: {
      const int64_t ffn = t.size(0) / 2;
      return {t.narrow(0, 0, ffn), t.narrow(0, ffn, ffn)};
    }
    case Transform::kNormWeight: return {a.apply_layernorm_1p ? t + 1 : t};
  }
  TORCH_INTERNAL_ASSERT(false);
}

at::Tensor from_hf(const TensorRule& r, const std::vector<at::Tensor>& p, const Arguments& a) {
  const auto s = qkv_shape(a);
  auto split_concat = [&](const at::Tensor& t) {
    return t.split_with_sizes({s.groups * s.per * s.d, s.groups * s.d, s.groups * s.d});
  };
  switch (r.transform) {
    case Transform::kCopy: return p[0];
    case Transform::kTranspose: return p[0].t();
    case Transform::kQkv: return fuse_qkv(p[0], p[1], p[2], s);
    case Transform::kQkvConcat: {
      const auto q = split_concat(p[0]);
      return fuse_qkv(q[0], q[1], q[2], s);
    }
    case Transform::kQkvConcatConv1D: {
      const auto q = split_concat(p[0].t());
      return fuse_qkv(q[0], q[1], q[2], s);
    }
    case Transform::kGateUp: return at::cat({p[0], p[1]});
    case Transform::kNormWeight: return a.apply_layernorm_1p ? p[0] - 1 : p[0];
  }
  TORCH_INTERNAL_ASSERT(false);
}

// Calls fn(rule, megatron name, hf names) for every tensor the settings have, layers (of the
// rule's kind) and experts expanded.
template <typename F>
void walk(const Architecture& arch, const Arguments& a, F&& fn) {
  const auto moe = a.num_experts ? detail::moe_layer_pattern(a.moe_layer_freq, a.num_layers)
                                 : std::vector<int64_t>(static_cast<size_t>(a.num_layers), 0);
  for (const auto& r : arch.tensors) {
    if (!present(r, a)) continue;
    const bool per_layer = r.megatron.find("{i}") != std::string::npos;
    const bool per_expert = r.megatron.find("{e}") != std::string::npos;
    for (int64_t i = 0; i < (per_layer ? a.num_layers : 1); ++i) {
      if (per_layer && r.layers != Layers::kAll && (moe[static_cast<size_t>(i)] != 0) != (r.layers == Layers::kMoE))
        continue;
      for (int64_t e = 0; e < (per_expert ? a.num_experts.value_or(0) : 1); ++e) {
        std::vector<std::string> hf;
        for (const auto& h : r.hf) hf.push_back(at_index(at_index(h, "{i}", i), "{e}", e));
        fn(r, at_index(at_index(r.megatron, "{i}", i), "{e}", e), hf);
      }
    }
  }
}

}  // namespace

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = {
      gpt2_architecture(),  llama_architecture(),   qwen2_architecture(),     mistral_architecture(),
      qwen3_architecture(), mixtral_architecture(), qwen2_moe_architecture(), qwen3_moe_architecture(),
      olmoe_architecture(), bloom_architecture()};
  return all;
}

const Architecture& architecture_of_model_type(const std::string& type, const std::string& where) {
  std::string supported;
  for (const auto& arch : architectures()) {
    if (arch.model_type == type) return arch;
    supported += (supported.empty() ? "" : ", ") + arch.model_type;
  }
  TORCH_CHECK(false, "[convert_checkpoint] ", where, ": model_type \"", type, "\" is not supported (", supported, ")");
}

const Architecture& architecture_of(const Arguments& args, const std::string& model_type) {
  if (!model_type.empty()) {
    const auto& arch = architecture_of_model_type(model_type, "--hf-model-type");
    const std::string m = arch.mismatch(args);
    TORCH_CHECK(m.empty(), "[convert_checkpoint] --hf-model-type ", model_type, ": ", arch.class_name, " ", m);
    return arch;
  }
  std::string why;
  for (const auto& arch : architectures()) {
    const std::string m = arch.mismatch(args);
    if (m.empty()) return arch;
    why += "; " + arch.class_name + " " + m;
  }
  TORCH_CHECK(false, "[convert_checkpoint] no Hugging Face architecture fits this checkpoint", why);
}

std::map<std::string, at::Tensor> export_tensors(const Architecture& arch, const Arguments& args,
                                                 const std::map<std::string, at::Tensor>& model, int64_t true_vocab) {
  std::map<std::string, at::Tensor> out;
  walk(arch, args, [&](const TensorRule& r, const std::string& name, const std::vector<std::string>& hf) {
    auto it = model.find(name);
    TORCH_CHECK(it != model.end(), "[convert_checkpoint] the checkpoint has no ", name);
    const at::Tensor t = r.vocab_rows ? it->second.narrow(0, 0, true_vocab) : it->second;
    const auto parts = to_hf(r, t, args);
    for (size_t k = 0; k < hf.size(); ++k) out[hf[k]] = parts[k].contiguous();
  });
  return out;
}

std::map<std::string, at::Tensor> import_tensors(const Architecture& arch, const Arguments& args,
                                                 const std::map<std::string, at::Tensor>& hf,
                                                 const std::string& where) {
  auto get = [&](const std::string& name) {
    auto it = hf.find(name);
    // Hub files of some model types leave out the top module's prefix.
    if (it == hf.end() && !arch.name_prefix.empty() && name.rfind(arch.name_prefix, 0) == 0)
      it = hf.find(name.substr(arch.name_prefix.size()));
    TORCH_CHECK(it != hf.end(), "[convert_checkpoint] ", where, " has no tensor ", name);
    // Every tensor the schema imports is a weight; integers would become weights silently.
    TORCH_CHECK(at::isFloatingType(it->second.scalar_type()), "[convert_checkpoint] ", where, ": tensor ", name, " is ",
                it->second.scalar_type(), "; model weights are floating point (F32, F16, BF16 or F64)");
    return it->second;
  };
  std::map<std::string, at::Tensor> out;
  walk(arch, args, [&](const TensorRule& r, const std::string& name, const std::vector<std::string>& names) {
    std::vector<at::Tensor> parts;
    std::string given;  // "name [shape]" of each part, for the error
    for (const auto& n : names) {
      parts.push_back(get(n));
      given += (given.empty() ? "" : ", ") + n + " " + shape_text(parts.back().sizes());
    }
    const auto want = expected_shape(name, args);
    at::Tensor t;
    try {
      t = from_hf(r, parts, args).contiguous();
    } catch (const c10::Error&) {
      TORCH_CHECK(false, "[convert_checkpoint] ", where, ": ", given, " do not fit config.json (", name, " must be ",
                  want ? shape_text(*want) : "other", ")");
    }
    TORCH_CHECK(!want || t.sizes() == c10::IntArrayRef(*want), "[convert_checkpoint] ", where, ": ", given, " give ",
                name, " of shape ", shape_text(t.sizes()), "; config.json implies ", shape_text(*want));
    out[name] = std::move(t);
  });
  return out;
}

std::string export_config(const Architecture& arch, const Arguments& args, int64_t true_vocab,
                          const std::string& torch_dtype, const SpecialTokenIds& special) {
  Arguments a = args;
  a.vocab_size = true_vocab;
  std::ostringstream c;
  c << "{\n  \"architectures\": [" << json_string(arch.class_name)
    << "],\n  \"model_type\": " << json_string(arch.model_type) << ",\n";
  for (const auto& rule : arch.config) {
    const std::string value = rule.write(a);
    if (!value.empty()) c << "  " << json_string(rule.key) << ": " << value << ",\n";
  }
  for (const auto& [key, id] : {std::pair{"bos_token_id", special.bos}, {"eos_token_id", special.eos}}) {
    if (id >= 0) c << "  \"" << key << "\": " << id << ",\n";
  }
  c << "  \"torch_dtype\": " << json_string(torch_dtype) << "\n}\n";
  return c.str();
}

Arguments import_config(const Architecture& arch, const json& config, const std::string& where) {
  TORCH_CHECK(config.is_object(), "[convert_checkpoint] ", where, ": expected a JSON object, found ",
              config.type_name());
  Arguments a;
  for (const auto& rule : arch.config) rule.read(member(&config, rule.key.c_str()), a, where);
  arch.fixed(a);
  TORCH_CHECK(a.num_query_groups >= 1 && a.num_attention_heads % a.num_query_groups == 0, "[convert_checkpoint] ",
              where, ": ", a.num_attention_heads, " attention heads are not divisible into ", a.num_query_groups,
              " key/value heads");
  TORCH_CHECK(a.kv_channels.value_or(1) >= 1 && (a.kv_channels || a.hidden_size % a.num_attention_heads == 0),
              "[convert_checkpoint] ", where, ": hidden size ", a.hidden_size, " is not divisible by ",
              a.num_attention_heads, " attention heads");
  a.seq_length = a.max_position_embeddings;
  return a;
}

}  // namespace megatron::training::hf
