// The train loop: train_step over the pipeline schedule, periodic evaluation and saves, and
// Megatron-LM's early exits.
#include "training/loop/trainer.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "megatron/distributed/finalize_model_grads.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/readback.h"
#include "megatron/tensor_parallel/fp8.h"
#include "megatron/training/config.h"
#include "megatron/training/num_microbatches_calculator.h"
#include "training/loop/metrics_accumulator.h"
#include "training/loop/moe_metrics.h"
#include "training/loop/replica_check.h"

namespace megatron::training::detail {
namespace {

// --exit-signal-handler: SIGTERM only raises this flag; the loop saves and stops after the
// iteration in progress (a process-wide signal can only reach process-wide state).
volatile std::sig_atomic_t g_exit_signal_received = 0;
extern "C" void on_exit_signal(int) {
  g_exit_signal_received = 1;
}

class ExitSignalHandler {
 public:
  explicit ExitSignalHandler(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    g_exit_signal_received = 0;
    previous_ = std::signal(SIGTERM, on_exit_signal);
  }
  ~ExitSignalHandler() {
    if (enabled_) std::signal(SIGTERM, previous_);
  }
  ExitSignalHandler(const ExitSignalHandler&) = delete;
  ExitSignalHandler& operator=(const ExitSignalHandler&) = delete;

 private:
  bool enabled_;
  void (*previous_)(int) = SIG_DFL;
};

std::vector<datasets::BatchIterator*> raw(const Iterators& its) {
  std::vector<datasets::BatchIterator*> out;
  for (const auto& it : its) out.push_back(it.get());
  return out;
}

// The largest value of x over the world's ranks (a host collective: no device readback).
double world_max(const ParallelState& ps, double x) {
  auto t = at::full({1}, x, at::kDouble);
  ps.get_world_group().all_reduce(t, comm::ReduceOp::kMax);
  return t.item<double>();
}

}  // namespace

Trainer::Trainer(const TrainingContext& ctx, TrainerParts parts, TrainingProgress progress,
                 Clock::time_point start_time)
    : args_(ctx.args),
      ctx_(ctx),
      ps_(ctx.parallel_state),
      parts_(std::move(parts)),
      forward_backward_func_(pipeline_parallel::get_forward_backward_func(ps_)),
      metrics_writer_(ps_.get_rank() == ps_.get_world_size() - 1 ? args_.metrics_file : ""),
      tensorboard_(ps_.get_rank() == ps_.get_world_size() - 1 ? args_.tensorboard_dir : "",
                   args_.tensorboard_queue_size),
      profiler_(args_, ps_.get_rank(), ctx.device),
      timers_(ctx.device),
      progress_(progress),
      start_time_(start_time) {
  result_.loaded_iteration = progress.loaded_iteration;
  last_saved_iteration_ = progress.loaded_iteration;
}

std::vector<torch::nn::Module*> Trainer::chunks() const {
  std::vector<torch::nn::Module*> out;
  for (const auto& m : parts_.model) out.push_back(m.get());
  return out;
}

void Trainer::set_train(bool on) {
  for (auto& m : parts_.model) m->train(on);
}

pipeline_parallel::ScheduleOptions Trainer::schedule_options(bool forward_only) const {
  pipeline_parallel::ScheduleOptions o;
  o.num_microbatches = args_.num_microbatches;
  o.seq_length = args_.seq_length / args_.context_parallel_size;  // what one rank's stages pass
  o.micro_batch_size = args_.micro_batch_size;
  o.hidden_size = args_.hidden_size;
  o.sequence_parallel = args_.sequence_parallel;
  o.tensor_model_parallel_size = args_.tensor_model_parallel_size;
  o.pipeline_dtype = params_dtype(args_);
  o.device = ctx_.device;
  o.forward_only = forward_only;
  o.calculate_per_token_loss = args_.calculate_per_token_loss;
  return o;
}

void Trainer::add_metrics(MetricsAccumulator& metrics, const pipeline_parallel::ForwardBackwardResult& fb) const {
  for (size_t i = 0; i < fb.losses_reduced.size(); ++i)
    metrics.add(fb.losses_reduced[i], i < fb.num_tokens.size() ? fb.num_tokens[i] : at::Tensor());
}

// Megatron-LM's finalize_model_grads with --calculate-per-token-loss: the gradients of summed
// losses, divided by the tokens of the whole batch (the last stage's count, summed over
// data- and context-parallel ranks and sent to every stage). They arrive averaged over those
// ranks, hence their number.
at::Tensor Trainer::per_token_grad_scale(const pipeline_parallel::ForwardBackwardResult& fb) const {
  if (!args_.calculate_per_token_loss) return {};
  at::Tensor tokens = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(ctx_.device));
  for (const auto& n : fb.num_tokens) tokens += n.to(tokens.device(), at::kDouble);
  ps_.get_data_parallel_group(true).all_reduce(tokens, comm::ReduceOp::kSum);
  if (ps_.get_pipeline_model_parallel_world_size() > 1)
    ps_.get_pipeline_model_parallel_group().all_reduce(tokens,
                                                       comm::ReduceOp::kSum);  // only the last stage's is non-zero
  return static_cast<double>(ps_.get_data_parallel_world_size(true)) / tokens.clamp_min(1.0);
}

