// LanguageModule (megatron/core/models/common/language_module): what pretrain(), checkpointing
// and finalize_model_grads need from one model chunk of a language model, whatever its
// architecture. GPTModel implements it; src/training uses nothing else of a model.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/module.h"
#include "megatron/transformer/param_gather.h"

namespace megatron::comm {
class ProcessGroup;
}

namespace megatron::models::common {

// One parameter (or saved buffer) of this rank with how its full tensor is sharded and initialised.
struct MEGATRON_API ShardedParameter {
  std::string name;       // state-dict name on this stage
  std::string init_name;  // global name the initialisation is seeded with
  at::Tensor param;       // this rank's shard
  tensor_parallel::ParamInit init;
  // A parameter of one of this rank's experts (Megatron-LM's allreduce=False): other
  // expert-parallel ranks hold other experts, so its gradient is averaged over the
  // expert-data-parallel ranks only and its norm summed over the expert-parallel ones.
  bool expert_parallel = false;
  // A buffer saved with the model (the routers' expert bias): no gradient, no optimizer state.
  bool buffer = false;
};

class MEGATRON_API LanguageModule : public transformer::MegatronModule {
 public:
  // Every parameter of this rank with its sharding (name order = named_parameters()).
  virtual std::vector<ShardedParameter> sharded_parameters() const = 0;
  // This chunk holds the embedding (first stage) / the output layer and loss (last stage).
  virtual bool pre_process() const = 0;
  virtual bool post_process() const = 0;
  // The output layer reuses the word-embedding weight (on a last stage that is not the first,
  // a copy of it whose gradient is summed with the first stage's).
  virtual bool share_embeddings_and_output_weights() const = 0;
  // The tokenizer's vocabulary, and the padded size the embedding and output layer have.
  virtual int64_t vocab_size() const = 0;
  virtual int64_t padded_vocab_size() const = 0;

  // name -> this rank's shard (detached, shared storage); load copies into the parameters
  // (strict: the key sets must match exactly).
  virtual std::map<std::string, at::Tensor> state_dict() const = 0;
  virtual void load_state_dict(const std::map<std::string, at::Tensor>& state, bool strict = true) = 0;

  // Gradients a chunk cannot complete alone (Megatron-LM's finalize_model_grads): the tied
  // word-embedding weight's over the embedding group, and with sequence parallelism the
  // replicated parameters' over the TP group.
  virtual void allreduce_word_embedding_grads(const std::shared_ptr<comm::ProcessGroup>& embedding_group) = 0;
  virtual void allreduce_sequence_parallel_grads() = 0;
  // Whether p is replicated over the TP ranks with a partial gradient on each (sequence
  // parallelism), which allreduce_sequence_parallel_grads sums.
  virtual bool has_sequence_parallel_grad(const ShardedParameter& p) const = 0;

  // For data parallelism that shards parameters between uses (distributed::DistributedDataParallel,
  // ZeRO-2/3): the unit parameter `name` belongs to, whose parameters are gathered and whose
  // gradient is reduced together ("" for the chunk's parameters outside such units), and the unit
  // whose hook waits for its part of an overlapped parameter gather (a unit read after another's
  // forward waits with that one). Default: no units.
  virtual std::string param_unit(const std::string& name) const { return ""; }
  virtual std::string gather_wait_unit(const std::string& name) const { return param_unit(name); }
  // Installs, around each unit's forward, the hooks `hooks(unit)` returns ("" for the parameters
  // outside the units, called as the chunk's forward begins); an empty function removes them. A
  // module that does not call hooks ignores it (the parameters are then gathered in the step).
  using ParamGatherHooks = std::function<std::shared_ptr<transformer::ParamGather>(const std::string& unit)>;
  virtual void set_param_gather(const ParamGatherHooks& hooks) {}
  // The initial value of parameter p, created without memory (tensor_parallel::DeferredParameterInit),
  // written into `view` (its shape, dtype and device) where its buffer places it.
  virtual void initialize_parameter(const ShardedParameter& p, at::Tensor& view) const;
};

// Layers and local experts are numbered per pipeline stage and per expert-parallel rank in
// parameter names, globally in initialisation seeds and whole-model checkpoints: `name` with the
// number after its first `part` (kLayersPart, kLocalExpertsPart) moved by delta; a name without
// `part` unchanged.
inline constexpr const char* kLayersPart = "decoder.layers.";
inline constexpr const char* kLocalExpertsPart = ".mlp.experts.local_experts.";
MEGATRON_API std::string shift_index(const std::string& name, const std::string& part, int64_t delta);

// The padded vocabulary of a language model's embedding and output layer:
// ceil(vocab / (divisible_by * tp)) * divisible_by * tp  (Megatron's _vocab_size_with_padding), or
// pad_vocab_size_to when given (Megatron-DeepSpeed's --pad-vocab-size-to; at least the vocabulary
// and a multiple of tp).
MEGATRON_API int64_t vocab_size_with_padding(int64_t vocab_size, int64_t make_vocab_size_divisible_by,
                                             int64_t tensor_model_parallel_size,
                                             std::optional<int64_t> pad_vocab_size_to = std::nullopt);

}  // namespace megatron::models::common
