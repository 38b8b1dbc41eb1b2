// The optimizer's state by parameter name, for checkpoints: each parameter's slice of its group's
// flat state (gathered over the data-parallel ranks with ZeRO-1), and back.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"

namespace megatron::optimizer {

std::map<std::string, at::Tensor> MegatronOptimizer::state_of(const UpdateGroup& g) const {
  if (config_.optimizer == "adam")
    return {{"exp_avg", g.exp_avg}, {"exp_avg_sq", g.exp_avg_sq}, {"step", g.step.to(at::kCPU).to(at::kLong)}};
  if (!g.momentum.defined()) return {};
  return {{"momentum_buffer", g.momentum}};
}

void MegatronOptimizer::load_state_of(UpdateGroup& g, const std::map<std::string, at::Tensor>& s,
                                      const std::string& what) {
  auto get = [&](const char* key) {
    auto it = s.find(key);
    TORCH_CHECK(it != s.end(), "[optimizer] the saved state of ", what, " has no '", key, "'");
    TORCH_CHECK(it->second.numel() == g.main.numel(), "[optimizer] the saved '", key, "' of ", what, " has ",
                it->second.numel(), " elements, this rank's ", g.main.numel());
    return it->second.to(g.main.options().requires_grad(false)).reshape(g.main.sizes()).clone();
  };
  if (config_.optimizer == "adam") {
    auto step = s.find("step");
    TORCH_CHECK(step != s.end(), "[optimizer] the saved state of ", what, " has no 'step' (not AdamW state?)");
    g.step = step->second.to(g.main.options().requires_grad(false)).reshape({}).clone();
    g.exp_avg = get("exp_avg");
    g.exp_avg_sq = get("exp_avg_sq");
  } else if (g.momentum.defined()) {
    g.momentum = get("momentum_buffer");
  }
}

std::map<std::string, MegatronOptimizer::ParamState> MegatronOptimizer::param_state() {
  std::map<std::string, ParamState> out;
  for (const auto& g : groups_) {
    const auto& buffer = ddp_.buffer(g.buffer);
    const auto& region = buffer.regions()[g.region];
    // The group's flat tensors; each parameter gets a view of its part.
    std::map<std::string, at::Tensor> flat;
    for (const auto& [key, value] : state_of(g))
      flat[key] = g.shards && key != "step" ? g.shards->gather(value) : value;
    const bool main_is_copy = g.shards || buffer.dtype() != at::kFloat;
    if (main_is_copy) flat["main_param"] = g.shards ? g.shards->gather(g.main.detach()) : g.main.detach();
    for (const auto& m : region.members) {
      const auto& p = ddp_.params()[ddp_.buffer_params(g.buffer)[m.index]];
      ParamState& s = out[p.name];
      for (const auto& [key, value] : flat)
        s[key] = key == "step" ? value.clone() : value.narrow(0, m.offset, p.param.numel()).view(p.param.sizes());
    }
  }
  return out;
}

void MegatronOptimizer::load_param_state(const std::map<std::string, ParamState>& state) {
  ddp_.finish_param_sync();  // an fp32 main shard is the parameters' memory, which a pending gather reads
  auto find = [&](const std::string& name) -> const ParamState& {
    auto it = state.find(name);
    TORCH_CHECK(it != state.end(), "[optimizer] the saved optimizer state has no parameter ", name);
    return it->second;
  };
  at::NoGradGuard no_grad;
  for (auto& g : groups_) {
    const auto& buffer = ddp_.buffer(g.buffer);
    const auto& region = buffer.regions()[g.region];
    // The group's elements of one kind of state, from every member; main parameters default to the model's.
    auto flat = [&](const std::string& key) {
      std::vector<at::Tensor> parts;
      for (const auto& m : region.members) {
        const auto& p = ddp_.params()[ddp_.buffer_params(g.buffer)[m.index]];
        const auto& s = find(p.name);
        auto it = s.find(key);
        if (it == s.end() && key == "main_param") {
          parts.push_back(p.param.detach().reshape({-1}).to(at::kFloat));
          continue;
        }
        TORCH_CHECK(it != s.end(), "[optimizer] the saved state of ", p.name, " has no '", key, "'");
        TORCH_CHECK(it->second.numel() == p.param.numel(), "[optimizer] the saved '", key, "' of ", p.name, " has ",
                    it->second.numel(), " elements, this rank's parameter ", p.param.numel());
        parts.push_back(it->second.reshape({-1}).to(g.main.device(), at::kFloat));
      }
      at::Tensor all = at::cat(parts);
      return g.shards ? g.shards->local_piece(all) : all;
    };
    // fp32 parameters without ZeRO-1 are their own main parameters, loaded with the model.
    if (g.shards || buffer.dtype() != at::kFloat) g.main.copy_(flat("main_param"));
    const auto& first = find(param_name(g, 0));
    // A checkpoint saved before any update has no update state: start it fresh.
    if (!first.count("exp_avg") && !first.count("momentum_buffer")) {
      reset_state(g);
      continue;
    }
    std::map<std::string, at::Tensor> s;
    for (const auto& [key, value] : first) {
      if (key == "step")
        s[key] = value;
      else if (key != "main_param")
        s[key] = flat(key);
    }
    load_state_of(g, s, "the parameter group of " + param_name(g, 0));
  }
}

}  // namespace megatron::optimizer
