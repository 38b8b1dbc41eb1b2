// Megatron-LM's --use-checkpoint-args (load_args_from_checkpoint): the model's shape, tokenizer
// and parallel layout read from the checkpoint --load names. Private to src/training.
#pragma once

#include <set>
#include <string>

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// With a.use_checkpoint_args: every network_size and tokenizer setting the command line (or the
// TOML config) did not give, in `given`, comes from the checkpoint's saved args; the tensor,
// pipeline and virtual-pipeline sizes come from it always, as in Megatron-LM (the saved shards
// fix them), but from a torch_dist checkpoint, which loads at any layout. Without a checkpoint in --load (or without
// --load) the given arguments stand, with a warning, as in Megatron-LM; an unreadable checkpoint is an error naming the
// file.
void apply_checkpoint_args(Arguments& a, const std::set<std::string>& given);

}  // namespace megatron::training::detail
