#include "megatron/optimizer/optimizer.h"

#include "megatron/comm/process_group.h"
#include "megatron/distributed/distributed_data_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <map>
#include <string>
#include <utility>

namespace megatron::optimizer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool no_weight_decay(const std::string& name, int64_t dim) {
  return ends_with(name, ".bias") || dim == 1;
}

bool is_embedding_or_output_name(const std::string& name) {
  for (const std::string n : {"embedding.word_embeddings.weight", "output_layer.weight"})
    if (name == n || ends_with(name, "." + n)) return true;
  return false;
}

int param_group_of(const std::string& name, int64_t dim, bool decoupled_lr) {
  return (no_weight_decay(name, dim) ? 1 : 0) + (decoupled_lr && is_embedding_or_output_name(name) ? 2 : 0);
}

MegatronOptimizer::MegatronOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                                     std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                                     std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups)
    : MegatronOptimizer(ddp, std::move(config), std::move(model_parallel_group), std::move(expert_norm_groups),
                        /*sharded=*/false) {}

MegatronOptimizer::MegatronOptimizer(distributed::DistributedDataParallel& ddp, OptimizerConfig config,
                                     std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                                     std::vector<std::shared_ptr<comm::ProcessGroup>> expert_norm_groups, bool sharded)
    : ddp_(ddp),
      config_(std::move(config)),
      mp_(std::move(model_parallel_group)),
      expert_norm_groups_(std::move(expert_norm_groups)),
      lr_(config_.lr),
      decoupled_lr_(config_.lr) {
  TORCH_CHECK(config_.optimizer == "adam" || config_.optimizer == "sgd", "[optimizer] unknown optimizer '",
              config_.optimizer, "'; expected adam or sgd");
  TORCH_CHECK(ddp_.sharded() == sharded, "[optimizer] ",
              sharded ? "DistributedOptimizer needs a DistributedDataParallel with the distributed optimizer's shards"
                      : "a DistributedDataParallel with the distributed optimizer's shards needs DistributedOptimizer "
                        "(get_megatron_optimizer picks it)");
  // One update group per region of each buffer: its parameter group's weight decay and learning
  // rate; its fp32 elements are this rank's shard, the parameters themselves (fp32) or a copy.
  for (size_t b = 0; b < ddp_.num_buffers(); ++b) {
    const auto& buffer = ddp_.buffer(b);
    for (size_t r = 0; r < buffer.regions().size(); ++r) {
      const int kind = ddp_.region_groups(b)[r];
      UpdateGroup g;
      g.buffer = b;
      g.region = r;
      g.weight_decay = kind % 2 == 0 ? config_.weight_decay : 0.0;
      g.decoupled = kind >= 2;
      if (sharded) {
        g.shards = ddp_.shards(b, r);
        g.main = g.shards->main();
      } else {
        const auto& region = buffer.regions()[r];
        at::Tensor params_part = buffer.params_of(region).narrow(0, 0, region.numel);
        g.main = buffer.dtype() == at::kFloat ? params_part : params_part.to(at::kFloat);
      }
      reset_state(g);
      groups_.push_back(std::move(g));
    }
  }
  if (!sharded) {
    // Per-parameter views of the groups' fp32 main elements (the parameters themselves for fp32).
    main_params_.resize(ddp_.params().size());
    for (const auto& g : groups_) {
      for (const auto& m : ddp_.buffer(g.buffer).regions()[g.region].members) {
        const size_t i = ddp_.buffer_params(g.buffer)[m.index];
        main_params_[i] =
            g.main.narrow(0, m.offset, ddp_.params()[i].param.numel()).view(ddp_.params()[i].param.sizes());
      }
    }
  }
  if (config_.grad_scaler) scaler_.emplace(*config_.grad_scaler);
}

MegatronOptimizer::~MegatronOptimizer() = default;

const std::string& MegatronOptimizer::param_name(const UpdateGroup& g, size_t member) const {
  const auto& m = ddp_.buffer(g.buffer).regions()[g.region].members[member];
  return ddp_.params()[ddp_.buffer_params(g.buffer)[m.index]].name;
}

