// Flags of Megatron-LM's scripts that choose how something is done rather than what is trained:
// the layer spec, what selective recompute covers, how gradients travel, the optimizer states'
// types and the data loader. What this build has is taken; the rest is refused with its reason.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// After validate_distributed (it reads the sharding strategy it settles).
void validate_implementation_choices(Arguments& a);

}  // namespace megatron::training::detail
