// MegatronOptimizer: AdamW or SGD over fp32 main parameters (the model's own for fp32 models,
// fp32 copies for bf16/fp16 ones), with Megatron-LM's step: unscale (fp16), clip by the global
// norm over model-parallel ranks, update, copy back. It updates the buffers a
// distributed::DistributedDataParallel holds, which has averaged the gradients over the
// data-parallel ranks; DistributedOptimizer (distrib_optimizer.h) updates this rank's shards of
// them. Biases and 1-D parameters (norms) get no weight decay. The step stays on the device:
// ATen's fused AdamW/SGD kernels over each parameter group, foreach norms and scaling, and a skip
// flag the kernels read themselves, so nothing waits for the host until the caller reads the result.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/optimizer/grad_scaler.h"

namespace megatron::comm {
class ProcessGroup;
}
namespace megatron::distributed {
class DistributedDataParallel;
class ParamShards;
}  // namespace megatron::distributed

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
  // --decoupled-lr: the embedding and output-layer parameters form groups of their own, updated
  // with set_lr's `decoupled` rate.
  bool decoupled_lr = false;
  // step() also counts the zero elements of the clipped gradients (--log-num-zeros-in-grad) and
  // takes the norm of the updated fp32 main parameters (--log-params-norm), each parameter once.
  bool log_num_zeros_in_grad = false;
  bool log_params_norm = false;
};

// Megatron-LM's parameter-group rules, by our parameter names (a chunk prefix allowed): biases and
// 1-D parameters (the norms) take no weight decay; the word embedding and the output layer take the
// decoupled learning rate (its is_embedding_or_output_parameter).
MEGATRON_API bool no_weight_decay(const std::string& name, int64_t dim);
MEGATRON_API bool is_embedding_or_output_name(const std::string& name);
// The parameter group (distributed::ModelParam::param_group) these rules give: 0 weight decay,
// 1 none; 2 and 3 the same for the embedding and output layer under --decoupled-lr.
MEGATRON_API int param_group_of(const std::string& name, int64_t dim, bool decoupled_lr);

// Bytes this rank holds now, counted from the live tensors (each storage once).
struct MEGATRON_API MemoryReport {
  int64_t params = 0;           // the model's parameters
  int64_t grads = 0;            // their gradients (whole, or this rank's shards)
  int64_t main_params = 0;      // fp32 main parameters that are not the model's own
  int64_t optimizer_state = 0;  // moments, momentum, step counts
};

// What step() launched, as fp32 scalars on the parameters' device, for the caller to read back
// together with its other values (one host readback per iteration).
struct MEGATRON_API StepResult {
  at::Tensor found_inf;       // 1: the update was skipped (fp16 overflow, a non-finite norm, skip_requested), else 0
  at::Tensor grad_norm;       // before clipping
  at::Tensor skip_requested;  // 1: some rank sharing the model passed a non-zero `skip` to step()
  at::Tensor num_zeros;       // fp64, with OptimizerConfig::log_num_zeros_in_grad (else undefined)
  at::Tensor params_norm;     // with OptimizerConfig::log_params_norm (else undefined)
};

