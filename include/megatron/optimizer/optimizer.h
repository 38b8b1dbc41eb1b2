// MegatronOptimizer: AdamW or SGD over fp32 main parameters (the model's own for fp32 models,
// fp32 copies for bf16/fp16 ones), with Megatron-LM's step: average gradients over data-parallel
// ranks, unscale (fp16), clip by the global norm over model-parallel ranks, update, copy back.
// Biases and 1-D parameters (norms) get no weight decay. The step stays on the device: ATen's
// fused AdamW/SGD kernels over each parameter group, foreach norms and scaling, and a skip flag
// the kernels read themselves, so nothing waits for the host until the caller reads the result.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/distributed/fsdp.h"
#include "megatron/distributed/grad_buckets.h"
#include "megatron/distributed/param_and_grad_buffer.h"
#include "megatron/optimizer/distrib_optimizer.h"
#include "megatron/optimizer/grad_scaler.h"

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
  // With it, Megatron-FSDP's optim_grads (ZeRO-2): between steps each rank keeps only its shard
  // of the gradients; and optim_grads_params (ZeRO-3): of the parameters too, each unit
  // (distributed/fsdp.h) gathered before its forward and its backward, the next one ahead when
  // fsdp_prefetch is set.
  bool shard_grads = false;
  bool shard_params = false;
  bool fsdp_prefetch = true;
  // Data-parallel gradient buckets of about bucket_numel elements (Megatron-LM's default: 40M),
  // all-reduced during the backward pass as each completes when overlap_grad_reduce is set
  // (without the distributed optimizer; with it the reduce-scatter follows the backward pass).
  int64_t bucket_numel = 40'000'000;
  bool overlap_grad_reduce = false;
  // With the distributed optimizer (ZeRO-1, and ZeRO-2's parameters outside the decoder layers):
  // the updated parameters gathered under the next forward, each bucket waited for by the first
  // module that reads it (param_gather() hooks); gathered at the end of the step when a module
  // never asked for its hooks.
  bool overlap_param_gather = false;
  // --decoupled-lr: the embedding and output-layer parameters form groups of their own, updated
  // with set_lr's `decoupled` rate.
  bool decoupled_lr = false;
};

struct MEGATRON_API OptimizerParam {
  std::string name;
  at::Tensor param;
  // A copy of a parameter that another rank counts in the gradient norm: replicated on TP
  // ranks > 0, or the last pipeline stage's copy of the tied word embedding.
  bool counted_elsewhere_in_grad_norm = false;
  // The word embedding or the output layer: updated with the decoupled learning rate when
  // OptimizerConfig::decoupled_lr is set (Megatron-LM's is_embedding_or_output_parameter).
  bool is_embedding_or_output_parameter = false;
  // Its gradient is summed with another pipeline stage's after the data-parallel reduction (the
  // tied word embedding on the first and last stage): with the distributed optimizer its bucket
  // is all-reduced, since the stages' shards hold different parameters.
  bool shared_across_pipeline_stages = false;
  // Under optim_grads / optim_grads_params: the unit it belongs to (a decoder layer's name, such
  // as decoder.layers.3, with its chunk's prefix), whose parameters are gathered and whose
  // gradient is reduced together; empty: the embedding and output layer's unit, kept whole
  // through a step.
  std::string fsdp_unit;
  // Replicated over the TP ranks, its gradient partial on each under sequence parallelism
  // (Megatron-LM's param.sequence_parallel): summed over the TP group after the data-parallel
  // reduction. The optimizer does it for fsdp units (the model's finalize_model_grads cannot:
  // their whole gradients are gone by then).
  bool sequence_parallel = false;
  // For a parameter created without memory (tensor_parallel::DeferredParameterInit, under
  // ZeRO-3): writes its initial value into `view` (its shape, dtype and device).
  std::function<void(at::Tensor&)> initialize;
  // overlap_param_gather: the unit whose hook waits for its part of the gather, when not
  // fsdp_unit (a chunk's final norm and output layer wait with its last layer, not as its forward
  // begins).
  std::string gather_wait_unit;
};

// Megatron-LM's parameter-group rules, by our parameter names (a chunk prefix allowed): biases and
// 1-D parameters (the norms) take no weight decay; the word embedding and the output layer take the
// decoupled learning rate (its is_embedding_or_output_parameter).
MEGATRON_API bool no_weight_decay(const std::string& name, int64_t dim);
MEGATRON_API bool is_embedding_or_output_name(const std::string& name);

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
};

