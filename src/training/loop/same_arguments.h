// Ranks launched with different flags (a per-rank launch line gone wrong) would train inconsistent
// replicas, or hang until the collective timeout: every rank's settings are compared at start-up.
#pragma once

#include "megatron/comm/process_group.h"
#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// Collective over `world`: the settings a checkpoint saves (checkpoint_schema.h's
// arguments_to_dict), compared field by field through a hash of each. A difference throws
// program::UsageError on every rank, naming the first differing flag and which ranks have which value.
void check_ranks_have_the_same_arguments(const Arguments& args, comm::ProcessGroup& world);

}  // namespace megatron::training::detail
