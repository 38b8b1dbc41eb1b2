// What one rank folder of a checkpoint holds, as data: the only code that knows the keys of
// model_optim_rng.pt and distrib_optim.pt (docs/checkpoints.md lists them). Saving, loading
// and conversion build or read a RankCheckpoint and never touch the dicts themselves.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "megatron/optimizer/param_scheduler.h"
#include "megatron/training/arguments.h"

namespace megatron::training {

constexpr double kCheckpointVersion = 3.0;

// A model chunk's key in the file: "model", or "model0", "model1", ... with virtual pipeline
// stages; its parameters' names in optimizer state carry the prefix "model1." (or none).
inline std::string model_chunk_key(size_t chunk, size_t chunks) {
  return chunks > 1 ? "model" + std::to_string(chunk) : "model";
}
inline std::string model_chunk_prefix(size_t chunk, size_t chunks) {
  return chunks > 1 ? model_chunk_key(chunk, chunks) + "." : "";
}

// The table's saved settings (arguments_table.h) as a dict of plain values (None for unset
// optionals), and back: fields absent from the dict keep their defaults; a value of the wrong
// type throws naming it.
MEGATRON_API c10::impl::GenericDict arguments_to_dict(const Arguments& args);
MEGATRON_API Arguments arguments_from_dict(const c10::IValue& dict);

struct MEGATRON_API RankCheckpoint {
  using TensorMap = std::map<std::string, at::Tensor>;
  struct GradScalerState {
    double scale = 1.0;
    int64_t growth_tracker = 0, hysteresis_tracker = 0;
  };
  // Saved as opt_param_scheduler; steps are samples, as in Megatron-LM.
  using SchedulerState = optimizer::ParamSchedulerState;
  struct OptimizerState {
    bool distributed = false;  // param_state lives in distrib_optim.pt
    // Parameter name ("model<v>.<name>" with virtual stages) -> its state tensors (exp_avg, ...).
    std::map<std::string, TensorMap> param_state;
    // The learning rates the last step used (decoupled_lr: the embedding's and output layer's
    // under --decoupled-lr).
    double lr = 0, decoupled_lr = 0;
    std::optional<GradScalerState> grad_scaler;  // fp16 only
    SchedulerState scheduler;
  };
  struct RngState {
    at::Tensor torch_rng_state;
    at::Tensor cuda_rng_state;  // undefined on CPU runs
    TensorMap rng_tracker_states;
    // Megatron-LM's seed for Python's random and numpy (--seed + 100 x pipeline rank), saved as
    // their seeded states (random_rng_state, np_rng_state), which training never draws from.
    std::optional<uint64_t> host_seed;
  };

  Arguments args;
  int64_t padded_vocab_size = 0, true_vocab_size = 0;  // 0: not recorded
  int64_t iteration = 0;
  double checkpoint_version = 0;  // Megatron-LM's; 0: not recorded
  std::vector<TensorMap> model;   // one state dict per model chunk
  // absent: --no-save-optim, or an import; Megatron-LM's own (non-distributed) state is mapped
  // onto the parameter names, and when it cannot be, why not is in optimizer_unread.
  std::optional<OptimizerState> optimizer;
  std::string optimizer_unread;
  std::optional<std::vector<RngState>> rng_state;  // one per data-parallel rank, or one
  int64_t consumed_train_samples = 0, consumed_valid_samples = 0;
  std::string data_fingerprint;  // data_fingerprint() of the run; "": not recorded (older, imported)
  // FP8 delayed scaling's scales and amax histories (tensor_parallel/fp8.h), every chunk's under
  // its prefix: "<model chunk prefix><layer>.fp8_scale" and ".fp8_amax_history"; empty without.
  TensorMap fp8_state;

  // The folder's files by name: model_optim_rng.pt, and distrib_optim.pt with a distributed
  // optimizer.
  std::map<std::string, c10::IValue> to_files() const;
  // Reads <rank_dir>'s files (distrib_optim.pt only with read_optimizer); a missing key or a
  // value of the wrong kind throws one line naming the file.
  static RankCheckpoint read(const std::string& rank_dir, bool read_optimizer);
  // The same from a model_optim_rng.pt dict already read; sharded: torch_dist's common.pt, whose
  // tensors are in the sharded files (its model entries may be absent or empty).
  static RankCheckpoint from_dict(const c10::impl::GenericDict& d, const std::string& file, const std::string& rank_dir,
                                  bool read_optimizer, bool sharded);
};

}  // namespace megatron::training
