// GPTModel (Megatron's models/gpt/gpt_model.py): embedding (first pipeline stage), transformer
// block, final norm and output layer (last stage). Internally [s, b, h]; returns logits [b, s, V]
// or the per-token loss [b, s]. Parameters are named like megatron/core's state dict
// (embedding.word_embeddings.weight, decoder.layers.0.self_attention.linear_qkv.weight,
// decoder.final_layernorm.weight, output_layer.weight) and are initialised from one seed
// independently of the TP/PP layout.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "megatron/models/common/embeddings.h"
#include "megatron/models/common/language_module.h"
#include "megatron/parallel_state.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/module.h"
#include "megatron/transformer/param_gather.h"
#include "megatron/transformer/transformer_block.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::models::gpt {

using common::PositionEmbeddingType;
using common::RopeScaling;

struct MEGATRON_API GPTModelOptions {
  GPTModelOptions(transformer::TransformerConfig config, int64_t vocab_size, int64_t max_sequence_length)
      : config_(std::move(config)), vocab_size_(vocab_size), max_sequence_length_(max_sequence_length) {}
  TORCH_ARG(transformer::TransformerConfig, config);
  TORCH_ARG(int64_t, vocab_size);  // before padding
  TORCH_ARG(int64_t, max_sequence_length);
  // The vocabulary is padded to a multiple of make_vocab_size_divisible_by x TP size.
  TORCH_ARG(int64_t, make_vocab_size_divisible_by) = 128;
  // Or to exactly this many rows (Megatron-DeepSpeed's --pad-vocab-size-to).
  TORCH_ARG(std::optional<int64_t>, pad_vocab_size_to) = std::nullopt;
  TORCH_ARG(bool, pre_process) = true;   // this stage holds the embedding
  TORCH_ARG(bool, post_process) = true;  // this stage holds the final norm and output layer
  // Which pipeline stage this is and, with the interleaved schedule, which of its model chunks
  // (layers are split evenly as in Megatron-LM: chunk v of stage p holds global layers
  // v*L/vpp + p*L/(pp*vpp) onwards; numbering in names is chunk-local).
  TORCH_ARG(int64_t, pipeline_model_parallel_rank) = 0;
  TORCH_ARG(int64_t, virtual_pipeline_model_parallel_rank) = 0;
  TORCH_ARG(bool, share_embeddings_and_output_weights) = true;
  TORCH_ARG(PositionEmbeddingType, position_embedding_type) = PositionEmbeddingType::kLearnedAbsolute;
  TORCH_ARG(double, rotary_percent) = 1.0;
  TORCH_ARG(double, rotary_base) = 10000.0;
  TORCH_ARG(std::optional<common::RopeScaling>, rope_scaling) = std::nullopt;
  // A LayerNorm on the word embeddings (BLOOM's word_embeddings_layernorm).
  TORCH_ARG(bool, embed_layernorm) = false;
  // true: logits stay split over the vocabulary ([b, s, V/tp], Megatron's training default);
  // false: they are gathered to [b, s, V]. The loss never gathers.
  TORCH_ARG(bool, parallel_output) = false;
  TORCH_ARG(double, label_smoothing) = 0.0;
  // Seed of the layout-independent initialisation.
  TORCH_ARG(uint64_t, seed) = 1234;
};

// Options for this rank's pipeline stage (and model chunk `virtual_rank` of it): the config's
// TP size, TP group, PP and virtual PP sizes, and pre_process / post_process / the stage ranks,
// all from `ps`.
MEGATRON_API GPTModelOptions gpt_model_options_for_rank(const ParallelState& ps, transformer::TransformerConfig config,
                                                        int64_t vocab_size, int64_t max_sequence_length,
                                                        std::optional<int> virtual_rank = std::nullopt);

using common::ShardedParameter;

class MEGATRON_API GPTModelImpl : public torch::nn::Cloneable<GPTModelImpl>, public common::LanguageModule {
 public:
  explicit GPTModelImpl(GPTModelOptions options);
  void reset() override;

