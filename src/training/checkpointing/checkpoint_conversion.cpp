// Checkpoint conversion: any layout -> full (TP = 1) tensors under global layer names -> another
// layout or Hugging Face (hf/hf_conversion.cpp). Rank files are read and written as RankCheckpoint,
// torch_dist folders by torch_dist_conversion.cpp.
#include "megatron/training/checkpoint_conversion.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "megatron/models/common/language_module.h"
#include "megatron/tensor_parallel/sharding.h"
#include "megatron/training/checkpointing.h"
#include "training/checkpointing/conversion_layout.h"
#include "training/checkpointing/full_checkpoint.h"
#include "training/checkpointing/torch_dist.h"
#include "training/hf/hf_conversion.h"

namespace megatron::training {
namespace fs = std::filesystem;
using TensorMap = RankCheckpoint::TensorMap;
using detail::export_hf;
using detail::FullCheckpoint;
using detail::import_hf;
using namespace detail;  // conversion_layout.h

namespace {

FullCheckpoint read_full(const std::string& dir, std::optional<int64_t> step) {
  FullCheckpoint f;
  if (step) {
    f.iteration = step;
  } else {
    auto tracker = read_tracker(dir);
    TORCH_CHECK(tracker, "[convert_checkpoint] ", dir, " has no ", kTrackerFileName);
    f.iteration = tracker->iteration;
  }
  const fs::path iter_dir = fs::path(dir) / iteration_dir_name(f.iteration);
  if (detail::is_torch_dist(iter_dir.string())) return detail::read_torch_dist_full(iter_dir.string(), f.iteration);
  auto rank_dir = [&](int t, int p, int pp, int e, int ep) {
    return (iter_dir / rank_dir_name(t, p, pp, e, ep)).string();
  };
  const RankCheckpoint first = RankCheckpoint::read(first_rank_dir(iter_dir.string()), true);
  f.a = first.args;
  const auto& a = f.a;
  const int tp = static_cast<int>(a.tensor_model_parallel_size), pp = static_cast<int>(a.pipeline_model_parallel_size);
  const int ep = static_cast<int>(a.expert_model_parallel_size), etp = expert_tp_of(a, iter_dir.string());
  // Each tensor's shards by TP (or expert-TP) rank; the first replica read counts.
  std::map<std::string, std::map<int, at::Tensor>> shards;
  std::map<std::string, std::map<std::string, std::map<int, at::Tensor>>> optim_shards;
  auto shard_index = [&](const std::string& name, int t) { return is_expert_param(name) && etp == 1 ? 0 : t; };
  bool has_optim = true;
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      for (int e = 0; e < ep; ++e) {
        // With expert TP 1 a layout's ranks hold some (TP, EP) pairs only; the check below names a gap.
        if (ep > 1 && !fs::is_directory(rank_dir(t, p, pp, e, ep))) continue;
        const bool is_first = p == 0 && t == 0 && e == 0;
        const RankCheckpoint ck = is_first ? first : RankCheckpoint::read(rank_dir(t, p, pp, e, ep), true);
        TORCH_CHECK(static_cast<int64_t>(ck.model.size()) == chunks_of(a), "[convert_checkpoint] ",
                    rank_dir(t, p, pp, e, ep), " holds ", ck.model.size(), " model chunks, its arguments say ",
                    chunks_of(a));
        auto global_of = [&](const std::string& local, int64_t v) {
          return expert_to_global(shift_layer(local, layer_offset(a, p, v)), a, e);
        };
        for (int64_t v = 0; v < chunks_of(a); ++v) {
          const bool tied_copy = !a.untie_embeddings_and_output_weights && !(p == 0 && v == 0);
          for (const auto& [name, tensor] : ck.model[v]) {
            if (tied_copy && name == "output_layer.weight") continue;  // the first stage's embedding
            const std::string global = global_of(name, v);
            shards[global].emplace(shard_index(global, t), tensor);
          }
        }
        if (!ck.optimizer) {
          has_optim = false;
          if (f.optimizer_unread.empty()) f.optimizer_unread = ck.optimizer_unread;
          continue;
        }
        for (const auto& [key, state] : ck.optimizer->param_state) {
          std::string name = key;
          int64_t v = 0;
          if (chunks_of(a) > 1) {  // "model<v>.<name>"
            const size_t dot = name.find('.');
            v = std::stoll(name.substr(5, dot - 5));
            name = name.substr(dot + 1);
          }
          const bool tied_copy = !a.untie_embeddings_and_output_weights && !(p == 0 && v == 0);
          if (tied_copy && name == "output_layer.weight") continue;
          const std::string global = global_of(name, v);
          for (const auto& [kind, tensor] : state) optim_shards[global][kind].emplace(shard_index(global, t), tensor);
        }
        if (is_first) {
          f.grad_scaler = ck.optimizer->grad_scaler;
          f.scheduler = ck.optimizer->scheduler;
          f.lr = ck.optimizer->lr;
          f.decoupled_lr = ck.optimizer->decoupled_lr;
        }
      }
    }
  }
  // Every shard of every tensor, in rank order.
  auto unshard = [&](const std::string& name, const std::map<int, at::Tensor>& parts) {
    const int n = is_expert_param(name) ? etp : tp;
    std::vector<at::Tensor> ordered;
    for (int i = 0; i < n; ++i) {
      auto it = parts.find(i);
      TORCH_CHECK(it != parts.end(), "[convert_checkpoint] ", iter_dir.string(), " has no shard ", i, " of ", n, " of ",
                  name, " (", describe_layout(iter_dir.string()), "): a rank folder is missing");
      ordered.push_back(it->second);
    }
    return ordered.front().dim() == 0 ? ordered.front() : layout_of(name, a, 0, n).unshard(ordered);
  };
  for (auto& [name, parts] : shards) f.model[name] = unshard(name, parts);
  if (has_optim) {
    for (auto& [name, kinds] : optim_shards)
      for (auto& [kind, parts] : kinds) f.optim[name][kind] = unshard(name, parts);
  }
  f.padded_vocab =
      first.padded_vocab_size > 0 ? first.padded_vocab_size : f.model.at("embedding.word_embeddings.weight").size(0);
  f.true_vocab = first.true_vocab_size > 0 ? first.true_vocab_size : a.vocab_size.value_or(f.padded_vocab);
  if (!f.iteration) return f;
  f.consumed_train = first.consumed_train_samples;
  f.consumed_valid = first.consumed_valid_samples;
  return f;
}

