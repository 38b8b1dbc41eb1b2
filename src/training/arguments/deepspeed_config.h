// Megatron-DeepSpeed's `--deepspeed --deepspeed_config ds_config.json`: the DeepSpeed JSON keys
// that describe the run, read into Arguments with DeepSpeed's meaning. Private to src/training.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// Fills the settings `a.deepspeed_config` names. `given`: the fields the command line (or the
// TOML config) set; a key that disagrees with one of them is an error naming both. The batch
// keys follow DeepSpeed's rule train_batch_size = micro x accumulation steps x data-parallel
// size, where `world_size` / (TP x PP) is the data-parallel size.
void apply_deepspeed_config(Arguments& a, const std::set<std::string>& given, int64_t world_size);

}  // namespace megatron::training::detail
