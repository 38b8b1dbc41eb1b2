#include "training/loop/model_setup.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <algorithm>

#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/common/language_module.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/config.h"
#include "training/loop/rank_lines.h"

namespace megatron::training::detail {

Model get_model(const TrainingContext& ctx, const ModelBuilder& model_builder) {
  const auto& ps = ctx.parallel_state;
  const auto vpp = ctx.args.virtual_pipeline_model_parallel_size;
  const auto ddp_config = ddp_config_from_args(ctx.args);
  Model model;
  for (int chunk = 0; chunk < (vpp ? static_cast<int>(*vpp) : 1); ++chunk) {
    TrainingContext chunk_ctx = ctx;
    if (vpp) chunk_ctx.virtual_pipeline_model_parallel_rank = chunk;
    const auto vrank = chunk_ctx.virtual_pipeline_model_parallel_rank;
    std::shared_ptr<torch::nn::Module> m;
    {
      // ZeRO-3 initialises the layers' parameters unit by unit as it shards them.
      std::optional<tensor_parallel::DeferredParameterInit> deferred;
      if (ddp_config.shards_params() && ctx.args.data_parallel_size > 1) deferred.emplace();
      m = model_builder(chunk_ctx, ps.is_pipeline_first_stage(vrank), ps.is_pipeline_last_stage(vrank));
    }
    TORCH_CHECK(m, "[training] model_builder returned no model");
    // As Module::to(dtype) then to(device) would, except that deferred parameters take their new
    // dtype and device without memory (the wrapper initialises them unit by unit).
    at::NoGradGuard no_grad;
    const at::ScalarType dtype = params_dtype(ctx.args);
    // Buffers keep their dtype (the routers' expert bias stays float32, as Megatron-Core keeps it).
    auto move = [&](at::Tensor& t, bool parameter) {
      const auto options =
          t.options().dtype(dtype == at::kFloat || !parameter ? t.scalar_type() : dtype).device(ctx.device);
      if (parameter && tensor_parallel::DeferredParameterInit::deferred(t))
        t.set_data(tensor_parallel::DeferredParameterInit::without_memory(t.sizes(), options));
      else
        t.set_data(t.to(options));
    };
    for (auto& t : m->parameters()) move(t, true);
    for (auto& t : m->buffers()) move(t, false);
    model.push_back(std::move(m));
  }
  return model;
}

namespace {

// A unit name of chunk `prefix`: "" (the chunk's parameters outside the units) is one unit across
// the chunks, kept whole through a step; the others are the chunk's own.
std::string chunk_unit(const std::string& prefix, const std::string& unit) {
  return unit.empty() ? unit : prefix + unit;
}

// The wrapper's view of every chunk's trainable parameters. Copies that another rank counts in
// the gradient norm are marked: replicated parameters on TP ranks > 0 (expert-TP ranks for an
// expert's), and the last stage's copy of the tied word embedding.
std::vector<distributed::ModelParam> model_params(const Model& model, int tp_rank, int etp_rank, bool decoupled_lr) {
  std::vector<distributed::ModelParam> params;
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    const std::string prefix = model_chunk_prefix(chunk, model.size());
    if (auto* lm = dynamic_cast<models::common::LanguageModule*>(model[chunk].get())) {
      const bool tied_copy = lm->share_embeddings_and_output_weights() && !lm->pre_process();
      for (const auto& p : lm->sharded_parameters()) {
        if (!p.param.requires_grad()) continue;
        distributed::ModelParam mp;
        mp.name = prefix + p.name;
        mp.param = p.param;
        mp.param_group = optimizer::param_group_of(p.name, p.param.dim(), decoupled_lr);
        mp.counted_elsewhere_in_grad_norm =
            ((p.expert_parallel ? etp_rank : tp_rank) > 0 && !p.init.layout.is_sharded()) ||
            (tied_copy && p.name == "output_layer.weight");
        mp.shared_across_pipeline_stages = lm->share_embeddings_and_output_weights() &&
                                           !(lm->pre_process() && lm->post_process()) &&
                                           optimizer::is_embedding_or_output_name(p.name);
        mp.fsdp_unit = chunk_unit(prefix, lm->param_unit(p.name));
        mp.sequence_parallel = lm->has_sequence_parallel_grad(p);
        mp.expert_parallel = p.expert_parallel;
        mp.gather_wait_unit = chunk_unit(prefix, lm->gather_wait_unit(p.name));
        if (tensor_parallel::DeferredParameterInit::deferred(p.param))
          mp.initialize = [lm, p](at::Tensor& view) { lm->initialize_parameter(p, view); };
        params.push_back(std::move(mp));
      }
      continue;
    }
    for (const auto& item : model[chunk]->named_parameters()) {
      if (!item.value().requires_grad()) continue;
      distributed::ModelParam mp;
      mp.name = prefix + item.key();
      mp.param = item.value();
      mp.param_group = optimizer::param_group_of(item.key(), item.value().dim(), decoupled_lr);
      params.push_back(std::move(mp));
    }
  }
  return params;
}

// Megatron-LM's --num-distributed-optimizer-instances: `group` cut into `instances` blocks of
// consecutive ranks, each an instance with a whole optimizer state sharded over its block, and
// the ranks at the same place in every block, which average what each block reduced.
struct InstanceGroups {
  std::shared_ptr<comm::ProcessGroup> within, across;
};
InstanceGroups instance_groups(const std::shared_ptr<comm::ProcessGroup>& group, int64_t instances,
                               const std::string& name) {
  if (!group || instances == 1) return {group, nullptr};
  const int n = static_cast<int>(instances), block = group->size() / n;
  InstanceGroups out;
  // Every member walks every subgroup, in one order (as ParallelState makes its groups).
  for (int i = 0; i < n; ++i) {
    std::vector<int> ranks;
    for (int r = 0; r < block; ++r) ranks.push_back(i * block + r);
    if (auto g = group->new_group(ranks, name + " within a distributed optimizer instance")) out.within = g;
  }
  for (int r = 0; r < block; ++r) {
    std::vector<int> ranks;
    for (int i = 0; i < n; ++i) ranks.push_back(i * block + r);
    if (auto g = group->new_group(ranks, name + " across distributed optimizer instances")) out.across = g;
  }
  return out;
}

}  // namespace

