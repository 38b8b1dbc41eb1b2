// Tensor-parallel layers (Megatron's layers.py). Weights are stored as this rank's shard and
// initialised from the full tensor (see sharding.h). Shapes use Megatron's [s, b, h] notation but
// any leading dims work.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/tensor_parallel/fp8.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/tensor_parallel/sharding.h"

namespace megatron::tensor_parallel {

// While one is alive on this thread, the layers below create their weights and biases without
// memory (shape and dtype over an empty storage): sharded data parallelism (ZeRO-3) initialises
// them one unit at a time into its buffers (optimizer::OptimizerParam::initialize), so that the
// whole model never exists on one rank. Not the meta device: a parameter's storage can be set
// later (Variable::set_data), its device type cannot change.
class MEGATRON_API DeferredParameterInit {
 public:
  DeferredParameterInit();
  ~DeferredParameterInit();
  DeferredParameterInit(const DeferredParameterInit&) = delete;
  DeferredParameterInit& operator=(const DeferredParameterInit&) = delete;
  static bool active();
  // A tensor of this shape and these options over an empty storage.
  static at::Tensor without_memory(at::IntArrayRef shape, const at::TensorOptions& options);
  // Whether `t` is one (has elements but no memory).
  static bool deferred(const at::Tensor& t) { return t.numel() > 0 && t.storage().nbytes() == 0; }

 private:
  bool previous_;
};

// Megatron-LM's linear_with_grad_accumulation_and_async_allreduce: Y = X W^T + b for a
// column-parallel weight W [out/tp, in] (`bias` empty for none). Backward launches the
// input-gradient all-reduce over `group` (reduce-scatter along s with sequence parallelism) before
// the weight-gradient GEMM and waits after it; given `grad_pending`, it leaves the all-reduce in
// flight there instead, for wait_for_grad_reduce_in_backward (domino.h) to wait on. With sequence
// parallelism the input [s/tp, b, in] is all-gathered along s, and backward re-gathers it under
// the input-gradient GEMM (only the shard is saved).
MEGATRON_API at::Tensor linear_with_grad_accumulation_and_async_allreduce(const at::Tensor& input,
                                                                          const at::Tensor& weight,
                                                                          const at::Tensor& bias, const GroupPtr& group,
                                                                          bool sequence_parallel,
                                                                          const PendingPtr& grad_pending = nullptr);

// The rows of `input`'s ids in this rank's vocabulary shard [start, end) of `weight` [V/tp, h],
// zeros for ids outside it: VocabParallelEmbedding's lookup before its reduction over TP ranks.
// sparse_grad: the weight's gradient is sparse.
MEGATRON_API at::Tensor vocab_parallel_lookup(const at::Tensor& weight, const at::Tensor& input, int64_t start,
                                              int64_t end, bool sparse_grad);

// Y = X A + b with A split by columns (the output dim) across TP ranks: weight [out/tp, in].
struct MEGATRON_API ColumnParallelLinearOptions {
  ColumnParallelLinearOptions(int64_t input_size, int64_t output_size)
      : input_size_(input_size), output_size_(output_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, output_size);
  TORCH_ARG(bool, bias) = true;
  // forward leaves the bias out for its caller to add, fused with what comes next (Megatron-LM's
  // skip_bias_add; the MLP's bias-GELU).
  TORCH_ARG(bool, skip_bias_add) = false;
  // All-gather the output so every rank gets [*, out]; otherwise [*, out/tp].
  TORCH_ARG(bool, gather_output) = false;
  // Input is sequence-sharded [s/tp, b, in]; it is all-gathered along s before the matmul.
  TORCH_ARG(bool, sequence_parallel) = false;
  // No weight parameter: forward takes it (the tied output layer).
  TORCH_ARG(bool, skip_weight_param_allocation) = false;
  // The full weight is this many equal row blocks, each split across ranks (2: gated fc1).
  TORCH_ARG(int64_t, num_chunks) = 1;
  TORCH_ARG(double, init_method_std) = 0.02;
  // Draw the weight's full tensor from the default CPU generator and keep this rank's shard;
  // false: leave zeros (a model initialises by name afterwards).
  TORCH_ARG(bool, perform_initialization) = true;
  TORCH_ARG(GroupPtr, tp_group) = nullptr;
  // The GEMM in FP8 (fp8.h); the input's TP collectives stay in the model's precision.
  TORCH_ARG(std::shared_ptr<const Fp8Config>, fp8) = nullptr;
  // An MoE expert's layer (Megatron-Core's is_expert): no collective here, the token dispatcher
  // gathers the input over the expert-TP ranks and sums their partial outputs.
  TORCH_ARG(bool, is_expert) = false;
};

class MEGATRON_API ColumnParallelLinearImpl : public torch::nn::Cloneable<ColumnParallelLinearImpl>,
                                              public ShardedModule,
                                              public Fp8Module {
 public:
  ColumnParallelLinearImpl(int64_t input_size, int64_t output_size)
      : ColumnParallelLinearImpl(ColumnParallelLinearOptions(input_size, output_size)) {}
  explicit ColumnParallelLinearImpl(ColumnParallelLinearOptions options);
  void reset() override;
  // input [*, in] (or [s/tp, b, in] with sequence_parallel) -> [*, out/tp] or [*, out].
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight = {});
  // The bias forward adds: `bias`, or none under skip_bias_add.
  at::Tensor gemm_bias() const { return options.skip_bias_add() ? at::Tensor() : bias; }
  std::vector<std::pair<std::string, ParamInit>> param_inits() const override;

