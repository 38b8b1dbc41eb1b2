// save_checkpoint in three steps (save_steps.h), and --async-save, which runs the middle one
// (writing this rank's files) on a background thread; the protocol is in docs/checkpoints.md.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/logging.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/training/checkpointing.h"
#include "training/checkpointing/integrity.h"
#include "training/checkpointing/rank_state.h"
#include "training/checkpointing/save_steps.h"

namespace megatron::training {
namespace fs = std::filesystem;

namespace detail {

void agree(comm::ProcessGroup& world, const std::string& error, const std::string& what) {
  auto flag = at::full({1}, error.empty() ? 0.0 : static_cast<double>(world.rank() + 1), at::kDouble);
  world.all_reduce(flag, comm::ReduceOp::kMax);
  const int failed = static_cast<int>(flag.item<double>());
  if (failed == 0) return;
  TORCH_CHECK(error.empty(), error);
  TORCH_CHECK(false, "[checkpointing] ", what, " failed on rank ", failed - 1, " (see its message)");
}

PendingSave begin_save(const Arguments& args, const ParallelState& ps, const TrainingState& state, bool host_copy) {
  PendingSave save;
  save.start = std::chrono::steady_clock::now();
  save.iteration = state.iteration;
  auto& world = ps.get_world_group();
  save.final_dir = (fs::path(args.save) / iteration_dir_name(state.iteration)).string();
  save.staging = save.final_dir + ".tmp";
  log_rank_0(LogLevel::kInfo, "saving checkpoint at iteration " + std::to_string(state.iteration) + " to " + args.save);
  std::string error;
  if (world.rank() == 0) {
    error = capture([&] {
      fs::create_directories(args.save);
      remove_stale_staging(args.save);
      fs::create_directory(save.staging);
    });
  }
  agree(world, error, "preparing " + save.staging);

  // Collective first: the distributed optimizer gathers its shards over data-parallel ranks.
  std::map<std::string, RankCheckpoint::TensorMap> param_state;
  if (!args.no_save_optim) param_state = state.optimizer->param_state();
  if (state.optimizer) state.optimizer->ddp().gather_params();  // ZeRO-3: the parameters whole while read
  save.torch_dist = args.ckpt_format == "torch_dist";
  if (save.torch_dist) {
    // Every rank writes a share of its (TP, PP, EP) rank's chunks; the state stays in the items,
    // and only those this rank writes are copied to the host.
    save.rank = detail::rank_checkpoint(args, ps, state, std::move(param_state));
    save.placement = TorchDistPlacement::of(ps);
    save.items = torch_dist_items(args, state, *save.rank, save.placement);
    if (host_copy)
      for (auto& item : save.items)
        if (item.chunk.defined())
          item.chunk = item.chunk.detach().to(at::TensorOptions().device(at::kCPU).pinned_memory(item.chunk.is_cuda()),
                                              /*non_blocking=*/false, /*copy=*/true);
    if (world.rank() != 0) {
      save.rank.reset();
    } else {  // rank 0 keeps what common.pt needs: of the optimizer state, the step all parameters share
      for (auto& m : save.rank->model) m.clear();
      if (save.rank->optimizer) {
        std::map<std::string, RankCheckpoint::TensorMap> step;
        for (const auto& [name, s] : save.rank->optimizer->param_state)
          if (auto it = s.find("step"); step.empty() && it != s.end())
            step[name]["step"] = it->second.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
        save.rank->optimizer->param_state = std::move(step);
      }
    }
  } else if (ps.get_expert_data_parallel_rank() == 0) {
    // One writer per (TP, PP, EP) rank: the first of its expert-data-parallel replicas (with one
    // expert-parallel rank, the data-parallel rank 0), as Megatron-LM's legacy save.
    save.rank = detail::rank_checkpoint(args, ps, state, std::move(param_state));
    if (host_copy) detail::copy_to_host(*save.rank);
    save.rank_name = rank_dir_name(ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank(),
                                   ps.get_pipeline_model_parallel_world_size(), ps.get_expert_model_parallel_rank(),
                                   ps.get_expert_model_parallel_world_size());
  }
  param_state.clear();
  // ZeRO-3's gathered parameters go once nothing reads them: after the host copy, or after the
  // plain save has written them (end_gather).
  if (state.optimizer) save.gathered = &state.optimizer->ddp();
  if (host_copy) end_gather(save);
  return save;
}

void end_gather(PendingSave& save) {
  if (save.gathered) save.gathered->release_params();
  save.gathered = nullptr;
}

uint64_t write_save(PendingSave& save) {
  uint64_t bytes = 0;
  if (save.torch_dist) {
    if (save.items.empty()) return bytes;
    const DcpMetadata written = write_dcp_file(save.staging, save.placement.file_name(), save.items);
    save.items.clear();  // the host copy goes as soon as it is written
    save.part = dcp_metadata_pickle(written);
    return std::filesystem::file_size(fs::path(save.staging) / save.placement.file_name());
  }
  if (!save.rank) return bytes;
  for (const auto& w : write_rank_dir(save.staging, save.rank_name, save.rank->to_files())) bytes += w.bytes;
  save.rank.reset();  // the host copy goes as soon as it is written
  return bytes;
}

// torch_dist: rank 0 gathers what every rank wrote and writes the files that describe it.
void write_torch_dist_metadata(comm::ProcessGroup& world, PendingSave& save, bool integrity) {
  const auto parts = all_gather_bytes(world, save.part);
  std::string error;
  if (world.rank() == 0) {
    error = capture([&] {
      DcpMetadata md;
      for (size_t r = 0; r < parts.size(); ++r) {
        if (parts[r].empty()) continue;
        const auto* bytes = reinterpret_cast<const uint8_t*>(parts[r].data());
        md.merge(parse_dcp_metadata(bytes, parts[r].size(), "rank " + std::to_string(r) + "'s part"), save.staging);
      }
      write_torch_dist_global(save.staging, md, *save.rank);
      if (integrity) save_integrity_manifest(save.staging);  // last: it hashes every other file
    });
  }
  save.rank.reset();
  try {
    agree(world, error, "writing the metadata of " + save.staging);
  } catch (const c10::Error&) {
    if (world.rank() == 0) capture([&] { remove_tree(save.staging); });
    throw;
  }
}

SaveResult end_save(const Arguments& args, const ParallelState& ps, PendingSave& save, uint64_t bytes,
                    const std::string& write_error) {
  auto& world = ps.get_world_group();
  try {
    agree(world, write_error, "saving iteration " + std::to_string(save.iteration) + " to " + save.staging);
  } catch (const c10::Error&) {
    // A failed save (a full disk) leaves nothing behind; the previous checkpoint stays current.
    if (world.rank() == 0) capture([&] { remove_tree(save.staging); });
    throw;
  }
  if (save.torch_dist) write_torch_dist_metadata(world, save, args.verify_integrity);
  std::string error;
  if (world.rank() == 0)
    error = capture(
        [&] { publish_checkpoint(args.save, save.iteration, args.keep_last_checkpoints, args.save_retain_interval); });
  agree(world, error, "publishing " + save.final_dir);

  auto total = at::full({1}, static_cast<double>(bytes), at::kDouble);
  world.all_reduce(total);
  SaveResult result;
  result.path = save.final_dir;
  result.bytes = static_cast<uint64_t>(total.item<double>());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - save.start).count();
  char line[256];
  std::snprintf(line, sizeof(line), "  successfully saved checkpoint from iteration %7lld to %s [ %.3f s, %.1f MB ]",
                static_cast<long long>(save.iteration), args.save.c_str(), result.seconds, result.bytes / 1e6);
  log_rank_0(LogLevel::kInfo, line);
  return result;
}

}  // namespace detail

