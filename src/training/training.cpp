// pretrain() top to bottom: parallel state, seeds, model, optimizer and schedule, data, then
// the train loop (train_step + training_log + evaluate), then the final test evaluation.
#include "megatron/training/training.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "megatron/cpu_math.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/training/checkpointing.h"
#include "megatron/training/metrics_writer.h"
#include "megatron/training/timers.h"

#ifdef MEGATRON_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace megatron::training {
namespace {

using Clock = std::chrono::steady_clock;

// --exit-signal-handler: SIGTERM only raises this flag; the loop saves and stops after the
// iteration in progress (a process-wide signal can only reach process-wide state).
volatile std::sig_atomic_t g_exit_signal_received = 0;
extern "C" void on_exit_signal(int) { g_exit_signal_received = 1; }

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

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), fmt, value);
  return buffer;
}

c10::Device choose_device(const Arguments& args, int local_rank) {
  std::string name = args.device;
  if (name.empty()) name = at::hasCUDA() ? "cuda" : "cpu";
  if (name == "cpu") return c10::Device(c10::kCPU);
  TORCH_CHECK(at::hasCUDA(), "[training] --device cuda, but no CUDA device is visible");
  // One GPU per local rank; a launcher that shows each rank only its own GPU leaves one visible.
  const auto index = static_cast<c10::DeviceIndex>(local_rank % static_cast<int>(at::getNumGPUs()));
#ifdef MEGATRON_WITH_CUDA
  c10::cuda::set_device(index);
#endif
  // TF32 tensor cores for fp32 matmuls and convolutions only when asked (--tf32).
  at::globalContext().setAllowTF32CuBLAS(args.tf32);
  at::globalContext().setAllowTF32CuDNN(args.tf32);
  return c10::Device(c10::kCUDA, index);
}

// Ranks on one machine share its cores. Unless OMP_NUM_THREADS says otherwise, each rank takes
// an equal share (torchrun sets 1): oversubscribed ranks would thrash, and their threaded
// reductions would not give the same bits from run to run.
void set_intra_op_threads_per_rank(const comm::LauncherEnv& env) {
  if (env.local_world_size <= 1 || std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int threads = std::max(1, cores / env.local_world_size);
  if (threads < at::get_num_threads()) at::set_num_threads(threads);
}

// Parameters as the optimizer sees them, over every model chunk of this stage. Copies that
// another rank counts in the gradient norm are marked: replicated parameters on TP ranks > 0,
// and the last stage's copy of the tied word embedding.
std::vector<optimizer::OptimizerParam> optimizer_params(const std::vector<std::shared_ptr<torch::nn::Module>>& model,
                                                        int tp_rank) {
  std::vector<optimizer::OptimizerParam> params;
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    const std::string prefix = model.size() > 1 ? "model" + std::to_string(chunk) + "." : "";
    if (auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(model[chunk].get())) {
      const bool tied_copy = gpt->options.share_embeddings_and_output_weights() && !gpt->options.pre_process();
      for (const auto& p : gpt->sharded_parameters()) {
        if (!p.param.requires_grad()) continue;
        const bool elsewhere = (tp_rank > 0 && !p.init.layout.is_sharded()) ||
                               (tied_copy && p.name == "output_layer.weight");
        params.push_back({prefix + p.name, p.param, elsewhere});
      }
      continue;
    }
    for (const auto& item : model[chunk]->named_parameters()) {
      if (item.value().requires_grad()) params.push_back({prefix + item.key(), item.value(), false});
    }
  }
  return params;
}

optimizer::OptimizerParamScheduler build_scheduler(const Arguments& args) {
  const int64_t gbs = *args.global_batch_size;
  optimizer::ParamSchedulerConfig c;
  c.init_lr = args.lr_warmup_init;
  c.max_lr = *args.lr;
  c.min_lr = args.min_lr;
  c.lr_decay_style = args.lr_decay_style;
  c.lr_wsd_decay_style = args.lr_wsd_decay_style;
  // Steps are samples, as in Megatron-LM.
  c.lr_decay_steps = args.lr_decay_samples ? *args.lr_decay_samples
                                           : (args.lr_decay_iters ? *args.lr_decay_iters : *args.train_iters) * gbs;
  c.lr_decay_steps = std::max<int64_t>(c.lr_decay_steps, 1);
  if (args.lr_warmup_fraction) {
    c.lr_warmup_steps = static_cast<int64_t>(*args.lr_warmup_fraction * c.lr_decay_steps);
  } else if (args.lr_warmup_samples > 0) {
    c.lr_warmup_steps = args.lr_warmup_samples;
  } else {
    c.lr_warmup_steps = args.lr_warmup_iters * gbs;
  }
  if (args.lr_wsd_decay_iters) c.wsd_decay_steps = *args.lr_wsd_decay_iters * gbs;
  return optimizer::OptimizerParamScheduler(c);
}

