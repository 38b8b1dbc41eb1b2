// The context-parallel flags (--context-parallel-size, --cp-comm-type) with Megatron-LM's rules
// for them, and what does not compose with context parallelism here, refused by name.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// After validate_distributed (the parallel sizes) and before anything reads cp_comm_type.
void validate_context_parallel(Arguments& a);

}  // namespace megatron::training::detail
