// A checkpoint with full (TP = 1) tensors under global layer numbers: what checkpoint conversion
// reads any layout (or a Hugging Face model) into, and writes another layout (or one) from.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "megatron/training/arguments.h"
#include "megatron/training/checkpoint_schema.h"

namespace megatron::training::detail {

// A checkpoint with full (TP = 1) tensors under global layer numbers.
struct FullCheckpoint {
  Arguments a;
  std::optional<int64_t> iteration;  // nullopt: release
  int64_t true_vocab = 0, padded_vocab = 0;
  RankCheckpoint::TensorMap model;
  std::map<std::string, RankCheckpoint::TensorMap> optim;  // empty: no optimizer state
  std::string optimizer_unread;                            // RankCheckpoint::optimizer_unread of a rank
  std::optional<RankCheckpoint::GradScalerState> grad_scaler;
  RankCheckpoint::SchedulerState scheduler;
  double lr = 0, decoupled_lr = 0;
  int64_t consumed_train = 0, consumed_valid = 0;
};

}  // namespace megatron::training::detail