std::unique_ptr<datasets::DataIterator> build_iterator(const Arguments& args, const ParallelState& ps,
                                                       std::shared_ptr<const datasets::MegatronDataset> ds,
                                                       int64_t eod_token, int64_t consumed_samples, bool pin_memory) {
  if (!ds) return nullptr;
  // Every rank of a TP group has the same DP rank, so it draws the same samples itself; a resumed
  // run starts after the samples its checkpoint consumed.
  auto sampler = std::make_unique<datasets::MegatronPretrainingSampler>(
      ds->size(), consumed_samples, args.micro_batch_size, ps.get_data_parallel_rank(),
      ps.get_data_parallel_world_size());
  datasets::BatchOptions options;
  options.eod_token = eod_token;
  options.sequence_length = args.seq_length;  // a dataset of another sample length is refused
  options.reset_position_ids = args.reset_position_ids;
  options.reset_attention_mask = args.reset_attention_mask;
  options.eod_mask_loss = args.eod_mask_loss;
  options.create_attention_mask = args.reset_attention_mask;  // else the causal mask is implied
  options.pin_memory = pin_memory;
  return std::make_unique<datasets::DataIterator>(std::move(ds), std::move(sampler), options,
                                                  static_cast<int>(args.num_workers));
}

// Sums of metrics over micro-batches, averaged over them and over data-parallel ranks. The sums
// stay on the metrics' device and cross to the host once per iteration, not once per micro-batch.
class MetricsAccumulator {
 public:
  void add(const std::map<std::string, at::Tensor>& metrics) {
    for (const auto& [key, value] : metrics) {
      at::Tensor v = value.detach().to(at::kDouble).reshape({});
      at::Tensor& sum = sums_[key];
      sum = sum.defined() ? sum + v.to(sum.device()) : v;
    }
    ++count_;
  }
  std::map<std::string, double> average(comm::ProcessGroup& dp) {
    std::map<std::string, double> out;
    if (sums_.empty() || count_ == 0) return out;
    std::vector<at::Tensor> sums;
    const c10::Device device = sums_.begin()->second.device();
    for (const auto& [key, sum] : sums_) sums.push_back(sum.to(device));
    at::Tensor values = (at::stack(sums) / static_cast<double>(count_)).to(at::kCPU);
    dp.all_reduce(values, comm::ReduceOp::kAvg);
    const double* v = values.data_ptr<double>();
    int64_t i = 0;
    for (const auto& [key, sum] : sums_) out[key] = v[i++];
    return out;
  }

 private:
  std::map<std::string, at::Tensor> sums_;
  int64_t count_ = 0;
};

// The data iterators of one split: one per model chunk, each walking the same samples, since
// every chunk's forward_step draws its own micro-batch (as Megatron-LM's interleaved schedule).
using Iterators = std::vector<std::unique_ptr<datasets::DataIterator>>;

std::vector<datasets::DataIterator*> raw(const Iterators& its) {
  std::vector<datasets::DataIterator*> out;
  for (const auto& it : its) out.push_back(it.get());
  return out;
}

struct Trainer {
  Trainer(const Arguments& args_, ParallelState ps_, TrainingContext ctx_)
      : args(args_), ps(std::move(ps_)), ctx(std::move(ctx_)) {}

  const Arguments& args;
  ParallelState ps;
  TrainingContext ctx;
  std::vector<std::shared_ptr<torch::nn::Module>> model;  // one per virtual pipeline stage
  std::unique_ptr<optimizer::MegatronOptimizer> optim;
  std::optional<optimizer::OptimizerParamScheduler> scheduler;
  Iterators train_it, valid_it, test_it;
  ForwardStepFunc forward_step;
  pipeline_parallel::ForwardBackwardFunc forward_backward_func;
  MetricsWriter metrics_writer;
  Timers timers;
  TrainingResult result;
  int64_t padded_vocab_size = 0, vocab_size = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  Clock::time_point start_time = Clock::now();  // pretrain()'s start, for --exit-duration-in-mins
  int64_t start_iteration = 0;  // a loaded checkpoint's
  std::optional<int64_t> last_saved_iteration;  // or loaded: nothing new to save then

