// Hugging Face schemas: per architecture, one table of how its tensors and config.json keys
// correspond to megatron/core's full (TP = 1) state dict and Arguments. Export and import walk
// the same table in opposite directions; adding an architecture is adding a table.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "megatron/training/arguments.h"

namespace megatron::training::hf {

// How one megatron tensor is made of Hugging Face tensors.
enum class Transform {
  kCopy,
  kTranspose,        // GPT-2's Conv1D keeps [in, out], a Linear [out, in]
  kQkv,              // q, k, v <-> megatron's grouped linear_qkv rows [groups x (q per group, k, v) x head dim]
  kQkvConcat,        // one tensor cat(q, k, v) <-> linear_qkv
  kQkvConcatConv1D,  // one tensor cat(q, k, v).t() <-> linear_qkv (GPT-2's c_attn.weight)
  kGateUp,           // gate_proj, up_proj <-> linear_fc1 = cat(gate, up)
  kNormWeight,       // gamma <-> the norm weight, gamma - 1 with --apply-layernorm-1p
};

// When a tensor exists.
enum class When { kAlways, kWithBias, kUntied, kNever };
// Which layers a "{i}" rule covers: all, those with a dense MLP, or the MoE ones (--moe-layer-freq).
enum class Layers { kAll, kDense, kMoE };

struct TensorRule {
  std::string megatron;         // "{i}" stands for a layer number, "{e}" for an expert's
  std::vector<std::string> hf;  // the Hugging Face names, "{i}" and "{e}" likewise
  Transform transform = Transform::kCopy;
  When when = When::kAlways;
  bool vocab_rows = false;  // rows are the vocabulary: export keeps the true vocabulary's
  Layers layers = Layers::kAll;
};

// One config.json key and the setting it carries.
struct ConfigRule {
  std::string key;
  // The value's JSON text for these settings ("": a key only read, never written).
  std::function<std::string(const Arguments&)> write;
  // Reads the key's value (nullptr when config.json lacks it) into the settings; `where` names
  // the file in errors.
  std::function<void(const nlohmann::json*, Arguments&, const std::string& where)> read;
};

struct Architecture {
  std::string model_type;   // config.json's "model_type": "gpt2", "llama"
  std::string class_name;   // "GPT2LMHeadModel", "LlamaForCausalLM"
  std::string name_prefix;  // hub files of this model type may lack it ("transformer.")
  std::vector<TensorRule> tensors;
  std::vector<ConfigRule> config;
  // The settings the architecture fixes (normalization, MLP, positions), set on import.
  std::function<void(Arguments&)> fixed;
  // Whether settings fit the architecture: "" or one line saying what does not.
  std::function<std::string(const Arguments&)> mismatch;
};

// The tables (hf_gpt2.cpp, hf_llama.cpp for the Llama family, hf_bloom.cpp); architectures()
// lists them, in the order architecture_of tries them.
Architecture gpt2_architecture();
Architecture llama_architecture();
Architecture qwen2_architecture();
Architecture mistral_architecture();
Architecture qwen3_architecture();
Architecture mixtral_architecture();
Architecture qwen2_moe_architecture();
Architecture qwen3_moe_architecture();
Architecture olmoe_architecture();
Architecture bloom_architecture();

// The Llama family's parts (hf_llama.cpp), which its MoE members (hf_moe.cpp) extend: the tensors
// of a layer with these biases (its MLP rules for the dense layers only), the config keys every
// member has, the settings it fixes, what it needs ("" when the settings have it; with_experts:
// the MoE members' question; qk_norm: Qwen 3's and OLMoE's), Mistral's sliding-window refusal,
// Qwen 2's key, settings and biases, and Qwen 3's query and key norms, settings and
// attention_bias key.
struct LlamaBiases {
  When qkv, proj, mlp;
};
std::vector<TensorRule> llama_tensors(const LlamaBiases& b);
std::vector<ConfigRule> llama_config();
void llama_fixed(Arguments& s);
// The query and key norms a member has: none, Qwen 3's per head, OLMoE's across the heads.
enum class QkNorm { kNone, kPerHead, kAcrossHeads };
std::string llama_mismatch(const Arguments& s, bool with_experts = false, QkNorm qk_norm = QkNorm::kNone);
void refuse_sliding_window(const nlohmann::json* v, Arguments& s, const std::string& where);
ConfigRule qwen2_sliding_window();
void qwen2_fixed(Arguments& s);
std::string qwen2_biases_mismatch(const Arguments& s);
std::vector<TensorRule> qwen3_qk_norms();
void qwen3_fixed(Arguments& s);
ConfigRule qwen3_attention_bias();
const std::vector<Architecture>& architectures();
// The architecture whose model_type is `type`, or whose settings these are (the first that fits,
// or the one named by model_type when given: "mistral" for a Llama without biases); one clear
// error otherwise (naming what was found and what is supported).
const Architecture& architecture_of_model_type(const std::string& type, const std::string& where);
const Architecture& architecture_of(const Arguments& args, const std::string& model_type = "");

// Full megatron state dict -> Hugging Face tensors (contiguous, vocabulary rows cut to true_vocab).
std::map<std::string, at::Tensor> export_tensors(const Architecture& arch, const Arguments& args,
                                                 const std::map<std::string, at::Tensor>& model, int64_t true_vocab);
// Hugging Face tensors -> full megatron state dict; a missing tensor throws naming it and `where`.
std::map<std::string, at::Tensor> import_tensors(const Architecture& arch, const Arguments& args,
                                                 const std::map<std::string, at::Tensor>& hf, const std::string& where);

// config.json of these settings (vocab_size = true_vocab, torch_dtype from dtype, bos and eos
// ids from the tokenizer), and back.
struct SpecialTokenIds {
  int64_t bos = -1, eos = -1;
};
std::string export_config(const Architecture& arch, const Arguments& args, int64_t true_vocab,
                          const std::string& torch_dtype, const SpecialTokenIds& special);
Arguments import_config(const Architecture& arch, const nlohmann::json& config, const std::string& where);

// The checkpoint's tokenizer files written into out_dir (GPT-2's vocab.json and merges.txt, or a
// HuggingFaceTokenizer's tokenizer.json, with tokenizer_config.json and special_tokens_map.json);
// returns its bos and eos ids. Files that are not there are an error naming the flag that gives them.
SpecialTokenIds export_tokenizer(const Arguments& args, const std::string& out_dir);

// --- what the tables are written with

std::string json_number(double v);  // shortest text that reads back to v
std::string json_bool(bool v);
std::string json_string(const std::string& s);  // quoted and escaped
// The member `key` of an object, or nullptr (also when `v` is null or not an object).
const nlohmann::json* member(const nlohmann::json* v, const char* key);
double number_or(const nlohmann::json* v, double fallback);
// A size or count: a positive integer, checked before it is narrowed; fallback when absent or null.
int64_t positive_int_or(const nlohmann::json* v, int64_t fallback, const std::string& key, const std::string& where);
bool bool_or(const nlohmann::json* v, bool fallback);
std::string string_or(const nlohmann::json* v, const std::string& fallback);
// A key one setting carries: an integer (required on import), a float with its default.
ConfigRule integer(std::string key, int64_t Arguments::*field);
ConfigRule real(std::string key, double Arguments::*field, double fallback);
// Written as it is; nothing to read back.
ConfigRule constant(std::string key, std::string value);
// The MLP width (--ffn-hidden-size, default 4 x hidden); required on import or defaulted.
ConfigRule ffn_size(std::string key, bool required);
// vocab_size, initializer_range and tie_word_embeddings, which every table ends with.
void common_tail(std::vector<ConfigRule>& rules, bool tied_by_default);

}  // namespace megatron::training::hf