SaveResult save_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state) {
  detail::PendingSave save = detail::begin_save(args, ps, state, /*host_copy=*/false);
  uint64_t bytes = 0;
  const std::string error = detail::capture([&] { bytes = detail::write_save(save); });
  detail::end_gather(save);
  return detail::end_save(args, ps, save, bytes, error);
}

class AsyncSave {
 public:
  detail::PendingSave save;
  std::future<std::pair<uint64_t, std::string>> written;  // bytes, error ("" when written)
};

std::shared_ptr<AsyncSave> save_checkpoint_async(const Arguments& args, const ParallelState& ps,
                                                 const TrainingState& state) {
  auto pending = std::make_shared<AsyncSave>();
  pending->save = detail::begin_save(args, ps, state, /*host_copy=*/true);
  // The thread owns nothing of the training state: it reads only the host copy in `save`.
  pending->written = std::async(std::launch::async, [p = pending.get()] {
    uint64_t bytes = 0;
    std::string error = detail::capture([&] { bytes = detail::write_save(p->save); });
    return std::make_pair(bytes, std::move(error));
  });
  return pending;
}

std::optional<SaveResult> finalize_async_save(AsyncSave& pending, const Arguments& args, const ParallelState& ps,
                                              bool blocking) {
  if (!blocking) {
    // Megatron-LM's maybe_finalize_async_save: the tracker moves only when every rank is done.
    const bool done = pending.written.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    auto all_done = at::full({1}, done ? 1.0 : 0.0, at::kDouble);
    ps.get_world_group().all_reduce(all_done, comm::ReduceOp::kMin);
    if (all_done.item<double>() == 0) return std::nullopt;
  }
  auto [bytes, error] = pending.written.get();
  return detail::end_save(args, ps, pending.save, bytes, error);
}

int64_t async_save_iteration(const AsyncSave& pending) {
  return pending.save.iteration;
}

}  // namespace megatron::training