  // input_ids, position_ids, labels [b, s] int64 (position_ids may be undefined: 0..s-1);
  // attention_mask: undefined (causal) or bool [b or 1, 1, s, s], true = masked out.
  // Returns the per-token loss [b, s] (fp32) when labels are given and this is the last stage,
  // else logits [b, s, V] (V padded; [b, s, V/tp] with parallel_output) on the last stage, else
  // the hidden states [s, b, h] to send to the next stage.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& position_ids = {},
                     const at::Tensor& attention_mask = {}, const at::Tensor& labels = {});
  void set_input_tensor(const at::Tensor& input) override { decoder->set_input_tensor(input); }
  void set_moe_aux_loss_scale(const at::Tensor& scale) override;
  bool has_moe_layers() const override { return config.moe_aux_loss_state() != nullptr; }
  std::map<std::string, at::Tensor> take_moe_aux_losses() override;

  // The word-embedding weight on the first stage, the output weight elsewhere (Megatron's
  // shared_embedding_or_output_weight); its gradient is summed over the embedding group.
  at::Tensor shared_embedding_or_output_weight() const;

  // Sums the gradient of the tied word-embedding / output weight over the embedding group (the
  // first and last pipeline stage; Megatron's _allreduce_word_embedding_grads). A no-op without
  // tied weights or when the group is null or this stage holds neither end.
  void allreduce_word_embedding_grads(const std::shared_ptr<comm::ProcessGroup>& embedding_group) override;

  // With sequence parallelism each TP rank sees a slice of the sequence, so the gradients of the
  // replicated decoder parameters (norms, row-parallel biases) are partial: sums them over the TP
  // group (Megatron does this in finalize_model_grads). No-op without sequence parallelism.
  void allreduce_sequence_parallel_grads() override;
  bool has_sequence_parallel_grad(const common::ShardedParameter& p) const override;
  // Each decoder layer is a unit (decoder.layers.N); the final norm and output layer wait for
  // their part of an overlapped gather with the last layer, after which they are read.
  std::string param_unit(const std::string& name) const override;
  std::string gather_wait_unit(const std::string& name) const override;
  void set_param_gather(const ParamGatherHooks& hooks) override;
  // From options.seed(), as initialize_parameters would.
  void initialize_parameter(const common::ShardedParameter& p, at::Tensor& view) const override;

  // Every parameter of this rank with its sharding (name order = named_parameters()).
  std::vector<ShardedParameter> sharded_parameters() const override;
  // (Re)initialises every parameter from `seed` (layout independent).
  void initialize_parameters(uint64_t seed);

  // This stage's state dict: name -> this rank's shard (detached, shared storage).
  std::map<std::string, at::Tensor> state_dict() const override;
  // Copies tensors into the parameters; strict: the key sets must match exactly.
  void load_state_dict(const std::map<std::string, at::Tensor>& state, bool strict = true) override;
  // The same names with FULL (TP = 1) tensors: all-gathers each sharded parameter over the TP
  // group (collective: every TP rank calls it). load_full_state_dict keeps this rank's shard of
  // each full tensor, so a checkpoint written at one TP size loads at another.
  std::map<std::string, at::Tensor> full_state_dict() const;
  void load_full_state_dict(const std::map<std::string, at::Tensor>& full, bool strict = true);

  // torch.save-compatible file of state_dict() (torch.load reads it); load_state_dict_file reads
  // one back.
  void save_state_dict_file(const std::string& path) const;
  void load_state_dict_file(const std::string& path, bool strict = true);

  bool pre_process() const override { return options.pre_process(); }
  bool post_process() const override { return options.post_process(); }
  bool share_embeddings_and_output_weights() const override { return options.share_embeddings_and_output_weights(); }
  int64_t vocab_size() const override { return options.vocab_size(); }
  int64_t padded_vocab_size() const override { return padded_vocab_size_; }

  GPTModelOptions options;
  transformer::TransformerConfig config;
  int64_t padded_vocab_size_ = 0;
  int64_t layer_offset = 0, num_local_layers = 0;
  common::LanguageModelEmbedding embedding{nullptr};
  transformer::TransformerBlock decoder{nullptr};
  tensor_parallel::ColumnParallelLinear output_layer{nullptr};
  std::optional<common::RotaryEmbedding> rotary_pos_emb;
  // set_param_gather's hooks for the parameters outside the decoder layers (the layers have their
  // own): called as forward() begins.
  std::shared_ptr<transformer::ParamGather> param_gather;

 private:
  // The attention mask the decoder gets: ALiBi's bias for this TP rank's heads with `mask`'s
  // masked positions at -inf, or `mask` itself without ALiBi.
  at::Tensor attention_bias(const at::Tensor& mask, int64_t seq_len, c10::Device device) const;
};
TORCH_MODULE(GPTModel);

}  // namespace megatron::models::gpt