  std::vector<torch::nn::Module*> chunks() const {
    std::vector<torch::nn::Module*> out;
    for (const auto& m : model) out.push_back(m.get());
    return out;
  }

  void set_train(bool on) {
    for (auto& m : model) m->train(on);
  }

  pipeline_parallel::ScheduleOptions schedule_options(bool forward_only) const {
    pipeline_parallel::ScheduleOptions o;
    o.num_microbatches = args.num_microbatches;
    o.seq_length = args.seq_length;
    o.micro_batch_size = args.micro_batch_size;
    o.hidden_size = args.hidden_size;
    o.sequence_parallel = args.sequence_parallel;
    o.tensor_model_parallel_size = args.tensor_model_parallel_size;
    o.pipeline_dtype = args.bf16 ? at::kBFloat16 : (args.fp16 ? at::kHalf : at::kFloat);
    o.device = ctx.device;
    o.forward_only = forward_only;
    return o;
  }

  // One iteration: forward/backward over every micro-batch through the pipeline schedule, then
  // the optimizer step.
  IterationRecord train_step(int64_t iteration) {
    IterationRecord record;
    record.iteration = iteration;
    record.learning_rate = optim->lr();
    record.loss_scale = optim->loss_scale();
    set_train(true);
    optim->zero_grad();
    timers.start("forward-backward");
    auto options = schedule_options(false);
    const double loss_scale = optim->loss_scale();
    if (loss_scale != 1.0) options.grad_scale_func = [loss_scale](const at::Tensor& loss) { return loss * loss_scale; };
    auto fb = forward_backward_func(forward_step, raw(train_it), chunks(), options);
    timers.stop("forward-backward");
    timers.start("optimizer");
    MetricsAccumulator metrics;
    for (const auto& reported : fb.losses_reduced) metrics.add(reported);
    record.metrics = metrics.average(ps.get_data_parallel_group());
    // A non-finite loss on any rank counts everywhere, so that all ranks take the same branch.
    auto bad = at::full({1}, fb.loss_finite ? 0.0 : 1.0, at::kDouble);
    ps.get_world_group().all_reduce(bad, comm::ReduceOp::kMax);
    if (bad.item<double>() > 0) {
      TORCH_CHECK(args.skip_nan_iterations, "[training] the loss is NaN or Inf at iteration ", iteration,
                  "; lower --lr, check the data, or pass --skip-nan-iterations to skip such updates");
      record.skipped = true;
      record.grad_norm = std::nan("");
    } else {
      finalize_model_grads();
      auto step = optim->step();
      record.skipped = !step.update_successful;
      record.grad_norm = step.grad_norm;
    }
    timers.stop("optimizer");
    consumed_train_samples += *args.global_batch_size;
    // As in Megatron-LM, a skipped update does not advance the learning-rate schedule.
    if (!record.skipped) optim->set_lr(scheduler->step(*args.global_batch_size));
    return record;
  }

  // Gradients a layer cannot complete alone (Megatron-LM's finalize_model_grads): with sequence
  // parallelism the replicated norm and bias gradients are partial sums on each TP rank, and the
  // tied word embedding's gradient is split between the first and the last pipeline stage.
  void finalize_model_grads() {
    for (auto& m : model) {
      auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(m.get());
      if (!gpt) continue;
      gpt->allreduce_sequence_parallel_grads();
      if (ps.get_pipeline_model_parallel_world_size() > 1 && (gpt->options.pre_process() || gpt->options.post_process()))
        gpt->allreduce_word_embedding_grads(ps.get_embedding_group());
    }
  }

  TrainingState checkpoint_state(int64_t iteration) {
    TrainingState s;
    s.model = &model;
    s.optimizer = optim.get();
    s.scheduler = &*scheduler;
    s.rng_tracker = ctx.rng_tracker;
    s.device = ctx.device;
    s.iteration = iteration;
    s.consumed_train_samples = consumed_train_samples;
    s.consumed_valid_samples = consumed_valid_samples;
    s.vocab_size = vocab_size;
    s.padded_vocab_size = padded_vocab_size;
    return s;
  }

