// pretrain() by phase, as Megatron-LM's training.py: initialize -> model -> optimizer and
// scheduler -> data -> load -> train -> evaluate. The loop itself is trainer.cpp's.
#include "megatron/training/training.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "megatron/comm/launcher_env.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/common/language_module.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/training/checkpointing.h"
#include "megatron/training/config.h"
#include "megatron/training/theoretical_memory.h"
#include "training/loop/initialize.h"
#include "training/loop/model_setup.h"
#include "training/loop/rank_lines.h"
#include "training/loop/trainer.h"

namespace megatron::training {
namespace {

using detail::Model;

// The true and padded vocabulary of the language-model chunks (--vocab-size for other models).
std::pair<int64_t, int64_t> vocab_sizes(const Arguments& args, const Model& model) {
  std::pair<int64_t, int64_t> sizes{args.vocab_size.value_or(0), args.vocab_size.value_or(0)};
  for (const auto& m : model)
    if (auto* lm = dynamic_cast<models::common::LanguageModule*>(m.get()))
      sizes = {lm->vocab_size(), lm->padded_vocab_size()};
  return sizes;
}

// --load: restores the parts in place and says where training resumes. Last of the set-up, after
// everything that might draw from the default generators, so that the restored RNG states are
// the ones the next iteration sees.
detail::TrainingProgress load(const TrainingContext& ctx, detail::TrainerParts& parts) {
  detail::TrainingProgress progress;
  if (ctx.args.load.empty()) return progress;
  TrainingState state = detail::checkpoint_state(ctx, parts, progress);
  if (load_checkpoint(ctx.args, ctx.parallel_state, state)) {
    progress = {state.iteration, state.consumed_train_samples, state.consumed_valid_samples, state.iteration};
    parts.optimizer->set_lr(parts.scheduler->lr(), parts.scheduler->decoupled_lr());
  }
  empty_cpu_allocator_cache();
  return progress;
}

std::unique_ptr<datasets::DataIterator> build_iterator(const TrainingContext& ctx,
                                                       std::shared_ptr<const datasets::MegatronDataset> ds,
                                                       int64_t eod_token, int64_t consumed_samples) {
  if (!ds) return nullptr;
  const auto& args = ctx.args;
  const auto& ps = ctx.parallel_state;
  // Every rank of a TP group has the same DP rank, so it draws the same samples itself; a resumed
  // run starts after the samples its checkpoint consumed.
  std::unique_ptr<datasets::BatchSampler> sampler;
  if (args.dataloader_type == "cyclic")
    sampler = std::make_unique<datasets::MegatronPretrainingRandomSampler>(
        ds->size(), consumed_samples, args.micro_batch_size, ps.get_data_parallel_rank(),
        ps.get_data_parallel_world_size(), /*data_sharding=*/!args.no_data_sharding);
  else
    sampler = std::make_unique<datasets::MegatronPretrainingSampler>(ds->size(), consumed_samples,
                                                                     args.micro_batch_size, ps.get_data_parallel_rank(),
                                                                     ps.get_data_parallel_world_size());
  datasets::BatchOptions options;
  options.eod_token = eod_token;
  options.sequence_length = args.seq_length;  // a dataset of another sample length is refused
  options.reset_position_ids = args.reset_position_ids;
  options.reset_attention_mask = args.reset_attention_mask;
  options.eod_mask_loss = args.eod_mask_loss;
  options.create_attention_mask = args.reset_attention_mask;  // else the causal mask is implied
  options.pin_memory = ctx.device.is_cuda();
  return std::make_unique<datasets::DataIterator>(std::move(ds), std::move(sampler), options,
                                                  static_cast<int>(args.num_workers));
}

// Megatron-LM's build_train_valid_test_data_iterators: one iterator per model chunk and split.
void build_data_iterators(const TrainingContext& ctx, const Datasets& ds, const detail::TrainingProgress& progress,
                          detail::TrainerParts& parts) {
  for (size_t chunk = 0; chunk < parts.model.size(); ++chunk) {
    parts.train.push_back(build_iterator(ctx, ds.train, ds.eod_token, progress.consumed_train_samples));
    if (ds.valid) parts.valid.push_back(build_iterator(ctx, ds.valid, ds.eod_token, progress.consumed_valid_samples));
    if (ds.test) parts.test.push_back(build_iterator(ctx, ds.test, ds.eod_token, 0));
  }
}

std::array<int64_t, 3> train_valid_test_num_samples(const Arguments& args) {
  const auto n = datasets::train_valid_test_num_samples(*args.train_iters, *args.global_batch_size, args.eval_interval,
                                                        args.eval_iters);
  return {n[0].value_or(0), n[1].value_or(0), n[2].value_or(0)};
}

// --deterministic-mode for the length of the run: ATen's deterministic algorithms (one error where
// an operator has none), cuDNN's without autotuning, and cuBLAS with a fixed workspace (its
// documented condition for reproducible GEMMs). What was set before comes back afterwards.
class DeterministicMode {
 public:
  explicit DeterministicMode(bool on) : on_(on) {
    if (!on_) return;
    auto& context = at::globalContext();
    algorithms_ = context.deterministicAlgorithms();
    cudnn_ = context.deterministicCuDNN();
    benchmark_ = context.benchmarkCuDNN();
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    context.setDeterministicAlgorithms(true, /*warn_only=*/false);
    context.setDeterministicCuDNN(true);
    context.setBenchmarkCuDNN(false);
  }
  ~DeterministicMode() {
    if (!on_) return;
    auto& context = at::globalContext();
    context.setDeterministicAlgorithms(algorithms_, false);
    context.setDeterministicCuDNN(cudnn_);
    context.setBenchmarkCuDNN(benchmark_);
  }
  DeterministicMode(const DeterministicMode&) = delete;
  DeterministicMode& operator=(const DeterministicMode&) = delete;

