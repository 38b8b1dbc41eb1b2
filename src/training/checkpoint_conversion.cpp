#include "megatron/training/checkpoint_conversion.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "megatron/models/common/safetensors.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/tensor_parallel/sharding.h"
#include "megatron/tokenizer/json.h"
#include "megatron/training/arguments.h"
#include "megatron/training/checkpointing.h"

namespace megatron::training {
namespace fs = std::filesystem;
using GenericDict = c10::impl::GenericDict;
using ParamState = std::map<std::string, at::Tensor>;

namespace {

// A checkpoint with full (TP = 1) tensors under global layer numbers.
struct FullCheckpoint {
  GenericDict args = GenericDict(c10::StringType::get(), c10::AnyType::get());
  training::Arguments a;
  std::optional<int64_t> iteration;  // nullopt: release
  int64_t true_vocab = 0, padded_vocab = 0;
  std::map<std::string, at::Tensor> model;
  std::map<std::string, ParamState> optim;  // empty: no optimizer state
  c10::IValue grad_scaler, scheduler;
  int64_t consumed_train = 0, consumed_valid = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How megatron/core splits each parameter over TP ranks: column-parallel layers (fused QKV, fc1,
// the vocabulary) along dim 0, row-parallel ones (proj, fc2) along dim 1, the rest replicated.
tensor_parallel::ShardLayout layout_of(const std::string& name, bool swiglu, int rank, int size) {
  if (name == "embedding.word_embeddings.weight" || name == "output_layer.weight" ||
      ends_with(name, ".self_attention.linear_qkv.weight") || ends_with(name, ".self_attention.linear_qkv.bias"))
    return {0, 1, rank, size};
  if (ends_with(name, ".mlp.linear_fc1.weight") || ends_with(name, ".mlp.linear_fc1.bias"))
    return {0, swiglu ? 2 : 1, rank, size};
  if (ends_with(name, ".self_attention.linear_proj.weight") || ends_with(name, ".mlp.linear_fc2.weight"))
    return {1, 1, rank, size};
  return {-1, 1, rank, size};
}

bool is_vocab_param(const std::string& name) {
  return name == "embedding.word_embeddings.weight" || name == "output_layer.weight";
}

int64_t chunks_of(const training::Arguments& a) { return a.virtual_pipeline_model_parallel_size.value_or(1); }
int64_t layers_per_chunk(const training::Arguments& a) {
  return a.num_layers / (a.pipeline_model_parallel_size * chunks_of(a));
}
// First global layer of model chunk v on pipeline stage p (Megatron-LM's split).
int64_t layer_offset(const training::Arguments& a, int64_t p, int64_t v) {
  return v * (a.num_layers / chunks_of(a)) + p * layers_per_chunk(a);
}

// "decoder.layers.3.x" -> "decoder.layers.<3 + delta>.x"; other names unchanged.
std::string shift_layer(const std::string& name, int64_t delta) {
  const std::string prefix = "decoder.layers.";
  if (name.rfind(prefix, 0) != 0) return name;
  const size_t dot = name.find('.', prefix.size());
  const int64_t i = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  return prefix + std::to_string(i + delta) + name.substr(dot);
}

// Which global names model chunk v of stage p holds.
bool belongs(const training::Arguments& a, const std::string& global, int64_t p, int64_t v) {
  const bool first = p == 0 && v == 0;
  const bool last = p == a.pipeline_model_parallel_size - 1 && v == chunks_of(a) - 1;
  if (global.rfind("embedding.", 0) == 0) return first;
  if (global.rfind("decoder.final_layernorm.", 0) == 0) return last;
  if (global == "output_layer.weight") return last;
  const std::string prefix = "decoder.layers.";
  TORCH_CHECK(global.rfind(prefix, 0) == 0, "[convert_checkpoint] unexpected parameter ", global);
  const int64_t i = std::stoll(global.substr(prefix.size()));
  const int64_t begin = layer_offset(a, p, v);
  return i >= begin && i < begin + layers_per_chunk(a);
}

std::string model_key(const training::Arguments& a, int64_t v) {
  return chunks_of(a) > 1 ? "model" + std::to_string(v) : "model";
}

const c10::IValue& entry(const GenericDict& d, const std::string& key, const std::string& file) {
  auto it = d.find(key);
  TORCH_CHECK(it != d.end(), "[convert_checkpoint] ", file, " has no '", key, "'");
  return it->value();
}

// Re-pads the vocabulary rows of an embedding-shaped tensor: keeps them when the padded size is
// unchanged, else keeps the true vocabulary and pads with zeros.
at::Tensor repad(const at::Tensor& t, int64_t true_vocab, int64_t padded) {
  if (t.size(0) == padded) return t;
  auto rows = t.narrow(0, 0, true_vocab);
  if (padded == true_vocab) return rows.contiguous();
  auto pad_shape = t.sizes().vec();
  pad_shape[0] = padded - true_vocab;
  return at::cat({rows, at::zeros(pad_shape, t.options())});
}

FullCheckpoint read_full(const std::string& dir, std::optional<int64_t> step) {
  FullCheckpoint f;
  if (step) {
    f.iteration = step;
  } else {
    auto tracker = training::read_tracker(dir);
    TORCH_CHECK(tracker, "[convert_checkpoint] ", dir, " has no ", training::kTrackerFileName);
    f.iteration = tracker->iteration;
  }
  const std::string iter_dir = (fs::path(dir) / training::iteration_dir_name(f.iteration)).string();
  const bool pipelined = !fs::is_directory(fs::path(iter_dir) / "mp_rank_00");
  auto file_of = [&](int t, int p, int pp) {
    return (fs::path(iter_dir) / training::rank_dir_name(t, p, pp) / training::kModelFileName).string();
  };
  const std::string first_file = file_of(0, 0, pipelined ? 2 : 1);
  const auto first = training::read_checkpoint_file(first_file).toGenericDict();
  f.args = entry(first, "args", first_file).toGenericDict().copy();
  f.a = training::arguments_from_dict(f.args);
  const auto& a = f.a;
  const int tp = static_cast<int>(a.tensor_model_parallel_size), pp = static_cast<int>(a.pipeline_model_parallel_size);
  auto padded_it = f.args.find("padded_vocab_size");
  auto true_it = f.args.find("true_vocab_size");
  std::map<std::string, std::vector<at::Tensor>> shards;
  std::map<std::string, std::map<std::string, std::vector<at::Tensor>>> optim_shards;
  bool has_optim = true;
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      const std::string file = file_of(t, p, pp);
      const auto d = (p == 0 && t == 0) ? first : training::read_checkpoint_file(file).toGenericDict();
      for (int64_t v = 0; v < chunks_of(a); ++v) {
        const int64_t offset = layer_offset(a, p, v);
        const bool tied_copy = !a.untie_embeddings_and_output_weights && !(p == 0 && v == 0);
        for (const auto& e : entry(d, model_key(a, v), file).toGenericDict()) {
          const std::string& name = e.key().toStringRef();
          if (tied_copy && name == "output_layer.weight") continue;  // the first stage's embedding
          shards[shift_layer(name, offset)].push_back(e.value().toTensor());
        }
      }
      auto opt = d.find("optimizer");
      if (opt == d.end()) {
        has_optim = false;
        continue;
      }
      const auto od = opt->value().toGenericDict();
      const auto rank_dir = fs::path(file).parent_path();
      GenericDict param_state = od.find("param_state") != od.end()
                                    ? entry(od, "param_state", file).toGenericDict()
                                    : entry(training::read_checkpoint_file((rank_dir / training::kDistribOptimFileName).string())
                                                .toGenericDict(),
                                            "param_state", file)
                                          .toGenericDict();
      for (const auto& e : param_state) {
        std::string name = e.key().toStringRef();
        int64_t v = 0;
        if (chunks_of(a) > 1) {  // "model<v>.<name>"
          const size_t dot = name.find('.');
          v = std::stoll(name.substr(5, dot - 5));
          name = name.substr(dot + 1);
        }
        const bool tied_copy = !a.untie_embeddings_and_output_weights && !(p == 0 && v == 0);
        if (tied_copy && name == "output_layer.weight") continue;
        const std::string global = shift_layer(name, layer_offset(a, p, v));
        for (const auto& s : e.value().toGenericDict()) optim_shards[global][s.key().toStringRef()].push_back(s.value().toTensor());
      }
      if (p == 0 && t == 0) {
        f.grad_scaler = entry(od, "grad_scaler", file);
        f.scheduler = entry(d, "opt_param_scheduler", file);
      }
    }
  }
  for (auto& [name, parts] : shards) f.model[name] = layout_of(name, a.swiglu, 0, tp).unshard(parts);
  if (has_optim) {
    for (auto& [name, kinds] : optim_shards) {
      for (auto& [kind, parts] : kinds)
        f.optim[name][kind] = parts.front().dim() == 0 ? parts.front() : layout_of(name, a.swiglu, 0, tp).unshard(parts);
    }
  }
  f.padded_vocab = padded_it != f.args.end() ? padded_it->value().toInt()
                                             : f.model.at("embedding.word_embeddings.weight").size(0);
  f.true_vocab = true_it != f.args.end() ? true_it->value().toInt() : f.a.vocab_size.value_or(f.padded_vocab);
  if (!f.iteration) return f;
  f.consumed_train = entry(first, "consumed_train_samples", first_file).toInt();
  f.consumed_valid = entry(first, "consumed_valid_samples", first_file).toInt();
  return f;
}

GenericDict new_dict() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }

void write_full(const FullCheckpoint& f, const std::string& save, int tp, int pp, std::optional<int64_t> vp_layers) {
  training::Arguments a = f.a;
  a.tensor_model_parallel_size = tp;
  a.pipeline_model_parallel_size = pp;
  a.num_layers_per_virtual_pipeline_stage = vp_layers;
  a.num_virtual_stages_per_pipeline_rank.reset();
  TORCH_CHECK(a.num_layers % pp == 0, "[convert_checkpoint] --num-layers (", a.num_layers,
              ") is not divisible by --target-pipeline-model-parallel-size (", pp, ")");
  a.virtual_pipeline_model_parallel_size.reset();
  if (vp_layers) {
    TORCH_CHECK(pp > 1 && *vp_layers > 0 && (a.num_layers / pp) % *vp_layers == 0,
                "[convert_checkpoint] --target-num-layers-per-virtual-pipeline-stage ", *vp_layers,
                " must divide the ", a.num_layers / pp, " layers per stage (and needs PP > 1)");
    a.virtual_pipeline_model_parallel_size = a.num_layers / pp / *vp_layers;
  }
  TORCH_CHECK(a.num_attention_heads % tp == 0 && a.num_query_groups % tp == 0, "[convert_checkpoint] ",
              a.num_attention_heads, " heads / ", a.num_query_groups,
              " query groups are not divisible by --target-tensor-parallel-size ", tp);
  const int64_t padded = models::gpt::vocab_size_with_padding(f.true_vocab, a.make_vocab_size_divisible_by, tp);
  GenericDict args = f.args.copy();
  for (const auto& e : training::arguments_to_dict(a)) args.insert_or_assign(e.key(), e.value());
  args.insert_or_assign("padded_vocab_size", padded);
  args.insert_or_assign("true_vocab_size", f.true_vocab);

  const std::string final_dir = (fs::path(save) / training::iteration_dir_name(f.iteration)).string();
  const std::string staging = final_dir + ".tmp";
  fs::create_directories(save);
  training::remove_tree(staging);
  fs::create_directories(staging);
  auto shard = [&](const std::string& global, const at::Tensor& full, int t) {
    at::Tensor x = full.dim() > 0 && is_vocab_param(global) ? repad(full, f.true_vocab, padded) : full;
    if (x.dim() == 0) return x;
    return layout_of(global, a.swiglu, t, tp).shard(x);
  };
  // The tied output layer of a last stage that is not the first is a copy of the embedding.
  auto source_name = [&](const std::string& global) {
    if (global == "output_layer.weight" && !a.untie_embeddings_and_output_weights) return std::string("embedding.word_embeddings.weight");
    return global;
  };
  std::vector<std::string> globals;
  for (const auto& [name, tensor] : f.model) globals.push_back(name);
  if (!a.untie_embeddings_and_output_weights && (pp > 1)) globals.push_back("output_layer.weight");
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      auto d = new_dict();
      d.insert("args", args);
      d.insert("checkpoint_version", training::kCheckpointVersion);
      d.insert("iteration", f.iteration.value_or(0));
      GenericDict param_state = new_dict();
      for (int64_t v = 0; v < chunks_of(a); ++v) {
        GenericDict model(c10::StringType::get(), c10::TensorType::get());
        const int64_t offset = layer_offset(a, p, v);
        for (const auto& global : globals) {
          if (!belongs(a, global, p, v)) continue;
          const std::string local = shift_layer(global, -offset);
          model.insert(local, shard(global, f.model.at(source_name(global)), t));
          if (f.optim.empty()) continue;
          auto it = f.optim.find(source_name(global));
          TORCH_CHECK(it != f.optim.end(), "[convert_checkpoint] the optimizer state has no ", source_name(global));
          GenericDict s(c10::StringType::get(), c10::TensorType::get());
          for (const auto& [kind, value] : it->second) s.insert(kind, shard(global, value, t));
          param_state.insert(chunks_of(a) > 1 ? "model" + std::to_string(v) + "." + local : local, s);
        }
        d.insert(model_key(a, v), model);
      }
      if (!f.optim.empty()) {
        auto opt = new_dict();
        opt.insert("distributed", false);
        opt.insert("param_state", param_state);
        opt.insert("param_groups", c10::impl::GenericList(c10::AnyType::get()));
        opt.insert("grad_scaler", f.grad_scaler);
        d.insert("optimizer", opt);
        d.insert("opt_param_scheduler", f.scheduler);
      }
      d.insert("consumed_train_samples", f.consumed_train);
      d.insert("consumed_valid_samples", f.consumed_valid);
      training::write_rank_dir(staging, training::rank_dir_name(t, p, pp), {{training::kModelFileName, d}});
    }
  }
  training::publish_checkpoint(save, f.iteration);
}

