// Megatron-LM's theoretical memory report, before anything is allocated: the bytes one rank will
// hold for weights, gradients, main weights and optimizer state, and for the activations of the
// micro-batches in flight, from the settings alone. pretrain() prints it and refuses a run whose
// estimate exceeds the memory free on its device (--ignore-memory-check overrides).
#pragma once

#include "megatron/export.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "megatron/training/arguments.h"

namespace megatron::training {

// In bytes; doubles, so that absurd settings give a huge figure instead of an overflow.
struct MEGATRON_API MemoryEstimate {
  double parameters = 0;  // of this rank's shard of the model, counted, not bytes
  double weights = 0, gradients = 0, main_weights = 0, optimizer_state = 0;
  double activations = 0;
  double weights_and_optimizer() const { return weights + gradients + main_weights + optimizer_state; }
  double total() const { return weights_and_optimizer() + activations; }
};

// The rank at pipeline stage `pipeline_rank` (the first holds the embedding and the most
// micro-batches in flight, the last the output layer and logits); vocab_size before padding.
MEGATRON_API MemoryEstimate theoretical_memory(const Arguments& args, int64_t pipeline_rank, int64_t vocab_size);

// Megatron-LM's report of that estimate: "Theoretical memory footprints: weight and optimizer=...".
MEGATRON_API std::string theoretical_memory_report(const Arguments& args, int64_t pipeline_rank, int64_t vocab_size);

// Throws one line naming this rank's estimate, the memory available (the GPU's free memory, or
// the host's shared by `ranks_on_host` ranks) and the settings that would shrink it, when it does
// not fit.
MEGATRON_API void check_memory(const Arguments& args, int64_t pipeline_rank, int64_t vocab_size, c10::Device device,
                               int ranks_on_host);

}  // namespace megatron::training