// Fresh state, as a first step would create it: zero moments (a zero momentum buffer makes
// SGD's first step equal to its buffer = gradient rule), step 0.
void MegatronOptimizer::reset_state(UpdateGroup& g) {
  const auto opts = g.main.options().requires_grad(false);
  if (config_.optimizer == "adam") {
    g.exp_avg = at::zeros_like(g.main, opts);
    g.exp_avg_sq = at::zeros_like(g.main, opts);
    g.step = at::zeros({}, opts);
  } else if (config_.sgd_momentum != 0) {
    g.momentum = at::zeros_like(g.main, opts);
  }
}

std::vector<int64_t> MegatronOptimizer::param_group_sizes() const {
  std::vector<int64_t> sizes;
  for (const auto& g : groups_)
    sizes.push_back(g.shards ? 1 : static_cast<int64_t>(ddp_.buffer(g.buffer).regions()[g.region].members.size()));
  return sizes;
}

void MegatronOptimizer::zero_grad() {
  ddp_.zero_grad_buffer();
}

std::vector<double> MegatronOptimizer::param_group_lrs() const {
  std::vector<double> lrs;
  for (const auto& g : groups_) lrs.push_back(g.decoupled ? decoupled_lr_ : lr_);
  return lrs;
}

void MegatronOptimizer::set_lr(double lr, std::optional<double> decoupled) {
  lr_ = lr;
  decoupled_lr_ = decoupled.value_or(lr);
}

std::vector<at::Tensor> MegatronOptimizer::counted_pieces(const std::vector<at::Tensor>& flat, bool experts) const {
  std::vector<at::Tensor> counted;
  for (size_t k = 0; k < groups_.size(); ++k) {
    const auto& g = groups_[k];
    if (ddp_.expert_buffer(g.buffer) != experts) continue;
    if (g.shards) {
      for (auto& piece : g.shards->norm_grads(flat[k])) counted.push_back(piece);
    } else {
      for (const auto& [offset, numel] : ddp_.buffer(g.buffer).regions()[g.region].counted)
        counted.push_back(flat[k].narrow(0, offset, numel));
    }
  }
  return counted;
}

at::Tensor MegatronOptimizer::sums_of_squares(const std::vector<at::Tensor>& flat) const {
  std::vector<at::Tensor> sums;
  for (bool experts : {false, true}) {
    const auto pieces = counted_pieces(flat, experts);
    sums.push_back(pieces.empty() ? at::zeros({1}, flat.front().options().dtype(at::kFloat))
                                  : at::stack(at::_foreach_norm(pieces)).square().sum().reshape({1}));
  }
  return at::cat(sums);
}

// A sum over every rank's counted pieces: over the shards, then the model-parallel ranks; the
// experts' entry (t[1]) over the expert norm groups instead, unless the data-parallel shards
// already covered the ranks holding other experts (the distributed optimizer's).
void MegatronOptimizer::sum_over_model(at::Tensor& t) const {
  reduce_norm_over_shards(t);
  const bool experts_apart = !is_distributed() && !expert_norm_groups_.empty();
  at::Tensor experts = experts_apart ? t.narrow(0, 1, 1).clone() : at::Tensor();
  if (mp_ && mp_->size() > 1) mp_->all_reduce(t);
  if (!experts_apart) return;
  for (const auto& g : expert_norm_groups_)
    if (g && g->size() > 1) g->all_reduce(experts);
  t.narrow(0, 1, 1).copy_(experts);
}

// The global gradient norm in fp32 (Megatron-LM's): norms of the counted ranges, their squares
// summed, then over the data-parallel shards (ZeRO-1) and the model-parallel ranks. Returns
// {sum of squares, skip requests}, both summed over those ranks in one reduction.
at::Tensor MegatronOptimizer::reduce_norm(const std::vector<at::Tensor>& grads, const at::Tensor& skip) const {
  const auto opts = grads.front().options().dtype(at::kFloat);
  at::Tensor flag = skip.defined() ? (skip.to(opts.device()).reshape({1}) != 0).to(at::kFloat) : at::zeros({1}, opts);
  at::Tensor all = at::cat({sums_of_squares(grads), flag});
  sum_over_model(all);
  return at::stack({all[0] + all[1], all[2]});
}

