// How the transformer layers divide over the pipeline stages and their virtual chunks, as
// Megatron-Core's get_transformer_layer_offset and get_num_layers_to_build do: evenly; with the
// first and last stages holding counts of their own (--decoder-first/last-pipeline-num-layers)
// and the rest evenly between the stages in the middle; or with the embedding and the loss
// counted as a layer each (--account-for-embedding/loss-in-pipeline-split), so that the first
// and last chunks hold one layer fewer (none, when a chunk holds one). Written once: the model,
// checkpoint conversion and the memory estimate read it from here.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megatron::transformer {

struct MEGATRON_API PipelineSplit {
  int64_t num_layers = 0;
  int64_t pipeline_size = 1;
  int64_t virtual_size = 1;  // model chunks per stage (the interleaved schedule)
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  bool account_for_embedding = false, account_for_loss = false;

  struct Range {
    int64_t offset = 0;  // the first layer's index in the whole model
    int64_t count = 0;
  };
  // "" when the layers divide as asked, else what does not (naming Megatron-LM's flags).
  std::string problem() const;
  // The layers of model chunk vp_rank of stage pp_rank (problem() must be "").
  Range layers(int64_t pp_rank, int64_t vp_rank) const;
  // The layers a stage holds over all its chunks.
  int64_t stage_layers(int64_t pp_rank) const;
};

}  // namespace megatron::transformer