void write_full(const FullCheckpoint& f, const ConvertOptions& o) {
  const int tp = o.target_tensor_model_parallel_size, pp = o.target_pipeline_model_parallel_size;
  const int ep = o.target_expert_model_parallel_size;
  const auto vp_layers = o.target_num_layers_per_virtual_pipeline_stage;
  const std::string& format = o.ckpt_format;
  const std::string& save = o.save;
  Arguments a = f.a;
  a.tensor_model_parallel_size = tp;
  a.pipeline_model_parallel_size = pp;
  TORCH_CHECK(ep == 1 || (a.num_experts && *a.num_experts % ep == 0), "[convert_checkpoint] ",
              "--target-expert-parallel-size ", ep, " must divide the checkpoint's --num-experts (",
              a.num_experts.value_or(0), ")");
  a.expert_model_parallel_size = ep;
  a.expert_tensor_parallel_size = o.target_expert_tensor_parallel_size;
  if (a.expert_tensor_parallel_size == tp) a.expert_tensor_parallel_size.reset();
  const int etp = expert_tp_of(a, "--target-expert-tensor-parallel-size");
  a.num_layers_per_virtual_pipeline_stage = vp_layers;
  a.num_virtual_stages_per_pipeline_rank.reset();
  // The target splits its layers evenly over its stages (the source's uneven split is read).
  a.decoder_first_pipeline_num_layers.reset();
  a.decoder_last_pipeline_num_layers.reset();
  a.account_for_embedding_in_pipeline_split = a.account_for_loss_in_pipeline_split = false;
  a.pipeline_model_parallel_layout.clear();
  TORCH_CHECK(a.num_layers % pp == 0, "[convert_checkpoint] --num-layers (", a.num_layers,
              ") is not divisible by --target-pipeline-model-parallel-size (", pp, ")");
  a.virtual_pipeline_model_parallel_size.reset();
  if (vp_layers) {
    TORCH_CHECK(pp > 1 && *vp_layers > 0 && (a.num_layers / pp) % *vp_layers == 0,
                "[convert_checkpoint] --target-num-layers-per-virtual-pipeline-stage ", *vp_layers, " must divide the ",
                a.num_layers / pp, " layers per stage (and needs PP > 1)");
    a.virtual_pipeline_model_parallel_size = a.num_layers / pp / *vp_layers;
  }
  TORCH_CHECK(a.num_attention_heads % tp == 0 && a.num_query_groups % tp == 0, "[convert_checkpoint] ",
              a.num_attention_heads, " heads / ", a.num_query_groups,
              " query groups are not divisible by --target-tensor-parallel-size ", tp);
  const int64_t padded =
      models::common::vocab_size_with_padding(f.true_vocab, a.make_vocab_size_divisible_by, tp, a.pad_vocab_size_to);

  if (format == "torch_dist") {  // whole tensors, which any layout reads
    a.ckpt_format = format;
    return detail::write_torch_dist_full(f, a, save);
  }
  const std::string final_dir = (fs::path(save) / iteration_dir_name(f.iteration)).string();
  const std::string staging = final_dir + ".tmp";
  fs::create_directories(save);
  remove_tree(staging);
  fs::create_directories(staging);
  auto shard = [&](const std::string& global, const at::Tensor& full, int t) {
    at::Tensor x = full.dim() > 0 && is_vocab_param(global) ? repad(full, f.true_vocab, padded) : full;
    if (x.dim() == 0) return x;
    if (is_expert_param(global)) return layout_of(global, a, etp == 1 ? 0 : t, etp).shard(x);
    return layout_of(global, a, t, tp).shard(x);
  };
  // The tied output layer of a last stage that is not the first is a copy of the embedding.
  auto source_name = [&](const std::string& global) {
    if (global == "output_layer.weight" && !a.untie_embeddings_and_output_weights)
      return std::string("embedding.word_embeddings.weight");
    return global;
  };
  std::vector<std::string> globals;
  for (const auto& [name, tensor] : f.model) globals.push_back(name);
  if (!a.untie_embeddings_and_output_weights && (pp > 1)) globals.push_back("output_layer.weight");
  // Every (TP, PP, EP) folder: each holds its TP shard of the dense tensors and its EP rank's
  // experts (their expert-TP shard), the layout's ranks reading the ones they are.
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      for (int e = 0; e < ep; ++e) {
        RankCheckpoint c;
        c.args = a;
        c.padded_vocab_size = padded;
        c.true_vocab_size = f.true_vocab;
        c.iteration = f.iteration.value_or(0);
        std::map<std::string, TensorMap> param_state;
        for (int64_t v = 0; v < chunks_of(a); ++v) {
          TensorMap model;
          const int64_t offset = layer_offset(a, p, v);
          for (const auto& global : globals) {
            if (!belongs(a, global, p, v)) continue;
            const auto [owner, at_rank] = expert_to_local(global, a);
            if (is_expert_param(global) && owner != e) continue;  // the dense tensors go to every EP rank
            const std::string local = shift_layer(at_rank, -offset);
            model[local] = shard(global, f.model.at(source_name(global)), t);
            if (f.optim.empty()) continue;
            auto it = f.optim.find(source_name(global));
            TORCH_CHECK(it != f.optim.end(), "[convert_checkpoint] the optimizer state has no ", source_name(global));
            TensorMap& s = param_state[model_chunk_prefix(v, chunks_of(a)) + local];
            for (const auto& [kind, value] : it->second) s[kind] = shard(global, value, t);
          }
          c.model.push_back(std::move(model));
        }
        if (!f.optim.empty())
          c.optimizer = RankCheckpoint::OptimizerState{false,          std::move(param_state), f.lr,
                                                       f.decoupled_lr, f.grad_scaler,          f.scheduler};
        c.consumed_train_samples = f.consumed_train;
        c.consumed_valid_samples = f.consumed_valid;
        write_rank_dir(staging, rank_dir_name(t, p, pp, e, ep), c.to_files());
      }
    }
  }
  publish_checkpoint(save, f.iteration);
}

}  // namespace

