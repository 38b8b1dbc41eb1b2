// Where checkpoints live, in Megatron-LM's legacy layout (docs/checkpoints.md):
//   <dir>/latest_checkpointed_iteration.txt      the iteration that counts ("release" for imports)
//   <dir>/iter_0000100/mp_rank_00[_000][_000]/model_optim_rng.pt   one per TP [x PP] [x EP] rank
//                                      /distrib_optim.pt     with --use-distributed-optimizer
//                                      /checksums.txt        size and CRC32 of each file
// An iteration is staged as iter_N.tmp, renamed to iter_N, and only then named by the tracker.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatron::training {

constexpr const char* kTrackerFileName = "latest_checkpointed_iteration.txt";
constexpr const char* kModelFileName = "model_optim_rng.pt";
constexpr const char* kDistribOptimFileName = "distrib_optim.pt";

// "iter_0000100", or "release" for nullopt.
MEGATRON_API std::string iteration_dir_name(std::optional<int64_t> iteration);
// "mp_rank_01" without pipeline parallelism, else "mp_rank_01_002"; with expert parallelism the
// expert-parallel rank follows: "mp_rank_01_003" or "mp_rank_01_002_003" (Megatron-LM's names).
MEGATRON_API std::string rank_dir_name(int tp_rank, int pp_rank, int pp_size, int ep_rank = 0, int ep_size = 1);
// The folder of tensor-, pipeline- and expert-parallel rank 0 in a saved iteration folder:
// mp_rank_00, mp_rank_00_000 (pipeline stages or expert parallelism), or mp_rank_00_000_000.
MEGATRON_API std::string first_rank_dir(const std::string& iter_dir);
// The layout a saved iteration folder shows ("TP 2, PP 1 (mp_rank_00 ... mp_rank_01)"), for errors.
MEGATRON_API std::string describe_layout(const std::string& iter_dir);

struct MEGATRON_API TrackerEntry {
  std::optional<int64_t> iteration;  // nullopt: "release"
};
// nullopt when dir has no tracker file; unreadable content throws naming the file.
MEGATRON_API std::optional<TrackerEntry> read_tracker(const std::string& dir);
// Writes the tracker file atomically.
MEGATRON_API void write_tracker(const std::string& dir, std::optional<int64_t> iteration);
// Iterations of the iter_NNNNNNN folders in dir, ascending (whatever their state).
MEGATRON_API std::vector<int64_t> list_iterations(const std::string& dir);

// Makes <dir>/<iteration dir>.tmp the checkpoint <dir>/<iteration dir> (replacing an existing
// one atomically) and then points the tracker at it; keep_last > 0 deletes older iter_ folders
// beyond the newest keep_last, retain_interval older ones whose iteration is not a multiple of
// it (Megatron-LM's --save-retain-interval). Single caller (rank 0).
MEGATRON_API void publish_checkpoint(const std::string& dir, std::optional<int64_t> iteration, int64_t keep_last = 0,
                                     std::optional<int64_t> retain_interval = std::nullopt);
// Deletes the iter_*.tmp and iter_*.deleting folders interrupted saves left in dir.
MEGATRON_API void remove_stale_staging(const std::string& dir);

// <dir>/save.lock, held (flock) while one run may save into dir: a second run pointed at the same
// folder is refused, naming the holder (pid and host written in the file). The kernel drops the
// lock when its process dies, so a dead run's lock file is stale and taken over.
constexpr const char* kSaveLockFileName = "save.lock";
class MEGATRON_API SaveDirLock {
 public:
  explicit SaveDirLock(const std::string& dir);  // throws naming the holder when held
  ~SaveDirLock();
  SaveDirLock(const SaveDirLock&) = delete;
  SaveDirLock& operator=(const SaveDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace megatron::training