std::unique_ptr<distributed::DistributedDataParallel> wrap_with_ddp(const TrainingContext& ctx, const Model& model) {
  const auto& ps = ctx.parallel_state;
  auto params = model_params(model, ps.get_tensor_model_parallel_rank(), ps.get_expert_tensor_parallel_rank(),
                             ctx.args.decoupled_lr.has_value());
  int64_t local_params = 0;
  for (const auto& p : params) local_params += p.param.numel();
  log_in_rank_order(ps.get_world_group(), 0, LogLevel::kInfo,
                    ps.get_data_parallel_rank() != 0
                        ? ""
                        : " > number of parameters on (tensor, pipeline) model parallel rank (" +
                              std::to_string(ps.get_tensor_model_parallel_rank()) + ", " +
                              std::to_string(ps.get_pipeline_model_parallel_rank()) +
                              "): " + std::to_string(local_params));
  auto config = ddp_config_from_args(ctx.args);
  // --ddp-num-buckets: Megatron-LM's bucket size, this rank's parameters over the count.
  if (ctx.args.ddp_num_buckets) config.bucket_size = std::max<int64_t>(1, local_params / *ctx.args.ddp_num_buckets);
  const bool several = ps.get_world_group().size() > 1;
  const int64_t instances = ctx.args.num_distributed_optimizer_instances;
  const auto dense = instance_groups(several ? ps.data_parallel_group_ptr(true) : nullptr, instances, "data-parallel");
  const auto experts =
      instance_groups(several ? ps.expert_data_parallel_group_ptr() : nullptr, instances, "expert-data-parallel");
  // The norm sums each rank's shards over its instance: an instance's ranks must hold its experts'
  // instance ranks for each of them once (true when expert parallelism is inner to the data-parallel order).
  if (instances > 1 && experts.within && dense.within) {
    const auto& block = dense.within->global_ranks();
    for (int r : experts.within->global_ranks())
      TORCH_CHECK(std::find(block.begin(), block.end(), r) != block.end(),
                  "[training] --num-distributed-optimizer-instances ", instances, ": rank ", r,
                  " shares the experts' optimizer instance of rank ", ps.get_rank(),
                  " but not its data-parallel one; this expert layout is not implemented with instances");
  }
  auto ddp = std::make_unique<distributed::DistributedDataParallel>(std::move(params), config, dense.within,
                                                                    ps.tensor_model_parallel_group_ptr(),
                                                                    experts.within, dense.across, experts.across);
  // Under ZeRO-2/3 each decoder layer calls its unit's hooks around its forward (gathering its
  // parameters under ZeRO-3), and under ZeRO-3 a GPT model gathers those outside the layers as its
  // forward begins; with --overlap-param-gather each waits for its part of the gather.
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    auto* lm = dynamic_cast<models::common::LanguageModule*>(model[chunk].get());
    if (!lm) continue;
    const std::string prefix = model_chunk_prefix(chunk, model.size());
    lm->set_param_gather(
        [ddp = ddp.get(), prefix](const std::string& unit) { return ddp->param_gather(chunk_unit(prefix, unit)); });
  }
  TORCH_CHECK(config.data_parallel_sharding_strategy != distributed::ShardingStrategy::kOptimGradsParams ||
                  ddp->fsdp_units_without_hooks() == 0,
              "[training] --data-parallel-sharding-strategy optim_grads_params gathers each decoder layer's "
              "parameters around its forward, which this model does not call for (",
              ddp->fsdp_units_without_hooks(), " units); use a GPTModel, or optim_grads");
  return ddp;
}

