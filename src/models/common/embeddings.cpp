#include "megatron/models/common/embeddings.h"

#include <torch/nn/module.h>

#include "megatron/tensor_parallel/random.h"

namespace megatron::models::common {

namespace tp = megatron::tensor_parallel;

LanguageModelEmbeddingImpl::LanguageModelEmbeddingImpl(const transformer::TransformerConfig& config_, int64_t vocab,
                                                       int64_t max_seq, PositionEmbeddingType type,
                                                       bool sparse_word_embedding_grad_)
    : config(config_.finalize()),
      vocab_size(vocab),
      max_sequence_length(max_seq),
      position_embedding_type(type),
      sparse_word_embedding_grad(sparse_word_embedding_grad_) {
  reset();
}

void LanguageModelEmbeddingImpl::reset() {
  word_embeddings = register_module(
      "word_embeddings", tp::VocabParallelEmbedding(tp::VocabParallelEmbeddingOptions(vocab_size, config.hidden_size())
                                                        .init_method_std(config.init_method_std())
                                                        .perform_initialization(config.perform_initialization())
                                                        .sparse_grad(sparse_word_embedding_grad)
                                                        .tp_group(config.tp_group())));
  if (position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
    TORCH_CHECK(max_sequence_length > 0,
                "[embedding] max_sequence_length must be positive for "
                "learned absolute position embeddings, got ",
                max_sequence_length);
    position_embeddings =
        register_module("position_embeddings",
                        torch::nn::Embedding(torch::nn::EmbeddingOptions(max_sequence_length, config.hidden_size())));
    if (config.perform_initialization())
      tp::init_sharded_param_from_default_generator(position_embeddings->weight, param_inits()[0].second);
  }
}

std::vector<std::pair<std::string, tp::ParamInit>> LanguageModelEmbeddingImpl::param_inits() const {
  if (!position_embeddings) return {};
  return {{"position_embeddings.weight",
           tp::ParamInit{tp::ParamInit::kNormal, config.init_method_std(), tp::ShardLayout{}}}};
}

at::Tensor LanguageModelEmbeddingImpl::forward(const at::Tensor& input_ids, const at::Tensor& position_ids) {
  at::Tensor emb = word_embeddings(input_ids);  // [b, s, h]
  if (position_embeddings) {
    TORCH_CHECK(position_ids.defined(), "[embedding] learned position embeddings need position_ids");
    TORCH_CHECK(input_ids.size(1) <= max_sequence_length, "[embedding] sequence length (", input_ids.size(1),
                ") exceeds max_sequence_length (", max_sequence_length, ")");
    emb = emb + position_embeddings(position_ids);
  }
  emb = emb.transpose(0, 1).contiguous();  // [s, b, h]
  const double p = config.hidden_dropout();
  if (config.sequence_parallel()) {
    emb = tp::scatter_to_sequence_parallel_region(emb, config.tp_group());
    if (is_training() && p > 0.0 && config.rng_tracker()) {
      at::Tensor out;
      config.rng_tracker()->fork([&] { out = tp::dropout(emb, p, true); });
      return out;
    }
  }
  return tp::dropout(emb, p, is_training());
}

RotaryEmbedding::RotaryEmbedding(int64_t kv_channels, double rotary_percent, double rotary_base)
    : rot_dim_(static_cast<int64_t>(kv_channels * rotary_percent)), base_(rotary_base) {
  TORCH_CHECK(rotary_percent > 0.0 && rotary_percent <= 1.0, "[rotary] rotary_percent must be in (0, 1], got ",
              rotary_percent);
  TORCH_CHECK(rot_dim_ >= 2 && rot_dim_ % 2 == 0, "[rotary] rotary dim = kv_channels (", kv_channels,
              ") x rotary_percent (", rotary_percent, ") = ", rot_dim_, " must be even and >= 2");
}

at::Tensor RotaryEmbedding::forward(int64_t seq_len, c10::Device device) const {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor inv_freq = 1.0 / at::pow(base_, at::arange(0, rot_dim_, 2, opts) / static_cast<double>(rot_dim_));
  at::Tensor pos = at::arange(seq_len, opts);
  at::Tensor freqs = at::outer(pos, inv_freq);   // [s, rot/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);  // [s, rot]
  return emb.view({seq_len, 1, 1, rot_dim_});
}

}  // namespace megatron::models::common
