// The mixture-of-experts flags: Megatron-LM's rules for them, and --moe-layer-freq read as
// Megatron-LM reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatron/training/arguments.h"

namespace megatron::training::detail {

void validate_moe(const Arguments& a);
// Megatron-Core's flex dispatcher (DeepEP or HybridEP kernels) is the alltoall exchange here: the
// backend is recorded so that the start-up warning names it; --moe-enable-deepep means flex.
void resolve_moe_aliases(Arguments& a);

// One 0/1 per layer: an integer N marks layers 0, N, 2N, ...; a string with '[' is a Python list
// expression of 0s and 1s built with +, * and parentheses ("([1]*3+[0])*2"), as Megatron-LM
// evaluates it, and must have one entry per layer.
std::vector<int64_t> moe_layer_pattern(const std::string& freq, int64_t num_layers);

}  // namespace megatron::training::detail
