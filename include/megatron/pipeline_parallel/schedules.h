// Forward/backward schedules over micro-batches (Megatron-LM's pipeline_parallel/schedules.py):
// no pipelining (gradient accumulation), 1F1B (warm-up, steady state, cool-down) and interleaved
// 1F1B over several model chunks per stage. get_forward_backward_func() picks one from the
// parallel state. The loss is computed on the last stage only and reported from it.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "megatron/datasets/batch_iterator.h"
#include "megatron/parallel_state.h"

namespace torch::nn {
class Module;
}

namespace megatron::pipeline_parallel {

// What loss_func(output) returns: the loss to back-propagate (the mean over this micro-batch's
// tokens), the metrics to report (e.g. {"lm loss": loss}), and how many tokens the mean is over
// (needed with calculate_per_token_loss). A (loss, metrics) pair converts to it.
struct MEGATRON_API LossResult {
  at::Tensor loss;
  std::map<std::string, at::Tensor> metrics;
  at::Tensor num_tokens;  // undefined: not given
  LossResult(at::Tensor loss, std::map<std::string, at::Tensor> metrics, at::Tensor num_tokens = {})
      : loss(std::move(loss)), metrics(std::move(metrics)), num_tokens(std::move(num_tokens)) {}
  LossResult(std::pair<at::Tensor, std::map<std::string, at::Tensor>> pair)  // NOLINT: implicit by design
      : loss(std::move(pair.first)), metrics(std::move(pair.second)) {}
};
using LossFunc = std::function<LossResult(const at::Tensor& output)>;
// forward_step(data_iterator, model) -> (output, loss_func): one micro-batch through one model
// chunk. On stages after the first the chunk's input comes from set_input_tensor; loss_func is
// called on the last stage only.
using ForwardStepFunc =
    std::function<std::pair<at::Tensor, LossFunc>(datasets::BatchIterator& data_iterator, torch::nn::Module& model)>;

struct ForwardBackwardResult;

struct MEGATRON_API ScheduleOptions {
  int64_t num_microbatches = 1;
  // Shape of the activations between stages: [seq_length (/ TP with sequence parallelism),
  // micro_batch_size, hidden_size], in pipeline_dtype.
  int64_t seq_length = 0;
  int64_t micro_batch_size = 0;
  int64_t hidden_size = 0;
  bool sequence_parallel = false;
  int64_t tensor_model_parallel_size = 1;
  at::ScalarType pipeline_dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  bool forward_only = false;  // evaluation: no backward, nothing kept
  // Applied to the loss before backward (the fp16 loss scale); identity when empty.
  std::function<at::Tensor(const at::Tensor&)> grad_scale_func;
  // Frees an activation's storage once it has been sent on (its graph stays for backward).
  bool deallocate_pipeline_outputs = true;
  // Megatron-LM's --calculate-per-token-loss: back-propagate each micro-batch's loss summed over
  // its tokens (loss x num_tokens), not its mean over num_microbatches; the caller divides the
  // gradients by the global token count.
  bool calculate_per_token_loss = false;
  // Called on the last stage once the last micro-batch's loss is computed, before its backward,
  // with the result so far (losses_reduced, num_tokens and loss_finite complete): the train step
  // launches the losses' data-parallel average there, ahead of the gradient buckets.
  std::function<void(const ForwardBackwardResult&)> after_last_loss;
};

struct MEGATRON_API ForwardBackwardResult {
  // One entry per micro-batch, from loss_func; on the last stage only.
  std::vector<std::map<std::string, at::Tensor>> losses_reduced;
  // With calculate_per_token_loss, each micro-batch's num_tokens (beside losses_reduced).
  std::vector<at::Tensor> num_tokens;
  // A bool scalar on the loss's device: every loss computed here was finite. Undefined where no
  // loss was computed (stages before the last); left on the device, for one readback later.
  at::Tensor loss_finite;
  // The most micro-batches whose forward had run and whose backward had not, at once: what
  // bounds activation memory (the number of stages for 1F1B, whatever num_microbatches is).
  int64_t peak_inflight_microbatches = 0;
  double compute_ms = 0;  // inside forward and backward steps; the rest of the time is waiting
  double total_ms = 0;
};

// One data iterator and one model chunk per virtual stage (a single one without interleaving).
using ForwardBackwardFunc = std::function<ForwardBackwardResult(
    const ForwardStepFunc& forward_step_func, const std::vector<datasets::BatchIterator*>& data_iterators,
    const std::vector<torch::nn::Module*>& model, const ScheduleOptions& options)>;

// No pipelining for one stage, 1F1B for several, interleaved 1F1B with virtual stages. The
// returned function refers to `parallel_state`, which must outlive it.
MEGATRON_API ForwardBackwardFunc get_forward_backward_func(const ParallelState& parallel_state);

MEGATRON_API ForwardBackwardResult
forward_backward_no_pipelining(const ParallelState& ps, const ForwardStepFunc& forward_step_func,
                               const std::vector<datasets::BatchIterator*>& data_iterators,
                               const std::vector<torch::nn::Module*>& model, const ScheduleOptions& options);
MEGATRON_API ForwardBackwardResult forward_backward_pipelining_without_interleaving(
    const ParallelState& ps, const ForwardStepFunc& forward_step_func,
    const std::vector<datasets::BatchIterator*>& data_iterators, const std::vector<torch::nn::Module*>& model,
    const ScheduleOptions& options);
MEGATRON_API ForwardBackwardResult forward_backward_pipelining_with_interleaving(
    const ParallelState& ps, const ForwardStepFunc& forward_step_func,
    const std::vector<datasets::BatchIterator*>& data_iterators, const std::vector<torch::nn::Module*>& model,
    const ScheduleOptions& options);

}  // namespace megatron::pipeline_parallel
