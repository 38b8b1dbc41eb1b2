// Checkpoints in Megatron-LM's legacy layout (docs/checkpoints.md):
//   <dir>/latest_checkpointed_iteration.txt      the iteration that counts ("release" for imports)
//   <dir>/iter_0000100/mp_rank_00[_000]/model_optim_rng.pt   one per TP [x PP] rank
//                                      /distrib_optim.pt     with --use-distributed-optimizer
//                                      /checksums.txt        size and CRC32 of each file
// Files are torch.save archives (Python's torch.load opens them). Saving is atomic: everything is
// written under iter_N.tmp, fsync'ed, renamed to iter_N, and only then does the tracker name it.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/parallel_state.h"
#include "megatron/training/arguments.h"

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

constexpr double kCheckpointVersion = 3.0;
constexpr const char* kTrackerFileName = "latest_checkpointed_iteration.txt";
constexpr const char* kModelFileName = "model_optim_rng.pt";
constexpr const char* kDistribOptimFileName = "distrib_optim.pt";
constexpr const char* kChecksumFileName = "checksums.txt";

// --- layout
// "iter_0000100", or "release" for nullopt.
std::string iteration_dir_name(std::optional<int64_t> iteration);
// "mp_rank_01" without pipeline parallelism, else "mp_rank_01_002" (Megatron-LM's names).
std::string rank_dir_name(int tp_rank, int pp_rank, int pp_size);
struct TrackerEntry {
  std::optional<int64_t> iteration;  // nullopt: "release"
};
// nullopt when dir has no tracker file; unreadable content throws naming the file.
std::optional<TrackerEntry> read_tracker(const std::string& dir);
// Iterations of the iter_NNNNNNN folders in dir, ascending (whatever their state).
std::vector<int64_t> list_iterations(const std::string& dir);

// --- files
// Writes `value` as a torch.save archive to path (whose folder must exist): flushed and
// fsync'ed; errors (disk full, permissions) throw naming the file. Returns the CRC32 and size.
struct WrittenFile {
  std::string path;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};
WrittenFile write_checkpoint_file(const std::string& path, const c10::IValue& value);
// Reads one file, checking it against its folder's checksums.txt when there is one; a missing,
// truncated or corrupt file throws one line naming it.
c10::IValue read_checkpoint_file(const std::string& path);
// Writes the files of one rank folder as <parent>/<name>.tmp, fsyncs, renames to <parent>/<name>.
std::vector<WrittenFile> write_rank_dir(const std::string& parent, const std::string& name,
                                        const std::map<std::string, c10::IValue>& files);
// Makes <dir>/<iteration dir>.tmp the checkpoint <dir>/<iteration dir> (replacing an existing
// one atomically) and then points the tracker at it; keep_last > 0 deletes older iter_ folders
// beyond the newest keep_last. Single caller (rank 0).
void publish_checkpoint(const std::string& dir, std::optional<int64_t> iteration, int64_t keep_last = 0);
// Deletes a file or folder tree if it exists (nftw; std::filesystem::remove_all is avoided
// because LibTorch's libtorch.so exports a copy of it that crashes on non-empty folders).
void remove_tree(const std::string& path);
// Writes the tracker file atomically.
void write_tracker(const std::string& dir, std::optional<int64_t> iteration);

// --- arguments
// Every setting of Arguments as a dict of plain values (None for unset optionals), and back.
c10::impl::GenericDict arguments_to_dict(const Arguments& args);
// Fields absent from the dict keep their defaults; a value of the wrong type throws naming it.
Arguments arguments_from_dict(const c10::IValue& dict);

// --- training state
// What pretrain saves and restores; the pointers stay owned by the caller.
struct TrainingState {
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

struct SaveResult {
  std::string path;   // the iteration folder
  uint64_t bytes = 0;  // written by this rank
  double seconds = 0;
};
// Saves state.iteration to args.save. Collective over the world; a failure on any rank throws
// on every rank (the failing one with its message) and leaves the previous checkpoint current.
SaveResult save_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state);

// Loads from args.load (the tracker's iteration, or --ckpt-step) into `state`: model, then unless
// --finetune / --no-load-optim the optimizer, grad scaler, schedule, iteration and consumed
// samples, and unless --no-load-rng the RNG states. Collective. Returns false when args.load has
// no checkpoint (training starts from scratch); throws on mismatched arguments and unreadable
// files (with --load-fallback it tries older iterations first).
bool load_checkpoint(const Arguments& args, const ParallelState& ps, TrainingState& state);

// Raises `signal` (default SIGKILL) when MEGATRON_FAULT_INJECTION names `point` ("point" or
// "point@rank"), for the tests that kill or stop a run at chosen moments.
void fault_point(const std::string& point, int rank, int signal = 9);

}  // namespace megatron::training
