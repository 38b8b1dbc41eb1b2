#include "training/arguments/checkpoint_args.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <vector>

#include "megatron/logging.h"
#include "megatron/training/checkpoint_layout.h"
#include "megatron/training/checkpoint_schema.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::training::detail {

void apply_checkpoint_args(Arguments& a, const std::set<std::string>& given) {
  if (!a.use_checkpoint_args) return;
  // As Megatron-LM: no checkpoint yet (a first start of a script that always resumes) is not an
  // error; the given arguments stand.
  const auto tracker = a.load.empty() || a.ckpt_step ? std::nullopt : read_tracker(a.load);
  if (a.load.empty() || (!a.ckpt_step && !tracker)) {
    log_rank_0(LogLevel::kWarn, "[arguments] --use-checkpoint-args: no checkpoint in --load " +
                                    (a.load.empty() ? std::string("(not given)") : a.load) +
                                    ", using the given arguments");
    return;
  }
  const std::optional<int64_t> iteration = a.ckpt_step ? a.ckpt_step : tracker->iteration;
  const std::string iter_dir = (std::filesystem::path(a.load) / iteration_dir_name(iteration)).string();
  // A torch_dist checkpoint loads at any layout: only its model's shape and tokenizer are taken.
  const bool any_layout = is_torch_dist(iter_dir);
  const std::string rank_dir = any_layout ? iter_dir : first_rank_dir(iter_dir);
  const Arguments saved = any_layout ? read_torch_dist_common(iter_dir, read_dcp_metadata(iter_dir), false).args
                                     : RankCheckpoint::read(rank_dir, false).args;
  std::vector<std::string> overridden;
#define MEGATRON_FROM_CHECKPOINT(group, field, saved_kind, check, help)                                              \
  if (std::string(#group) == "network_size" || std::string(#group) == "moe" || std::string(#group) == "tokenizer") { \
    if (!given.count(#field)) a.field = saved.field;                                                                 \
  }
  MEGATRON_ARGUMENTS(MEGATRON_FROM_CHECKPOINT)
#undef MEGATRON_FROM_CHECKPOINT
  if (any_layout) return;
  auto force = [&](const char* field, auto& mine, const auto& theirs) {
    if (given.count(field) && mine != theirs) overridden.push_back(flag_of(field));
    mine = theirs;
  };
  force("tensor_model_parallel_size", a.tensor_model_parallel_size, saved.tensor_model_parallel_size);
  force("pipeline_model_parallel_size", a.pipeline_model_parallel_size, saved.pipeline_model_parallel_size);
  force("num_layers_per_virtual_pipeline_stage", a.num_layers_per_virtual_pipeline_stage,
        saved.num_layers_per_virtual_pipeline_stage);
  force("num_virtual_stages_per_pipeline_rank", a.num_virtual_stages_per_pipeline_rank,
        saved.num_virtual_stages_per_pipeline_rank);
  if (!overridden.empty()) {
    std::string list;
    for (const auto& f : overridden) list += (list.empty() ? "" : ", ") + f;
    log_rank_0(LogLevel::kWarn, "[arguments] --use-checkpoint-args: " + list + " taken from " + rank_dir +
                                    " (the saved shards fix the parallel layout)");
  }
}

}  // namespace megatron::training::detail
