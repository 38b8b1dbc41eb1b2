// Every value of Arguments against its range in the argument table (arguments_table.h): one
// error naming the flag, the range and the value.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

void check_ranges(const Arguments& a);
// One value of `field` against its range, the error naming it `named_as` (a config file's key).
void check_range(const std::string& field, double value, const std::string& named_as);

}  // namespace megatron::training::detail
