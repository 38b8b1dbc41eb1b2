// load_checkpoint, and the save folder's lock and history checks (save_checkpoint.cpp saves):
// what every rank reads, in which order, and how the ranks agree; docs/checkpoints.md.
#include "megatron/training/checkpointing.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/logging.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "training/checkpointing/integrity.h"
#include "training/checkpointing/paths.h"
#include "training/checkpointing/rank_state.h"
#include "training/checkpointing/save_steps.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::training {
namespace fs = std::filesystem;
namespace {
using detail::join;

using TensorMap = RankCheckpoint::TensorMap;
using detail::agree;
using detail::capture;
using detail::load_fp8_state;
using detail::load_module_state;
using detail::rank_checkpoint;
using detail::set_rng_state;

// Settings that decide the shapes and the layout of the saved tensors.
// any_layout: a torch_dist checkpoint, which loads at any TP/PP (and padded vocabulary).
void check_arguments(const Arguments& args, const TrainingState& state, const RankCheckpoint& ck,
                     const std::string& file, bool any_layout) {
  const Arguments& saved = ck.args;
  auto same = [&](const char* flag, const auto& mine, const auto& theirs) {
    TORCH_CHECK(mine == theirs, "[checkpointing] ", file, " was saved with ", flag, " ", c10::IValue(theirs),
                ", this run has ", c10::IValue(mine));
  };
  same("--num-layers", args.num_layers, saved.num_layers);
  same("--hidden-size", args.hidden_size, saved.hidden_size);
  same("--num-attention-heads", args.num_attention_heads, saved.num_attention_heads);
  same("--num-query-groups", args.num_query_groups, saved.num_query_groups);
  same("--position-embedding-type", args.position_embedding_type, saved.position_embedding_type);
  if (args.position_embedding_type == "learned_absolute")
    same("--max-position-embeddings", args.max_position_embeddings, saved.max_position_embeddings);
  same("--normalization", args.normalization, saved.normalization);
  same("--apply-layernorm-1p", args.apply_layernorm_1p, saved.apply_layernorm_1p);
  same("--swiglu", args.swiglu, saved.swiglu);
  same("--disable-bias-linear", args.disable_bias_linear, saved.disable_bias_linear);
  // Whether Q, K, V have a bias: Megatron-LM sets add_qkv_bias with every bias-linear run.
  same("--add-qkv-bias (or biases on every linear layer)", args.add_qkv_bias || !args.disable_bias_linear,
       saved.add_qkv_bias || !saved.disable_bias_linear);
  same("--embed-layernorm", args.embed_layernorm, saved.embed_layernorm);
  same("--qk-layernorm", args.qk_layernorm, saved.qk_layernorm);
  same("--qk-layernorm-across-heads", args.qk_layernorm_across_heads, saved.qk_layernorm_across_heads);
  same("--num-experts", args.num_experts.value_or(0), saved.num_experts.value_or(0));
  same("--untie-embeddings-and-output-weights", args.untie_embeddings_and_output_weights,
       saved.untie_embeddings_and_output_weights);
  if (any_layout) return;
  same("--tensor-model-parallel-size", args.tensor_model_parallel_size, saved.tensor_model_parallel_size);
  same("--pipeline-model-parallel-size", args.pipeline_model_parallel_size, saved.pipeline_model_parallel_size);
  same("virtual pipeline stages (--num-layers-per-virtual-pipeline-stage)",
       args.virtual_pipeline_model_parallel_size.value_or(1), saved.virtual_pipeline_model_parallel_size.value_or(1));
  // The stages' files number their layers from the stage's first: the split must be the same.
  auto given = [](const std::optional<int64_t>& n) { return n ? std::to_string(*n) : std::string("(not given)"); };
  same("--decoder-first-pipeline-num-layers", given(args.decoder_first_pipeline_num_layers),
       given(saved.decoder_first_pipeline_num_layers));
  same("--decoder-last-pipeline-num-layers", given(args.decoder_last_pipeline_num_layers),
       given(saved.decoder_last_pipeline_num_layers));
  same("--account-for-embedding-in-pipeline-split", args.account_for_embedding_in_pipeline_split,
       saved.account_for_embedding_in_pipeline_split);
  same("--account-for-loss-in-pipeline-split", args.account_for_loss_in_pipeline_split,
       saved.account_for_loss_in_pipeline_split);
  same("--pipeline-model-parallel-layout", args.pipeline_model_parallel_layout, saved.pipeline_model_parallel_layout);
  if (ck.padded_vocab_size > 0 && state.padded_vocab_size > 0)
    same("a padded vocabulary of", state.padded_vocab_size, ck.padded_vocab_size);
}

// Every rank resumes at one place: rank folders mixed from two saves would train out of step.
void check_ranks_agree(comm::ProcessGroup& world, const TrainingState& state, double version, const std::string& file) {
  const std::vector<double> mine = {static_cast<double>(state.iteration),
                                    static_cast<double>(state.consumed_train_samples),
                                    static_cast<double>(state.consumed_valid_samples), version};
  const int64_t n = static_cast<int64_t>(mine.size());
  at::Tensor all = at::empty({world.size() * n}, at::kDouble);
  world.all_gather(all, at::tensor(mine, at::kDouble));
  const double* v = all.data_ptr<double>();
  auto where = [&](int r) {
    const double* x = v + n * r;
    return "iteration " + std::to_string(static_cast<int64_t>(x[0])) + ", consumed samples " +
           std::to_string(static_cast<int64_t>(x[1])) + " train / " + std::to_string(static_cast<int64_t>(x[2])) +
           " valid, checkpoint version " + c10::str(x[3]);
  };
  for (int r = 1; r < world.size(); ++r) {
    TORCH_CHECK(std::equal(v, v + n, v + n * r), "[checkpointing] the ranks disagree on where to resume: rank 0 read ",
                where(0), ", rank ", r, " read ", where(r), " (this rank's file: ", file,
                "); its rank folders come from different saves");
  }
}

// This rank's folder of iter_dir, with a message naming both layouts when it is not there.
std::string rank_dir_of(const Arguments& args, const ParallelState& ps, const std::string& iter_dir) {
  TORCH_CHECK(fs::is_directory(iter_dir), "[checkpointing] ", iter_dir, " does not exist");
  const std::string rank_dir =
      join(iter_dir, rank_dir_name(ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank(),
                                   ps.get_pipeline_model_parallel_world_size(), ps.get_expert_model_parallel_rank(),
                                   ps.get_expert_model_parallel_world_size()));
  TORCH_CHECK(fs::is_directory(rank_dir), "[checkpointing] ", rank_dir, " does not exist: ", iter_dir,
              " was saved with ", describe_layout(iter_dir), ", this run has TP ", args.tensor_model_parallel_size,
              ", PP ", args.pipeline_model_parallel_size, ", EP ", args.expert_model_parallel_size,
              "; reshard it with convert_checkpoint");
  return rank_dir;
}

}  // namespace