// After the forward passes every hooked module has waited for its buckets (or ZeRO-2 unit) of the
// last gather.
void Trainer::warn_unwaited_param_gather(int64_t pending) {
  if (pending == 0 || unwaited_gather_reported_) return;
  unwaited_gather_reported_ = true;
  log(LogLevel::kWarn,
      "--overlap-param-gather: " + std::to_string(pending) +
          " parameter bucket(s) or layer unit(s) of the last step's gather were not waited for by this step's "
          "forward passes: a module asked for its ParamGather hook and did not call it, so code "
          "that read those parameters saw last step's values (they are gathered now, before "
          "the update)");
}

// One iteration: forward/backward over every micro-batch through the pipeline schedule, then
// the optimizer step.
IterationRecord Trainer::train_step(int64_t iteration) {
  auto& optim = *parts_.optimizer;
  auto& ddp = *parts_.ddp;
  IterationRecord record;
  record.iteration = iteration;
  record.learning_rate = optim.lr();
  record.loss_scale = optim.loss_scale();
  record.global_batch_size = get_current_global_batch_size(args_, progress_.consumed_train_samples);
  set_train(true);
  ddp.zero_grad_buffer();
  timers_.start("forward-backward");
  auto options = schedule_options(false);
  options.num_microbatches = get_num_microbatches(args_, progress_.consumed_train_samples);
  ddp.start_grad_sync(options.num_microbatches);
  const double loss_scale = optim.loss_scale();
  if (loss_scale != 1.0) options.grad_scale_func = [loss_scale](const at::Tensor& loss) { return loss * loss_scale; };
  // The losses, averaged over data- and context-parallel ranks with a last entry, non-zero where a rank's loss
  // was not finite (the optimizer carries that flag to every rank sharing the model). Launched as
  // the last loss is known, so that it travels before the gradient buckets rather than after them.
  MetricsAccumulator metrics;
  std::optional<MetricsAccumulator::Launched> losses;
  auto launch_losses = [&](const pipeline_parallel::ForwardBackwardResult& so_far) {
    add_metrics(metrics, so_far);
    const at::Tensor nonfinite = so_far.loss_finite.defined() ? at::logical_not(so_far.loss_finite) : at::Tensor();
    losses = metrics.launch(ps_.get_data_parallel_group(true), nonfinite);
  };
  options.after_last_loss = launch_losses;
  // A throw before the wait (pretrain() survives one for its caller) must not leave the
  // all-reduce writing into a freed tensor: it is waited for on the way out.
  struct WaitOnExit {
    std::optional<MetricsAccumulator::Launched>& launched;
    ~WaitOnExit() {
      if (!launched || !launched->work) return;
      try {
        launched->work->wait();
      } catch (...) {  // already unwinding with the error that matters
      }
    }
  } wait_on_exit{losses};
  auto fb = forward_backward_func_(parts_.forward_step, raw(parts_.train), chunks(), options);
  timers_.stop("forward-backward");
  if (args_.empty_unused_memory_level >= 1) empty_unused_memory(ctx_.device);  // as Megatron-LM's train_step
  timers_.start("optimizer");
  RECORD_USER_SCOPE("optimizer");  // a named range in --profile traces
  if (!losses) launch_losses(fb);  // a stage without losses launches nothing
  at::Tensor reduced = metrics.finish(*losses);
  warn_unwaited_param_gather(ddp.param_syncs_pending());
  // FP8's delayed scaling: this iteration's amaxes reduced, the next one's scales set.
  tensor_parallel::reduce_and_update_fp8_state(
      parts_.model, {&ps_.get_tensor_model_parallel_group(),
                     args_.tp_only_amax_red ? &ps_.get_context_parallel_group() : &ps_.get_data_parallel_group(true)});
  distributed::finalize_model_grads(parts_.model, ddp, ps_);
  auto step = optim.step(reduced.defined() ? reduced[-1] : at::Tensor(), per_token_grad_scale(fb));
  const auto moe = detail::reduce_moe_aux_losses(args_, ps_, chunks(), options.num_microbatches, ctx_.device);
  // The iteration's one readback: metrics, then the optional parameter norm and zero count, the
  // MoE losses, then found_inf, skip_requested and the norm.
  std::vector<at::Tensor> values;
  for (const auto& t : {step.params_norm, step.num_zeros})
    if (t.defined()) values.push_back(t.to(at::kDouble).reshape({}));
  for (int64_t i = 0; i < static_cast<int64_t>(moe.names.size()); ++i) values.push_back(moe.values[i].to(at::kDouble));
  for (const auto& t : {step.found_inf, step.skip_requested, step.grad_norm}) values.push_back(t.to(at::kDouble));
  at::Tensor outcome = at::stack(values);
  if (reduced.defined() && reduced.device() != outcome.device()) outcome = outcome.to(reduced.device());
  const at::Tensor host = read_to_host(reduced.defined() ? at::cat({reduced, outcome}) : outcome).contiguous();
  const double* v = host.data_ptr<double>();
  const int64_t n = host.numel();
  int64_t optional_at = n - static_cast<int64_t>(values.size());
  if (step.params_norm.defined()) record.params_norm = v[optional_at++];
  if (step.num_zeros.defined()) record.num_zeros = v[optional_at++];
  if (reduced.defined()) record.metrics = metrics.unpack(host);
  for (const auto& name : moe.names) record.metrics[name] = v[optional_at++];
  const bool found_inf = v[n - 3] > 0, loss_nonfinite_anywhere = v[n - 2] > 0;
  TORCH_CHECK(!loss_nonfinite_anywhere || args_.skip_nan_iterations, "[training] the loss is NaN or Inf at iteration ",
              iteration, "; lower --lr, check the data, or pass --skip-nan-iterations to skip such updates");
  // With fp16 a non-finite norm is an overflow, which the loss scale handles; otherwise it is an error.
  TORCH_CHECK(!found_inf || loss_nonfinite_anywhere || optim.grad_scaler() || args_.skip_nan_iterations,
              "[training] the gradient norm is NaN or Inf at iteration ", iteration,
              "; lower --lr, check the data, or pass --skip-nan-iterations to skip such updates");
  optim.update_loss_scale(found_inf);
  if (args_.empty_unused_memory_level >= 2) empty_unused_memory(ctx_.device);
  record.skipped = found_inf;
  record.grad_norm = found_inf ? std::nan("") : v[n - 1];
  timers_.stop("optimizer");
  progress_.consumed_train_samples += record.global_batch_size;
  // As in Megatron-LM, a skipped update does not advance the learning-rate schedule.
  if (!record.skipped) {
    parts_.scheduler->step(record.global_batch_size);
    optim.set_lr(parts_.scheduler->lr(), parts_.scheduler->decoupled_lr());
  }
  return record;
}