void detach_ddp_hooks(const Model& model) {
  for (const auto& chunk : model)
    if (auto* lm = dynamic_cast<models::common::LanguageModule*>(chunk.get())) lm->set_param_gather(nullptr);
}

std::optional<int64_t> peak_allocated(c10::Device device) {
  if (const auto d = device_memory_stats(device)) return d->max_allocated;
  if (device.is_cpu() && cpu_allocator_cache_enabled()) return cpu_allocator_cache_stats().peak_allocated_bytes;
  return std::nullopt;
}

namespace {

// Every rank: what its parameters, gradients, main parameters and optimizer state hold now, and
// the most allocated while the model was built and by now.
void log_memory_after_setup(const TrainingContext& ctx, const optimizer::MegatronOptimizer& optim,
                            std::optional<int64_t> model_peak) {
  const auto m = optim.memory_report();
  auto mb = [](int64_t bytes) { return std::to_string(static_cast<double>(bytes) / (1 << 20)); };
  std::string line = "[Rank " + std::to_string(ctx.parallel_state.get_world_group().rank()) +
                     "] memory (MB) after optimizer setup (" + ctx.args.data_parallel_sharding_strategy +
                     ") | params: " + mb(m.params) + " | grads: " + mb(m.grads) +
                     " | main params: " + mb(m.main_params) + " | optimizer state: " + mb(m.optimizer_state);
  if (const auto now = peak_allocated(ctx.device); now && model_peak)
    line += " | max allocated building the model: " + mb(*model_peak) + " | so far: " + mb(*now);
  log_in_rank_order(ctx.parallel_state.get_world_group(), 0, LogLevel::kInfo, line);
}

}  // namespace

std::unique_ptr<optimizer::MegatronOptimizer> get_megatron_optimizer(const TrainingContext& ctx,
                                                                     distributed::DistributedDataParallel& ddp,
                                                                     std::optional<int64_t> model_peak_bytes) {
  const auto& args = ctx.args;
  const auto& ps = ctx.parallel_state;
  auto optim = optimizer::get_megatron_optimizer(
      optimizer_config_from_args(args), ddp, ps.model_parallel_group_ptr(),
      {ps.pipeline_model_parallel_group_ptr(), ps.expert_tensor_and_model_parallel_group_ptr()});
  log_memory_after_setup(ctx, *optim, model_peak_bytes);
  if (ddp.grad_bucket_count() > 0)
    log_rank_0(LogLevel::kInfo,
               std::string("Number of buckets for gradient ") +
                   (ddp.sharded() ? "reduce-scatter (reduced to each shard's rank): " : "all-reduce: ") +
                   std::to_string(ddp.grad_bucket_count()) +
                   (args.overlap_grad_reduce ? " (overlapped with the backward pass)" : ""));
  if (ddp.param_sync_overlapped())
    log_rank_0(LogLevel::kInfo,
               "Parameter all-gather overlapped with the next forward pass: each layer waits for its own buckets");
  if (const int64_t units = ddp.param_gather_units_overlapped(); units > 0)
    log_rank_0(LogLevel::kInfo, "Parameter all-gather of " + std::to_string(units) +
                                    " layer unit(s) overlapped with the next forward pass: each layer waits for "
                                    "its own");
  if (args.overlap_param_gather && !ddp.config().shards_params() && ddp.sharded() && !ddp.param_sync_overlapped())
    log_rank_0(LogLevel::kWarn,
               "--overlap-param-gather: this model's modules do not wait for their parameters (only GPTModel's "
               "do), so the step gathers them before it returns");
  return optim;
}

}  // namespace megatron::training::detail
