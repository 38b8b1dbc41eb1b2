// Megatron-LM's distributed-optimizer state in its legacy checkpoints (--ckpt-format torch), read
// onto our parameter names. model_optim_rng.pt keeps the parameter groups (without parameters, each
// with its step); distrib_optim.pt, written by data-parallel rank 0 of each (TP, PP) rank, the
// whole state of that rank's parameters: per gradient buffer (one per model chunk: its
// parameters share a dtype), {(param dtype, grad dtype): {"param" (the fp32 main copy),
// "exp_avg", "exp_avg_sq", "numel_unpadded"}}, flat fp32 tensors in the buffer's layout with
// the padding after each bucket cut (distrib_optimizer.py, get_parameter_state_dp_zero).
#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "megatron/training/checkpoint_files.h"
#include "training/checkpointing/checkpoint_dicts.h"

namespace megatron::training::detail {
namespace {

const c10::IValue* find(const GenericDict& d, const char* key) {
  auto it = d.find(key);
  return it == d.end() || it->value().isNone() ? nullptr : &it->value();
}

// Where each parameter of one chunk's buffer starts in the flat tensors, and their length. The
// buffer holds the parameters in reverse order, each starting on a multiple of 64 elements of
// its bucket; a bucket closes once it holds bucket_size elements, and around the copy of a tied
// embedding kept on two pipeline stages (shared_embedding); the padding after a bucket is not
// saved (distrib_optimizer.py, _compute_per_buffer_param_layout).
int64_t buffer_layout(const std::vector<const ModelDictParam*>& params, std::optional<int64_t> bucket_size,
                      const std::string& shared, std::vector<int64_t>& starts) {
  starts.assign(params.size(), 0);
  int64_t saved = 0, local = 0, end = 0;  // before this bucket; within it
  bool open = false;
  for (size_t i = params.size(); i-- > 0;) {
    const bool new_bucket = params[i]->local == shared;
    local = (local + 63) / 64 * 64;
    if (new_bucket && open) {
      saved += local;
      local = 0;
    }
    starts[i] = saved + local;
    end = local + params[i]->tensor.numel();
    open = true;
    if ((bucket_size && end >= *bucket_size) || new_bucket) {
      saved += end;
      local = 0;
      open = false;
    } else {
      local = end;
    }
  }
  return open ? saved + end : saved;
}

}  // namespace

RankCheckpoint::OptimizerState read_megatron_lm_distrib_optim(const GenericDict& d, const std::string& file) {
  const std::string dist_file = (std::filesystem::path(file).parent_path() / "distrib_optim.pt").string();
  const std::string way_out = "; pass --no-load-optim (the Adam moments restart) or --finetune";
  TORCH_CHECK(std::filesystem::is_regular_file(dist_file), "[checkpointing] ", file,
              " holds the groups of Megatron-LM's distributed optimizer, whose state (distrib_optim.pt) is not "
              "beside it",
              way_out);
  const auto top = get_dict(d, "optimizer", file);
  const auto& groups = get(get_dict(top, "optimizer", file), "param_groups", file);
  TORCH_CHECK(groups.isList() && !groups.toListRef().empty(), "[checkpointing] ", file,
              ": the optimizer's 'param_groups' is not a list of groups");
  RankCheckpoint::OptimizerState o;
  read_group_lrs(groups, o, file);
  std::optional<double> step;
  for (const auto& g : groups.toListRef())
    if (const auto* s = find(g.toGenericDict(), "step"); s && !step) step = step_value(*s);
  TORCH_CHECK(step, "[checkpointing] ", file,
              ": the distributed optimizer's groups have no step (saved before its first?)", way_out);
  o.grad_scaler = read_grad_scaler(top, file, /*stateless_allowed=*/true);
  o.scheduler = read_scheduler(d, file);

  const auto dist_value = read_checkpoint_file(dist_file);
  TORCH_CHECK(dist_value.isGenericDict(), "[checkpointing] ", dist_file,
              " is not one optimizer's state (a list: several, as expert-parallel runs save)", way_out);
  const auto dist = dist_value.toGenericDict();
  TORCH_CHECK(dist.contains("buckets_coalesced"), "[checkpointing] ", dist_file,
              " is in the older per-bucket layout (before buckets_coalesced)", way_out);
  // The buffers hold the buckets back to back, each without its padding to a data-parallel multiple.
  read_distrib_optim_buffers(
      model_dict_params(d, file), get_dict(d, "args", file), *step,
      [&](size_t c, const char* key) {
        auto it = dist.find(static_cast<int64_t>(c));
        TORCH_CHECK(it != dist.end() && it->value().isGenericDict() && it->value().toGenericDict().size() == 1,
                    "[checkpointing] ", dist_file, " has no state of gradient buffer ", c,
                    " (one buffer per model chunk, of one dtype, is read)", way_out);
        const auto state = it->value().toGenericDict().begin()->value();
        TORCH_CHECK(state.isGenericDict(), "[checkpointing] ", dist_file, ": buffer ", c, " is not a dict");
        const auto* flat = find(state.toGenericDict(), key);
        return flat && flat->isTensor() ? flat->toTensor() : at::Tensor();
      },
      o, dist_file, way_out);
  return o;
}

void read_distrib_optim_buffers(const std::vector<ModelDictParam>& params, const GenericDict& args, double step,
                                const std::function<at::Tensor(size_t, const char*)>& flat,
                                RankCheckpoint::OptimizerState& o, const std::string& file,
                                const std::string& way_out) {
  // Its bucket size (megatron/training: resolve_ddp_bucket_size and the per-chunk rule).
  auto flag = [&](const char* key) {
    return find(args, key) && find(args, key)->isBool() && find(args, key)->toBool();
  };
  auto integer = [&](const char* key, int64_t fallback) {
    const auto* v = find(args, key);
    return v && v->isInt() ? v->toInt() : fallback;
  };
  TORCH_CHECK(!find(args, "ddp_num_buckets"), "[checkpointing] ", file,
              ": written with --ddp-num-buckets, whose bucket "
              "layout this reader does not rebuild",
              way_out);
  std::optional<int64_t> bucket_size;
  if (flag("overlap_grad_reduce") && !flag("overlap_param_gather_with_optimizer_step"))
    bucket_size = find(args, "ddp_bucket_size")
                      ? integer("ddp_bucket_size", 0)
                      : std::max<int64_t>(
                            40000000, 1000000 * integer("data_parallel_size", 1) * integer("context_parallel_size", 1));
  const bool tied_across_stages =
      integer("pipeline_model_parallel_size", 1) > 1 && !flag("untie_embeddings_and_output_weights");

  const size_t chunks = params.empty() ? 0 : params.back().chunk + 1;
  const bool first_stage = !params.empty() && params.front().local == "embedding.word_embeddings.weight";
  for (size_t c = 0; c < chunks; ++c) {
    std::vector<const ModelDictParam*> mine;
    for (const auto& p : params)
      if (p.chunk == c) mine.push_back(&p);
    auto has = [&](const std::string& local) {
      return std::any_of(mine.begin(), mine.end(), [&](const ModelDictParam* p) { return p->local == local; });
    };
    // The tied embedding's copies between stages close buckets of their own.
    std::string shared;
    if (tied_across_stages && has("embedding.word_embeddings.weight") && !has("decoder.final_layernorm.weight"))
      shared = "embedding.word_embeddings.weight";
    if (tied_across_stages && has("output_layer.weight") && !has("embedding.word_embeddings.weight"))
      shared = "output_layer.weight";
    // Buckets only on the first chunk of the first pipeline stage.
    std::vector<int64_t> starts;
    const int64_t numel = buffer_layout(mine, c == 0 && first_stage ? bucket_size : std::nullopt, shared, starts);

    for (const char* key : {"param", "exp_avg", "exp_avg_sq"}) {
      const at::Tensor buffer = flat(c, key);
      TORCH_CHECK(buffer.defined(), "[checkpointing] ", file, " has no '", key, "' of gradient buffer ", c, way_out);
      TORCH_CHECK(buffer.numel() == numel, "[checkpointing] ", file, ": buffer ", c, " holds ", buffer.numel(),
                  " elements, its parameters laid out as Megatron-LM lays them out ", numel,
                  " (a model or bucket size other than the checkpoint's args say)", way_out);
      for (size_t i = 0; i < mine.size(); ++i) {
        const ModelDictParam& p = *mine[i];
        auto& ps = o.param_state[p.name];
        const at::Tensor value = buffer.narrow(0, starts[i], p.tensor.numel()).view(p.tensor.sizes());
        if (std::string(key) != "param")
          ps[key] = value;
        else if (p.tensor.scalar_type() != at::kFloat)
          ps["main_param"] = value;
        ps["step"] = at::scalar_tensor(step, at::kFloat);
      }
    }
  }
}

}  // namespace megatron::training::detail
