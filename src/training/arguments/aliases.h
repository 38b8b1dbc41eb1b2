// Megatron-LM's aliases (--recompute-activations, --persistent-save-interval, --zero-stage, ...)
// and the defaults its scripts rely on (GPT-2's tokenizer with a vocab and merge file).
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// First in Arguments::validate, after the ranges: later rules read the fields the aliases set.
void resolve_aliases(Arguments& a);

}  // namespace megatron::training::detail