// --- Hugging Face

std::string json_number(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}

struct HfNames {
  bool llama;
};

// Which Hugging Face architecture the settings describe; one line naming what does not fit.
bool is_llama(const training::Arguments& a) {
  const bool rope = a.position_embedding_type == "rope";
  if (!rope) {
    TORCH_CHECK(a.normalization == "LayerNorm" && !a.swiglu && !a.disable_bias_linear,
                "[convert_checkpoint] GPT2LMHeadModel (learned positions) needs LayerNorm, GELU and biases; this "
                "checkpoint has --normalization ", a.normalization, a.swiglu ? " --swiglu" : "",
                a.disable_bias_linear ? " --disable-bias-linear" : "");
    TORCH_CHECK(a.num_query_groups == a.num_attention_heads && (!a.kv_channels || *a.kv_channels * a.num_attention_heads == a.hidden_size),
                "[convert_checkpoint] GPT2LMHeadModel needs plain multi-head attention (no --group-query-attention, "
                "--kv-channels = hidden / heads)");
    return false;
  }
  TORCH_CHECK(a.normalization == "RMSNorm" && a.swiglu && a.rotary_percent == 1.0,
              "[convert_checkpoint] LlamaForCausalLM (rope) needs --normalization RMSNorm, --swiglu and "
              "--rotary-percent 1; this checkpoint has --normalization ", a.normalization,
              a.swiglu ? "" : " without --swiglu", " --rotary-percent ", a.rotary_percent);
  return true;
}