  void save(int64_t iteration) {
    if (last_saved_iteration == iteration) return;
    save_checkpoint(args, ps, checkpoint_state(iteration));
    empty_cpu_allocator_cache();  // the save's one-off buffers would otherwise stay cached
    result.saved_iterations.push_back(iteration);
    last_saved_iteration = iteration;
  }

  // Whether SIGTERM reached any rank: all stop after the same iteration.
  bool exit_signal_received() {
    auto flag = at::full({1}, g_exit_signal_received ? 1.0 : 0.0, at::kDouble);
    ps.get_world_group().all_reduce(flag, comm::ReduceOp::kMax);
    return flag.item<double>() > 0;
  }

  // Megatron-LM's --exit-duration-in-mins: minutes since pretrain() began, the slowest rank's.
  double training_minutes() {
    const double minutes = std::chrono::duration<double>(Clock::now() - start_time).count() / 60.0;
    auto slowest = at::full({1}, minutes, at::kDouble);
    ps.get_world_group().all_reduce(slowest, comm::ReduceOp::kMax);
    return slowest.item<double>();
  }

  std::map<std::string, double> evaluate(const Iterators& its) {
    set_train(false);
    at::NoGradGuard no_grad;
    MetricsAccumulator metrics;
    for (int64_t i = 0; i < args.eval_iters; ++i) {
      auto fb = forward_backward_func(forward_step, raw(its), chunks(), schedule_options(true));
      for (const auto& reported : fb.losses_reduced) metrics.add(reported);
    }
    set_train(true);
    return metrics.average(ps.get_data_parallel_group());
  }

  void evaluate_and_print_results(int64_t iteration, const Iterators& it, const std::string& split) {
    auto values = evaluate(it);
    // As Megatron-LM, a checkpoint records how far validation has read, so a resumed run
    // validates on the same samples as an uninterrupted one.
    if (split == "valid") consumed_valid_samples += args.eval_iters * *args.global_batch_size;
    std::string text = " validation loss at iteration " + std::to_string(iteration) +
                       (split == "test" ? " on test set" : "") + " | ";
    for (const auto& [key, value] : values) {
      text += key + " value: " + format("%.6E", value) + " | ";
      text += key + " PPL: " + format("%.6E", std::exp(std::min(20.0, value))) + " | ";
    }
    const std::string rule(text.size() + 1, '-');
    log_rank_last(LogLevel::kInfo, rule);
    log_rank_last(LogLevel::kInfo, text);
    log_rank_last(LogLevel::kInfo, rule);
    result.evaluations.push_back({iteration, split, values});
    if (ps.get_rank() == ps.get_world_size() - 1) metrics_writer.write_evaluation(result.evaluations.back());
  }

  // Megatron-LM's iteration line, averaged over the iterations since the last one.
  void training_log(int64_t iteration, const std::vector<IterationRecord>& window) {
    std::map<std::string, double> sums;
    int64_t advanced = 0, skipped = 0, nan = 0;
    double elapsed = 0;
    for (const auto& r : window) {
      elapsed += r.elapsed_ms;
      if (r.skipped) {
        ++skipped;
        bool has_nan = false;
        for (const auto& [k, v] : r.metrics) has_nan = has_nan || !std::isfinite(v);
        nan += has_nan;
        continue;
      }
      ++advanced;
      for (const auto& [k, v] : r.metrics) sums[k] += v;
    }
    const double ms = elapsed / window.size();
    const double flops = num_floating_point_operations(args, *args.global_batch_size, padded_vocab_size);
    const double tflops = flops / (ms / 1000.0) / 1e12 / args.world_size;
    const double tokens_per_s = *args.global_batch_size * args.seq_length / (ms / 1000.0);
    const auto& last = window.back();
    std::ostringstream line;
    char head[128];
    std::snprintf(head, sizeof(head), " iteration %8lld/%8lld |", static_cast<long long>(iteration),
                  static_cast<long long>(*args.train_iters));
    line << head << " consumed samples: " << format("%12.0f", static_cast<double>(consumed_train_samples))
         << " | elapsed time per iteration (ms): " << format("%.1f", ms)
         << " | throughput per GPU (TFLOP/s/GPU): " << format("%.3f", tflops)
         << " | tokens per second: " << format("%.1f", tokens_per_s)
         << " | learning rate: " << format("%.6E", optim->lr())
         << " | global batch size: " << format("%5.0f", static_cast<double>(*args.global_batch_size)) << " |";
    for (const auto& [k, v] : sums) line << " " << k << ": " << format("%.6E", v / std::max<int64_t>(1, advanced)) << " |";
    line << " loss scale: " << format("%.1f", optim->loss_scale()) << " |";
    if (!last.skipped) line << " grad norm: " << format("%.3f", last.grad_norm) << " |";
    line << " number of skipped iterations: " << format("%3.0f", static_cast<double>(skipped))
         << " | number of nan iterations: " << format("%3.0f", static_cast<double>(nan)) << " |";
    log_rank_last(LogLevel::kInfo, line.str());
    log_rank_last(LogLevel::kInfo, timers.report(ps.get_world_group(), static_cast<double>(window.size())));
    if (ps.get_rank() == ps.get_world_size() - 1) {
      IterationRecord logged = last;  // with the interval's averages, as printed
      for (auto& [k, v] : logged.metrics) v = sums.count(k) ? sums[k] / std::max<int64_t>(1, advanced) : v;
      metrics_writer.write_iteration(logged, consumed_train_samples, ms, tokens_per_s, tflops);
    }
  }