ConvertResult convert_checkpoint(const ConvertOptions& o) {
  TORCH_CHECK(o.load.empty() != o.import_hf.empty(),
              "[convert_checkpoint] give one of load (--load) and import_hf (--import-hf)");
  TORCH_CHECK(!o.save.empty() || !o.export_hf.empty(),
              "[convert_checkpoint] give save (--save) and/or export_hf (--export-hf)");
  TORCH_CHECK(o.target_tensor_model_parallel_size >= 1, "[convert_checkpoint] --target-tensor-parallel-size must be ",
              ">= 1 (got ", o.target_tensor_model_parallel_size, ")");
  TORCH_CHECK(o.target_pipeline_model_parallel_size >= 1,
              "[convert_checkpoint] --target-pipeline-model-parallel-size must be >= 1 (got ",
              o.target_pipeline_model_parallel_size, ")");
  TORCH_CHECK(o.target_num_layers_per_virtual_pipeline_stage.value_or(1) >= 1,
              "[convert_checkpoint] --target-num-layers-per-virtual-pipeline-stage must be >= 1 (got ",
              o.target_num_layers_per_virtual_pipeline_stage.value_or(0), ")");
  TORCH_CHECK(o.ckpt_format == "torch" || o.ckpt_format == "torch_dist", "[convert_checkpoint] --ckpt-format ",
              o.ckpt_format, " is not one written here (torch, torch_dist)");
  TORCH_CHECK(o.make_vocab_size_divisible_by >= 1,
              "[convert_checkpoint] --make-vocab-size-divisible-by must be >= 1 (got ", o.make_vocab_size_divisible_by,
              ")");
  if (!o.save.empty() && !o.overwrite) {
    const auto found = fs::is_directory(o.save) ? list_iterations(o.save) : std::vector<int64_t>{};
    const bool tracked = fs::exists(fs::path(o.save) / kTrackerFileName);
    TORCH_CHECK(found.empty() && !tracked, "[convert_checkpoint] --save ", o.save, " already holds checkpoints (",
                tracked ? kTrackerFileName : "", tracked && !found.empty() ? ", " : "",
                found.empty() ? "" : iteration_dir_name(found.back()),
                "); write to a new folder, or pass --overwrite to replace them");
  }
  at::NoGradGuard no_grad;
  FullCheckpoint f =
      o.load.empty() ? import_hf(o.import_hf, o.make_vocab_size_divisible_by) : read_full(o.load, o.ckpt_step);
  if (!o.export_hf.empty()) export_hf(f, o);
  if (!o.save.empty()) write_full(f, o);
  ConvertResult r;
  r.iteration = f.iteration;
  r.has_optimizer_state = !f.optim.empty();
  r.optimizer_unread = f.optimizer_unread;
  return r;
}

}  // namespace megatron::training