void export_hf(const FullCheckpoint& f, const std::string& out_dir) {
  const auto& a = f.a;
  const bool llama = is_llama(a);
  const int64_t h = a.hidden_size, heads = a.num_attention_heads, groups = a.num_query_groups;
  const int64_t d = a.kv_channels.value_or(h / heads), per = heads / groups;
  const int64_t ffn = a.ffn_hidden_size.value_or(4 * h);
  auto get = [&](const std::string& name) {
    auto it = f.model.find(name);
    TORCH_CHECK(it != f.model.end(), "[convert_checkpoint] the checkpoint has no ", name);
    return it->second;
  };
  auto vocab_rows = [&](const at::Tensor& t) { return t.narrow(0, 0, f.true_vocab).contiguous(); };
  std::map<std::string, at::Tensor> out;
  const std::string top = llama ? "model." : "transformer.";
  out[top + (llama ? "embed_tokens.weight" : "wte.weight")] = vocab_rows(get("embedding.word_embeddings.weight"));
  if (!llama) out["transformer.wpe.weight"] = get("embedding.position_embeddings.weight");
  const bool bias = !a.disable_bias_linear;
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    auto qkv = [&](const at::Tensor& t) {  // [ng * (per + 2) * d (, h)] -> q, k, v
      auto g = t.dim() == 2 ? t.view({groups, per + 2, d, h}) : t.view({groups, per + 2, d});
      auto rows = [&](const at::Tensor& x) { return t.dim() == 2 ? x.reshape({-1, h}) : x.reshape({-1}); };
      return std::array<at::Tensor, 3>{rows(g.narrow(1, 0, per)), rows(g.narrow(1, per, 1)), rows(g.narrow(1, per + 1, 1))};
    };
    const auto w = qkv(get(p + "self_attention.linear_qkv.weight"));
    if (llama) {
      const std::string q = "model.layers." + std::to_string(i) + ".";
      out[q + "input_layernorm.weight"] = get(p + "input_layernorm.weight");
      out[q + "post_attention_layernorm.weight"] = get(p + "pre_mlp_layernorm.weight");
      out[q + "self_attn.q_proj.weight"] = w[0].contiguous();
      out[q + "self_attn.k_proj.weight"] = w[1].contiguous();
      out[q + "self_attn.v_proj.weight"] = w[2].contiguous();
      out[q + "self_attn.o_proj.weight"] = get(p + "self_attention.linear_proj.weight");
      auto fc1 = get(p + "mlp.linear_fc1.weight");
      out[q + "mlp.gate_proj.weight"] = fc1.narrow(0, 0, ffn).contiguous();
      out[q + "mlp.up_proj.weight"] = fc1.narrow(0, ffn, ffn).contiguous();
      out[q + "mlp.down_proj.weight"] = get(p + "mlp.linear_fc2.weight");
      if (bias) {
        const auto b = qkv(get(p + "self_attention.linear_qkv.bias"));
        out[q + "self_attn.q_proj.bias"] = b[0].contiguous();
        out[q + "self_attn.k_proj.bias"] = b[1].contiguous();
        out[q + "self_attn.v_proj.bias"] = b[2].contiguous();
        out[q + "self_attn.o_proj.bias"] = get(p + "self_attention.linear_proj.bias");
        auto b1 = get(p + "mlp.linear_fc1.bias");
        out[q + "mlp.gate_proj.bias"] = b1.narrow(0, 0, ffn).contiguous();
        out[q + "mlp.up_proj.bias"] = b1.narrow(0, ffn, ffn).contiguous();
        out[q + "mlp.down_proj.bias"] = get(p + "mlp.linear_fc2.bias");
      }
    } else {
      // GPT-2's Conv1D stores weights as [in, out]: the transpose of a Linear's.
      const std::string q = "transformer.h." + std::to_string(i) + ".";
      out[q + "ln_1.weight"] = get(p + "input_layernorm.weight");
      out[q + "ln_1.bias"] = get(p + "input_layernorm.bias");
      out[q + "ln_2.weight"] = get(p + "pre_mlp_layernorm.weight");
      out[q + "ln_2.bias"] = get(p + "pre_mlp_layernorm.bias");
      out[q + "attn.c_attn.weight"] = at::cat({w[0], w[1], w[2]}).t().contiguous();
      const auto b = qkv(get(p + "self_attention.linear_qkv.bias"));
      out[q + "attn.c_attn.bias"] = at::cat({b[0], b[1], b[2]});
      out[q + "attn.c_proj.weight"] = get(p + "self_attention.linear_proj.weight").t().contiguous();
      out[q + "attn.c_proj.bias"] = get(p + "self_attention.linear_proj.bias");
      out[q + "mlp.c_fc.weight"] = get(p + "mlp.linear_fc1.weight").t().contiguous();
      out[q + "mlp.c_fc.bias"] = get(p + "mlp.linear_fc1.bias");
      out[q + "mlp.c_proj.weight"] = get(p + "mlp.linear_fc2.weight").t().contiguous();
      out[q + "mlp.c_proj.bias"] = get(p + "mlp.linear_fc2.bias");
    }
  }
  out[top + (llama ? "norm.weight" : "ln_f.weight")] = get("decoder.final_layernorm.weight");
  if (!llama) out["transformer.ln_f.bias"] = get("decoder.final_layernorm.bias");
  const bool tied = !a.untie_embeddings_and_output_weights;
  if (!tied) out["lm_head.weight"] = vocab_rows(get("output_layer.weight"));

  const auto dtype = get("embedding.word_embeddings.weight").scalar_type();
  const std::string torch_dtype = dtype == at::kBFloat16 ? "bfloat16" : (dtype == at::kHalf ? "float16" : "float32");
  std::ostringstream c;
  c << "{\n";
  if (llama) {
    c << "  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
      << "  \"hidden_size\": " << h << ",\n  \"intermediate_size\": " << ffn << ",\n"
      << "  \"num_hidden_layers\": " << a.num_layers << ",\n  \"num_attention_heads\": " << heads << ",\n"
      << "  \"num_key_value_heads\": " << groups << ",\n  \"head_dim\": " << d << ",\n"
      << "  \"max_position_embeddings\": " << a.max_position_embeddings << ",\n"
      << "  \"rms_norm_eps\": " << json_number(a.norm_epsilon) << ",\n"
      << "  \"rope_theta\": " << json_number(a.rotary_base) << ",\n"
      << "  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": " << json_number(a.rotary_base) << "},\n"
      << "  \"attention_bias\": " << (bias ? "true" : "false") << ",\n  \"mlp_bias\": " << (bias ? "true" : "false")
      << ",\n  \"hidden_act\": \"silu\",\n  \"attention_dropout\": 0.0,\n";
  } else {
    c << "  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
      << "  \"n_embd\": " << h << ",\n  \"n_inner\": " << ffn << ",\n  \"n_layer\": " << a.num_layers << ",\n"
      << "  \"n_head\": " << heads << ",\n  \"n_positions\": " << a.max_position_embeddings << ",\n"
      << "  \"layer_norm_epsilon\": " << json_number(a.norm_epsilon) << ",\n"
      << "  \"activation_function\": \"" << (a.openai_gelu ? "gelu_new" : "gelu") << "\",\n"
      << "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n";
  }
  c << "  \"vocab_size\": " << f.true_vocab << ",\n  \"initializer_range\": " << json_number(a.init_method_std)
    << ",\n  \"tie_word_embeddings\": " << (tied ? "true" : "false") << ",\n  \"torch_dtype\": \"" << torch_dtype
    << "\"\n}\n";
  fs::create_directories(out_dir);
  {
    const std::string path = (fs::path(out_dir) / "config.json").string();
    std::ofstream cfg(path + ".tmp");
    cfg << c.str();
    cfg.close();
    TORCH_CHECK(cfg, "[convert_checkpoint] writing ", path, " failed");
    fs::rename(path + ".tmp", path);
  }
  models::common::save_safetensors((fs::path(out_dir) / "model.safetensors").string(), out);
}