std::unique_ptr<SaveDirLock> lock_save_dir(const Arguments& args, const ParallelState& ps) {
  if (args.save.empty()) return nullptr;
  auto& world = ps.get_world_group();
  std::unique_ptr<SaveDirLock> lock;
  std::string error;
  if (world.rank() == 0) error = capture([&] { lock = std::make_unique<SaveDirLock>(args.save); });
  agree(world, error, "locking --save " + args.save);
  return lock;
}

void check_save_history(const Arguments& args, int64_t iteration) {
  if (args.save.empty() || args.allow_save_rewind || !std::filesystem::is_directory(args.save)) return;
  const auto tracker = read_tracker(args.save);
  const std::string path = join(args.save, kTrackerFileName);
  if (tracker) {
    TORCH_CHECK(!tracker->iteration || *tracker->iteration <= iteration, "[checkpointing] --save ", args.save,
                ": its tracker names iteration ", tracker->iteration.value_or(0), " but this run starts at iteration ",
                iteration, "; its saves would replace later checkpoints and move ", path, " back. Resume with --load ",
                args.save, ", save elsewhere, or pass --allow-save-rewind");
    return;
  }
  const auto found = list_iterations(args.save);
  TORCH_CHECK(found.empty() || found.back() <= iteration, "[checkpointing] --save ", args.save, " holds ",
              iteration_dir_name(found.back()), " but no ", kTrackerFileName, "; this run (from iteration ", iteration,
              ") would replace its checkpoints. Save elsewhere, or pass --allow-save-rewind");
}