class MEGATRON_API MegatronOptimizer {
 public:
  // data_parallel_group averages gradients; model_parallel_group (TP x PP) sums the norm and
  // the overflow check; tensor_parallel_group sums the sequence-parallel gradients of fsdp units.
  // Any may be nullptr for a single rank.
  MegatronOptimizer(std::vector<OptimizerParam> params, OptimizerConfig config,
                    std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                    std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                    std::shared_ptr<comm::ProcessGroup> tensor_parallel_group = nullptr);
  ~MegatronOptimizer();

  // Scale to multiply the loss by before backward (1 without fp16 loss scaling).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // Zeroes the model gradients; those of bf16/fp16 parameters become fp32 buffers that autograd
  // accumulates the micro-batches into (Megatron-LM's main_grad).
  void zero_grad();
  // --overlap-grad-reduce: each parameter's gradient is complete after `accumulations` backward
  // passes (the step's micro-batches); from then on its bucket is all-reduced as soon as every
  // gradient in it is complete. No effect without overlap. Call after zero_grad().
  void start_grad_sync(int64_t accumulations);
  // The data-parallel average of the gradients (what overlap has not launched yet is launched
  // now, then everything is waited for); before anything else reads or changes the gradients.
  // step() calls it when the caller has not.
  void finish_grad_sync();
  // Buckets whose all-reduce was launched since start_grad_sync() (0 without overlap), and
  // buckets in all (0 without data parallelism).
  int64_t grad_buckets_launched() const;
  int64_t grad_bucket_count() const;
  // Averages, unscales, clips and updates. `skip` (optional, a scalar on the device, non-zero to
  // skip) travels with the norm's reduction over the model-parallel ranks, so that the last
  // stage's non-finite loss skips the update on every rank sharing the model. `grad_scale`
  // (optional, a scalar on the device) multiplies the averaged gradients first
  // (--calculate-per-token-loss: data-parallel size / global token count).
  StepResult step(const at::Tensor& skip = {}, const at::Tensor& grad_scale = {});
  // After reading step()'s found_inf: moves the fp16 loss scale (no-op without loss scaling).
  void update_loss_scale(bool found_inf);
  // The learning rate of the next steps; `decoupled` (default: lr) for the embedding and
  // output-layer groups when OptimizerConfig::decoupled_lr is set.
  void set_lr(double lr, std::optional<double> decoupled = std::nullopt);
  double lr() const { return lr_; }
  double decoupled_lr() const { return decoupled_lr_; }

  // Under optim_grads / optim_grads_params: what a module calls around its forward for the unit
  // `fsdp_unit` (OptimizerParam::fsdp_unit; "" for the embedding and output layer under ZeRO-3):
  // gathers its parameters (ZeRO-3) and allocates its whole gradient as its backward begins.
  // nullptr otherwise, or for a unit this rank does not hold. Under ZeRO-2 a unit whose hooks are
  // never asked for gets its gradient allocated before each step instead; ZeRO-3 needs them.
  // With overlap_param_gather: waits for the unit's part of the parameter gather before its
  // forward.
  std::shared_ptr<transformer::ParamGather> param_gather(const std::string& fsdp_unit) const;
  // overlap_param_gather: waits for what is left of the gather the last step launched. Before
  // anything but the model's forward reads the parameters (the checkpoint functions and unshard()
  // call it themselves).
  void finish_param_sync();
  // Buckets whose parameter gather is launched and not waited for, for tests.
  int64_t param_syncs_pending() const;
  // overlap_param_gather applies: every unit whose parameters the buckets carry has asked for its
  // hooks (else the step gathers them before it returns).
  bool param_sync_overlapped() const;
  // ZeRO-2 with overlap_param_gather: the layer units whose all-gather the step launches for the
  // next forward, each waited for by its layer (units whose module never asked for its hooks are
  // gathered in the step instead).
  int64_t param_gather_units_overlapped() const;
  // ZeRO-3: every parameter whole, for what reads the model outside its forward (checkpoints),
  // and released again. No-ops otherwise.
  void gather_params();
  void release_params();
  // The main parameters (this rank's shards with ZeRO-1..3) copied from the model parameters,
  // after something wrote into those (a checkpoint loaded without its optimizer state).
  void reload_model_params();
  // Under ZeRO-2/3, the units whose module never asked for their hooks (param_gather()).
  int64_t fsdp_units_without_hooks() const;
  // Sharding ends (collective): every parameter whole again and its gradient dropped (released
  // under ZeRO-2/3), so that the model serves without this optimizer. No-op without ZeRO-2/3.
  void unshard();
  // Parameter all-gathers of units so far (ZeRO-3), for tests and benchmarks.
  int64_t param_gathers() const;
  MemoryReport memory_report() const;

