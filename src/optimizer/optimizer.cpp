#include "megatron/optimizer/optimizer.h"

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

MegatronOptimizer::MegatronOptimizer(std::vector<OptimizerParam> params, OptimizerConfig config,
                                     std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                                     std::shared_ptr<comm::ProcessGroup> model_parallel_group,
                                     std::shared_ptr<comm::ProcessGroup> tensor_parallel_group)
    : params_(std::move(params)),
      config_(std::move(config)),
      dp_(std::move(data_parallel_group)),
      mp_(std::move(model_parallel_group)),
      tp_(std::move(tensor_parallel_group)),
      lr_(config_.lr),
      decoupled_lr_(config_.lr) {
  TORCH_CHECK(!params_.empty(), "[optimizer] no parameters to optimise");
  TORCH_CHECK(config_.optimizer == "adam" || config_.optimizer == "sgd", "[optimizer] unknown optimizer '",
              config_.optimizer, "'; expected adam or sgd");
  const c10::Device device = params_.front().param.device();
  for (const auto& p : params_) {
    TORCH_CHECK(at::isFloatingType(p.param.scalar_type()), "[optimizer] parameter ", p.name, " has dtype ",
                p.param.scalar_type(), "; expected a floating-point type");
    TORCH_CHECK(p.param.device() == device, "[optimizer] parameter ", p.name, " is on ", p.param.device(),
                ", the first on ", device, "; the fused update needs one device");
  }
  distributed_ = config_.use_distributed_optimizer && dp_ && dp_->size() > 1;
  const bool sharded_grads = distributed_ && config_.shard_grads;
  const bool sharded_params = sharded_grads && config_.shard_params;
  if (sharded_grads) fsdp_ = std::make_unique<distributed::FsdpUnits>(dp_, sharded_params, config_.fsdp_prefetch, tp_);
  // One buffer per parameter dtype for the parameters outside fsdp units (all of them without
  // gradient sharding), then one per unit, in the order the model runs them.
  std::map<at::ScalarType, std::vector<size_t>> by_dtype;
  std::vector<std::string> unit_names;
  std::map<std::string, std::vector<size_t>> by_unit;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& unit = sharded_grads ? params_[i].fsdp_unit : std::string();
    if (unit.empty()) {
      by_dtype[params_[i].param.scalar_type()].push_back(i);
    } else {
      if (!by_unit.count(unit)) unit_names.push_back(unit);
      by_unit[unit].push_back(i);
    }
  }
  for (const auto& [dtype, indices] : by_dtype) add_buffer(indices, /*fsdp_unit=*/"");
  root_buffers_ = buffers_.size();
  if (sharded_params && root_buffers_ > 0) {
    TORCH_CHECK(root_buffers_ == 1,
                "[optimizer] optim_grads_params needs the parameters outside the decoder layers "
                "in one dtype, got ",
                root_buffers_);
    fsdp_unit_index_[""] = fsdp_->add_kept_unit(*buffers_[0], shards_of(0));
    buffers_[0]->release_params();  // gathered as the model's forward begins
  }
  for (const auto& unit : unit_names) add_buffer(by_unit[unit], unit);
  if (!distributed_) {
    // Per-parameter views of the groups' fp32 main elements (the parameters themselves for fp32).
    main_params_.resize(params_.size());
    for (const auto& g : groups_) {
      const auto& region = region_of(g);
      for (const auto& m : region.members) {
        const size_t i = index_of(g, m);
        main_params_[i] = g.main.narrow(0, m.offset, params_[i].param.numel()).view(params_[i].param.sizes());
      }
    }
  }
  if (config_.grad_scaler) scaler_.emplace(*config_.grad_scaler);
}

MegatronOptimizer::~MegatronOptimizer() = default;

