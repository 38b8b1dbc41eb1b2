// Input embeddings of a language model (Megatron's LanguageModelEmbedding: vocab-parallel word
// embeddings, optionally normalised (BLOOM), plus optional learned absolute positions, dropout,
// [b, s] -> [s, b, h]), rotary position embeddings (Megatron's RotaryEmbedding, with Llama 3's
// frequency scaling) and ALiBi's attention biases (BLOOM).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <optional>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/domino_half.h"
#include "megatron/transformer/norm.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::models::common {

enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kAlibi, kNone };
// "learned_absolute", "rope", "alibi" or "none" (--position-embedding-type); throws naming `flag`.
MEGATRON_API PositionEmbeddingType parse_position_embedding_type(const std::string& name,
                                                                 const std::string& flag = "--position-embedding-type");

class LanguageModelEmbeddingImpl : public torch::nn::Cloneable<LanguageModelEmbeddingImpl>,
                                   public tensor_parallel::ShardedModule {
 public:
  LanguageModelEmbeddingImpl(const transformer::TransformerConfig& config, int64_t vocab_size,
                             int64_t max_sequence_length, PositionEmbeddingType position_embedding_type,
                             bool sparse_word_embedding_grad = false, bool embed_layernorm = false);
  void reset() override;
  // input_ids, position_ids [b, s] -> [s, b, h] ([s/tp, b, h] with sequence parallelism).
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& position_ids);
  // position_embeddings.weight (word_embeddings initialise themselves).
  std::vector<std::pair<std::string, tensor_parallel::ParamInit>> param_inits() const override;

  transformer::TransformerConfig config;
  int64_t vocab_size, max_sequence_length;
  PositionEmbeddingType position_embedding_type;
  bool sparse_word_embedding_grad, embed_layernorm;
  tensor_parallel::VocabParallelEmbedding word_embeddings{nullptr};
  // The word embeddings' LayerNorm (--embed-layernorm), registered under word_embeddings as
  // Megatron-DeepSpeed names it: embedding.word_embeddings.norm.{weight,bias}.
  transformer::Norm word_embeddings_norm{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};  // [max_s, h], replicated; when learned

  // The learned position rows [b or 1, s, h]; undefined without learned position embeddings.
  at::Tensor position_rows(const at::Tensor& input_ids, const at::Tensor& position_ids);
};
TORCH_MODULE(LanguageModelEmbedding);

// Domino (transformer/domino.h): the embedding's forward as the two halves of the batch
// [s, b/2, h], each half's all-reduce launched as soon as its rows are looked up and left in
// flight for the first layer to wait for.
MEGATRON_API transformer::DominoHalves domino_embedding_forward(LanguageModelEmbeddingImpl& embedding,
                                                                const at::Tensor& input_ids,
                                                                const at::Tensor& position_ids);

// Llama 3's RoPE frequency scaling (Hugging Face's rope_type "llama3"): wavelengths longer than
// original_max_position_embeddings / low_freq_factor are stretched by `factor`, those shorter than
// original / high_freq_factor are kept, and the band between is interpolated smoothly.
struct RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// Rotary frequencies for rotary_percent of the head dim: inv_freq_i = base^(-2i/rot_dim), scaled
// when `scaling` is given.
class MEGATRON_API RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t kv_channels, double rotary_percent = 1.0, double rotary_base = 10000.0,
                  bool interleaved = false, std::optional<RopeScaling> scaling = std::nullopt);
  // -> freqs [s, 1, 1, rot_dim] for positions 0..s-1: cat(pos * inv_freq, pos * inv_freq), or
  // each angle twice in a row when interleaved.
  at::Tensor forward(int64_t seq_len, c10::Device device) const;
  // inv_freq [rot_dim / 2] (fp32).
  at::Tensor inv_freq(c10::Device device) const;
  int64_t rot_dim() const { return rot_dim_; }

 private:
  int64_t rot_dim_;
  double base_;
  bool interleaved_;
  std::optional<RopeScaling> scaling_;
};

// ALiBi's per-head slopes (Press et al.; BLOOM, Megatron-DeepSpeed): the geometric sequence
// 2^(-8i/n) for the largest power of two n <= heads, then every other slope of 2n for the rest.
MEGATRON_API at::Tensor alibi_slopes(int64_t num_heads);
// The additive attention bias of heads [first_head, first_head + count) (this TP rank's):
// slope * (j - i) for key j <= query i and -inf above the diagonal -> [1, count, s, s] fp32.
MEGATRON_API at::Tensor alibi_causal_bias(int64_t num_heads, int64_t first_head, int64_t count, int64_t seq_len,
                                          c10::Device device);

}  // namespace megatron::models::common