// One fused kernel per group. The kernels read found_inf on the device and leave everything
// untouched where it is 1; the step counts advance by 1 - found_inf.
void MegatronOptimizer::update(const std::vector<at::Tensor>& grads, const at::Tensor& found_inf) {
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < groups_.size(); ++k) {
    auto& g = groups_[k];
    const double lr = g.decoupled ? decoupled_lr_ : lr_;
    if (config_.optimizer == "adam") {
      g.step.add_(1 - found_inf);
      at::_fused_adamw_({g.main}, {grads[k]}, {g.exp_avg}, {g.exp_avg_sq}, {}, {g.step}, lr, config_.adam_beta1,
                        config_.adam_beta2, g.weight_decay, config_.adam_eps, /*amsgrad=*/false, /*maximize=*/false,
                        /*grad_scale=*/{}, found_inf);
    } else {
      // torch.optim.SGD's rule (coupled weight decay, momentum without dampening).
      const auto momentum = g.momentum.defined() ? std::vector<at::Tensor>{g.momentum} : std::vector<at::Tensor>{};
      at::_fused_sgd_({g.main}, {grads[k]}, momentum, g.weight_decay, config_.sgd_momentum, lr, /*dampening=*/0,
                      /*nesterov=*/false, /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/{}, found_inf);
    }
  }
}

// Nothing to do for fp32 (main is the parameters), one copy per bf16/fp16 region.
void MegatronOptimizer::copy_main_params_to_model_params() {
  at::NoGradGuard no_grad;
  for (const auto& g : groups_) {
    const auto& buffer = ddp_.buffer(g.buffer);
    if (buffer.dtype() == at::kFloat) continue;
    const auto& region = buffer.regions()[g.region];
    buffer.params_of(region).narrow(0, 0, region.numel).copy_(g.main);
  }
}

StepResult MegatronOptimizer::step(const at::Tensor& skip, const at::Tensor& grad_scale) {
  ddp_.finish_param_sync();  // what the forward passes did not wait for: the update writes the shards
  ddp_.finish_grad_sync();
  std::vector<at::Tensor> grads;
  for (const auto& g : groups_) grads.push_back(ddp_.reduced_grads(g.buffer, g.region));
  ddp_.grads_consumed();  // the next step syncs its own gradients
  const auto scalar = grads.front().options().dtype(at::kFloat);
  if (grad_scale.defined()) at::_foreach_mul_(grads, grad_scale.to(scalar).reshape({}));
  if (scaler_) {
    at::Tensor overflow = at::zeros({}, scalar);  // every overflow also makes the norm non-finite
    at::_amp_foreach_non_finite_check_and_unscale_(grads, overflow, at::full({}, 1.0 / scaler_->scale(), scalar));
  }
  StepResult result;
  at::Tensor reduced = reduce_norm(grads, skip);
  result.grad_norm = reduced[0].sqrt();
  result.skip_requested = reduced[1].gt(0).to(at::kFloat);
  result.found_inf = at::logical_or(at::logical_not(at::isfinite(result.grad_norm)), reduced[1].gt(0)).to(at::kFloat);
  if (config_.clip_grad > 0) {
    // Megatron-LM's clip_coeff = max_norm / (norm + 1e-6), applied when below 1; scaling by 1 changes nothing.
    at::Tensor coeff = (config_.clip_grad / (result.grad_norm + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(grads, coeff);
  }
  if (config_.log_num_zeros_in_grad) {  // Megatron-LM's count_zeros: the clipped gradients, counted once
    result.num_zeros = at::zeros({2}, scalar.dtype(at::kDouble));
    for (bool experts : {false, true})
      for (const auto& piece : counted_pieces(grads, experts)) result.num_zeros[experts ? 1 : 0] += piece.eq(0).sum();
    sum_over_model(result.num_zeros);
    result.num_zeros = result.num_zeros.sum();
  }
  update(grads, result.found_inf);
  copy_main_params_to_model_params();
  if (config_.log_params_norm) {  // Megatron-LM's calc_params_l2_norm: the fp32 main parameters, updated
    std::vector<at::Tensor> mains;
    for (const auto& g : groups_) mains.push_back(g.main);
    at::Tensor sum_sq = sums_of_squares(mains);
    sum_over_model(sum_sq);
    result.params_norm = sum_sq.sum().sqrt();
  }
  return result;
}

void MegatronOptimizer::update_loss_scale(bool found_inf) {
  if (scaler_) scaler_->update(found_inf);
}

}  // namespace megatron::optimizer