  void train() {
    std::vector<IterationRecord> window;
    ExitSignalHandler signal_handler(args.exit_signal_handler);
    result.iteration = start_iteration;
    for (int64_t iteration = start_iteration + 1; iteration <= *args.train_iters; ++iteration) {
      auto start = Clock::now();
      IterationRecord record = train_step(iteration);
      record.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      window.push_back(record);
      result.iterations.push_back(record);
      if (iteration % args.log_interval == 0 || iteration == *args.train_iters) {
        training_log(iteration, window);
        window.clear();
      }
      if (!valid_it.empty() && args.eval_iters > 0 && iteration % args.eval_interval == 0)
        evaluate_and_print_results(iteration, valid_it, "valid");
      result.iteration = iteration;
      if (!args.save.empty() && args.save_interval && iteration % *args.save_interval == 0) save(iteration);
      fault_point("train:sigterm_after_iteration_" + std::to_string(iteration), ps.get_rank(), SIGTERM);
      // Megatron-LM's exits before --train-iters: each saves (where --save is set) and stops.
      std::string exit_message;
      if (args.exit_signal_handler && exit_signal_received()) {
        exit_message = "exiting program after receiving SIGTERM.";
        result.exited_on_signal = true;
      } else if (double minutes = args.exit_duration_in_mins ? training_minutes() : 0.0;
                 args.exit_duration_in_mins && minutes > *args.exit_duration_in_mins) {
        exit_message = "exiting program after " + format("%.2f", minutes) + " minutes";
      } else if (args.exit_interval && iteration % *args.exit_interval == 0 && iteration < *args.train_iters) {
        exit_message = "exiting program at iteration " + std::to_string(iteration);
      }
      if (!exit_message.empty()) {
        if (!window.empty()) training_log(iteration, window);
        if (!args.save.empty()) save(iteration);
        log_rank_0(LogLevel::kInfo, exit_message);
        result.exited_early = true;
        return;
      }
    }
    if (!args.save.empty() && result.iteration > start_iteration) save(result.iteration);
  }
};

}  // namespace

double num_floating_point_operations(const Arguments& args, int64_t batch_size, int64_t vocab) {
  const double h = static_cast<double>(args.hidden_size);
  const double heads = static_cast<double>(args.num_attention_heads);
  const double groups = static_cast<double>(args.group_query_attention ? args.num_query_groups : args.num_attention_heads);
  const double kv = args.kv_channels ? static_cast<double>(*args.kv_channels) : h / heads;
  const double ffn = args.ffn_hidden_size ? static_cast<double>(*args.ffn_hidden_size) : 4 * h;
  const double gated = args.swiglu ? 1.5 : 1.0;
  const double s = static_cast<double>(args.seq_length), L = static_cast<double>(args.num_layers);
  // 3 (forward + 2x backward) * 2 (multiply-add) * 2 (two GEMMs per block term), as Megatron-LM.
  return 12.0 * batch_size * s * L * h * h *
         ((1.0 + groups / heads + s / h) * (kv * heads / h) + (ffn / h) * gated + vocab / (2.0 * L * h));
}

