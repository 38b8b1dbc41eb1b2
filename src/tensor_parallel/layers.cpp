#include "megatron/tensor_parallel/layers.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>

#include "autograd_group.h"

namespace megatron::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t divide(int64_t n, int64_t d, const char* what, const char* who) {
  TORCH_CHECK(d > 0 && n % d == 0, "[", who, "] ", what, " (", n, ") must be divisible by the tensor-parallel size (",
              d, ")");
  return n / d;
}

thread_local bool deferred_init = false;

// New parameters start as zeros; the model's initialisation pass (or the caller) fills them.
// Without memory under DeferredParameterInit.
at::Tensor empty_param(at::IntArrayRef shape) {
  return deferred_init ? DeferredParameterInit::without_memory(shape, at::kFloat) : at::zeros(shape, at::kFloat);
}

// Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication (layers.h says what it does). The
// GEMMs are the ones autograd runs for at::linear, so results are bit-identical to
// copy_to_tensor_model_parallel_region (or the sequence gather) + at::linear.
struct LinearWithGradAccumulationAndAsyncCommunication
    : torch::autograd::Function<LinearWithGradAccumulationAndAsyncCommunication> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, GroupPtr g, bool sequence_parallel, PendingPtr grad_pending) {
    at::Tensor total = sequence_parallel ? all_gather_along_dim(input, g, 0) : input;
    detail::save_group(ctx, g);
    if (grad_pending) detail::save_pending(ctx, grad_pending);
    ctx->saved_data["sequence_parallel"] = sequence_parallel;
    const bool has_bias = bias.numel() > 0;
    ctx->saved_data["has_bias"] = has_bias;
    ctx->save_for_backward({input, weight});
    return at::linear(total, weight, has_bias ? bias : at::Tensor());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const GroupPtr g = detail::load_group(ctx);
    const bool sequence_parallel = ctx->saved_data["sequence_parallel"].toBool();
    const at::Tensor grad = grads[0].contiguous();
    const int64_t out_features = grad.size(-1), in_features = weight.size(1);

    at::Tensor total = input;
    comm::WorkHandle gather;
    if (sequence_parallel) {
      auto sizes = input.sizes().vec();
      sizes[0] *= group_size(g);
      total = at::empty(sizes, input.options());
      gather = g->all_gather_async(total, input.contiguous());
    }
    const at::Tensor grad_2d = grad.view({-1, out_features});
    auto grad_input_sizes = grad.sizes().vec();
    grad_input_sizes.back() = in_features;
    at::Tensor grad_input = grad_2d.mm(weight).view(grad_input_sizes);  // [s, b, in]
    if (gather) gather->wait();

    at::Tensor grad_input_shard;
    comm::WorkHandle reduce;
    if (sequence_parallel) {
      grad_input_shard = at::empty(input.sizes(), grad_input.options());
      reduce = g->reduce_scatter_async(grad_input_shard, grad_input);
    } else {
      reduce = g->all_reduce_async(grad_input);
    }
    // Under the collective: the weight and bias gradients.
    at::Tensor grad_weight = grad_2d.t().mm(total.reshape({-1, in_features}));
    at::Tensor grad_bias = ctx->saved_data["has_bias"].toBool() ? grad_2d.sum(0) : at::Tensor();
    if (ctx->saved_data.count("pending")) {
      detail::load_pending(ctx)->work = reduce;  // Domino: waited by the LayerNorm backward's guard
    } else {
      reduce->wait();
    }
    return {sequence_parallel ? grad_input_shard : grad_input,
            grad_weight,
            grad_bias,
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor linear_with_grad_accumulation_and_async_allreduce(const at::Tensor& input, const at::Tensor& weight,
                                                             const at::Tensor& bias, const GroupPtr& group,
                                                             bool sequence_parallel, const PendingPtr& grad_pending) {
  // A custom autograd function cannot take an undefined tensor: no bias travels as an empty one.
  return LinearWithGradAccumulationAndAsyncCommunication::apply(
      input, weight, bias.defined() ? bias : at::empty({0}, weight.options()), group, sequence_parallel, grad_pending);
}

at::Tensor vocab_parallel_lookup(const at::Tensor& weight, const at::Tensor& input, int64_t start, int64_t end,
                                 bool sparse_grad) {
  at::Tensor mask = (input < start).logical_or_(input >= end);
  at::Tensor local_ids = (input - start).masked_fill_(mask, 0);
  return at::embedding(weight, local_ids, -1, false, sparse_grad).masked_fill(mask.unsqueeze(-1), 0.0);
}

DeferredParameterInit::DeferredParameterInit() : previous_(deferred_init) {
  deferred_init = true;
}

DeferredParameterInit::~DeferredParameterInit() {
  deferred_init = previous_;
}

bool DeferredParameterInit::active() {
  return deferred_init;
}

at::Tensor DeferredParameterInit::without_memory(at::IntArrayRef shape, const at::TensorOptions& options) {
  at::Tensor t = at::empty({0}, options);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);  // sizes only: the storage stays empty
  return t;
}

// --- ColumnParallelLinear --------------------------------------------------------------------

ColumnParallelLinearImpl::ColumnParallelLinearImpl(ColumnParallelLinearOptions options_)
    : options(std::move(options_)) {
  reset();
}

void ColumnParallelLinearImpl::reset() {
  const int tp = group_size(options.tp_group());
  TORCH_CHECK(options.input_size() >= 1 && options.output_size() >= 1 && options.num_chunks() >= 1,
              "[ColumnParallelLinear] input_size (", options.input_size(), "), output_size (", options.output_size(),
              ") and num_chunks (", options.num_chunks(), ") must be >= 1");
  TORCH_CHECK(options.output_size() % (tp * options.num_chunks()) == 0,
              "[ColumnParallelLinear] "
              "output_size (",
              options.output_size(), ") must be divisible by num_chunks (", options.num_chunks(),
              ") x the tensor-parallel size (", tp, ")");
  output_size_per_partition = options.output_size() / tp;
  weight = at::Tensor();
  bias = at::Tensor();
  if (!options.skip_weight_param_allocation()) {
    weight = register_parameter("weight", empty_param({output_size_per_partition, options.input_size()}));
    if (options.perform_initialization()) init_sharded_param_from_default_generator(weight, param_inits()[0].second);
  }
  if (options.bias()) bias = register_parameter("bias", empty_param({output_size_per_partition}));
  fp8_meta = options.fp8() ? std::make_shared<Fp8Meta>(*options.fp8()) : nullptr;
}

std::vector<std::pair<std::string, ParamInit>> ColumnParallelLinearImpl::param_inits() const {
  ShardLayout layout{0, options.num_chunks(), group_rank(options.tp_group()), group_size(options.tp_group())};
  std::vector<std::pair<std::string, ParamInit>> out;
  if (!options.skip_weight_param_allocation())
    out.push_back({"weight", ParamInit{ParamInit::kNormal, options.init_method_std(), layout}});
  if (options.bias()) out.push_back({"bias", ParamInit{ParamInit::kZeros, 0.0, layout}});
  return out;
}

at::Tensor ColumnParallelLinearImpl::forward(const at::Tensor& input, const at::Tensor& weight_arg) {
  const at::Tensor& w = weight_arg.defined() ? weight_arg : weight;
  TORCH_CHECK(w.defined(),
              "[ColumnParallelLinear] no weight: pass one to forward() when "
              "skip_weight_param_allocation is set");
  TORCH_CHECK(w.size(0) == output_size_per_partition && w.size(1) == options.input_size(),
              "[ColumnParallelLinear] weight must be [", output_size_per_partition, ", ", options.input_size(),
              "], got ", w.sizes());
  const auto& g = options.tp_group();
  if (options.is_expert())
    return fp8_meta ? fp8_linear(input, w, gemm_bias(), fp8_meta) : at::linear(input, w, gemm_bias());
  if (fp8_meta) {
    // The collectives of linear_with_grad_accumulation_and_async_allreduce, unfused.
    const at::Tensor x = options.sequence_parallel() ? gather_from_sequence_parallel_region(input, g)
                                                     : copy_to_tensor_model_parallel_region(input, g);
    at::Tensor out = fp8_linear(x, w, gemm_bias(), fp8_meta);
    return options.gather_output() ? gather_from_tensor_model_parallel_region(out, g) : out;
  }
  at::Tensor out = group_size(g) == 1 ? at::linear(input, w, gemm_bias())
                                      : linear_with_grad_accumulation_and_async_allreduce(input, w, gemm_bias(), g,
                                                                                          options.sequence_parallel());
  if (options.gather_output()) out = gather_from_tensor_model_parallel_region(out, g);
  return out;
}

// --- RowParallelLinear -----------------------------------------------------------------------

RowParallelLinearImpl::RowParallelLinearImpl(RowParallelLinearOptions options_) : options(std::move(options_)) {
  reset();
}

void RowParallelLinearImpl::reset() {
  TORCH_CHECK(!options.sequence_parallel() || options.input_is_parallel(),
              "[RowParallelLinear] sequence_parallel needs input_is_parallel");
  input_size_per_partition =
      divide(options.input_size(), group_size(options.tp_group()), "input_size", "RowParallelLinear");
  weight = register_parameter("weight", empty_param({options.output_size(), input_size_per_partition}));
  if (options.perform_initialization()) init_sharded_param_from_default_generator(weight, param_inits()[0].second);
  bias = options.bias() ? register_parameter("bias", empty_param({options.output_size()})) : at::Tensor();
  fp8_meta = options.fp8() ? std::make_shared<Fp8Meta>(*options.fp8()) : nullptr;
}

std::vector<std::pair<std::string, ParamInit>> RowParallelLinearImpl::param_inits() const {
  ShardLayout layout{1, 1, group_rank(options.tp_group()), group_size(options.tp_group())};
  std::vector<std::pair<std::string, ParamInit>> out{
      {"weight", ParamInit{ParamInit::kNormal, options.init_method_std(), layout}}};
  if (options.bias()) out.push_back({"bias", ParamInit{ParamInit::kZeros, 0.0, ShardLayout{}}});
  return out;
}

at::Tensor RowParallelLinearImpl::forward(const at::Tensor& input) {
  const auto& g = options.tp_group();
  at::Tensor x = options.input_is_parallel() ? input : scatter_to_tensor_model_parallel_region(input, g);
  auto gemm = [this](const at::Tensor& in, const at::Tensor& b) {
    return fp8_meta ? fp8_linear(in, weight, b, fp8_meta) : at::linear(in, weight, b);
  };
  // Without TP (or for an expert, whose dispatcher sums the partial outputs) nothing is reduced
  // here: the GEMM adds the bias.
  if (group_size(g) == 1 || options.is_expert()) return gemm(x, bias);
  at::Tensor partial = gemm(x, at::Tensor());
  at::Tensor out = options.sequence_parallel() ? reduce_scatter_to_sequence_parallel_region(partial, g)
                                               : reduce_from_tensor_model_parallel_region(partial, g);
  return bias.defined() ? out + bias : out;
}

// --- VocabParallelEmbedding ------------------------------------------------------------------

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(VocabParallelEmbeddingOptions options_)
    : options(std::move(options_)) {
  reset();
}

void VocabParallelEmbeddingImpl::reset() {
  const int64_t per =
      divide(options.num_embeddings(), group_size(options.tp_group()), "num_embeddings", "VocabParallelEmbedding");
  vocab_start_index = per * group_rank(options.tp_group());
  vocab_end_index = vocab_start_index + per;
  weight = register_parameter("weight", empty_param({per, options.embedding_dim()}));
  if (options.perform_initialization()) init_sharded_param_from_default_generator(weight, param_inits()[0].second);
}

std::vector<std::pair<std::string, ParamInit>> VocabParallelEmbeddingImpl::param_inits() const {
  ShardLayout layout{0, 1, group_rank(options.tp_group()), group_size(options.tp_group())};
  return {{"weight", ParamInit{ParamInit::kNormal, options.init_method_std(), layout}}};
}

at::Tensor VocabParallelEmbeddingImpl::forward(const at::Tensor& input) {
  const auto& g = options.tp_group();
  at::Tensor out = group_size(g) == 1 ? at::embedding(weight, input, -1, false, options.sparse_grad())
                                      : vocab_parallel_lookup(weight, input, vocab_start_index, vocab_end_index,
                                                              options.sparse_grad());
  return options.reduce_scatter_embeddings() ? reduce_scatter_to_sequence_parallel_region(out, g)
                                             : reduce_from_tensor_model_parallel_region(out, g);
}

}  // namespace megatron::tensor_parallel