class MEGATRON_API MegatronOptimizer {
 public:
  // Updates the parameters `ddp` holds (which must outlive this and hold no shards: those take a
  // DistributedOptimizer). model_parallel_group (TP x PP) sums the norm and the overflow check;
  // nullptr for a single rank. expert_norm_groups, in turn, sum the experts' part of the norms
  // instead (PP, then expert TP x EP: every rank holding other experts or other shards of them);
  // empty: the model-parallel group does.
  MegatronOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                    std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                    std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups = {});
  virtual ~MegatronOptimizer();
  MegatronOptimizer(const MegatronOptimizer&) = delete;
  MegatronOptimizer& operator=(const MegatronOptimizer&) = delete;

  distributed::DistributedDataParallel& ddp() const { return ddp_; }
  // Scale to multiply the loss by before backward (1 without fp16 loss scaling).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // Zeroes the model gradients (the DDP buffers', which autograd accumulates the micro-batches into).
  void zero_grad();
  // Unscales, clips and updates the data-parallel average of the gradients (finishing the DDP's
  // sync if the caller has not). `skip` (optional, a scalar on the device, non-zero to skip)
  // travels with the norm's reduction over the model-parallel ranks, so that the last stage's
  // non-finite loss skips the update on every rank sharing the model. `grad_scale` (optional, a
  // scalar on the device) multiplies the averaged gradients first (--calculate-per-token-loss:
  // data-parallel size / global token count).
  StepResult step(const at::Tensor& skip = {}, const at::Tensor& grad_scale = {});
  // After reading step()'s found_inf: moves the fp16 loss scale (no-op without loss scaling).
  void update_loss_scale(bool found_inf);
  // The learning rate of the next steps; `decoupled` (default: lr) for the embedding and
  // output-layer groups when OptimizerConfig::decoupled_lr is set.
  void set_lr(double lr, std::optional<double> decoupled = std::nullopt);
  double lr() const { return lr_; }
  double decoupled_lr() const { return decoupled_lr_; }

  // The main parameters (this rank's shards with the distributed optimizer) copied from the model
  // parameters, after something wrote into those (a checkpoint loaded without its optimizer state).
  void reload_model_params();
  MemoryReport memory_report() const;

  // fp32 main parameters, in the DDP's params() order (the model parameters themselves for fp32
  // models); empty with the distributed optimizer, whose main parameters are shards.
  const std::vector<at::Tensor>& main_params() const { return main_params_; }
  virtual bool is_distributed() const { return false; }
  // Number of updated tensors in each parameter group (weight decay first, then none; then the
  // same two for the decoupled embedding and output layer): the main parameters, or one shard per
  // group with the distributed optimizer. Its learning rate, in the same order.
  std::vector<int64_t> param_group_sizes() const;
  std::vector<double> param_group_lrs() const;
  GradScaler* grad_scaler() { return scaler_ ? &*scaler_ : nullptr; }

  // Optimizer state by parameter name (the DDP's params() names), for checkpoints. Per parameter:
  // the update's state ("exp_avg", "exp_avg_sq", "step" for AdamW, "momentum_buffer" for SGD with
  // momentum) and "main_param" where the fp32 main parameter is not the model parameter itself
  // (bf16/fp16 models, the distributed optimizer); tensors shaped like the parameter. The
  // distributed optimizer all-gathers its shards over the data-parallel group (collective), one
  // kind of state at a time.
  using ParamState = std::map<std::string, at::Tensor>;
  std::map<std::string, ParamState> param_state();
  // Restores param_state() output, from any data-parallel size. Every parameter must be there
  // with the shape of this rank's parameter; errors name the parameter.
  void load_param_state(const std::map<std::string, ParamState>& state);

 protected:
  // One update: a parameter group (a region of a DDP buffer), or this rank's shard of it.
  struct UpdateGroup {
    size_t buffer = 0, region = 0;
    double weight_decay = 0;
    bool decoupled = false;                            // the embedding and output layer under --decoupled-lr
    const distributed::ParamShards* shards = nullptr;  // the DDP's, with the distributed optimizer
    at::Tensor main;                                   // the fp32 elements the update writes
    at::Tensor exp_avg, exp_avg_sq, momentum;
    at::Tensor step;  // fp32 scalar, as the fused AdamW kernel reads it
  };
  // For DistributedOptimizer: the groups over the DDP's shards.
  MegatronOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                    std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                    std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups, bool sharded);

  // The updated main parameters into the model (Megatron-LM's _copy_main_params_to_model_params).
  virtual void copy_main_params_to_model_params();
  // The sum of squares and skip flag of this rank's part of the norm, summed over what else holds
  // part of the same model replica (the data-parallel shards, for the distributed optimizer).
  virtual void reduce_norm_over_shards(at::Tensor& sums) const {}

  distributed::DistributedDataParallel& ddp_;
  std::deque<UpdateGroup> groups_;

 private:
  const std::string& param_name(const UpdateGroup& g, size_t member) const;
  // Per group's flat tensor (its gradient or main parameters), the parts this rank counts in the
  // norms: TP-replicated parameters and the tied copy once, with shards only this rank's part;
  // the experts' groups only, or only the others.
  std::vector<at::Tensor> counted_pieces(const std::vector<at::Tensor>& flat, bool experts) const;
  // {the others' sum of squares, the experts'} of the counted pieces of `flat`.
  at::Tensor sums_of_squares(const std::vector<at::Tensor>& flat) const;
  // [others, experts, ...] summed over the ranks holding the rest of the model.
  void sum_over_model(at::Tensor& t) const;
  at::Tensor reduce_norm(const std::vector<at::Tensor>& grads, const at::Tensor& skip) const;
  void update(const std::vector<at::Tensor>& grads, const at::Tensor& found_inf);
  void reset_state(UpdateGroup& g);
  // The update's state of a group as named flat tensors (main's shape), and its restore.
  std::map<std::string, at::Tensor> state_of(const UpdateGroup& g) const;
  void load_state_of(UpdateGroup& g, const std::map<std::string, at::Tensor>& s, const std::string& what);

  OptimizerConfig config_;
  std::shared_ptr<comm::ProcessGroup> mp_;
  std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups_;
  std::vector<at::Tensor> main_params_;  // by DDP params() index, without shards: views of the groups' main
  std::optional<GradScaler> scaler_;
  double lr_, decoupled_lr_;
};

// Megatron-LM's get_megatron_optimizer for one DDP wrapper: a DistributedOptimizer when `ddp` holds
// shards, else a MegatronOptimizer.
MEGATRON_API std::unique_ptr<MegatronOptimizer> get_megatron_optimizer(
    const OptimizerConfig& config, distributed::DistributedDataParallel& ddp,
    std::shared_ptr<comm::ProcessGroup> model_parallel_group,
    std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups = {});

}  // namespace megatron::optimizer