// One ParamAndGradBuffer over params_[indices] (of one dtype) with a weight-decay region and a
// no-decay one, and the same two for the embedding and output layer under --decoupled-lr; its
// update groups; its gradient buckets (outside fsdp units), or its fsdp unit.
void MegatronOptimizer::add_buffer(const std::vector<size_t>& indices, const std::string& fsdp_unit) {
  std::vector<at::Tensor> tensors;
  std::vector<bool> counted, shared;
  std::vector<distributed::ParamAndGradBuffer::Initializer> initialize;
  std::vector<std::vector<size_t>> regions(4);
  for (size_t k = 0; k < indices.size(); ++k) {
    const auto& p = params_[indices[k]];
    initialize.push_back(p.initialize);
    TORCH_CHECK(p.param.scalar_type() == params_[indices.front()].param.scalar_type(), "[optimizer] fsdp unit ",
                fsdp_unit, " mixes dtypes: ", p.name, " is ", p.param.scalar_type());
    tensors.push_back(p.param);
    counted.push_back(!p.counted_elsewhere_in_grad_norm);
    shared.push_back(p.shared_across_pipeline_stages);
    const bool decoupled = config_.decoupled_lr && p.is_embedding_or_output_parameter;
    regions[(no_weight_decay(p.name, p.param.dim()) ? 1 : 0) + (decoupled ? 2 : 0)].push_back(k);
  }
  const size_t b = buffers_.size();
  buffer_params_.push_back(indices);
  std::vector<std::vector<size_t>> used;
  std::vector<size_t> kinds;
  for (size_t r = 0; r < regions.size(); ++r) {
    if (regions[r].empty()) continue;
    used.push_back(regions[r]);
    kinds.push_back(r);
  }
  buffers_.push_back(std::make_unique<distributed::ParamAndGradBuffer>(
      tensors, used, counted, distributed_ ? dp_->size() : 1, std::nullopt, initialize));
  auto& buffer = *buffers_.back();
  // Buckets all-reduce, or with the distributed optimizer reduce each piece to the rank whose
  // shard holds it; under the backward pass with the overlap, after it without (the same
  // collectives, so the two agree bit for bit). An fsdp unit reduce-scatters itself.
  if (dp_ && dp_->size() > 1 && fsdp_unit.empty()) {
    std::vector<int64_t> shard_numel;
    if (distributed_)
      for (const auto& region : buffer.regions()) shard_numel.push_back(region.padded / dp_->size());
    buckets_.push_back(
        std::make_unique<distributed::GradBuckets>(buffer, tensors, config_.bucket_numel, shard_numel, shared));
    if (config_.overlap_grad_reduce) buckets_.back()->enable_overlap();
  }
  const size_t first_group = groups_.size();
  for (size_t r = 0; r < used.size(); ++r) {
    UpdateGroup g;
    g.buffer = b;
    g.region = r;
    g.weight_decay = kinds[r] % 2 == 0 ? config_.weight_decay : 0.0;
    g.decoupled = kinds[r] >= 2;
    const auto& region = buffer.regions()[r];
    if (distributed_) {
      g.shards.emplace(buffer, r, dp_, /*own_main=*/config_.shard_grads && config_.shard_params);
      g.main = g.shards->main();
    } else {
      at::Tensor params_part = buffer.params_of(region).narrow(0, 0, region.numel);
      g.main = buffer.dtype() == at::kFloat ? params_part : params_part.to(at::kFloat);
    }
    reset_state(g);
    groups_.push_back(std::move(g));
  }
  // Sharded gradients exist whole only within a step (zero_grad() or the unit's backward allocates them).
  if (fsdp_) buffer.release_grads();
  if (fsdp_unit.empty()) return;
  // Units of one model chunk share the prefix before decoder.layers.
  const std::string chunk = fsdp_unit.substr(0, fsdp_unit.find("decoder.layers."));
  const auto known = fsdp_chunks_.emplace(chunk, static_cast<int>(fsdp_chunks_.size())).first;
  std::vector<bool> sequence_parallel;
  for (size_t i : indices) sequence_parallel.push_back(params_[i].sequence_parallel);
  const size_t unit = fsdp_->add_unit(buffer, shards_of(b), tensors, known->second, sequence_parallel);
  fsdp_unit_index_[fsdp_unit] = unit;
  for (size_t k = first_group; k < groups_.size(); ++k) groups_[k].fsdp_unit = static_cast<int64_t>(unit);
  if (config_.shard_params) buffer.release_params();  // the shards hold them now
}

std::vector<const ParamShards*> MegatronOptimizer::shards_of(size_t buffer) const {
  std::vector<const ParamShards*> out;
  for (const auto& g : groups_)
    if (g.buffer == buffer) out.push_back(&*g.shards);
  return out;
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
  for (const auto& g : groups_) sizes.push_back(g.shards ? 1 : static_cast<int64_t>(region_of(g).members.size()));
  return sizes;
}

void MegatronOptimizer::zero_grad() {
  for (size_t b = 0; b < root_buffers_; ++b) buffers_[b]->zero_grad();
  if (fsdp_) fsdp_->zero_grad();
  grads_synced_ = false;
}

void MegatronOptimizer::start_grad_sync(int64_t accumulations) {
  TORCH_CHECK(accumulations > 0, "[optimizer] start_grad_sync needs a positive number of backward passes, got ",
              accumulations);
  for (auto& b : buckets_) b->start(dp_, accumulations);
  if (fsdp_) fsdp_->start(accumulations);
}

void MegatronOptimizer::finish_grad_sync() {
  if (grads_synced_) return;
  // An fsdp unit's gradient is reduced from its buffer as its backward ends; it must accumulate
  // in place.
  for (size_t k = 0; k < root_buffers_; ++k) {
    for (size_t i : buffers_[k]->collect_replaced_grads()) {
      TORCH_CHECK(buckets_.empty() || !buckets_[k]->launched_with(i), "[optimizer] the gradient of ",
                  params_[buffer_params_[k][i]].name,
                  " was replaced after its bucket's all-reduce began (--overlap-grad-reduce); accumulate into "
                  "its .grad in place instead");
    }
  }
  for (auto& b : buckets_) b->finish(dp_);
  if (fsdp_) fsdp_->finish();
  grads_synced_ = true;
}

