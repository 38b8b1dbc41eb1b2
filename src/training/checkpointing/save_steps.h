// One save in three steps, so that --async-save can run the middle one on a background thread:
// begin (collective: the staging folder, this rank's state), write (this rank's files, no
// collective), end (collective: every rank's outcome, then the tracker). Private to src/training.
#pragma once

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/checkpointing.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::comm {
class ProcessGroup;
}
namespace megatron::distributed {
class DistributedDataParallel;
}

namespace megatron::training::detail {

// Runs fn; returns its error message ("" when it succeeded).
template <typename F>
std::string capture(F&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return std::string("[checkpointing] ") + e.what();
  }
  return "";
}

// Every rank learns whether any failed; all throw then, the failing one with its own message.
void agree(comm::ProcessGroup& world, const std::string& error, const std::string& what);

struct PendingSave {
  int64_t iteration = 0;
  std::string staging, final_dir;
  std::chrono::steady_clock::time_point start;
  std::optional<RankCheckpoint> rank;                        // what this rank writes (data-parallel rank 0 only)
  std::string rank_name;                                     // its folder, mp_rank_XX[_YYY]
  distributed::DistributedDataParallel* gathered = nullptr;  // ZeRO-3 parameters held whole
  // --ckpt-format torch_dist: every rank writes its items to its own file; `rank` keeps only what
  // common.pt needs (rank 0), and `part` is the metadata of what this rank wrote, gathered at the end.
  bool torch_dist = false;
  TorchDistPlacement placement;
  std::vector<DcpItem> items;
  std::string part;
};

// host_copy: the tensors copied to (pinned) host memory, so that training may go on while they
// are written; otherwise they share the live tensors' storage.
PendingSave begin_save(const Arguments& args, const ParallelState& ps, const TrainingState& state, bool host_copy);
// Releases what begin_save gathered (ZeRO-3's parameters); begin_save does it itself for a host copy.
void end_gather(PendingSave& save);
// This rank's files into the staging folder; returns the bytes written. Throws on failure.
uint64_t write_save(PendingSave& save);
// Agrees on every rank's outcome (`error`: this rank's, "" when it wrote), then publishes.
SaveResult end_save(const Arguments& args, const ParallelState& ps, PendingSave& save, uint64_t bytes,
                    const std::string& error);

}  // namespace megatron::training::detail
