// Checkpoint conversion (tools/convert_checkpoint and megatron_cpp.convert_checkpoint): a
// checkpoint of any TP/PP/virtual-PP/EP layout or format (torch, torch_dist), or a Hugging Face GPT-2 / Llama model,
// assembled at TP = 1 in this process and written at another layout and/or exported to Hugging Face (config.json +
// model.safetensors). Optimizer state moves along when the source has it; RNG states are dropped, as they belong to
// ranks.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megatron::training {

struct MEGATRON_API ConvertOptions {
  // The source: a checkpoint folder (its tracker names the iteration unless ckpt_step does), or
  // a Hugging Face model folder. Exactly one.
  std::string load;
  std::optional<int64_t> ckpt_step;
  std::string import_hf;
  int64_t make_vocab_size_divisible_by = 128;  // padding of an imported vocabulary
  // The outputs: at least one.
  std::string save;  // a checkpoint folder, written at the target layout
  int target_tensor_model_parallel_size = 1;
  int target_pipeline_model_parallel_size = 1;
  std::optional<int64_t> target_num_layers_per_virtual_pipeline_stage;
  // MoE checkpoints: the experts over EP ranks, each expert over expert-TP ranks (unset: the
  // target TP; 1: each expert whole).
  int target_expert_model_parallel_size = 1;
  std::optional<int64_t> target_expert_tensor_parallel_size;
  // The format of save: torch (per-rank files at the target layout) or torch_dist (megatron-core's
  // sharded files, which load at any layout). The source's is read from its files.
  std::string ckpt_format = "torch";
  std::string export_hf;  // config.json + model.safetensors + the tokenizer's files
  // The Hugging Face model_type to export as ("llama", "qwen2", "mistral", ...); empty: the
  // first whose architecture fits the checkpoint's settings.
  std::string hf_model_type;
  // The tokenizer files to export (GPT2BPETokenizer's vocab and merges, HuggingFaceTokenizer's
  // tokenizer.json or its folder); empty: the paths the checkpoint was trained with.
  std::string vocab_file, merge_file, tokenizer_model;
  // Whether save may be a folder that already holds checkpoints (the source's own, for one):
  // otherwise such a folder is refused, so that no conversion replaces what it was pointed at.
  bool overwrite = false;
};

struct MEGATRON_API ConvertResult {
  std::optional<int64_t> iteration;  // nullopt: a "release" checkpoint (imported)
  bool has_optimizer_state = false;
  std::string optimizer_unread;  // why a Megatron-LM optimizer state was left behind ("": none was)
};

// Throws c10::Error with one line naming the file or option at fault.
MEGATRON_API ConvertResult convert_checkpoint(const ConvertOptions& options);

}  // namespace megatron::training
