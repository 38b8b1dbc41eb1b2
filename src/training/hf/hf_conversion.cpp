#include "training/hf/hf_conversion.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "input_files.h"
#include "megatron/models/common/safetensors.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpointing.h"
#include "training/hf/hf_schema.h"

namespace megatron::training::detail {
namespace fs = std::filesystem;
namespace {

// The file's JSON, or one error naming it (and the line and column at fault).
nlohmann::json read_json(const std::string& path, bool refuse_repeated_keys = false) {
  const std::string where = "[convert_checkpoint] " + path;
  return megatron::detail::parse_json(megatron::detail::read_whole_file(path, where), where, refuse_repeated_keys);
}

const nlohmann::json& member(const nlohmann::json& v, const char* key, const std::string& file) {
  const auto* m = hf::member(&v, key);
  TORCH_CHECK(m, "[convert_checkpoint] ", file, " has no \"", key, "\"");
  return *m;
}

// One model.safetensors, or the shards model.safetensors.index.json names: each tensor is taken
// from the shard its "weight_map" names (as transformers loads them), and only from there.
std::map<std::string, at::Tensor> load_hf_weights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return models::common::load_safetensors(single.string());
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  TORCH_CHECK(fs::exists(index), "[convert_checkpoint] ", dir, " has neither model.safetensors nor ",
              "model.safetensors.index.json");
  const auto json = read_json(index, /*refuse_repeated_keys=*/true);  // a tensor listed twice is ambiguous
  const auto& weight_map = member(json, "weight_map", index);
  TORCH_CHECK(weight_map.is_object(), "[convert_checkpoint] ", index, ": \"weight_map\" is not an object");
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : weight_map.items()) {
    TORCH_CHECK(file.is_string(), "[convert_checkpoint] ", index, ": \"weight_map\" gives tensor ",
                megatron::detail::excerpt(name), " no file name");
    by_file[file.get<std::string>()].push_back(name);
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [file, names] : by_file) {
    const std::string path = (fs::path(dir) / file).string();
    auto shard = models::common::load_safetensors(path);
    for (const auto& name : names) {
      auto it = shard.find(name);
      TORCH_CHECK(it != shard.end(), "[convert_checkpoint] ", index, " places tensor ", name, " in ", file,
                  ", which does not hold it");
      out[name] = std::move(it->second);
    }
  }
  return out;
}

}  // namespace

void export_hf(const FullCheckpoint& f, const ConvertOptions& o) {
  const std::string& out_dir = o.export_hf;
  Arguments a = f.a;  // the tokenizer files may have moved since training
  if (!o.vocab_file.empty()) a.vocab_file = o.vocab_file;
  if (!o.merge_file.empty()) a.merge_file = o.merge_file;
  if (!o.tokenizer_model.empty()) a.tokenizer_model = o.tokenizer_model;
  const auto& arch = hf::architecture_of(f.a, o.hf_model_type);
  const auto tensors = hf::export_tensors(arch, f.a, f.model, f.true_vocab);
  const auto dtype = f.model.at("embedding.word_embeddings.weight").scalar_type();
  const std::string torch_dtype = dtype == at::kBFloat16 ? "bfloat16" : (dtype == at::kHalf ? "float16" : "float32");
  fs::create_directories(out_dir);
  const hf::SpecialTokenIds special = hf::export_tokenizer(a, out_dir);
  write_text_file((fs::path(out_dir) / "config.json").string(),
                  hf::export_config(arch, f.a, f.true_vocab, torch_dtype, special));
  models::common::save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);
}

FullCheckpoint import_hf(const std::string& dir, int64_t divisible_by) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const auto cfg = read_json(cfg_path);
  const auto& arch = hf::architecture_of_model_type(hf::string_or(&member(cfg, "model_type", cfg_path), ""), cfg_path);
  FullCheckpoint f;
  f.a = hf::import_config(arch, cfg, cfg_path);
  f.a.make_vocab_size_divisible_by = divisible_by;
  f.true_vocab = f.padded_vocab = *f.a.vocab_size;
  f.model = hf::import_tensors(arch, f.a, load_hf_weights(dir), dir);
  return f;
}

}  // namespace megatron::training::detail
