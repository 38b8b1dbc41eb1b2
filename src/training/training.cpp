// pretrain() by phase, as Megatron-LM's training.py: initialize -> model -> optimizer and
// scheduler -> data -> load -> train -> evaluate. The loop itself is trainer.cpp's.
#include "megatron/training/training.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include "initialize.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/common/language_module.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/training/checkpointing.h"
#include "megatron/training/config.h"
#include "megatron/training/theoretical_memory.h"
#include "trainer.h"

namespace megatron::training {
namespace {

using detail::Model;

// One model chunk per virtual stage, each told which it is, in the run's dtype and device.
Model get_model(const TrainingContext& ctx, const ModelBuilder& model_builder) {
  const auto& ps = ctx.parallel_state;
  const auto vpp = ctx.args.virtual_pipeline_model_parallel_size;
  Model model;
  for (int chunk = 0; chunk < (vpp ? static_cast<int>(*vpp) : 1); ++chunk) {
    TrainingContext chunk_ctx = ctx;
    if (vpp) chunk_ctx.virtual_pipeline_model_parallel_rank = chunk;
    const auto vrank = chunk_ctx.virtual_pipeline_model_parallel_rank;
    std::shared_ptr<torch::nn::Module> m;
    {
      // ZeRO-3 initialises the layers' parameters unit by unit as it shards them.
      std::optional<tensor_parallel::DeferredParameterInit> deferred;
      if (ctx.args.data_parallel_sharding_strategy == "optim_grads_params" && ctx.args.data_parallel_size > 1)
        deferred.emplace();
      m = model_builder(chunk_ctx, ps.is_pipeline_first_stage(vrank), ps.is_pipeline_last_stage(vrank));
    }
    TORCH_CHECK(m, "[training] model_builder returned no model");
    // As Module::to(dtype) then to(device) would, except that deferred parameters take their new
    // dtype and device without memory (the optimizer initialises them unit by unit).
    at::NoGradGuard no_grad;
    const std::optional<at::ScalarType> dtype = ctx.args.bf16   ? std::optional(at::kBFloat16)
                                                : ctx.args.fp16 ? std::optional(at::kHalf)
                                                                : std::nullopt;
    auto move = [&](at::Tensor& t, bool deferrable) {
      const auto options = t.options().dtype(dtype.value_or(t.scalar_type())).device(ctx.device);
      if (deferrable && tensor_parallel::DeferredParameterInit::deferred(t))
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

void detach_param_gather(const Model& model) {
  for (const auto& chunk : model) {
    auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(chunk.get());
    if (!gpt) continue;
    gpt->param_gather = nullptr;
    for (size_t i = 0; i < gpt->decoder->layers->size(); ++i)
      gpt->decoder->layers->ptr<transformer::TransformerLayerImpl>(i)->param_gather = nullptr;
  }
}

// The most the allocator has held so far (the GPU's, or the CPU allocator cache's blocks).
std::optional<int64_t> peak_allocated(c10::Device device) {
  if (const auto d = device_memory_stats(device)) return d->max_allocated;
  if (device.is_cpu() && cpu_allocator_cache_enabled()) return cpu_allocator_cache_stats().peak_allocated_bytes;
  return std::nullopt;
}

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
  log(LogLevel::kInfo, line);
}

// "decoder.layers.N" (with the chunk's prefix): decoder layer N's unit, whose parameters sharded
// data parallelism gathers and reduces together.
const std::string kLayers = "decoder.layers.";
std::string layer_unit(const std::string& prefix, const std::string& layer) {
  return prefix + kLayers + layer;
}

// The unit of a parameter ("" outside the decoder layers).
std::string fsdp_unit_of(const std::string& prefix, const std::string& name) {
  if (name.compare(0, kLayers.size(), kLayers) != 0) return "";
  return layer_unit(prefix, name.substr(kLayers.size(), name.find('.', kLayers.size()) - kLayers.size()));
}

// Read after a chunk's last layer, its final norm and output layer wait for their part of an
// overlapped parameter gather with that layer ("" for the others, and for a chunk without layers).
std::string gather_wait_unit(const std::string& prefix, const std::string& name, int64_t layers) {
  const bool tail = name.rfind("decoder.final_layernorm.", 0) == 0 || name.rfind("output_layer.", 0) == 0;
  return tail && layers > 0 ? layer_unit(prefix, std::to_string(layers - 1)) : "";
}

// Parameters as the optimizer sees them, over every model chunk of this stage. Copies that
// another rank counts in the gradient norm are marked: replicated parameters on TP ranks > 0,
// and the last stage's copy of the tied word embedding.
std::vector<optimizer::OptimizerParam> optimizer_params(const Model& model, int tp_rank) {
  std::vector<optimizer::OptimizerParam> params;
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    const std::string prefix = model_chunk_prefix(chunk, model.size());
    if (auto* lm = dynamic_cast<models::common::LanguageModule*>(model[chunk].get())) {
      const bool tied_copy = lm->share_embeddings_and_output_weights() && !lm->pre_process();
      for (const auto& p : lm->sharded_parameters()) {
        if (!p.param.requires_grad()) continue;
        const bool elsewhere =
            (tp_rank > 0 && !p.init.layout.is_sharded()) || (tied_copy && p.name == "output_layer.weight");
        const bool input_or_output = optimizer::is_embedding_or_output_name(p.name);
        const bool shared =
            lm->share_embeddings_and_output_weights() && !(lm->pre_process() && lm->post_process()) && input_or_output;
        params.push_back({prefix + p.name, p.param, elsewhere, input_or_output, shared, fsdp_unit_of(prefix, p.name),
                          lm->has_sequence_parallel_grad(p)});
        auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(model[chunk].get());
        if (gpt) params.back().gather_wait_unit = gather_wait_unit(prefix, p.name, gpt->decoder->layers->size());
        // Deferred (DeferredParameterInit): the value GPTModel::initialize_parameters would give it.
        if (gpt && tensor_parallel::DeferredParameterInit::deferred(p.param))
          params.back().initialize = [init = p.init, seed = gpt->options.seed(), name = p.init_name](at::Tensor& view) {
            tensor_parallel::init_sharded_param(view, init, seed, name);
          };
      }
      continue;
    }
    for (const auto& item : model[chunk]->named_parameters()) {
      if (item.value().requires_grad())
        params.push_back({prefix + item.key(), item.value(), false, false, false, fsdp_unit_of(prefix, item.key())});
    }
  }
  return params;
}

// Under ZeRO-2/3 each decoder layer calls its unit's hooks around its forward (gathering its
// parameters under ZeRO-3), and under ZeRO-3 a GPT model gathers those outside the layers as its
// forward begins.
void attach_param_gather(const Model& model, const optimizer::MegatronOptimizer& optim) {
  for (size_t chunk = 0; chunk < model.size(); ++chunk) {
    auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(model[chunk].get());
    if (!gpt) continue;
    const std::string prefix = model_chunk_prefix(chunk, model.size());
    gpt->param_gather = optim.param_gather("");
    for (size_t i = 0; i < gpt->decoder->layers->size(); ++i)
      gpt->decoder->layers->ptr<transformer::TransformerLayerImpl>(i)->param_gather =
          optim.param_gather(layer_unit(prefix, std::to_string(i)));
  }
}

std::unique_ptr<optimizer::MegatronOptimizer> get_megatron_optimizer(const TrainingContext& ctx, const Model& model) {
  const auto& ps = ctx.parallel_state;
  auto params = optimizer_params(model, ps.get_tensor_model_parallel_rank());
  int64_t local_params = 0;
  for (const auto& p : params) local_params += p.param.numel();
  if (ps.get_data_parallel_rank() == 0)
    log(LogLevel::kInfo, " > number of parameters on (tensor, pipeline) model parallel rank (" +
                             std::to_string(ps.get_tensor_model_parallel_rank()) + ", " +
                             std::to_string(ps.get_pipeline_model_parallel_rank()) +
                             "): " + std::to_string(local_params));
  auto optim = std::make_unique<optimizer::MegatronOptimizer>(
      std::move(params), optimizer_config_from_args(ctx.args),
      ps.get_world_group().size() > 1 ? ps.data_parallel_group_ptr() : nullptr, ps.model_parallel_group_ptr(),
      ps.tensor_model_parallel_group_ptr());
  attach_param_gather(model, *optim);
  TORCH_CHECK(
      ctx.args.data_parallel_sharding_strategy != "optim_grads_params" || optim->fsdp_units_without_hooks() == 0,
      "[training] --data-parallel-sharding-strategy optim_grads_params gathers each decoder layer's parameters "
      "around its forward, which this model does not call for (",
      optim->fsdp_units_without_hooks(), " units); use a GPTModel, or optim_grads");
  return optim;
}

// The true and padded vocabulary of the language-model chunks (--vocab-size for other models).
std::pair<int64_t, int64_t> vocab_sizes(const Arguments& args, const Model& model) {
  std::pair<int64_t, int64_t> sizes{args.vocab_size.value_or(0), args.vocab_size.value_or(0)};
  for (const auto& m : model)
    if (auto* lm = dynamic_cast<models::common::LanguageModule*>(m.get()))
      sizes = {lm->vocab_size(), lm->padded_vocab_size()};
  return sizes;
}

// --load: restores the parts in place and says where training resumes. Last of the set-up, after
// everything that might draw from the default generators, so that the restored RNG states are
// the ones the next iteration sees.
detail::TrainingProgress load(const TrainingContext& ctx, detail::TrainerParts& parts) {
  detail::TrainingProgress progress;
  if (ctx.args.load.empty()) return progress;
  TrainingState state = detail::checkpoint_state(ctx, parts, progress);
  if (load_checkpoint(ctx.args, ctx.parallel_state, state)) {
    progress = {state.iteration, state.consumed_train_samples, state.consumed_valid_samples, state.iteration};
    parts.optimizer->set_lr(parts.scheduler->lr(), parts.scheduler->decoupled_lr());
  }
  empty_cpu_allocator_cache();
  return progress;
}

std::unique_ptr<datasets::DataIterator> build_iterator(const TrainingContext& ctx,
                                                       std::shared_ptr<const datasets::MegatronDataset> ds,
                                                       int64_t eod_token, int64_t consumed_samples) {
  if (!ds) return nullptr;
  const auto& args = ctx.args;
  const auto& ps = ctx.parallel_state;
  // Every rank of a TP group has the same DP rank, so it draws the same samples itself; a resumed
  // run starts after the samples its checkpoint consumed.
  auto sampler = std::make_unique<datasets::MegatronPretrainingSampler>(
      ds->size(), consumed_samples, args.micro_batch_size, ps.get_data_parallel_rank(),
      ps.get_data_parallel_world_size());
  datasets::BatchOptions options;
  options.eod_token = eod_token;
  options.sequence_length = args.seq_length;  // a dataset of another sample length is refused
  options.reset_position_ids = args.reset_position_ids;
  options.reset_attention_mask = args.reset_attention_mask;
  options.eod_mask_loss = args.eod_mask_loss;
  options.create_attention_mask = args.reset_attention_mask;  // else the causal mask is implied
  options.pin_memory = ctx.device.is_cuda();
  return std::make_unique<datasets::DataIterator>(std::move(ds), std::move(sampler), options,
                                                  static_cast<int>(args.num_workers));
}

// Megatron-LM's build_train_valid_test_data_iterators: one iterator per model chunk and split.
void build_data_iterators(const TrainingContext& ctx, const Datasets& ds, const detail::TrainingProgress& progress,
                          detail::TrainerParts& parts) {
  for (size_t chunk = 0; chunk < parts.model.size(); ++chunk) {
    parts.train.push_back(build_iterator(ctx, ds.train, ds.eod_token, progress.consumed_train_samples));
    if (ds.valid) parts.valid.push_back(build_iterator(ctx, ds.valid, ds.eod_token, progress.consumed_valid_samples));
    if (ds.test) parts.test.push_back(build_iterator(ctx, ds.test, ds.eod_token, 0));
  }
}

std::array<int64_t, 3> train_valid_test_num_samples(const Arguments& args) {
  const auto n = datasets::train_valid_test_num_samples(*args.train_iters, *args.global_batch_size, args.eval_interval,
                                                        args.eval_iters);
  return {n[0].value_or(0), n[1].value_or(0), n[2].value_or(0)};
}

}  // namespace

TrainingResult pretrain(const Arguments& args, const ModelBuilder& model_builder, const DatasetBuilder& dataset_builder,
                        const ForwardStepFunc& forward_step, std::shared_ptr<comm::ProcessGroup> world) {
  const auto start_time = detail::Clock::now();
  auto init = detail::initialize_megatron(args, std::move(world));
  const TrainingContext ctx{args, init.parallel_state, init.rng_tracker, init.device, std::nullopt};

  const auto save_lock = lock_save_dir(args, init.parallel_state);  // held until pretrain returns
  // Before the model exists: a run that cannot fit stops here with the settings that would help.
  // The tokenizer's vocabulary is the model builder's; GPT-2's stands in when no flag gives one.
  check_memory(args, init.parallel_state.get_pipeline_model_parallel_rank(), args.vocab_size.value_or(50257),
               init.device, comm::LauncherEnv::from_environment().local_world_size);
  detail::TrainerParts parts;
  parts.model = get_model(ctx, model_builder);
  const auto model_peak = peak_allocated(init.device);
  std::tie(parts.vocab_size, parts.padded_vocab_size) = vocab_sizes(args, parts.model);
  parts.optimizer = get_megatron_optimizer(ctx, parts.model);
  log_memory_after_setup(ctx, *parts.optimizer, model_peak);
  if (parts.optimizer->grad_bucket_count() > 0)
    log_rank_0(
        LogLevel::kInfo,
        std::string("Number of buckets for gradient ") +
            (parts.optimizer->is_distributed() ? "reduce-scatter (reduced to each shard's rank): " : "all-reduce: ") +
            std::to_string(parts.optimizer->grad_bucket_count()) +
            (args.overlap_grad_reduce ? " (overlapped with the backward pass)" : ""));
  if (parts.optimizer->param_sync_overlapped())
    log_rank_0(LogLevel::kInfo,
               "Parameter all-gather overlapped with the next forward pass: each layer waits for its own buckets");
  if (const int64_t units = parts.optimizer->param_gather_units_overlapped(); units > 0)
    log_rank_0(LogLevel::kInfo, "Parameter all-gather of " + std::to_string(units) +
                                    " layer unit(s) overlapped with the next forward pass: each layer waits for "
                                    "its own");
  if (args.overlap_param_gather && args.data_parallel_sharding_strategy != "optim_grads_params" &&
      parts.optimizer->is_distributed() && !parts.optimizer->param_sync_overlapped())
    log_rank_0(LogLevel::kWarn,
               "--overlap-param-gather: this model's modules do not wait for their parameters (only GPTModel's "
               "do), so the step gathers them before it returns");
  parts.scheduler = std::make_unique<optimizer::OptimizerParamScheduler>(scheduler_config_from_args(args));
  parts.optimizer->set_lr(parts.scheduler->lr(), parts.scheduler->decoupled_lr());
  parts.forward_step = forward_step;

  log_rank_0(LogLevel::kInfo, "> building train, validation, and test datasets ...");
  const Datasets ds = dataset_builder(ctx, train_valid_test_num_samples(args));
  TORCH_CHECK(ds.train, "[training] dataset_builder returned no training dataset");

  const auto progress = load(ctx, parts);
  check_save_history(ctx.args, progress.iteration);
  build_data_iterators(ctx, ds, progress, parts);

  const auto model = parts.model;
  auto* optimizer = parts.optimizer.get();
  detail::Trainer trainer(ctx, std::move(parts), progress, start_time);
  // The model outlives the optimizer (the caller may hold it). If training throws (a non-finite
  // loss stops it), the gather the last step launched into its parameters is finished (its
  // buffers die with the optimizer) and the hooks into the optimizer are removed; no new
  // collective is started, since a failing peer may never join it.
  struct Unwind {
    const Model& model;
    optimizer::MegatronOptimizer* optimizer;
    bool armed = true;
    ~Unwind() {
      if (!armed) return;
      try {
        optimizer->finish_param_sync();
      } catch (const std::exception&) {  // a peer gone: the first error is already on its way
      }
      detach_param_gather(model);
    }
  } unwind{model, optimizer};
  log_rank_0(LogLevel::kInfo, "training ...");
  trainer.train();
  if (!trainer.exited_early()) trainer.evaluate_final();
  // Whole again, without sharding hooks.
  optimizer->unshard();
  detach_param_gather(model);
  unwind.armed = false;
  return trainer.result();
}

double num_floating_point_operations(const Arguments& args, int64_t batch_size, int64_t vocab) {
  const double h = static_cast<double>(args.hidden_size);
  const double heads = static_cast<double>(args.num_attention_heads);
  const double groups =
      static_cast<double>(args.group_query_attention ? args.num_query_groups : args.num_attention_heads);
  const double kv = args.kv_channels ? static_cast<double>(*args.kv_channels) : h / heads;
  const double ffn = args.ffn_hidden_size ? static_cast<double>(*args.ffn_hidden_size) : 4 * h;
  const double gated = args.swiglu ? 1.5 : 1.0;
  const double s = static_cast<double>(args.seq_length), L = static_cast<double>(args.num_layers);
  // 3 (forward + 2x backward) * 2 (multiply-add) * 2 (two GEMMs per block term), as Megatron-LM.
  return 12.0 * batch_size * s * L * h * h *
         ((1.0 + groups / heads + s / h) * (kv * heads / h) + (ffn / h) * gated + vocab / (2.0 * L * h));
}

}  // namespace megatron::training
