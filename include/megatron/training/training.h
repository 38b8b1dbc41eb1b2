// pretrain(): Megatron-LM's training driver. The caller supplies three callbacks, as in
// pretrain_gpt.py: model_builder(pre_process, post_process), dataset_builder(train/valid/test
// sample counts) and forward_step(data_iterator, model) -> (output, loss_func).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/datasets/data_iterator.h"
#include "megatron/datasets/megatron_dataset.h"
#include "megatron/parallel_state.h"
#include "megatron/pipeline_parallel/schedules.h"
#include "megatron/training/arguments.h"

namespace torch::nn {
class Module;
}
namespace megatron::tensor_parallel {
class RngTracker;
}

namespace megatron::training {

// What the callbacks may need besides their own arguments.
struct MEGATRON_API TrainingContext {
  const Arguments& args;
  const ParallelState& parallel_state;
  std::shared_ptr<tensor_parallel::RngTracker> rng_tracker;  // TP-region dropout states
  c10::Device device;
  // With the interleaved schedule, model_builder is called once per model chunk of this stage;
  // this says which (pre_process / post_process already take it into account).
  std::optional<int> virtual_pipeline_model_parallel_rank;
};

// loss_func(output) -> LossResult (loss to back-propagate: mean over this micro-batch's tokens,
//                       metrics to report, e.g. {"lm loss": loss}, optionally the token count);
// pretrain averages the metrics over micro-batches and data-parallel ranks (weighted by the token
// counts with --calculate-per-token-loss). forward_step(data_iterator, model) runs one
// micro-batch through one model chunk; loss_func is called on the last pipeline stage only.
using LossResult = pipeline_parallel::LossResult;
using LossFunc = pipeline_parallel::LossFunc;
using ForwardStepFunc = pipeline_parallel::ForwardStepFunc;
using ModelBuilder =
    std::function<std::shared_ptr<torch::nn::Module>(const TrainingContext& ctx, bool pre_process, bool post_process)>;
struct MEGATRON_API Datasets {
  std::shared_ptr<const datasets::MegatronDataset> train, valid, test;  // valid/test may be null
  int64_t eod_token = -1;  // for --reset-position-ids, --reset-attention-mask, --eod-mask-loss
};
using DatasetBuilder =
    std::function<Datasets(const TrainingContext& ctx, const std::array<int64_t, 3>& train_valid_test_num_samples)>;

struct MEGATRON_API IterationRecord {
  int64_t iteration = 0;
  std::map<std::string, double> metrics;  // averaged over micro-batches and DP ranks
  double learning_rate = 0.0;             // the one this iteration's update used
  int64_t global_batch_size = 0;          // samples this iteration (grows under --rampup-batch-size)
  double grad_norm = 0.0;
  double loss_scale = 1.0;
  bool skipped = false;  // fp16 overflow or a skipped NaN loss
  double elapsed_ms = 0.0;
  std::optional<double> params_norm;  // --log-params-norm: of the updated parameters
  std::optional<double> num_zeros;    // --log-num-zeros-in-grad: zeros in the clipped gradients
};

struct MEGATRON_API EvaluationRecord {
  int64_t iteration = 0;
  std::string split;  // "valid" | "test"
  std::map<std::string, double> metrics;
};

struct MEGATRON_API TrainingResult {
  std::vector<IterationRecord> iterations;  // those this run trained (after a loaded checkpoint)
  std::vector<EvaluationRecord> evaluations;
  int64_t consumed_train_samples = 0;
  int64_t iteration = 0;                    // the last one trained (or loaded)
  std::optional<int64_t> loaded_iteration;  // --load: the checkpoint's iteration
  std::vector<int64_t> saved_iterations;    // --save: checkpoints written
  bool exited_on_signal = false;            // --exit-signal-handler saw SIGTERM
  bool exited_early = false;                // stopped before --train-iters: SIGTERM, --exit-interval
                                            // or --exit-duration-in-mins (no final evaluation)
};

// Runs the whole job on `world` (nullptr: init_distributed from the launcher environment).
// Throws c10::Error for bad settings, for a NaN/Inf loss (unless args.skip_nan_iterations) and
// for a checkpoint that cannot be saved or loaded (training/checkpointing.h).
MEGATRON_API TrainingResult pretrain(const Arguments& args, const ModelBuilder& model_builder,
                                     const DatasetBuilder& dataset_builder, const ForwardStepFunc& forward_step,
                                     std::shared_ptr<comm::ProcessGroup> world = nullptr);

// Megatron-LM's model FLOPs of one iteration (forward + backward), for the throughput column.
MEGATRON_API double num_floating_point_operations(const Arguments& args, int64_t batch_size, int64_t padded_vocab_size);

}  // namespace megatron::training
