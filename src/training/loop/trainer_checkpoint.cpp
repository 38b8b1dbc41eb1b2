// What the Trainer saves and when it is published: the training state a checkpoint holds, the
// plain save, and --async-save's save in flight.
#include <memory>

#include "megatron/memory.h"
#include "megatron/training/checkpointing.h"
#include "training/loop/trainer.h"

namespace megatron::training::detail {

TrainingState checkpoint_state(const TrainingContext& ctx, TrainerParts& parts, const TrainingProgress& progress) {
  TrainingState s;
  s.model = &parts.model;
  s.optimizer = parts.optimizer.get();
  s.scheduler = parts.scheduler.get();
  s.rng_tracker = ctx.rng_tracker;
  s.device = ctx.device;
  s.iteration = progress.iteration;
  s.consumed_train_samples = progress.consumed_train_samples;
  s.consumed_valid_samples = progress.consumed_valid_samples;
  s.vocab_size = parts.vocab_size;
  s.padded_vocab_size = parts.padded_vocab_size;
  return s;
}

void Trainer::save(int64_t iteration) {
  if (last_saved_iteration_ == iteration) return;
  TrainingProgress at = progress_;
  at.iteration = iteration;
  last_saved_iteration_ = iteration;
  if (args_.async_save) {
    finalize_async_save(/*blocking=*/true);  // one save in flight at a time, as Megatron-LM
    async_save_ = save_checkpoint_async(args_, ps_, checkpoint_state(ctx_, parts_, at));
    return;
  }
  save_checkpoint(args_, ps_, checkpoint_state(ctx_, parts_, at));
  empty_cpu_allocator_cache();  // the save's one-off buffers would otherwise stay cached
  result_.saved_iterations.push_back(iteration);
}

void Trainer::finalize_async_save(bool blocking) {
  if (!async_save_) return;
  std::shared_ptr<AsyncSave> pending = std::move(async_save_);  // finished or failed, it is done with
  const int64_t iteration = async_save_iteration(*pending);
  if (training::finalize_async_save(*pending, args_, ps_, blocking)) {
    empty_cpu_allocator_cache();
    result_.saved_iterations.push_back(iteration);
  } else {
    async_save_ = std::move(pending);
  }
}

}  // namespace megatron::training::detail
