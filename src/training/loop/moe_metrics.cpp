#include "training/loop/moe_metrics.h"

#include <ATen/ATen.h>

#include <numeric>

#include "megatron/transformer/module.h"
#include "training/arguments/moe_arguments.h"

namespace megatron::training::detail {

MoeAuxLosses reduce_moe_aux_losses(const Arguments& args, const ParallelState& ps,
                                   const std::vector<torch::nn::Module*>& chunks, int64_t num_microbatches,
                                   const c10::Device& device) {
  MoeAuxLosses out;
  if (!args.num_experts) return out;
  // Every rank names the same losses, whether or not its stage holds an MoE layer.
  if (args.moe_aux_loss_coeff > 0 && args.moe_router_load_balancing_type != "none")
    out.names.push_back(args.moe_router_load_balancing_type == "aux_loss" ? "load_balancing_loss"
                                                                          : "seq_load_balancing_loss");
  if (args.moe_z_loss_coeff.value_or(0) > 0) out.names.push_back("z_loss");
  std::vector<at::Tensor> sums(out.names.size());
  for (auto* chunk : chunks) {
    auto* module = dynamic_cast<transformer::MegatronModule*>(chunk);
    if (!module) continue;
    const auto recorded = module->take_moe_aux_losses();
    for (size_t i = 0; i < out.names.size(); ++i) {
      auto it = recorded.find(out.names[i]);
      if (it != recorded.end()) sums[i] = sums[i].defined() ? sums[i] + it->second : it->second;
    }
  }
  if (out.names.empty()) return out;
  std::vector<at::Tensor> values;
  for (const auto& s : sums)
    values.push_back(s.defined() ? s.to(device, at::kFloat).reshape({}) : at::zeros({}, at::TensorOptions(device)));
  out.values = at::stack(values);
  if (ps.get_pipeline_model_parallel_world_size() > 1) ps.get_pipeline_model_parallel_group().all_reduce(out.values);
  // Each TP rank's values are its sequence-parallel share of the tokens' (router.cpp): summed.
  if (ps.get_tensor_model_parallel_world_size() > 1) ps.get_tensor_model_parallel_group().all_reduce(out.values);
  // Over the data- and context-parallel ranks: each CP rank's load-balancing loss is its share of
  // the whole times CP (router.cpp), its z-loss the mean over its own tokens.
  if (ps.get_data_parallel_world_size(true) > 1)
    ps.get_data_parallel_group(true).all_reduce(out.values, comm::ReduceOp::kAvg);
  const auto pattern = moe_layer_pattern(args.moe_layer_freq, args.num_layers);
  const int64_t moe_layers = std::accumulate(pattern.begin(), pattern.end(), int64_t{0});
  out.values = out.values / static_cast<double>(std::max<int64_t>(1, moe_layers) * num_microbatches);
  return out;
}

}  // namespace megatron::training::detail
