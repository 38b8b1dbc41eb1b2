// The FP8 flags (--fp8-format, --fp8-recipe, ...) with Megatron-LM's rules for them, and what is
// not implemented here, refused by name before anything is built.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// After the model shape and the parallel sizes are validated.
void validate_fp8(const Arguments& a);

}  // namespace megatron::training::detail
