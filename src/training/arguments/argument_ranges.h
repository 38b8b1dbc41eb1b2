// Every value of Arguments against its range in the argument table (arguments_table.h): one
// error naming the flag, the range and the value.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

void check_ranges(const Arguments& a);

}  // namespace megatron::training::detail
