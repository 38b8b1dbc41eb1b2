// MegatronOptimizer: AdamW or SGD over fp32 main parameters (the model's own for fp32 models,
// fp32 copies for bf16/fp16 ones), with Megatron-LM's step: average gradients over data-parallel
// ranks, unscale and check for overflow (fp16), clip by the global norm over model-parallel
// ranks, update, copy back. Biases and 1-D parameters (norms) get no weight decay.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/optimizer/distrib_optimizer.h"
#include "megatron/optimizer/grad_scaler.h"

namespace torch::optim {
class Optimizer;
}

namespace megatron::optimizer {

struct MEGATRON_API OptimizerConfig {
  std::string optimizer = "adam";  // adam (decoupled weight decay, AdamW) | sgd
  double lr = 1e-4;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  double clip_grad = 1.0;  // 0: no clipping
  // fp16 only: loss scaling (fixed when config.dynamic is false).
  std::optional<GradScalerConfig> grad_scaler;
  // ZeRO-1: fp32 main parameters and optimizer state sharded over the data-parallel ranks
  // (optimizer/distrib_optimizer.h); no effect with one data-parallel rank.
  bool use_distributed_optimizer = false;
};

struct MEGATRON_API OptimizerParam {
  std::string name;
  at::Tensor param;
  // A copy of a parameter that another rank counts in the gradient norm: replicated on TP
  // ranks > 0, or the last pipeline stage's copy of the tied word embedding.
  bool counted_elsewhere_in_grad_norm = false;
};

struct MEGATRON_API StepResult {
  bool update_successful = true;  // false: fp16 overflow, the update was skipped
  double grad_norm = 0.0;         // before clipping; NaN when skipped
};

class MEGATRON_API MegatronOptimizer {
 public:
  // data_parallel_group averages gradients; model_parallel_group (TP x PP) sums the norm and
  // the overflow check. Either may be nullptr for a single rank.
  MegatronOptimizer(std::vector<OptimizerParam> params, OptimizerConfig config,
                    std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                    std::shared_ptr<comm::ProcessGroup> model_parallel_group);
  ~MegatronOptimizer();

  // Scale to multiply the loss by before backward (1 without fp16 loss scaling).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // Zeroes the model gradients; those of bf16/fp16 parameters become fp32 buffers that autograd
  // accumulates the micro-batches into (Megatron-LM's main_grad).
  void zero_grad();
  StepResult step();
  void set_lr(double lr);
  double lr() const { return lr_; }

  const std::vector<OptimizerParam>& params() const { return params_; }
  // fp32 main parameters, in params() order (the model parameters themselves for fp32 models);
  // empty with the distributed optimizer, whose main parameters are shards.
  const std::vector<at::Tensor>& main_params() const { return main_params_; }
  bool is_distributed() const { return !shards_.empty(); }
  torch::optim::Optimizer& inner() { return *inner_; }
  GradScaler* grad_scaler() { return scaler_ ? &*scaler_ : nullptr; }

  // Optimizer state by parameter name (params() names), for checkpoints. Per parameter: the
  // inner optimizer's state once it exists ("exp_avg", "exp_avg_sq", "step" for AdamW,
  // "momentum_buffer" for SGD) and "main_param" where the fp32 main parameter is not the model
  // parameter itself (bf16/fp16 models, the distributed optimizer); tensors shaped like the
  // parameter. The distributed optimizer all-gathers its shards over the data-parallel group
  // (collective), one kind of state at a time.
  using ParamState = std::map<std::string, at::Tensor>;
  std::map<std::string, ParamState> param_state();
  // Restores param_state() output, from any data-parallel size. Every parameter must be there
  // with the shape of this rank's parameter; errors name the parameter.
  void load_param_state(const std::map<std::string, ParamState>& state);

 private:
  std::vector<at::Tensor> main_grads();
  double grad_norm(const std::vector<at::Tensor>& grads) const;
  bool found_inf_after_unscale(const std::vector<at::Tensor>& grads);

  std::vector<OptimizerParam> params_;
  OptimizerConfig config_;
  std::shared_ptr<comm::ProcessGroup> dp_, mp_;
  std::vector<at::Tensor> main_params_;
  std::vector<ParamShards> shards_;                 // distributed optimizer: one per weight-decay group
  std::vector<std::vector<size_t>> shard_members_;  // params_ indices of each shard group
  bool has_copies_ = false;                         // main params are fp32 copies of lower-precision model params
  std::unique_ptr<torch::optim::Optimizer> inner_;
  std::optional<GradScaler> scaler_;
  double lr_;
};

}  // namespace megatron::optimizer
