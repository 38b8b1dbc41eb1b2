#include "training/arguments/implementation_arguments.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <utility>

#include "megatron/logging.h"

namespace megatron::training::detail {
namespace {

#define IMPL_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// --spec MODULE FUNCTION names the Python function that builds Megatron-LM's layers; the GPT
// layer specs build what the flags say here, any other spec a model pretrain_gpt does not build.
void validate_spec(const Arguments& a) {
  if (a.spec.empty()) return;
  const std::string spec = joined(a.spec);
  const bool gpt =
      spec == "local" ||
      (a.spec.size() == 2 && a.spec[0] == "megatron.core.models.gpt.gpt_layer_specs" &&
       (a.spec[1] == "get_gpt_layer_local_spec" || a.spec[1] == "get_gpt_layer_with_transformer_engine_spec"));
  const bool hybrid = spec.find("mamba") != std::string::npos || spec.find("hybrid") != std::string::npos;
  IMPL_CHECK(gpt, "--spec ", spec, ": ",
             hybrid ? "Mamba and hybrid models are not built by pretrain_gpt"
                    : "pretrain_gpt builds GPT layers from the flags; it takes local or "
                      "megatron.core.models.gpt.gpt_layer_specs get_gpt_layer_local_spec / "
                      "get_gpt_layer_with_transformer_engine_spec");
}

const char* unimplemented_recompute_reason(const std::string& module) {
  if (module == "moe_act" || module == "layernorm")
    return "recomputing a part whose output the next layer keeps (Megatron-LM's output-discarding checkpoint) is "
           "not implemented";
  if (module == "moe") return "recomputing a whole MoE layer (its router and token exchange) is not implemented";
  if (module == "mla_up_proj") return "multi-latent attention is not implemented";
  if (module == "mhc") return "hyper-connections are not implemented";
  if (module == "core_attn" || module == "mlp" || module == "shared_experts") return nullptr;
  return "gated delta net attention is not implemented";
}

void validate_recompute_modules(const Arguments& a) {
  if (a.recompute_modules.empty()) return;
  for (const auto& m : a.recompute_modules) {
    const char* reason = unimplemented_recompute_reason(m);
    IMPL_CHECK(!reason, "--recompute-modules ", m, ": ", reason, " (core_attn, mlp and shared_experts are)");
  }
  if (a.recompute_granularity != "selective") {
    log_rank_0(LogLevel::kWarn, "--recompute-modules " + joined(a.recompute_modules) +
                                    " has no effect without --recompute-granularity selective");
    return;
  }
  const bool mlp =
      std::find(a.recompute_modules.begin(), a.recompute_modules.end(), "mlp") != a.recompute_modules.end();
  IMPL_CHECK(!mlp || a.fp8_format.empty(),
             "--recompute-modules mlp is not implemented with --fp8-format (its GEMMs would record their amax twice)");
  IMPL_CHECK(!mlp || !a.domino, "--recompute-modules mlp is not implemented with --domino");
}

// Gradients accumulate in fp32 here; --grad-reduce-in-bf16 changes what the buckets' collectives
// carry. The optimizer's states are fp32.
void validate_gradients_and_states(const Arguments& a) {
  IMPL_CHECK(!(a.ddp_num_buckets && a.ddp_bucket_size), "give only one of --ddp-num-buckets and --ddp-bucket-size");
  IMPL_CHECK(!a.grad_reduce_in_bf16 || a.data_parallel_sharding_strategy == "no_shard" ||
                 a.data_parallel_sharding_strategy == "optim",
             "--grad-reduce-in-bf16 is not implemented with --data-parallel-sharding-strategy ",
             a.data_parallel_sharding_strategy, " (its reduce-scatter carries fp32)");
  const std::pair<const char*, const std::string*> states[] = {{"--main-grads-dtype", &a.main_grads_dtype},
                                                               {"--main-params-dtype", &a.main_params_dtype},
                                                               {"--exp-avg-dtype", &a.exp_avg_dtype},
                                                               {"--exp-avg-sq-dtype", &a.exp_avg_sq_dtype}};
  for (const auto& [flag, dtype] : states)
    IMPL_CHECK(*dtype == "fp32", flag, " ", *dtype,
               ": the optimizer keeps its main parameters, gradients and moments in fp32 here (lower-precision "
               "states are not implemented)");
}

}  // namespace

void validate_implementation_choices(Arguments& a) {
  validate_spec(a);
  validate_recompute_modules(a);
  validate_gradients_and_states(a);
  IMPL_CHECK(a.dataloader_type != "external",
             "--dataloader-type external: pretrain_gpt builds its own data loader "
             "(single or cyclic); a program of its own passes its data through pretrain()'s dataset_builder");
  if (a.no_data_sharding && a.dataloader_type != "cyclic")
    log_rank_0(LogLevel::kWarn, "--no-data-sharding has no effect without --dataloader-type cyclic");
}

}  // namespace megatron::training::detail
