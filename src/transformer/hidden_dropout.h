// The dropout on a sub-block's output before the residual add, shared by the plain layer and
// Domino's schedule of it.
#pragma once

#include <ATen/core/Tensor.h>

#include "megatron/tensor_parallel/random.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer::detail {

// Dropout of a sequence-sharded tensor differs per TP rank (tracker state); of a replicated one
// it is the same on every rank (default generator).
inline at::Tensor hidden_dropout(const at::Tensor& x, const TransformerConfig& c, bool train) {
  const double p = c.hidden_dropout();
  if (!train || p == 0.0) return x;
  if (c.sequence_parallel() && c.rng_tracker()) {
    at::Tensor out;
    c.rng_tracker()->fork([&] { out = tensor_parallel::dropout(x, p, true); });
    return out;
  }
  return tensor_parallel::dropout(x, p, true);
}

}  // namespace megatron::transformer::detail
