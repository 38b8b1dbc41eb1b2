// Megatron-LM's num-microbatches calculator (megatron/core/num_microbatches_calculator.py): the
// global batch size and the micro-batches per step once `consumed_samples` are trained, constant
// or, under --rampup-batch-size, growing. Megatron-LM keeps the calculator global; here the two
// queries take the arguments they are computed from.
#pragma once

#include "megatron/export.h"

#include <cstdint>

#include "megatron/training/arguments.h"

namespace megatron::training {

// --global-batch-size, or under --rampup-batch-size START INCREMENT SAMPLES, START plus one
// INCREMENT per SAMPLES / ((gbs - START) / INCREMENT) samples until SAMPLES are consumed
// (Megatron-LM's RampupBatchsizeNumMicroBatchesCalculator).
MEGATRON_API int64_t get_current_global_batch_size(const Arguments& args, int64_t consumed_samples);

// That batch over the data-parallel ranks, in micro-batches: global / (micro x DP).
MEGATRON_API int64_t get_num_microbatches(const Arguments& args, int64_t consumed_samples);

}  // namespace megatron::training