  ColumnParallelLinearOptions options;
  int64_t output_size_per_partition = 0;
  at::Tensor weight;  // [out/tp, in]
  at::Tensor bias;    // [out/tp]
};
TORCH_MODULE(ColumnParallelLinear);

// Y = X A + b with A split by rows (the input dim): weight [out, in/tp]; partial products are
// all-reduced (or reduce-scattered along s with sequence_parallel); the bias is added once.
struct MEGATRON_API RowParallelLinearOptions {
  RowParallelLinearOptions(int64_t input_size, int64_t output_size)
      : input_size_(input_size), output_size_(output_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, output_size);
  TORCH_ARG(bool, bias) = true;
  // Input already split along its last dim [*, in/tp]; otherwise it is scattered here.
  TORCH_ARG(bool, input_is_parallel) = false;
  TORCH_ARG(bool, sequence_parallel) = false;
  TORCH_ARG(double, init_method_std) = 0.02;
  TORCH_ARG(bool, perform_initialization) = true;
  TORCH_ARG(GroupPtr, tp_group) = nullptr;
  TORCH_ARG(std::shared_ptr<const Fp8Config>, fp8) = nullptr;  // as ColumnParallelLinear's
  TORCH_ARG(bool, is_expert) = false;                          // as ColumnParallelLinear's: the output stays partial
};

class MEGATRON_API RowParallelLinearImpl : public torch::nn::Cloneable<RowParallelLinearImpl>,
                                           public ShardedModule,
                                           public Fp8Module {
 public:
  RowParallelLinearImpl(int64_t input_size, int64_t output_size)
      : RowParallelLinearImpl(RowParallelLinearOptions(input_size, output_size)) {}
  explicit RowParallelLinearImpl(RowParallelLinearOptions options);
  void reset() override;
  // input [*, in/tp] (or [*, in]) -> [*, out] (or [s/tp, b, out] with sequence_parallel).
  at::Tensor forward(const at::Tensor& input);
  std::vector<std::pair<std::string, ParamInit>> param_inits() const override;

  RowParallelLinearOptions options;
  int64_t input_size_per_partition = 0;
  at::Tensor weight;  // [out, in/tp]
  at::Tensor bias;    // [out], replicated
};
TORCH_MODULE(RowParallelLinear);

// Embedding table split along the vocabulary: rank r holds rows [r·V/tp, (r+1)·V/tp).
struct MEGATRON_API VocabParallelEmbeddingOptions {
  VocabParallelEmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);  // must be divisible by the TP size (pad it)
  TORCH_ARG(int64_t, embedding_dim);
  // Reduce-scatter the result along dim 0 (input [s, b]) instead of all-reducing it.
  TORCH_ARG(bool, reduce_scatter_embeddings) = false;
  // The lookup's weight gradient is sparse (touched rows only). Only for a weight that also gets
  // a dense gradient in the same backward (a tied output layer), so that autograd sums the two
  // into a dense .grad without materialising a dense [V/tp, h] lookup gradient.
  TORCH_ARG(bool, sparse_grad) = false;
  TORCH_ARG(double, init_method_std) = 0.02;
  TORCH_ARG(bool, perform_initialization) = true;
  TORCH_ARG(GroupPtr, tp_group) = nullptr;
};

class MEGATRON_API VocabParallelEmbeddingImpl : public torch::nn::Cloneable<VocabParallelEmbeddingImpl>,
                                                public ShardedModule {
 public:
  VocabParallelEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : VocabParallelEmbeddingImpl(VocabParallelEmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit VocabParallelEmbeddingImpl(VocabParallelEmbeddingOptions options);
  void reset() override;
  // ids [*] -> [*, h]
  at::Tensor forward(const at::Tensor& input);
  std::vector<std::pair<std::string, ParamInit>> param_inits() const override;

  VocabParallelEmbeddingOptions options;
  int64_t vocab_start_index = 0, vocab_end_index = 0;
  at::Tensor weight;  // [V/tp, h]
};
TORCH_MODULE(VocabParallelEmbedding);

}  // namespace megatron::tensor_parallel
