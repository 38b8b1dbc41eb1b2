// The train loop of pretrain() (Megatron-LM's train, train_step, training_log, evaluate): a
// Trainer is built from the finished parts of a run and owns them until it returns the result.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "megatron/training/checkpointing.h"
#include "megatron/training/metrics_writer.h"
#include "megatron/training/tensorboard_writer.h"
#include "megatron/training/timers.h"
#include "megatron/training/training.h"
#include "training/loop/metrics_accumulator.h"
#include "training/loop/profiler.h"

namespace megatron::training::detail {

using Clock = std::chrono::steady_clock;
using Model = std::vector<std::shared_ptr<torch::nn::Module>>;  // one chunk per virtual stage
// The data iterators of one split: one per model chunk, each walking the same samples, since
// every chunk's forward_step draws its own micro-batch (as Megatron-LM's interleaved schedule).
using Iterators = std::vector<std::unique_ptr<datasets::BatchIterator>>;

// Where a run starts: from scratch, or where a loaded checkpoint left off.
struct TrainingProgress {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  std::optional<int64_t> loaded_iteration;
};

struct TrainerParts {
  Model model;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;  // before the optimizer, which updates its buffers
  std::unique_ptr<optimizer::MegatronOptimizer> optimizer;
  std::unique_ptr<optimizer::OptimizerParamScheduler> scheduler;
  ForwardStepFunc forward_step;
  Iterators train, valid, test;
  int64_t vocab_size = 0, padded_vocab_size = 0;
};

// What save_checkpoint and load_checkpoint read and restore: the parts, at `progress`.
TrainingState checkpoint_state(const TrainingContext& ctx, TrainerParts& parts, const TrainingProgress& progress);

class Trainer {
 public:
  // ctx (and the parallel state it names) must outlive the Trainer.
  Trainer(const TrainingContext& ctx, TrainerParts parts, TrainingProgress progress, Clock::time_point start_time);

  // Iterations until --train-iters or an early exit, saving as the flags ask.
  void train();
  // The validation evaluation --eval-interval did not already run at the end, then the test one.
  void evaluate_final();
  bool exited_early() const { return result_.exited_early; }
  TrainingResult result() const;

 private:
  IterationRecord train_step(int64_t iteration);
  void warn_unwaited_param_gather(int64_t pending);
  std::map<std::string, double> evaluate(const Iterators& its);
  void evaluate_and_print_results(int64_t iteration, const Iterators& its, const std::string& split);
  void training_log(int64_t iteration, const std::vector<IterationRecord>& window);
  // Megatron-LM's TensorBoard scalars of one iteration (every --tensorboard-log-interval).
  void tensorboard_log(int64_t iteration, const IterationRecord& record);
  void save(int64_t iteration);
  // --async-save: publishes the save in flight once every rank has written it (collective);
  // blocking waits for that, as before the next save and before train() returns.
  void finalize_async_save(bool blocking);
  // The reason to stop after `iteration` ("" to go on): SIGTERM, --exit-duration-in-mins,
  // --exit-interval. Collective, so every rank stops after the same iteration.
  std::string exit_reason(int64_t iteration);
  // --kill-switch-path exists on some rank (collective).
  bool kill_switch_set() const;
  pipeline_parallel::ScheduleOptions schedule_options(bool forward_only) const;
  void add_metrics(MetricsAccumulator& metrics, const pipeline_parallel::ForwardBackwardResult& fb) const;
  at::Tensor per_token_grad_scale(const pipeline_parallel::ForwardBackwardResult& fb) const;
  std::vector<torch::nn::Module*> chunks() const;
  void set_train(bool on);

  const Arguments& args_;
  const TrainingContext& ctx_;
  const ParallelState& ps_;
  TrainerParts parts_;
  pipeline_parallel::ForwardBackwardFunc forward_backward_func_;
  MetricsWriter metrics_writer_;
  TensorBoardWriter tensorboard_;  // the last rank's, as Megatron-LM's
  IterationProfiler profiler_;
  Timers timers_;
  TrainingProgress progress_;
  Clock::time_point start_time_;                 // pretrain()'s, for --exit-duration-in-mins
  std::optional<int64_t> last_saved_iteration_;  // or loaded: nothing new to save then
  std::shared_ptr<AsyncSave> async_save_;        // being written in the background
  bool memory_reported_ = false;
  bool unwaited_gather_reported_ = false;
  TrainingResult result_;
};

}  // namespace megatron::training::detail
