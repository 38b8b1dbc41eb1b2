// Input embeddings of a language model (Megatron's LanguageModelEmbedding: vocab-parallel word
// embeddings plus optional learned absolute positions, dropout, [b, s] -> [s, b, h]) and rotary
// position embeddings (Megatron's RotaryEmbedding).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::models::common {

enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kNone };

class LanguageModelEmbeddingImpl : public torch::nn::Cloneable<LanguageModelEmbeddingImpl>,
                                   public tensor_parallel::ShardedModule {
 public:
  LanguageModelEmbeddingImpl(const transformer::TransformerConfig& config, int64_t vocab_size,
                             int64_t max_sequence_length, PositionEmbeddingType position_embedding_type,
                             bool sparse_word_embedding_grad = false);
  void reset() override;
  // input_ids, position_ids [b, s] -> [s, b, h] ([s/tp, b, h] with sequence parallelism).
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& position_ids);
  // position_embeddings.weight (word_embeddings initialise themselves).
  std::vector<std::pair<std::string, tensor_parallel::ParamInit>> param_inits() const override;

  transformer::TransformerConfig config;
  int64_t vocab_size, max_sequence_length;
  PositionEmbeddingType position_embedding_type;
  bool sparse_word_embedding_grad;
  tensor_parallel::VocabParallelEmbedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};  // [max_s, h], replicated; when learned
};
TORCH_MODULE(LanguageModelEmbedding);

// Rotary frequencies for rotary_percent of the head dim: inv_freq_i = base^(-2i/rot_dim).
class MEGATRON_API RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t kv_channels, double rotary_percent = 1.0, double rotary_base = 10000.0);
  // -> freqs [s, 1, 1, rot_dim] = cat(pos * inv_freq, pos * inv_freq) for positions 0..s-1.
  at::Tensor forward(int64_t seq_len, c10::Device device) const;
  int64_t rot_dim() const { return rot_dim_; }

 private:
  int64_t rot_dim_;
  double base_;
};

}  // namespace megatron::models::common
