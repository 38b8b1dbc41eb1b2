#include "megatron/optimizer/optimizer.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <limits>
#include <utility>

#include "megatron/distributed/grad_sync.h"

namespace megatron::optimizer {
namespace {

// The inner optimizer's state of one tensor as named tensors (empty before its first step).
std::map<std::string, at::Tensor> inner_state(torch::optim::Optimizer& inner, const at::Tensor& t) {
  auto it = inner.state().find(t.unsafeGetTensorImpl());
  if (it == inner.state().end()) return {};
  if (auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
    return {{"exp_avg", adam->exp_avg()},
            {"exp_avg_sq", adam->exp_avg_sq()},
            {"step", at::scalar_tensor(adam->step(), at::kLong)}};
  }
  auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get());
  TORCH_INTERNAL_ASSERT(sgd, "unknown inner optimizer state");
  if (!sgd->momentum_buffer().defined()) return {};
  return {{"momentum_buffer", sgd->momentum_buffer()}};
}

// Installs inner-optimizer state for tensor t from named tensors (as inner_state returns them).
void set_inner_state(torch::optim::Optimizer& inner, const at::Tensor& t, const std::map<std::string, at::Tensor>& s,
                     const std::string& what) {
  auto get = [&](const char* key) {
    auto it = s.find(key);
    TORCH_CHECK(it != s.end(), "[optimizer] the saved state of ", what, " has no '", key, "'");
    TORCH_CHECK(it->second.numel() == t.numel(), "[optimizer] the saved '", key, "' of ", what, " has ",
                it->second.numel(), " elements, the parameter ", t.numel());
    return it->second.to(t.options().requires_grad(false)).reshape(t.sizes()).clone();
  };
  if (dynamic_cast<torch::optim::AdamW*>(&inner)) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    auto step = s.find("step");
    TORCH_CHECK(step != s.end(), "[optimizer] the saved state of ", what, " has no 'step' (not AdamW state?)");
    state->step(step->second.item<int64_t>());
    state->exp_avg(get("exp_avg"));
    state->exp_avg_sq(get("exp_avg_sq"));
    inner.state()[t.unsafeGetTensorImpl()] = std::move(state);
  } else {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(get("momentum_buffer"));
    inner.state()[t.unsafeGetTensorImpl()] = std::move(state);
  }
}

bool no_weight_decay(const OptimizerParam& p) {
  const auto& n = p.name;
  const bool is_bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
  return is_bias || p.param.dim() == 1;
}

}  // namespace

