// Where a run's data comes from (Megatron-LM's get_blend_and_blend_per_split): one blend cut by
// --split (--data-path, or the words of the --data-args-path file), or a blend per split
// (--train/valid/test-data-path, or the --per-split-data-args-path JSON file). Written once: the
// dataset provider and the checkpoint's data fingerprint read it from here.
#pragma once

#include <array>
#include <optional>

#include "megatron/datasets/blended_dataset.h"
#include "megatron/training/arguments.h"

namespace megatron::training::detail {

struct DataBlends {
  std::optional<datasets::DataBlend> blend;                     // split by --split
  std::array<std::optional<datasets::DataBlend>, 3> per_split;  // train, valid, test
};

// Reads the files the flags name; an error names the flag and the file. Neither is set with
// --mock-data.
DataBlends data_blends_from_args(const Arguments& a);

// Exactly one source given (mock data, one blend, or a blend per split), the flags that name them
// consistent, and the words given inline (and --split) well formed.
void validate_data_sources(const Arguments& a);

}  // namespace megatron::training::detail