int64_t MegatronOptimizer::grad_bucket_count() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += static_cast<int64_t>(b->buckets().size());
  return n;
}

int64_t MegatronOptimizer::grad_buckets_launched() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b->launched();
  return n;
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

// The fp32 gradients of each group's main: the region's, averaged over data-parallel ranks, or
// this rank's reduce-scattered shard with ZeRO-1.
std::vector<at::Tensor> MegatronOptimizer::gather_grads() {
  finish_grad_sync();
  grads_synced_ = false;  // the next step syncs its own gradients
  std::vector<at::Tensor> grads;
  for (const auto& g : groups_) {
    const auto& region = region_of(g);
    if (g.fsdp_unit >= 0)
      grads.push_back(fsdp_->grad_shard(static_cast<size_t>(g.fsdp_unit), g.region));
    else if (g.shards)
      grads.push_back(g.shards->reduced_grads());
    else
      grads.push_back(buffers_[g.buffer]->grads_of(region).narrow(0, 0, region.numel));
  }
  return grads;
}

// The global gradient norm in fp32 (Megatron-LM's): norms of the counted ranges, their squares
// summed, then over the data-parallel shards (ZeRO-1) and the model-parallel ranks. Returns
// {sum of squares, skip requests}, both summed over those ranks in one reduction.
at::Tensor MegatronOptimizer::reduce_norm(const std::vector<at::Tensor>& grads, const at::Tensor& skip) const {
  std::vector<at::Tensor> counted;
  for (size_t k = 0; k < groups_.size(); ++k) {
    const auto& g = groups_[k];
    if (g.shards) {
      for (auto& piece : g.shards->norm_grads(grads[k])) counted.push_back(piece);
    } else {
      for (const auto& [offset, numel] : region_of(g).counted) counted.push_back(grads[k].narrow(0, offset, numel));
    }
  }
  const auto opts = grads.front().options().dtype(at::kFloat);
  at::Tensor sum_sq =
      counted.empty() ? at::zeros({1}, opts) : at::stack(at::_foreach_norm(counted)).square().sum().reshape({1});
  at::Tensor flag = skip.defined() ? (skip.to(opts.device()).reshape({1}) != 0).to(at::kFloat) : at::zeros({1}, opts);
  at::Tensor both = at::cat({sum_sq, flag});
  if (distributed_) dp_->all_reduce(both);  // every shard of the model once
  if (mp_ && mp_->size() > 1) mp_->all_reduce(both);
  return both;
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

// The updated main parameters into the model: nothing to do for fp32 without ZeRO-1 (main is
// the parameters), one copy per bf16/fp16 region, or ZeRO-1's all-gather. Under ZeRO-2 only the
// gradient shards stay; under ZeRO-3 the parameters are released too, gathered when next used.
void MegatronOptimizer::copy_back() {
  at::NoGradGuard no_grad;
  const bool overlapped = param_sync_overlapped();
  if (fsdp_)
    for (size_t b = 0; b < root_buffers_; ++b) buffers_[b]->release_grads();
  if (fsdp_ && config_.shard_params) {
    fsdp_->release_params();
    return;
  }
  // ZeRO-2: a unit whose module waits for its parameters gets them under the next forward.
  const bool units_overlapped = fsdp_ && config_.overlap_param_gather;
  for (const auto& g : groups_) {
    const bool unit_overlapped =
        units_overlapped && g.fsdp_unit >= 0 && fsdp_->hooked(static_cast<size_t>(g.fsdp_unit));
    if (g.shards && ((overlapped && g.fsdp_unit < 0) || unit_overlapped)) {
      g.shards->write_main_to_params();  // gathered below
    } else if (g.shards) {
      g.shards->all_gather_params();
    } else if (buffers_[g.buffer]->dtype() != at::kFloat) {
      const auto& region = region_of(g);
      buffers_[g.buffer]->params_of(region).narrow(0, 0, region.numel).copy_(g.main);
    }
  }
  if (overlapped)
    for (auto& b : buckets_) b->start_param_sync(dp_);
  if (units_overlapped) fsdp_->start_param_sync();
}

StepResult MegatronOptimizer::step(const at::Tensor& skip, const at::Tensor& grad_scale) {
  finish_param_sync();  // what the forward passes did not wait for: the update writes the shards
  std::vector<at::Tensor> grads = gather_grads();
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
  update(grads, result.found_inf);
  copy_back();
  return result;
}

void MegatronOptimizer::update_loss_scale(bool found_inf) {
  if (scaler_) scaler_->update(found_inf);
}

}  // namespace megatron::optimizer
