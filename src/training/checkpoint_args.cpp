#include "checkpoint_args.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "megatron/logging.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpoint_layout.h"
#include "megatron/training/checkpoint_schema.h"

namespace megatron::training::detail {
namespace fs = std::filesystem;
namespace {

// The file of tensor- and pipeline-parallel rank 0 of the iteration --load (or --ckpt-step) names.
std::string first_rank_file(const Arguments& a) {
  std::optional<int64_t> iteration = a.ckpt_step;
  if (!iteration) iteration = read_tracker(a.load)->iteration;  // the caller checked there is one
  const fs::path iter_dir = fs::path(a.load) / iteration_dir_name(iteration);
  std::vector<std::string> ranks;
  if (fs::is_directory(iter_dir)) {
    for (const auto& entry : fs::directory_iterator(iter_dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("mp_rank_00", 0) == 0) ranks.push_back(name);
    }
  }
  TORCH_CHECK(!ranks.empty(), "[arguments] --use-checkpoint-args: ", iter_dir.string(),
              " has no mp_rank_00* folder to read the saved arguments from");
  std::sort(ranks.begin(), ranks.end());  // mp_rank_00 or mp_rank_00_000: TP 0, PP 0
  return (iter_dir / ranks.front() / kModelFileName).string();
}

}  // namespace

void apply_checkpoint_args(Arguments& a, const std::set<std::string>& given) {
  if (!a.use_checkpoint_args) return;
  // As Megatron-LM: no checkpoint yet (a first start of a script that always resumes) is not an
  // error; the given arguments stand.
  if (a.load.empty() || (!a.ckpt_step && !read_tracker(a.load))) {
    log_rank_0(LogLevel::kWarn, "[arguments] --use-checkpoint-args: no checkpoint in --load " +
                                    (a.load.empty() ? std::string("(not given)") : a.load) +
                                    ", using the given arguments");
    return;
  }
  const std::string file = first_rank_file(a);
  const c10::IValue value = read_checkpoint_file(file);
  TORCH_CHECK(value.isGenericDict() && value.toGenericDict().contains("args"),
              "[arguments] --use-checkpoint-args: ", file, " has no saved 'args'");
  const Arguments saved = arguments_from_dict(value.toGenericDict().at("args"));
  std::vector<std::string> overridden;
#define MEGATRON_FROM_CHECKPOINT(group, field, saved_kind, check, help)              \
  if (std::string(#group) == "network_size" || std::string(#group) == "tokenizer") { \
    if (!given.count(#field)) a.field = saved.field;                                 \
  }
  MEGATRON_ARGUMENTS(MEGATRON_FROM_CHECKPOINT)
#undef MEGATRON_FROM_CHECKPOINT
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
    log_rank_0(LogLevel::kWarn, "[arguments] --use-checkpoint-args: " + list + " taken from " + file +
                                    " (the saved shards fix the parallel layout)");
  }
}

}  // namespace megatron::training::detail