const tokenizer::JsonValue& member(const tokenizer::JsonValue& v, const char* key, const std::string& file) {
  const auto* m = v.find(key);
  TORCH_CHECK(m, "[convert_checkpoint] ", file, " has no \"", key, "\"");
  return *m;
}

std::map<std::string, at::Tensor> load_hf_weights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return models::common::load_safetensors(single.string());
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  TORCH_CHECK(fs::exists(index), "[convert_checkpoint] ", dir, " has neither model.safetensors nor ",
              "model.safetensors.index.json");
  std::ifstream in(index);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto json = tokenizer::parse_json(text);
  std::set<std::string> files;
  for (const auto& [name, file] : member(json, "weight_map", index.string()).object) files.insert(file.string);
  std::map<std::string, at::Tensor> out;
  for (const auto& file : files) out.merge(models::common::load_safetensors((fs::path(dir) / file).string()));
  return out;
}

FullCheckpoint import_hf(const std::string& dir, int64_t divisible_by) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  std::ifstream in(cfg_path);
  TORCH_CHECK(in, "[convert_checkpoint] cannot read ", cfg_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cfg = tokenizer::parse_json(text);
  const std::string type = member(cfg, "model_type", cfg_path).string;
  TORCH_CHECK(type == "gpt2" || type == "llama", "[convert_checkpoint] ", cfg_path, ": model_type \"", type,
              "\" is not supported (gpt2, llama)");
  const bool llama = type == "llama";
  auto num = [&](const char* key) { return static_cast<int64_t>(member(cfg, key, cfg_path).number); };
  auto opt_num = [&](const char* key, double fallback) {
    const auto* m = cfg.find(key);
    return m && m->type == tokenizer::JsonValue::Type::kNumber ? m->number : fallback;
  };
  auto opt_bool = [&](const char* key, bool fallback) {
    const auto* m = cfg.find(key);
    return m && m->type == tokenizer::JsonValue::Type::kBool ? m->boolean : fallback;
  };
  FullCheckpoint f;
  auto& a = f.a;
  a.make_vocab_size_divisible_by = divisible_by;
  if (llama) {
    a.num_layers = num("num_hidden_layers");
    a.hidden_size = num("hidden_size");
    a.num_attention_heads = num("num_attention_heads");
    a.num_query_groups = static_cast<int64_t>(opt_num("num_key_value_heads", static_cast<double>(a.num_attention_heads)));
    a.group_query_attention = a.num_query_groups != a.num_attention_heads;
    a.ffn_hidden_size = num("intermediate_size");
    const auto head_dim = static_cast<int64_t>(opt_num("head_dim", static_cast<double>(a.hidden_size / a.num_attention_heads)));
    if (head_dim * a.num_attention_heads != a.hidden_size) a.kv_channels = head_dim;
    a.normalization = "RMSNorm";
    a.norm_epsilon = opt_num("rms_norm_eps", 1e-6);
    a.swiglu = true;
    a.position_embedding_type = "rope";
    double theta = opt_num("rope_theta", 10000.0);
    if (const auto* rp = cfg.find("rope_parameters"); rp && rp->find("rope_theta")) theta = rp->find("rope_theta")->number;
    a.rotary_base = theta;
    a.max_position_embeddings = num("max_position_embeddings");
    const bool attention_bias = opt_bool("attention_bias", false), mlp_bias = opt_bool("mlp_bias", false);
    TORCH_CHECK(attention_bias == mlp_bias, "[convert_checkpoint] ", cfg_path,
                ": attention_bias and mlp_bias differ; megatron has one --disable-bias-linear");
    a.disable_bias_linear = !attention_bias;
    a.untie_embeddings_and_output_weights = !opt_bool("tie_word_embeddings", false);
    const std::string act = cfg.find("hidden_act") ? cfg.find("hidden_act")->string : "silu";
    TORCH_CHECK(act == "silu", "[convert_checkpoint] ", cfg_path, ": hidden_act \"", act, "\" is not silu");
  } else {
    a.num_layers = num("n_layer");
    a.hidden_size = num("n_embd");
    a.num_attention_heads = num("n_head");
    a.num_query_groups = a.num_attention_heads;
    const auto* inner = cfg.find("n_inner");
    a.ffn_hidden_size = inner && inner->type == tokenizer::JsonValue::Type::kNumber ? static_cast<int64_t>(inner->number)
                                                                                   : 4 * a.hidden_size;
    a.norm_epsilon = opt_num("layer_norm_epsilon", 1e-5);
    a.max_position_embeddings = num("n_positions");
    a.untie_embeddings_and_output_weights = !opt_bool("tie_word_embeddings", true);
    const std::string act = cfg.find("activation_function") ? cfg.find("activation_function")->string : "gelu_new";
    TORCH_CHECK(act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh", "[convert_checkpoint] ", cfg_path,
                ": activation_function \"", act, "\" is not gelu, gelu_new or gelu_pytorch_tanh");
    a.openai_gelu = act != "gelu";
  }
  a.seq_length = a.max_position_embeddings;
  a.init_method_std = opt_num("initializer_range", 0.02);
  f.true_vocab = num("vocab_size");
  a.vocab_size = f.true_vocab;
  f.padded_vocab = f.true_vocab;

  auto w = load_hf_weights(dir);
  auto get = [&](std::string name) {
    auto it = w.find(name);
    if (it == w.end() && !llama && name.rfind("transformer.", 0) == 0) it = w.find(name.substr(12));  // hub files
    TORCH_CHECK(it != w.end(), "[convert_checkpoint] ", dir, " has no tensor ", name);
    return it->second;
  };
  const int64_t h = a.hidden_size, heads = a.num_attention_heads, groups = a.num_query_groups;
  const int64_t d = a.kv_channels.value_or(h / heads), per = heads / groups;
  auto fuse_qkv = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {  // megatron's grouped rows
    const bool weight = q.dim() == 2;
    auto shape = [&](int64_t n) {
      return weight ? std::vector<int64_t>{groups, n, d, q.size(1)} : std::vector<int64_t>{groups, n, d};
    };
    auto fused = at::cat({q.reshape(shape(per)), k.reshape(shape(1)), v.reshape(shape(1))}, 1);
    return weight ? fused.reshape({-1, q.size(1)}) : fused.reshape({-1});
  };
  auto& m = f.model;
  const std::string top = llama ? "model." : "transformer.";
  m["embedding.word_embeddings.weight"] = get(top + (llama ? "embed_tokens.weight" : "wte.weight"));
  if (!llama) m["embedding.position_embeddings.weight"] = get("transformer.wpe.weight");
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    if (llama) {
      const std::string q = "model.layers." + std::to_string(i) + ".";
      m[p + "input_layernorm.weight"] = get(q + "input_layernorm.weight");
      m[p + "pre_mlp_layernorm.weight"] = get(q + "post_attention_layernorm.weight");
      m[p + "self_attention.linear_qkv.weight"] =
          fuse_qkv(get(q + "self_attn.q_proj.weight"), get(q + "self_attn.k_proj.weight"), get(q + "self_attn.v_proj.weight"));
      m[p + "self_attention.linear_proj.weight"] = get(q + "self_attn.o_proj.weight");
      m[p + "mlp.linear_fc1.weight"] = at::cat({get(q + "mlp.gate_proj.weight"), get(q + "mlp.up_proj.weight")});
      m[p + "mlp.linear_fc2.weight"] = get(q + "mlp.down_proj.weight");
      if (!a.disable_bias_linear) {
        m[p + "self_attention.linear_qkv.bias"] =
            fuse_qkv(get(q + "self_attn.q_proj.bias"), get(q + "self_attn.k_proj.bias"), get(q + "self_attn.v_proj.bias"));
        m[p + "self_attention.linear_proj.bias"] = get(q + "self_attn.o_proj.bias");
        m[p + "mlp.linear_fc1.bias"] = at::cat({get(q + "mlp.gate_proj.bias"), get(q + "mlp.up_proj.bias")});
        m[p + "mlp.linear_fc2.bias"] = get(q + "mlp.down_proj.bias");
      }
    } else {
      const std::string q = "transformer.h." + std::to_string(i) + ".";
      m[p + "input_layernorm.weight"] = get(q + "ln_1.weight");
      m[p + "input_layernorm.bias"] = get(q + "ln_1.bias");
      m[p + "pre_mlp_layernorm.weight"] = get(q + "ln_2.weight");
      m[p + "pre_mlp_layernorm.bias"] = get(q + "ln_2.bias");
      auto c_attn = get(q + "attn.c_attn.weight").t();  // [3h, h]
      auto qkv = c_attn.split(heads * d);
      m[p + "self_attention.linear_qkv.weight"] = fuse_qkv(qkv[0], qkv[1], qkv[2]);
      auto bias = get(q + "attn.c_attn.bias").split(heads * d);
      m[p + "self_attention.linear_qkv.bias"] = fuse_qkv(bias[0], bias[1], bias[2]);
      m[p + "self_attention.linear_proj.weight"] = get(q + "attn.c_proj.weight").t().contiguous();
      m[p + "self_attention.linear_proj.bias"] = get(q + "attn.c_proj.bias");
      m[p + "mlp.linear_fc1.weight"] = get(q + "mlp.c_fc.weight").t().contiguous();
      m[p + "mlp.linear_fc1.bias"] = get(q + "mlp.c_fc.bias");
      m[p + "mlp.linear_fc2.weight"] = get(q + "mlp.c_proj.weight").t().contiguous();
      m[p + "mlp.linear_fc2.bias"] = get(q + "mlp.c_proj.bias");
    }
  }
  m["decoder.final_layernorm.weight"] = get(top + (llama ? "norm.weight" : "ln_f.weight"));
  if (!llama) m["decoder.final_layernorm.bias"] = get("transformer.ln_f.bias");
  if (a.untie_embeddings_and_output_weights) m["output_layer.weight"] = get("lm_head.weight");
  for (auto& [name, t] : m) t = t.contiguous();
  f.args = training::arguments_to_dict(a);
  return f;
}

}  // namespace

ConvertResult convert_checkpoint(const ConvertOptions& o) {
  TORCH_CHECK(o.load.empty() != o.import_hf.empty(), "[convert_checkpoint] give one of load (--load) and import_hf (--import-hf)");
  TORCH_CHECK(!o.save.empty() || !o.export_hf.empty(), "[convert_checkpoint] give save (--save) and/or export_hf (--export-hf)");
  at::NoGradGuard no_grad;
  FullCheckpoint f = o.load.empty() ? import_hf(o.import_hf, o.make_vocab_size_divisible_by) : read_full(o.load, o.ckpt_step);
  if (!o.export_hf.empty()) export_hf(f, o.export_hf);
  if (!o.save.empty())
    write_full(f, o.save, o.target_tensor_model_parallel_size, o.target_pipeline_model_parallel_size,
               o.target_num_layers_per_virtual_pipeline_stage);
  ConvertResult r;
  r.iteration = f.iteration;
  r.has_optimizer_state = !f.optim.empty();
  return r;
}

}  // namespace megatron::training
