// What one rank's checkpoint holds of the training state, and putting it back: the model
// chunks' state dicts (a LanguageModule's sharded one, else named parameters and buffers), the
// optimizer's and scheduler's state, and the RNG states. Private to src/training.
#pragma once

#include <map>
#include <string>

#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/checkpointing.h"

namespace torch::nn {
class Module;
}

namespace megatron::training::detail {

RankCheckpoint::TensorMap module_state(torch::nn::Module& m);
void load_module_state(torch::nn::Module& m, const RankCheckpoint::TensorMap& state);
// A checkpoint's FP8 state (RankCheckpoint::fp8_state) into every chunk's FP8 layers; false when
// it holds none (a run saved without delayed FP8 scaling: the scales start afresh).
bool load_fp8_state(const std::vector<std::shared_ptr<torch::nn::Module>>& model,
                    const RankCheckpoint::TensorMap& fp8_state, const std::string& file);

RankCheckpoint::RngState rng_state(const TrainingState& state, uint64_t host_seed);
// `file` names the checkpoint in errors.
void set_rng_state(const RankCheckpoint::RngState& r, TrainingState& state, const std::string& file);

// This rank's part of the checkpoint (param_state: the optimizer's, gathered beforehand).
RankCheckpoint rank_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state,
                               std::map<std::string, RankCheckpoint::TensorMap> param_state);

// Replaces every tensor of `c` by a host copy (pinned when it was on a GPU) that no training step
// touches: what --async-save writes while training goes on.
void copy_to_host(RankCheckpoint& c);

// What the run trains on, as far as a resume must agree: each --data-path prefix's file name,
// weight and .idx/.bin sizes, the split, the sequence length and the seed (mock data: its
// vocabulary). Not the folder (data may move) nor sample counts (--train-iters may grow).
std::string data_fingerprint(const Arguments& args);

}  // namespace megatron::training::detail