TrainingResult pretrain(const Arguments& args, const ModelBuilder& model_builder,
                        const DatasetBuilder& dataset_builder, const ForwardStepFunc& forward_step,
                        std::shared_ptr<comm::ProcessGroup> world) {
  const auto start_time = Clock::now();
  const auto env = comm::LauncherEnv::from_environment();
  const c10::Device device = choose_device(args, env.local_rank);
  if (!args.no_cpu_allocator_cache) enable_cpu_allocator_cache();
  set_intra_op_threads_per_rank(env);
  warm_up_cpu_math();
  if (!world) {
    comm::DistributedOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.distributed_timeout_minutes * 60000));
    options.device_type = device.type();
    world = comm::init_distributed(env, options);
  }
  TORCH_CHECK(world->size() == args.world_size, "[training] the arguments were validated for world size ",
              args.world_size, " but the job has ", world->size(), " ranks");
  const auto vpp = args.virtual_pipeline_model_parallel_size;
  auto ps = ParallelState::initialize_model_parallel(
      world, static_cast<int>(args.tensor_model_parallel_size), static_cast<int>(args.pipeline_model_parallel_size),
      vpp ? std::optional<int>(static_cast<int>(*vpp)) : std::nullopt);
  log_rank_0(LogLevel::kInfo, "> initialized tensor model parallel with size " +
                                  std::to_string(ps.get_tensor_model_parallel_world_size()));
  log_rank_0(LogLevel::kInfo, "> initialized pipeline model parallel with size " +
                                  std::to_string(ps.get_pipeline_model_parallel_world_size()));
  log_rank_0(LogLevel::kInfo, "> initialized data parallel with size " +
                                  std::to_string(ps.get_data_parallel_world_size()));
  log_rank_0(LogLevel::kInfo, "> intra-op threads per rank: " + std::to_string(at::get_num_threads()));
  if (const auto ignored = ignored_megatron_flags(args); !ignored.empty()) {
    std::string names;
    for (const auto& f : ignored) names += " " + f;
    log_rank_0(LogLevel::kWarn, "these Megatron-LM flags have no effect in megatron-cpp (see --help):" + names);
  }

  // Megatron-LM's _set_random_seed: one seed per pipeline stage, TP-region states per TP rank.
  const uint64_t seed = args.seed + 100 * ps.get_pipeline_model_parallel_rank();
  auto rng_tracker = tensor_parallel::model_parallel_manual_seed(seed, ps.get_tensor_model_parallel_rank(), device);
  TrainingContext ctx{args, ps, rng_tracker, device, std::nullopt};

  // One model chunk per virtual stage, each told which it is.
  std::vector<std::shared_ptr<torch::nn::Module>> model;
  for (int chunk = 0; chunk < (vpp ? static_cast<int>(*vpp) : 1); ++chunk) {
    TrainingContext chunk_ctx = ctx;
    std::optional<int> virtual_rank;
    if (vpp) virtual_rank = chunk;
    chunk_ctx.virtual_pipeline_model_parallel_rank = virtual_rank;
    auto m = model_builder(chunk_ctx, ps.is_pipeline_first_stage(virtual_rank), ps.is_pipeline_last_stage(virtual_rank));
    TORCH_CHECK(m, "[training] model_builder returned no model");
    if (args.bf16) m->to(at::kBFloat16);
    if (args.fp16) m->to(at::kHalf);
    m->to(device);
    model.push_back(std::move(m));
  }
  int64_t padded_vocab = args.vocab_size.value_or(0), true_vocab = args.vocab_size.value_or(0);
  for (const auto& m : model) {
    if (auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(m.get())) {
      padded_vocab = gpt->padded_vocab_size;
      true_vocab = gpt->options.vocab_size();
    }
  }

  optimizer::OptimizerConfig oc;
  oc.optimizer = args.optimizer;
  oc.lr = *args.lr;
  oc.weight_decay = args.weight_decay;
  oc.adam_beta1 = args.adam_beta1;
  oc.adam_beta2 = args.adam_beta2;
  oc.adam_eps = args.adam_eps;
  oc.sgd_momentum = args.sgd_momentum;
  oc.clip_grad = args.clip_grad;
  oc.use_distributed_optimizer = args.use_distributed_optimizer;
  if (args.fp16) {
    optimizer::GradScalerConfig sc;
    sc.initial_scale = args.loss_scale.value_or(args.initial_loss_scale);
    sc.dynamic = !args.loss_scale;
    sc.min_scale = std::min(args.min_loss_scale, sc.initial_scale);
    sc.growth_interval = args.loss_scale_window;
    sc.hysteresis = args.hysteresis;
    oc.grad_scaler = sc;
  }
  auto params = optimizer_params(model, ps.get_tensor_model_parallel_rank());
  int64_t local_params = 0;
  for (const auto& p : params) local_params += p.param.numel();
  if (ps.get_data_parallel_rank() == 0)
    log(LogLevel::kInfo, " > number of parameters on (tensor, pipeline) model parallel rank (" +
                             std::to_string(ps.get_tensor_model_parallel_rank()) + ", " +
                             std::to_string(ps.get_pipeline_model_parallel_rank()) + "): " + std::to_string(local_params));
  auto optim = std::make_unique<optimizer::MegatronOptimizer>(
      std::move(params), oc, ps.get_world_group().size() > 1 ? ps.data_parallel_group_ptr() : nullptr,
      ps.model_parallel_group_ptr());
  auto scheduler = build_scheduler(args);
  optim->set_lr(scheduler.lr());

  const int64_t gbs = *args.global_batch_size;
  const auto requested = datasets::train_valid_test_num_samples(*args.train_iters, gbs, args.eval_interval,
                                                                args.eval_iters);
  const std::array<int64_t, 3> num_samples = {requested[0].value_or(0), requested[1].value_or(0),
                                              requested[2].value_or(0)};
  log_rank_0(LogLevel::kInfo, "> building train, validation, and test datasets ...");
  Datasets ds = dataset_builder(ctx, num_samples);
  TORCH_CHECK(ds.train, "[training] dataset_builder returned no training dataset");

  Trainer trainer(args, ps, ctx);
  trainer.start_time = start_time;
  trainer.model = model;
  trainer.optim = std::move(optim);
  trainer.scheduler = scheduler;
  trainer.forward_step = forward_step;
  trainer.metrics_writer = MetricsWriter(ps.get_rank() == ps.get_world_size() - 1 ? args.metrics_file : "");
  trainer.padded_vocab_size = padded_vocab;
  trainer.vocab_size = true_vocab;
  // The schedule refers to the trainer's own copy of the parallel state.
  trainer.forward_backward_func = pipeline_parallel::get_forward_backward_func(trainer.ps);
  // Loaded last, after everything that might draw from the default generators, so that the
  // restored RNG states are the ones the next iteration sees.
  if (!args.load.empty()) {
    auto state = trainer.checkpoint_state(0);
    if (load_checkpoint(args, ps, state)) {
      trainer.start_iteration = state.iteration;
      trainer.consumed_train_samples = state.consumed_train_samples;
      trainer.consumed_valid_samples = state.consumed_valid_samples;
      trainer.optim->set_lr(trainer.scheduler->lr());
      trainer.result.loaded_iteration = state.iteration;
      trainer.last_saved_iteration = state.iteration;
    }
    empty_cpu_allocator_cache();
  }
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    trainer.train_it.push_back(build_iterator(args, ps, ds.train, ds.eod_token, trainer.consumed_train_samples, device.is_cuda()));
    if (ds.valid)
      trainer.valid_it.push_back(build_iterator(args, ps, ds.valid, ds.eod_token, trainer.consumed_valid_samples, device.is_cuda()));
    if (ds.test) trainer.test_it.push_back(build_iterator(args, ps, ds.test, ds.eod_token, 0, device.is_cuda()));
  }

  log_rank_0(LogLevel::kInfo, "training ...");
  trainer.train();
  trainer.result.consumed_train_samples = trainer.consumed_train_samples;
  if (trainer.result.exited_early) return trainer.result;
  if (!trainer.valid_it.empty() && args.eval_iters > 0 && *args.train_iters % args.eval_interval != 0)
    trainer.evaluate_and_print_results(*args.train_iters, trainer.valid_it, "valid");
  if (!trainer.test_it.empty() && args.eval_iters > 0)
    trainer.evaluate_and_print_results(*args.train_iters, trainer.test_it, "test");
  trainer.result.consumed_train_samples = trainer.consumed_train_samples;
  return trainer.result;
}

}  // namespace megatron::training
