// How the transformer layers divide over the pipeline stages and their virtual chunks, as
// Megatron-Core's get_transformer_layer_offset and get_num_layers_to_build do: evenly; with the
// first and last stages holding counts of their own (--decoder-first/last-pipeline-num-layers)
// and the rest evenly between the stages in the middle; or with the embedding and the loss
// counted as a layer each (--account-for-embedding/loss-in-pipeline-split), so that the first
// and last chunks hold one layer fewer (none, when a chunk holds one); or as a layout string
// names each chunk's layers (--pipeline-model-parallel-layout, Megatron-Core's
// PipelineParallelLayerLayout). Written once: the model, checkpoint conversion and the memory
// estimate read it from here.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatron::transformer {

struct MEGATRON_API PipelineSplit {
  int64_t num_layers = 0;
  int64_t pipeline_size = 1;
  int64_t virtual_size = 1;  // model chunks per stage (the interleaved schedule)
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  bool account_for_embedding = false, account_for_loss = false;
  // Megatron-Core's layout string, e.g. "Et*3|(tt|)*2,tL": one '|'-separated part per virtual stage
  // (virtual rank major, then pipeline rank), E the embedding, t a transformer layer, L the loss;
  // "(...)*n" and "x*n" repeat. When given it alone says where the layers go.
  std::string layout;

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
  // The number of virtual stages (pipeline size x chunks per stage) a layout string names, or
  // the reason it cannot be read.
  static int64_t layout_stages(const std::string& layout, std::string* problem = nullptr);
};

}  // namespace megatron::transformer
