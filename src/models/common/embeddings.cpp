#include "megatron/models/common/embeddings.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "megatron/tensor_parallel/random.h"

namespace megatron::models::common {

namespace tp = megatron::tensor_parallel;

PositionEmbeddingType parse_position_embedding_type(const std::string& name, const std::string& flag) {
  if (name == "learned_absolute") return PositionEmbeddingType::kLearnedAbsolute;
  if (name == "rope") return PositionEmbeddingType::kRope;
  if (name == "alibi") return PositionEmbeddingType::kAlibi;
  TORCH_CHECK_VALUE(name == "none", flag, ": expected learned_absolute, rope, alibi or none, found '", name, "'");
  return PositionEmbeddingType::kNone;
}

LanguageModelEmbeddingImpl::LanguageModelEmbeddingImpl(const transformer::TransformerConfig& config_, int64_t vocab,
                                                       int64_t max_seq, PositionEmbeddingType type,
                                                       bool sparse_word_embedding_grad_, bool embed_layernorm_)
    : config(config_.finalize()),
      vocab_size(vocab),
      max_sequence_length(max_seq),
      position_embedding_type(type),
      sparse_word_embedding_grad(sparse_word_embedding_grad_),
      embed_layernorm(embed_layernorm_) {
  reset();
}

void LanguageModelEmbeddingImpl::reset() {
  word_embeddings = register_module(
      "word_embeddings", tp::VocabParallelEmbedding(tp::VocabParallelEmbeddingOptions(vocab_size, config.hidden_size())
                                                        .init_method_std(config.init_method_std())
                                                        .perform_initialization(config.perform_initialization())
                                                        .sparse_grad(sparse_word_embedding_grad)
                                                        .tp_group(config.tp_group())));
  if (embed_layernorm) {
    // Always a LayerNorm (as BLOOM's), with the model's epsilon.
    auto norm_config = config;
    norm_config.normalization(transformer::Normalization::kLayerNorm);
    word_embeddings_norm = word_embeddings->register_module("norm", transformer::Norm(norm_config));
  }
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

at::Tensor LanguageModelEmbeddingImpl::position_rows(const at::Tensor& input_ids, const at::Tensor& position_ids) {
  if (!position_embeddings) return {};
  TORCH_CHECK(position_ids.defined(), "[embedding] learned position embeddings need position_ids");
  TORCH_CHECK(input_ids.size(1) <= max_sequence_length, "[embedding] sequence length (", input_ids.size(1),
              ") exceeds max_sequence_length (", max_sequence_length, ")");
  return position_embeddings(position_ids);
}

at::Tensor LanguageModelEmbeddingImpl::forward(const at::Tensor& input_ids, const at::Tensor& position_ids) {
  at::Tensor emb = word_embeddings(input_ids);  // [b, s, h]
  if (word_embeddings_norm) emb = word_embeddings_norm(emb);
  if (at::Tensor pos = position_rows(input_ids, position_ids); pos.defined()) emb = emb + pos;
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

RotaryEmbedding::RotaryEmbedding(int64_t kv_channels, double rotary_percent, double rotary_base, bool interleaved,
                                 std::optional<RopeScaling> scaling)
    : rot_dim_(static_cast<int64_t>(kv_channels * rotary_percent)),
      base_(rotary_base),
      interleaved_(interleaved),
      scaling_(scaling) {
  TORCH_CHECK(rotary_percent > 0.0 && rotary_percent <= 1.0, "[rotary] rotary_percent must be in (0, 1], got ",
              rotary_percent);
  TORCH_CHECK(rot_dim_ >= 2 && rot_dim_ % 2 == 0, "[rotary] rotary dim = kv_channels (", kv_channels,
              ") x rotary_percent (", rotary_percent, ") = ", rot_dim_, " must be even and >= 2");
  if (scaling_) {
    const auto& s = *scaling_;
    TORCH_CHECK(s.factor >= 1.0 && s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor &&
                    s.original_max_position_embeddings > 0,
                "[rotary] rope scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a positive "
                "original context; got factor ",
                s.factor, ", low_freq_factor ", s.low_freq_factor, ", high_freq_factor ", s.high_freq_factor,
                ", original_max_position_embeddings ", s.original_max_position_embeddings);
  }
}

at::Tensor RotaryEmbedding::inv_freq(c10::Device device) const {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor inv = 1.0 / at::pow(base_, at::arange(0, rot_dim_, 2, opts) / static_cast<double>(rot_dim_));
  if (!scaling_) return inv;
  const auto& s = *scaling_;
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor, high_freq_wavelen = original / s.high_freq_factor;
  at::Tensor wavelen = 2 * M_PI / inv;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv / s.factor, inv);
  at::Tensor smooth = (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  at::Tensor medium = wavelen.ge(high_freq_wavelen).logical_and(wavelen.le(low_freq_wavelen));
  return at::where(medium, smoothed, scaled);
}

at::Tensor RotaryEmbedding::forward(int64_t seq_len, c10::Device device) const {
  at::Tensor pos = at::arange(seq_len, at::TensorOptions().dtype(at::kFloat).device(device));
  at::Tensor freqs = at::outer(pos, inv_freq(device));  // [s, rot/2]
  at::Tensor emb = interleaved_ ? at::stack({freqs, freqs}, -1) : at::cat({freqs, freqs}, -1);
  return emb.reshape({seq_len, 1, 1, rot_dim_});
}

at::Tensor alibi_slopes(int64_t num_heads) {
  TORCH_CHECK(num_heads >= 1, "[alibi] num_heads must be positive, got ", num_heads);
  const auto closest = static_cast<int64_t>(std::exp2(std::floor(std::log2(static_cast<double>(num_heads)))));
  auto geometric = [](int64_t n, int64_t count, int64_t step) {
    std::vector<float> out;
    for (int64_t i = 0; i < count; ++i)
      out.push_back(static_cast<float>(std::exp2(-8.0 * static_cast<double>(1 + i * step) / static_cast<double>(n))));
    return out;
  };
  std::vector<float> slopes = geometric(closest, closest, 1);
  const auto extra = geometric(2 * closest, num_heads - closest, 2);
  slopes.insert(slopes.end(), extra.begin(), extra.end());
  return at::tensor(slopes, at::kFloat);
}

at::Tensor alibi_causal_bias(int64_t num_heads, int64_t first_head, int64_t count, int64_t seq_len,
                             c10::Device device) {
  TORCH_CHECK(first_head >= 0 && count >= 1 && first_head + count <= num_heads, "[alibi] heads [", first_head, ", ",
              first_head + count, ") are not within the ", num_heads, " heads");
  // Relative distances (j - i) rather than BLOOM's key positions j: the same softmax (each row is
  // shifted by a constant), with values near zero where it matters, which bf16 keeps exact.
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor pos = at::arange(seq_len, opts);
  at::Tensor distance = pos.unsqueeze(0) - pos.unsqueeze(1);  // [s, s]: j - i
  at::Tensor slopes = alibi_slopes(num_heads).narrow(0, first_head, count).to(device);
  at::Tensor bias = slopes.view({count, 1, 1}) * distance.unsqueeze(0);
  bias.masked_fill_(distance.gt(0).unsqueeze(0), -std::numeric_limits<float>::infinity());
  return bias.unsqueeze(0);
}

}  // namespace megatron::models::common