MegatronOptimizer::MegatronOptimizer(std::vector<OptimizerParam> params, OptimizerConfig config,
                                     std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                                     std::shared_ptr<comm::ProcessGroup> model_parallel_group)
    : params_(std::move(params)),
      config_(std::move(config)),
      dp_(std::move(data_parallel_group)),
      mp_(std::move(model_parallel_group)),
      lr_(config_.lr) {
  TORCH_CHECK(!params_.empty(), "[optimizer] no parameters to optimise");
  for (const auto& p : params_) {
    TORCH_CHECK(at::isFloatingType(p.param.scalar_type()), "[optimizer] parameter ", p.name, " has dtype ",
                p.param.scalar_type(), "; expected a floating-point type");
  }
  std::vector<at::Tensor> decay, no_decay;
  if (config_.use_distributed_optimizer && dp_ && dp_->size() > 1) {
    // The inner optimizer sees one flat shard per weight-decay group.
    for (bool wd : {true, false}) {
      std::vector<at::Tensor> group;
      std::vector<bool> duplicate;
      std::vector<size_t> members;
      for (size_t i = 0; i < params_.size(); ++i) {
        const auto& p = params_[i];
        if (no_weight_decay(p) == wd) continue;
        group.push_back(p.param);
        duplicate.push_back(p.counted_elsewhere_in_grad_norm);
        members.push_back(i);
      }
      if (group.empty()) continue;
      shards_.emplace_back(group, duplicate, dp_);
      shard_members_.push_back(std::move(members));
      (wd ? decay : no_decay).push_back(shards_.back().shard());
    }
  } else {
    for (const auto& p : params_) {
      if (p.param.scalar_type() == at::kFloat) {
        main_params_.push_back(p.param);
      } else {
        has_copies_ = true;
        main_params_.push_back(p.param.detach().to(at::kFloat).set_requires_grad(true));
      }
    }
    for (size_t i = 0; i < params_.size(); ++i)
      (no_weight_decay(params_[i]) ? no_decay : decay).push_back(main_params_[i]);
  }

  if (config_.optimizer == "adam") {
    auto options = [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(config_.lr)
                                                              .betas({config_.adam_beta1, config_.adam_beta2})
                                                              .eps(config_.adam_eps)
                                                              .weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    if (!decay.empty()) groups.emplace_back(decay, options(config_.weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
    inner_ = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(config_.lr));
  } else {
    TORCH_CHECK(config_.optimizer == "sgd", "[optimizer] unknown optimizer '", config_.optimizer,
                "'; expected adam or sgd");
    auto options = [&](double wd) {
      return std::make_unique<torch::optim::SGDOptions>(
          torch::optim::SGDOptions(config_.lr).momentum(config_.sgd_momentum).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    if (!decay.empty()) groups.emplace_back(decay, options(config_.weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
    inner_ = std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(config_.lr));
  }
  if (config_.grad_scaler) scaler_.emplace(*config_.grad_scaler);
}

MegatronOptimizer::~MegatronOptimizer() = default;

void MegatronOptimizer::zero_grad() {
  for (auto& p : params_) {
    at::Tensor& grad = p.param.mutable_grad();
    // bf16/fp16 parameters accumulate their micro-batch gradients in fp32, as Megatron-LM's
    // main_grad: autograd adds each half-precision gradient into this buffer in place.
    if (p.param.scalar_type() != at::kFloat && (!grad.defined() || grad.scalar_type() != at::kFloat)) {
      grad = at::zeros(p.param.sizes(), p.param.options().dtype(at::kFloat).requires_grad(false));
    } else if (grad.defined()) {
      grad.zero_();
    }
  }
}

void MegatronOptimizer::set_lr(double lr) {
  lr_ = lr;
  for (auto& group : inner_->param_groups()) group.options().set_lr(lr);
}

std::vector<at::Tensor> MegatronOptimizer::main_grads() {
  std::vector<at::Tensor> grads;
  grads.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor model_grad = params_[i].param.grad();
    at::Tensor& main = main_params_[i];
    if (!model_grad.defined()) model_grad = at::zeros_like(params_[i].param);
    main.mutable_grad() = model_grad.to(at::kFloat);  // fp32 already, unless zero_grad() was skipped
    grads.push_back(main.grad());
  }
  return grads;
}

double MegatronOptimizer::grad_norm(const std::vector<at::Tensor>& grads) const {
  auto sum_sq = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(grads.front().device()));
  if (is_distributed()) {
    for (const auto& shard : shards_) sum_sq += shard.grad_sum_of_squares();
    dp_->all_reduce(sum_sq);  // every shard of the model once
  } else {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (params_[i].counted_elsewhere_in_grad_norm) continue;
      sum_sq += grads[i].to(at::kDouble).pow(2).sum();
    }
  }
  if (mp_ && mp_->size() > 1) mp_->all_reduce(sum_sq);
  return std::sqrt(sum_sq.item<double>());
}

bool MegatronOptimizer::found_inf_after_unscale(const std::vector<at::Tensor>& grads) {
  const double inv = 1.0 / scaler_->scale();
  auto found = at::zeros({1}, at::TensorOptions().device(grads.front().device()));
  for (auto& g : grads) {
    g.mul_(inv);
    found.add_(at::logical_not(at::isfinite(g)).any().to(at::kFloat));
  }
  // Sharded gradients differ between DP ranks; whole ones are equal there after the average.
  if (is_distributed()) dp_->all_reduce(found, comm::ReduceOp::kMax);
  if (mp_ && mp_->size() > 1) mp_->all_reduce(found, comm::ReduceOp::kMax);
  return found.item<float>() > 0;
}

std::map<std::string, MegatronOptimizer::ParamState> MegatronOptimizer::param_state() {
  std::map<std::string, ParamState> out;
  if (!is_distributed()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      ParamState& s = out[params_[i].name];
      s = inner_state(*inner_, main_params_[i]);
      if (has_copies_ && params_[i].param.scalar_type() != at::kFloat) s["main_param"] = main_params_[i].detach();
    }
    return out;
  }
  for (size_t g = 0; g < shards_.size(); ++g) {
    auto& shard = shards_[g];
    const auto& members = shard_members_[g];
    for (size_t i : members) out[params_[i].name];
    // Every kind of state gathered into one flat buffer; each parameter gets a view of its part.
    auto spread = [&](const std::string& key, const at::Tensor& flat) {
      int64_t offset = 0;
      for (size_t i : members) {
        const auto& p = params_[i].param;
        out[params_[i].name][key] = flat.narrow(0, offset, p.numel()).view(p.sizes());
        offset += p.numel();
      }
    };
    spread("main_param", shard.gather(shard.shard().detach()));
    // Every DP rank steps its shard together, so all have state or none has.
    for (const auto& [key, value] : inner_state(*inner_, shard.shard())) {
      if (key == "step") {
        for (size_t i : members) out[params_[i].name]["step"] = value.clone();
      } else {
        spread(key, shard.gather(value));
      }
    }
  }
  return out;
}

void MegatronOptimizer::load_param_state(const std::map<std::string, ParamState>& state) {
  auto find = [&](const std::string& name) -> const ParamState& {
    auto it = state.find(name);
    TORCH_CHECK(it != state.end(), "[optimizer] the saved optimizer state has no parameter ", name);
    return it->second;
  };
  at::NoGradGuard no_grad;
  if (!is_distributed()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto& s = find(params_[i].name);
      if (auto main = s.find("main_param"); main != s.end() && has_copies_) {
        TORCH_CHECK(main->second.numel() == main_params_[i].numel(), "[optimizer] the saved main parameter of ",
                    params_[i].name, " has ", main->second.numel(), " elements, this rank's ", main_params_[i].numel());
        main_params_[i].copy_(main->second.reshape(main_params_[i].sizes()));
      } else if (has_copies_ && params_[i].param.scalar_type() != at::kFloat) {
        main_params_[i].copy_(params_[i].param);  // a checkpoint without fp32 copies
      }
      inner_->state().erase(main_params_[i].unsafeGetTensorImpl());
      if (s.count("exp_avg") || s.count("momentum_buffer"))
        set_inner_state(*inner_, main_params_[i], s, params_[i].name);
    }
    return;
  }
  for (size_t g = 0; g < shards_.size(); ++g) {
    auto& shard = shards_[g];
    const auto& members = shard_members_[g];
    // The group's flat buffer of one kind of state; main parameters default to the model's.
    auto flat = [&](const std::string& key) {
      std::vector<at::Tensor> parts;
      for (size_t i : members) {
        const auto& s = find(params_[i].name);
        auto it = s.find(key);
        const auto& p = params_[i].param;
        if (it == s.end() && key == "main_param") {
          parts.push_back(p.detach().reshape({-1}).to(at::kFloat).cpu());
          continue;
        }
        TORCH_CHECK(it != s.end(), "[optimizer] the saved state of ", params_[i].name, " has no '", key, "'");
        TORCH_CHECK(it->second.numel() == p.numel(), "[optimizer] the saved '", key, "' of ", params_[i].name, " has ",
                    it->second.numel(), " elements, this rank's parameter ", p.numel());
        parts.push_back(it->second.reshape({-1}).to(at::kFloat).cpu());
      }
      return shard.local_piece(at::cat(parts)).to(shard.shard().device());
    };
    shard.shard().copy_(flat("main_param"));
    inner_->state().erase(shard.shard().unsafeGetTensorImpl());
    const auto& first = find(params_[members.front()].name);
    if (!first.count("exp_avg") && !first.count("momentum_buffer")) continue;
    std::map<std::string, at::Tensor> s;
    for (const auto& [key, value] : first) {
      if (key == "step")
        s[key] = value;
      else if (key != "main_param")
        s[key] = flat(key);
    }
    set_inner_state(*inner_, shard.shard(), s, "the distributed optimizer's shard");
  }
}

StepResult MegatronOptimizer::step() {
  std::vector<at::Tensor> grads;
  if (is_distributed()) {
    for (auto& shard : shards_) {
      shard.reduce_scatter_grads();
      grads.push_back(shard.shard().grad());
    }
  } else {
    grads = main_grads();
    if (dp_) distributed::allreduce_gradients(grads, *dp_);
  }

  if (scaler_) {
    const bool found_inf = found_inf_after_unscale(grads);
    scaler_->update(found_inf);
    if (found_inf) return {false, std::numeric_limits<double>::quiet_NaN()};
  }

  StepResult result;
  result.grad_norm = grad_norm(grads);
  if (config_.clip_grad > 0) {
    const double coeff = config_.clip_grad / (result.grad_norm + 1e-6);
    if (coeff < 1.0) {
      for (auto& g : grads) g.mul_(coeff);
    }
  }
  inner_->step();
  if (is_distributed()) {
    for (auto& shard : shards_) shard.all_gather_params();
  } else if (has_copies_) {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].param.scalar_type() != at::kFloat) params_[i].param.copy_(main_params_[i]);
    }
  }
  return result;
}

}  // namespace megatron::optimizer
