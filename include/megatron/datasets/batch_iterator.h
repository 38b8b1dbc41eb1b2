// What forward_step draws micro-batches from. Batches are named tensors, as Megatron-LM's are
// dicts; the schedules hand the iterator on untouched, so any source of batches fits: a
// DataIterator over the library's datasets, or a class of the user's own.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>

namespace megatron::datasets {

// A GPT batch (build_batch) holds "text", "tokens", "labels", "loss_mask", "position_ids" and
// "attention_mask" (undefined when not created); see data_iterator.h for their shapes.
using Batch = std::map<std::string, at::Tensor>;

class MEGATRON_API BatchIterator {
 public:
  virtual ~BatchIterator() = default;
  // The next micro-batch, nullopt once the source is exhausted.
  virtual std::optional<Batch> next() = 0;
};

}  // namespace megatron::datasets
