// Saving and loading checkpoints (Megatron-LM's save_checkpoint / load_checkpoint): the
// orchestration over the layers below it, each in its own header:
//   checkpoint_files.h    temporary names, fsync, rename, checksums
//   checkpoint_layout.h   iteration and rank folder names, the tracker, publishing
//   checkpoint_schema.h   RankCheckpoint: the keys of model_optim_rng.pt and distrib_optim.pt
//   fault_injection.h     the points where tests kill or stop a run
// Files are torch.save archives (Python's torch.load opens them). docs/checkpoints.md.
#pragma once

#include "megatron/export.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpoint_layout.h"
#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/fault_injection.h"

namespace torch::nn {
class Module;
}
namespace megatron::optimizer {
class MegatronOptimizer;
class OptimizerParamScheduler;
}  // namespace megatron::optimizer
namespace megatron::tensor_parallel {
class RngTracker;
}

namespace megatron::training {

// What pretrain saves and restores; the pointers stay owned by the caller.
struct MEGATRON_API TrainingState {
  std::vector<std::shared_ptr<torch::nn::Module>>* model = nullptr;  // one per virtual stage
  optimizer::MegatronOptimizer* optimizer = nullptr;
  optimizer::OptimizerParamScheduler* scheduler = nullptr;
  std::shared_ptr<tensor_parallel::RngTracker> rng_tracker;
  c10::Device device = c10::Device(c10::kCPU);
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t vocab_size = 0, padded_vocab_size = 0;
};

struct MEGATRON_API SaveResult {
  std::string path;    // the iteration folder
  uint64_t bytes = 0;  // written by this rank
  double seconds = 0;
};
// Saves state.iteration to args.save. Collective over the world; a failure on any rank throws
// on every rank (the failing one with its message) and leaves the previous checkpoint current.
MEGATRON_API SaveResult save_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state);

// --async-save (Megatron-LM's): save_checkpoint_async copies this rank's state to host memory
// and returns; a background thread writes it into the staging folder while training goes on.
// finalize_async_save (collective: every rank calls it each iteration, and before exiting)
// publishes it once every rank's write has finished, waiting for that when `blocking`; a failed
// write throws on every rank there, and until then the previous checkpoint stays current.
class AsyncSave;
MEGATRON_API std::shared_ptr<AsyncSave> save_checkpoint_async(const Arguments& args, const ParallelState& ps,
                                                              const TrainingState& state);
// nullopt while a rank is still writing (never when blocking).
MEGATRON_API std::optional<SaveResult> finalize_async_save(AsyncSave& save, const Arguments& args,
                                                           const ParallelState& ps, bool blocking);
MEGATRON_API int64_t async_save_iteration(const AsyncSave& save);

// Before training: a run starting at `iteration` whose --save holds a later run's checkpoints
// (its tracker names a later iteration, or it has iterations and no tracker) would replace them
// and move the tracker back; that is an error naming what it found, unless --allow-save-rewind.
MEGATRON_API void check_save_history(const Arguments& args, int64_t iteration);

// Rank 0 locks --save for the run (checkpoint_layout.h's SaveDirLock); collective, so that every
// rank stops when another run holds it. nullptr without --save.
MEGATRON_API std::unique_ptr<SaveDirLock> lock_save_dir(const Arguments& args, const ParallelState& ps);

// Loads from args.load (the tracker's iteration, or --ckpt-step) into `state`: model, then unless
// --finetune / --no-load-optim the optimizer, grad scaler, schedule, iteration and consumed
// samples, and unless --no-load-rng the RNG states. Collective. Returns false when args.load has
// no checkpoint (training starts from scratch); throws on mismatched arguments and unreadable
// files (with --load-fallback it tries older iterations first).
MEGATRON_API bool load_checkpoint(const Arguments& args, const ParallelState& ps, TrainingState& state);

// The tensors of a torch_dist checkpoint folder (an iteration's) and their global shapes, from
// its .metadata, checked as a load checks it; a malformed one throws one line naming the file.
MEGATRON_API std::map<std::string, std::vector<int64_t>> torch_dist_tensor_shapes(const std::string& iter_dir);

}  // namespace megatron::training
