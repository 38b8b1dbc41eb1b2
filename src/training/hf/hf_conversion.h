// Hugging Face models to and from a full checkpoint (checkpoint conversion's --export-hf and
// --import-hf): config.json and model.safetensors through the tables of hf_schema.h, and the
// tokenizer's files beside an export.
#pragma once

#include <cstdint>
#include <string>

#include "megatron/training/checkpoint_conversion.h"
#include "training/checkpointing/full_checkpoint.h"

namespace megatron::training::detail {

void export_hf(const FullCheckpoint& f, const ConvertOptions& o);
// A model's folder (config.json, model.safetensors or its sharded index) with the vocabulary
// padded to a multiple of divisible_by.
FullCheckpoint import_hf(const std::string& dir, int64_t divisible_by);

}  // namespace megatron::training::detail