  const std::vector<OptimizerParam>& params() const { return params_; }
  // fp32 main parameters, in params() order (the model parameters themselves for fp32 models);
  // empty with the distributed optimizer, whose main parameters are shards.
  const std::vector<at::Tensor>& main_params() const { return main_params_; }
  bool is_distributed() const { return distributed_; }
  // Number of updated tensors in each parameter group (weight decay first, then none; then the
  // same two for the decoupled embedding and output layer): the main parameters, or one shard per
  // group with the distributed optimizer. Its learning rate, in the same order.
  std::vector<int64_t> param_group_sizes() const;
  std::vector<double> param_group_lrs() const;
  GradScaler* grad_scaler() { return scaler_ ? &*scaler_ : nullptr; }

  // Optimizer state by parameter name (params() names), for checkpoints. Per parameter: the
  // update's state ("exp_avg", "exp_avg_sq", "step" for AdamW, "momentum_buffer" for SGD with
  // momentum) and "main_param" where the fp32 main parameter is not the model
  // parameter itself (bf16/fp16 models, the distributed optimizer); tensors shaped like the
  // parameter. The distributed optimizer all-gathers its shards over the data-parallel group
  // (collective), one kind of state at a time.
  using ParamState = std::map<std::string, at::Tensor>;
  std::map<std::string, ParamState> param_state();
  // Restores param_state() output, from any data-parallel size. Every parameter must be there
  // with the shape of this rank's parameter; errors name the parameter.
  void load_param_state(const std::map<std::string, ParamState>& state);

 private:
  // One update: a parameter group (a region of a buffer), or this rank's shard of it (ZeRO-1).
  struct UpdateGroup {
    size_t buffer = 0, region = 0;
    double weight_decay = 0;
    bool decoupled = false;  // the embedding and output layer under --decoupled-lr
    std::optional<ParamShards> shards;
    int64_t fsdp_unit = -1;  // its index in fsdp_, for units with sharded gradients
    at::Tensor main;         // the fp32 elements the update writes
    at::Tensor exp_avg, exp_avg_sq, momentum;
    at::Tensor step;  // fp32 scalar, as the fused AdamW kernel reads it
  };
  const distributed::ParamAndGradBuffer::Region& region_of(const UpdateGroup& g) const {
    return buffers_[g.buffer]->regions()[g.region];
  }
  size_t index_of(const UpdateGroup& g, const distributed::ParamAndGradBuffer::Member& m) const {
    return buffer_params_[g.buffer][m.index];
  }
  void add_buffer(const std::vector<size_t>& indices, const std::string& fsdp_unit);
  std::vector<const ParamShards*> shards_of(size_t buffer) const;
  std::vector<at::Tensor> gather_grads();
  at::Tensor reduce_norm(const std::vector<at::Tensor>& grads, const at::Tensor& skip) const;
  void update(const std::vector<at::Tensor>& grads, const at::Tensor& found_inf);
  void copy_back();
  const std::string& gather_wait_unit(size_t i) const {
    return params_[i].gather_wait_unit.empty() ? params_[i].fsdp_unit : params_[i].gather_wait_unit;
  }
  void reset_state(UpdateGroup& g);
  // The update's state of a group as named flat tensors (main's shape), and its restore.
  std::map<std::string, at::Tensor> state_of(const UpdateGroup& g) const;
  void load_state_of(UpdateGroup& g, const std::map<std::string, at::Tensor>& s, const std::string& what);

  std::vector<OptimizerParam> params_;
  OptimizerConfig config_;
  std::shared_ptr<comm::ProcessGroup> dp_, mp_, tp_;
  bool distributed_ = false;
  std::vector<std::unique_ptr<distributed::ParamAndGradBuffer>> buffers_;  // one per parameter dtype
  // Per buffer, with data parallelism.
  std::vector<std::unique_ptr<distributed::GradBuckets>> buckets_;
  size_t root_buffers_ = 0;  // buffers_[0, root_buffers_) hold the parameters outside fsdp units
  std::unique_ptr<distributed::FsdpUnits> fsdp_;
  std::map<std::string, size_t> fsdp_unit_index_;   // "" for the kept unit (ZeRO-3)
  std::map<std::string, int> fsdp_chunks_;          // model chunk prefix -> index
  mutable std::set<std::string> hooked_units_;      // param_gather() asked for them
  bool grads_synced_ = false;                       // finish_grad_sync() ran since zero_grad()
  std::vector<std::vector<size_t>> buffer_params_;  // each buffer's parameters as params_ indices
  std::deque<UpdateGroup> groups_;                  // a deque: fsdp_ points at their shards
  std::vector<at::Tensor> main_params_;             // by params_ index, without ZeRO-1: views of the groups' main
  std::optional<GradScaler> scaler_;
  double lr_, decoupled_lr_;
};

}  // namespace megatron::optimizer
