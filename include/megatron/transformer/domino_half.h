// Domino's unit of work between layers: one half of a micro-batch, split along the batch.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

// Complete when `pending` is null; else the half whose MLP (or the embedding's) all-reduce is
// still in flight, whose value is residual + dropout(reduced hidden + bias) (no residual: the
// embedding), finished by the next layer once it needs it.
struct MEGATRON_API DominoHalf {
  at::Tensor hidden;
  tensor_parallel::PendingPtr pending;
  at::Tensor residual, bias;
  // The half's value, waiting for its all-reduce if one is in flight.
  at::Tensor resolve(const TransformerConfig& config, bool train) const;
};
using DominoHalves = std::array<DominoHalf, 2>;

// --domino needs an even micro-batch size; `size` is the micro-batch's.
MEGATRON_API void check_domino_micro_batch(int64_t size);
// [s, b, h] as two complete halves of b / 2 sequences each.
MEGATRON_API DominoHalves split_in_halves(const at::Tensor& hidden);

}  // namespace megatron::transformer