bool load_checkpoint(const Arguments& args, const ParallelState& ps, TrainingState& state) {
  const auto start = std::chrono::steady_clock::now();
  auto& world = ps.get_world_group();
  const auto tracker = read_tracker(args.load);
  std::vector<std::optional<int64_t>> candidates;
  if (args.ckpt_step) {
    candidates.push_back(*args.ckpt_step);
  } else if (tracker) {
    candidates.push_back(tracker->iteration);
  } else {
    // A folder of checkpoints that lost its tracker is not a fresh start: saving into it would
    // replace its iterations. An absent or empty folder is (launch scripts pass --load on run 1).
    const auto found = list_iterations(args.load);
    if (!found.empty()) {
      std::string names;
      for (size_t i = 0; i < found.size() && i < 5; ++i) names += (i ? ", " : "") + iteration_dir_name(found[i]);
      if (found.size() > 5) names += ", ... " + iteration_dir_name(found.back());
      TORCH_CHECK(false, "[checkpointing] --load ", args.load, " holds ", found.size(), " checkpoint(s) (", names,
                  ") but no ", kTrackerFileName, "; give --ckpt-step N to load one, or write its number into ",
                  join(args.load, kTrackerFileName));
    }
    log_rank_0(LogLevel::kWarn, "WARNING: could not find " + join(args.load, kTrackerFileName) +
                                    "; no checkpoint to load, training starts from random weights");
    return false;
  }
  if (args.load_fallback) {
    const auto all = list_iterations(args.load);
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (!candidates.front() || *it < *candidates.front()) candidates.push_back(*it);
  }
  const bool want_optimizer = !args.finetune && !args.no_load_optim;
  RankCheckpoint ck;
  std::string file;
  std::optional<int64_t> iteration;
  bool torch_dist = false;
  if (state.optimizer) state.optimizer->ddp().gather_params();  // ZeRO-3: whole parameters to load into
  for (size_t c = 0; c < candidates.size(); ++c) {
    const std::string iter_dir = join(args.load, iteration_dir_name(candidates[c]));
    const std::string error = capture([&] {
      TORCH_CHECK(fs::is_directory(iter_dir), "[checkpointing] ", iter_dir, " does not exist");
      torch_dist = detail::is_torch_dist(iter_dir);
      if (torch_dist) {
        file = iter_dir;
        if (args.verify_integrity && world.rank() == 0) detail::verify_integrity_manifest(iter_dir);
        ck = detail::read_torch_dist(iter_dir, args, ps, state, want_optimizer);
      } else {
        const std::string rank_dir = rank_dir_of(args, ps, iter_dir);
        file = join(rank_dir, kModelFileName);
        ck = RankCheckpoint::read(rank_dir, want_optimizer);
      }
      // Here, so that every rank agrees on it: a Megatron-LM optimizer state this reader cannot map.
      TORCH_CHECK(!want_optimizer || !candidates[c] || ck.optimizer_unread.empty(), ck.optimizer_unread,
                  ck.optimizer_unread.find("--no-load-optim") == std::string::npos
                      ? "; pass --no-load-optim (the Adam moments restart) or --finetune"
                      : "");
    });
    auto flag = at::full({1}, error.empty() ? 0.0 : 1.0, at::kDouble);
    world.all_reduce(flag, comm::ReduceOp::kMax);
    if (flag.item<double>() == 0) {
      iteration = candidates[c];
      break;
    }
    if (c + 1 < candidates.size()) {
      if (!error.empty()) log(LogLevel::kWarn, error);
      log_rank_0(LogLevel::kWarn, "WARNING: " + iter_dir + " cannot be loaded on every rank; --load-fallback tries " +
                                      join(args.load, iteration_dir_name(candidates[c + 1])));
      continue;
    }
    agree(world, error, "loading " + iter_dir);
  }
  check_arguments(args, state, ck, file, torch_dist);
  if (torch_dist) detail::check_every_tensor_read(world, join(args.load, iteration_dir_name(iteration)), args, state);
  // Before version 2.0 Megatron-LM stored the fused QKV weight in another order, which this
  // reader does not convert.
  TORCH_CHECK(ck.checkpoint_version == 0 || ck.checkpoint_version >= 2.0, "[checkpointing] ", file,
              " has checkpoint_version ", ck.checkpoint_version,
              ": its query/key/value weights are in the order of Megatron-LM before 2.0, which this reader does not "
              "convert; load and save it once with Megatron-LM first");
  const bool release = !iteration;
  // A resume on other data would draw samples the run never planned (and skip others).
  if (!release && !args.finetune && !args.override_data_check && !ck.data_fingerprint.empty()) {
    const std::string now = detail::data_fingerprint(args);
    TORCH_CHECK(now == ck.data_fingerprint, "[checkpointing] ", file, " was trained on ", ck.data_fingerprint,
                "; this run has ", now, ". Pass --override-data-check to resume on it anyway, or --finetune");
  }

  const auto& model = *state.model;
  TORCH_CHECK(ck.model.size() == model.size(), "[checkpointing] ", file, " holds ", ck.model.size(),
              " model chunks, this run builds ", model.size());
  for (size_t v = 0; v < model.size(); ++v) {
    try {
      load_module_state(*model[v], ck.model[v]);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] ", file, " '", model_chunk_key(v, model.size()),
                  "': ", e.what_without_backtrace());
    }
  }
  if (!load_fp8_state(model, ck.fp8_state, file) && !args.fp8_format.empty() && args.fp8_recipe == "delayed")
    log_rank_0(LogLevel::kInfo, "> " + file + " holds no FP8 scaling state: the FP8 scales start from 1");
  if (args.finetune || release) {
    state.iteration = 0;
    state.consumed_train_samples = state.consumed_valid_samples = 0;
  } else {
    state.iteration = ck.iteration;
    state.consumed_train_samples = ck.consumed_train_samples;
    state.consumed_valid_samples = ck.consumed_valid_samples;
  }
  check_ranks_agree(world, state, ck.checkpoint_version, file);
  if (want_optimizer && !release) {
    TORCH_CHECK(ck.optimizer, "[checkpointing] ", file,
                " has no optimizer state (saved with --no-save-optim?); pass --no-load-optim or --finetune");
    try {
      state.optimizer->load_param_state(ck.optimizer->param_state);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] ", file, ": ", e.what_without_backtrace());
    }
    if (auto* scaler = state.optimizer->grad_scaler(); scaler && ck.optimizer->grad_scaler) {
      const auto& s = *ck.optimizer->grad_scaler;
      scaler->load_state({s.scale, s.growth_tracker, s.hysteresis_tracker});
    }
    const auto how = args.override_opt_param_scheduler         ? optimizer::SavedSchedule::kOverride
                     : args.use_checkpoint_opt_param_scheduler ? optimizer::SavedSchedule::kUseCheckpoint
                                                               : optimizer::SavedSchedule::kMustMatch;
    try {
      for (const auto& line : state.scheduler->load_state_dict(ck.optimizer->scheduler, how))
        log_rank_0(LogLevel::kInfo, line);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] ", file, ": ", e.what_without_backtrace(),
                  " (this run's flags against the checkpoint's schedule); pass --override-opt_param-scheduler to "
                  "keep this run's or --use-checkpoint-opt_param-scheduler to take the checkpoint's");
    }
  } else if (state.optimizer) {
    state.optimizer->reload_model_params();  // the main parameters start from the loaded model
  }
  if (state.optimizer) state.optimizer->ddp().release_params();
  if (!args.finetune && !args.no_load_rng && !release) {
    if (!ck.rng_state || ck.rng_state->empty()) {
      log_rank_0(LogLevel::kWarn, "WARNING: " + file +
                                      " has no RNG state (resharded or --no-save-rng); "
                                      "the RNG continues from its seed");
    } else {
      const auto& list = *ck.rng_state;
      const auto dp_rank = static_cast<size_t>(ps.get_data_parallel_rank());
      const bool per_dp_rank = list.size() == static_cast<size_t>(ps.get_data_parallel_world_size());
      set_rng_state(per_dp_rank ? list[dp_rank] : list[0], state, file);
    }
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  log_rank_0(LogLevel::kInfo, "  successfully loaded checkpoint from " + args.load + " [ " +
                                  iteration_dir_name(iteration) + " ] at iteration " + std::to_string(state.iteration) +
                                  " [ " + seconds + " s ]");
  return true;
}

}  // namespace megatron::training
