// The checkpoint's args as Megatron-LM saves them. Private to src/training.
#pragma once

#include <ATen/core/ivalue.h>

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

// `attributes` (arguments_to_dict and the counts beside it) with what Megatron-LM's loaders read
// under names of their own, as an argparse.Namespace.
c10::IValue saved_args_namespace(c10::impl::GenericDict attributes, const Arguments& args);

}  // namespace megatron::training::detail