 private:
  bool on_, algorithms_ = false, cudnn_ = false, benchmark_ = false;
};

// Megatron-LM's phase markers ("[after training is done] datetime: 2026-11-28 09:00:00"), which log
// scrapers and job monitors key on.
void print_datetime(const std::string& phase) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);
  log_rank_0(LogLevel::kInfo, "[" + phase + "] datetime: " + stamp + " ");
}

}  // namespace

TrainingResult pretrain(const Arguments& args, const ModelBuilder& model_builder, const DatasetBuilder& dataset_builder,
                        const ForwardStepFunc& forward_step, std::shared_ptr<comm::ProcessGroup> world) {
  const auto start_time = detail::Clock::now();
  const DeterministicMode deterministic(args.deterministic_mode);
  auto init = detail::initialize_megatron(args, std::move(world));
  print_datetime("after megatron is initialized");
  const TrainingContext ctx{args, init.parallel_state, init.rng_tracker, init.device, std::nullopt};

  const auto save_lock = lock_save_dir(args, init.parallel_state);  // held until pretrain returns
  // Before the model exists: a run that cannot fit stops here with the settings that would help.
  // The tokenizer's vocabulary is the model builder's; GPT-2's stands in when no flag gives one.
  const int64_t stage = init.parallel_state.get_pipeline_model_parallel_rank(), vocab = args.vocab_size.value_or(50257);
  detail::log_in_rank_order(
      init.parallel_state.get_world_group(), 0, LogLevel::kInfo,
      "[Rank " + std::to_string(init.parallel_state.get_rank()) + "] " + theoretical_memory_report(args, stage, vocab));
  check_memory(args, stage, vocab, init.device, comm::LauncherEnv::from_environment().local_world_size);
  detail::TrainerParts parts;
  parts.model = detail::get_model(ctx, model_builder);
  const auto model_peak = detail::peak_allocated(init.device);
  std::tie(parts.vocab_size, parts.padded_vocab_size) = vocab_sizes(args, parts.model);
  parts.ddp = detail::wrap_with_ddp(ctx, parts.model);
  parts.optimizer = detail::get_megatron_optimizer(ctx, *parts.ddp, model_peak);
  parts.scheduler = std::make_unique<optimizer::OptimizerParamScheduler>(scheduler_config_from_args(args));
  parts.optimizer->set_lr(parts.scheduler->lr(), parts.scheduler->decoupled_lr());
  parts.forward_step = forward_step;
  print_datetime("after model, optimizer, and learning rate scheduler are built");

  log_rank_0(LogLevel::kInfo, "> building train, validation, and test datasets ...");
  const Datasets ds = dataset_builder(ctx, train_valid_test_num_samples(args));
  TORCH_CHECK(ds.train, "[training] dataset_builder returned no training dataset");

  const auto progress = load(ctx, parts);
  check_save_history(ctx.args, progress.iteration);
  build_data_iterators(ctx, ds, progress, parts);
  print_datetime("after dataloaders are built");

  const auto model = parts.model;
  auto* ddp = parts.ddp.get();
  detail::Trainer trainer(ctx, std::move(parts), progress, start_time);
  // The model outlives the wrapper (the caller may hold it). If training throws (a non-finite
  // loss stops it), the gather the last step launched into its parameters is finished (its
  // buffers die with the wrapper) and the wrapper's hooks are removed; no new collective is
  // started, since a failing peer may never join it.
  struct Unwind {
    const Model& model;
    distributed::DistributedDataParallel* ddp;
    bool armed = true;
    ~Unwind() {
      if (!armed) return;
      try {
        ddp->finish_param_sync();
      } catch (const std::exception&) {  // a peer gone: the first error is already on its way
      }
      detail::detach_ddp_hooks(model);
    }
  } unwind{model, ddp};
  log_rank_0(LogLevel::kInfo, "done with setup ...");
  log_rank_0(LogLevel::kInfo, "training ...");
  trainer.train();
  print_datetime("after training is done");
  if (!trainer.exited_early()) trainer.evaluate_final();
  // Whole again, without sharding hooks.
  ddp->unshard();
  detail::detach_ddp_hooks(model);
  unwind.armed = false;
  return trainer.result();
}

double num_floating_point_operations(const Arguments& args, int64_t batch_size, int64_t vocab) {
  const double h = static_cast<double>(args.hidden_size);
  const double heads = static_cast<double>(args.num_attention_heads);
  const double groups =
      static_cast<double>(args.group_query_attention ? args.num_query_groups : args.num_attention_heads);
  const double kv = args.kv_channels ? static_cast<double>(*args.kv_channels) : h / heads;
  const double ffn = args.ffn_hidden_size ? static_cast<double>(*args.ffn_hidden_size) : 4 * h;
  const double gated = args.swiglu ? 1.5 : 1.0;
  const double s = static_cast<double>(args.seq_length), L = static_cast<double>(args.num_layers);
  // 3 (forward + 2x backward) * 2 (multiply-add) * 2 (two GEMMs per block term), as Megatron-LM.
  return 12.0 * batch_size * s * L * h * h *
         ((1.0 + groups / heads + s / h) * (kv * heads / h) + (ffn / h) * gated + vocab / (2.0 * L * h));
}

}  // namespace megatron::training