bool Trainer::kill_switch_set() const {
  if (args_.kill_switch_path.empty()) return false;
  std::error_code ec;  // any rank that sees the file stops them all
  return world_max(ps_, std::filesystem::exists(args_.kill_switch_path, ec) ? 1.0 : 0.0) > 0;
}

std::string Trainer::exit_reason(int64_t iteration) {
  if (args_.exit_signal_handler && world_max(ps_, g_exit_signal_received ? 1.0 : 0.0) > 0) {
    result_.exited_on_signal = true;
    return "exiting program after receiving SIGTERM.";
  }
  if (args_.exit_duration_in_mins) {
    // Minutes since pretrain() began, the slowest rank's.
    const double minutes = world_max(ps_, std::chrono::duration<double>(Clock::now() - start_time_).count() / 60.0);
    if (minutes > *args_.exit_duration_in_mins) {
      char text[64];
      std::snprintf(text, sizeof(text), "exiting program after %.2f minutes", minutes);
      return text;
    }
  }
  if (args_.exit_interval && iteration % *args_.exit_interval == 0 && iteration < *args_.train_iters)
    return "exiting program at iteration " + std::to_string(iteration);
  return "";
}

void Trainer::train() {
  std::vector<IterationRecord> window;
  ExitSignalHandler signal_handler(args_.exit_signal_handler);
  const int64_t start_iteration = progress_.iteration;
  for (int64_t iteration = start_iteration + 1; iteration <= *args_.train_iters; ++iteration) {
    if (kill_switch_set()) {  // Megatron-DeepSpeed's: no save, no final evaluation
      finalize_async_save(/*blocking=*/true);
      log_rank_0(LogLevel::kInfo, "Detected kill switch at " + args_.kill_switch_path + ". Exiting");
      result_.exited_early = true;
      return;
    }
    const auto start = Clock::now();
    profiler_.before_iteration(iteration);
    IterationRecord record = train_step(iteration);
    finalize_async_save(/*blocking=*/false);
    profiler_.after_iteration(iteration);
    record.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    window.push_back(record);
    result_.iterations.push_back(record);
    progress_.iteration = iteration;
    tensorboard_log(iteration, record);
    if (iteration % args_.log_interval == 0 || iteration == *args_.train_iters) {
      training_log(iteration, window);
      window.clear();
    }
    const auto hash_interval = args_.check_weight_hash_across_dp_replicas_interval;
    if (args_.test_mode || (hash_interval && iteration % *hash_interval == 0)) {
      if (parts_.ddp) parts_.ddp->gather_params();  // ZeRO-3's whole parameters, a pending gather done
      check_param_hashes_across_replicas(parts_.model, ps_, args_.test_mode, iteration);
      if (parts_.ddp) parts_.ddp->release_params();
    }
    if (!parts_.valid.empty() && args_.eval_iters > 0 && iteration % args_.eval_interval == 0)
      evaluate_and_print_results(iteration, parts_.valid, "valid");
    if (!args_.save.empty() && args_.save_interval && iteration % *args_.save_interval == 0) save(iteration);
    fault_point("train:sigterm_after_iteration_" + std::to_string(iteration), ps_.get_rank(), SIGTERM);
    // Megatron-LM's exits before --train-iters: each saves (where --save is set) and stops.
    if (const std::string reason = exit_reason(iteration); !reason.empty()) {
      if (!window.empty()) training_log(iteration, window);
      if (!args_.save.empty()) save(iteration);
      finalize_async_save(/*blocking=*/true);
      log_rank_0(LogLevel::kInfo, reason);
      result_.exited_early = true;
      return;
    }
  }
  if (!args_.save.empty() && progress_.iteration > start_iteration) save(progress_.iteration);
  finalize_async_save(/*blocking=*/true);
}

std::map<std::string, double> Trainer::evaluate(const Iterators& its) {
  set_train(false);
  at::NoGradGuard no_grad;
  MetricsAccumulator metrics;
  for (int64_t i = 0; i < args_.eval_iters; ++i) {
    auto fb = forward_backward_func_(parts_.forward_step, raw(its), chunks(), schedule_options(true));
    add_metrics(metrics, fb);
  }
  set_train(true);
  return metrics.average(ps_.get_data_parallel_group(true));
}

void Trainer::evaluate_final() {
  if (!parts_.valid.empty() && args_.eval_iters > 0 && *args_.train_iters % args_.eval_interval != 0)
    evaluate_and_print_results(*args_.train_iters, parts_.valid, "valid");
  if (!parts_.test.empty() && args_.eval_iters > 0) evaluate_and_print_results(*args_.train_iters, parts_.test, "test");
}

TrainingResult Trainer::result() const {
  TrainingResult r = result_;
  r.iteration = progress_.iteration;
  r.consumed_train_samples = progress_.consumed_train_samples;
  return r;
}

}  // namespace megatron::training::detail
