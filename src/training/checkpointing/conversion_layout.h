// Where each tensor of a full (TP = 1, global names) checkpoint goes in a TP / PP / virtual-PP /
// EP layout and back: the shard layouts, the layer and expert numbering, the vocabulary padding.
// checkpoint_conversion.cpp's, in a header of their own to keep that file to its walks.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <utility>

#include "megatron/models/common/language_module.h"
#include "megatron/tensor_parallel/sharding.h"
#include "megatron/training/arguments.h"
#include "megatron/training/config.h"

namespace megatron::training::detail {

inline bool name_ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How megatron/core splits each parameter over TP ranks: column-parallel layers (fused QKV, fc1,
// the vocabulary; the query and key norms across heads) along dim 0, row-parallel ones (proj,
// fc2) along dim 1, the rest replicated. The MLPs of MoE layers split alike: the shared expert's
// over TP, each routed expert's over the expert-TP ranks (the caller's size).
inline tensor_parallel::ShardLayout layout_of(const std::string& name, const Arguments& a, int rank, int size) {
  if (name == "embedding.word_embeddings.weight" || name == "output_layer.weight" ||
      name_ends_with(name, ".self_attention.linear_qkv.weight") ||
      name_ends_with(name, ".self_attention.linear_qkv.bias"))
    return {0, 1, rank, size};
  if (a.qk_layernorm_across_heads && (name_ends_with(name, ".self_attention.q_layernorm.weight") ||
                                      name_ends_with(name, ".self_attention.k_layernorm.weight")))
    return {0, 1, rank, size};
  if (name_ends_with(name, ".linear_fc1.weight") || name_ends_with(name, ".linear_fc1.bias"))
    return {0, a.swiglu ? 2 : 1, rank, size};
  if (name_ends_with(name, ".self_attention.linear_proj.weight") || name_ends_with(name, ".linear_fc2.weight"))
    return {1, 1, rank, size};
  return {-1, 1, rank, size};
}

inline bool is_expert_param(const std::string& name) {
  return name.find(models::common::kLocalExpertsPart) != std::string::npos;
}

// The expert-TP size of a layout: Megatron-LM's default TP, or 1 (each expert whole), the two
// whose rank folders are (TP rank, EP rank) alone; other sizes are refused by name.
inline int expert_tp_of(const Arguments& a, const std::string& what) {
  const int64_t tp = a.tensor_model_parallel_size, etp = a.expert_tensor_parallel_size.value_or(tp);
  TORCH_CHECK(!a.num_experts || etp == tp || etp == 1, "[convert_checkpoint] ", what,
              " has --expert-tensor-parallel-size ", etp, " with --tensor-model-parallel-size ", tp,
              ": converting needs expert TP equal to TP or 1");
  return static_cast<int>(a.num_experts ? etp : tp);
}

// A name at this EP rank (local experts) <-> the whole model's (global experts).
inline std::string expert_to_global(const std::string& name, const Arguments& a, int ep_rank) {
  if (!is_expert_param(name)) return name;
  const int64_t local = *a.num_experts / a.expert_model_parallel_size;
  return models::common::shift_index(name, models::common::kLocalExpertsPart, ep_rank * local);
}
// The EP rank holding a global name's expert (0 for any other name, which every EP rank holds), and
// the name there.
inline std::pair<int, std::string> expert_to_local(const std::string& global, const Arguments& a) {
  if (!is_expert_param(global)) return {0, global};
  const int64_t local = *a.num_experts / a.expert_model_parallel_size;
  const size_t at =
      global.find(models::common::kLocalExpertsPart) + std::string(models::common::kLocalExpertsPart).size();
  const int64_t e = std::stoll(global.substr(at));
  return {static_cast<int>(e / local),
          models::common::shift_index(global, models::common::kLocalExpertsPart, -(e / local) * local)};
}

inline bool is_vocab_param(const std::string& name) {
  return name == "embedding.word_embeddings.weight" || name == "output_layer.weight";
}

inline int64_t chunks_of(const Arguments& a) {
  return a.virtual_pipeline_model_parallel_size.value_or(1);
}
// First global layer of model chunk v on pipeline stage p (Megatron-LM's split).
inline int64_t layer_offset(const Arguments& a, int64_t p, int64_t v) {
  return pipeline_split_from_args(a).layers(p, v).offset;
}

// "decoder.layers.3.x" -> "decoder.layers.<3 + delta>.x"; other names unchanged.
inline std::string shift_layer(const std::string& name, int64_t delta) {
  return models::common::shift_index(name, models::common::kLayersPart, delta);
}

// Which global names model chunk v of stage p holds.
inline bool belongs(const Arguments& a, const std::string& global, int64_t p, int64_t v) {
  const bool first = p == 0 && v == 0;
  const bool last = p == a.pipeline_model_parallel_size - 1 && v == chunks_of(a) - 1;
  if (global.rfind("embedding.", 0) == 0) return first;
  if (global.rfind("decoder.final_layernorm.", 0) == 0) return last;
  if (global == "output_layer.weight") return last;
  const std::string prefix = "decoder.layers.";
  TORCH_CHECK(global.rfind(prefix, 0) == 0, "[convert_checkpoint] unexpected parameter ", global);
  const int64_t i = std::stoll(global.substr(prefix.size()));
  const auto chunk = pipeline_split_from_args(a).layers(p, v);
  return i >= chunk.offset && i < chunk.offset + chunk.count;
}

// Re-pads the vocabulary rows of an embedding-shaped tensor: keeps them when the padded size is
// unchanged, else keeps the true vocabulary and pads with zeros.
inline at::Tensor repad(const at::Tensor& t, int64_t true_vocab, int64_t padded) {
  if (t.size(0) == padded) return t;
  auto rows = t.narrow(0, 0, true_vocab);
  if (padded == true_vocab) return rows.contiguous();
  auto pad_shape = t.sizes().vec();
  pad_shape[0] = padded - true_vocab;
  return at::cat({rows, at::zeros(pad_shape, t.options())});
}

}  // namespace megatron::training::detail
