// Domino's schedule of a transformer block over two half-batches, from the layers' parts.
#include "megatron/transformer/domino.h"

#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>

#include "hidden_dropout.h"
#include "megatron/tensor_parallel/layers.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

namespace {

// The end of an attention or MLP sub-block: residual + dropout(all-reduced partial + bias); of the
// embedding: dropout(all-reduced rows + position rows), with no residual.
at::Tensor finish(const at::Tensor& partial, const tp::PendingPtr& pending, const at::Tensor& bias,
                  const at::Tensor& residual, const TransformerConfig& c, bool train) {
  at::Tensor out = tp::wait_for_reduce(partial, pending);
  if (bias.defined()) out = out + bias;
  out = detail::hidden_dropout(out, c, train);
  return residual.defined() ? residual + out : out;
}

// A column-parallel layer's GEMM whose backward leaves its input-gradient all-reduce in `pending`.
at::Tensor column(const tp::ColumnParallelLinearImpl& layer, const at::Tensor& input, const tp::PendingPtr& pending) {
  return tp::linear_with_grad_accumulation_and_async_allreduce(
      input, layer.weight, layer.gemm_bias(), layer.options.tp_group(), layer.options.sequence_parallel(), pending);
}

// A row-parallel layer's partial product on this rank, neither reduced nor biased.
at::Tensor row_partial(const tp::RowParallelLinearImpl& layer, const at::Tensor& input) {
  TORCH_CHECK(layer.options.input_is_parallel() && !layer.options.sequence_parallel(),
              "[domino] a row-parallel layer's partial product needs input_is_parallel and no sequence parallelism");
  return at::linear(input, layer.weight);
}

// A half with nothing in flight.
DominoHalf complete_half(at::Tensor hidden) {
  return DominoHalf{std::move(hidden), nullptr, at::Tensor(), at::Tensor()};
}

}  // namespace

at::Tensor DominoHalf::resolve(const TransformerConfig& config, bool train) const {
  return pending ? finish(hidden, pending, bias, residual, config, train) : hidden;
}

void check_domino_micro_batch(int64_t size) {
  TORCH_CHECK(size % 2 == 0, "[domino] --domino splits each micro-batch in two: its size (", size, ") must be even");
}

DominoHalves split_in_halves(const at::Tensor& hidden) {
  check_domino_micro_batch(hidden.size(1));
  auto halves = hidden.chunk(2, 1);
  return {complete_half(halves[0].contiguous()), complete_half(halves[1].contiguous())};
}

DominoHalves domino_layer_forward(TransformerLayerImpl& layer, const DominoHalves& halves,
                                  const std::array<at::Tensor, 2>& attention_masks, const at::Tensor& rotary_pos_emb,
                                  tp::GradWaitChain& chain) {
  const auto& config = layer.config;
  const auto& g = config.tp_group();
  // Without tensor parallelism there is nothing to overlap: the plain sub-blocks (their GEMMs add the biases).
  const int tp_size = tp::group_size(g);
  const bool train = layer.is_training();
  auto& attention = *layer.self_attention;
  auto& mlp = *layer.mlp;
  auto pending = [] { return std::make_shared<tp::PendingReduce>(); };
  std::array<at::Tensor, 2> x, partial;
  std::array<tp::PendingPtr, 2> reduce;
  // Attention: half 1's input (its previous MLP all-reduce) is waited for only once half 0's
  // attention has been launched.
  for (int i = 0; i < 2; ++i) {
    x[i] = halves[i].resolve(config, train);
    auto grad_reduce = pending();
    at::Tensor ln = chain.wait_for_grad_reduce_in_backward(layer.input_layernorm(x[i]), grad_reduce);
    reduce[i] = pending();
    if (tp_size == 1) {
      partial[i] = attention.forward(ln, attention_masks[i], rotary_pos_emb);
      continue;
    }
    at::Tensor context =
        attention.context(column(*attention.linear_qkv, ln, grad_reduce), attention_masks[i], rotary_pos_emb);
    partial[i] =
        tp::start_reduce_from_tensor_model_parallel_region(row_partial(*attention.linear_proj, context), g, reduce[i]);
  }
  // MLP: half 0's runs while half 1's attention all-reduce is in flight, and the reverse.
  for (int i = 0; i < 2; ++i) {
    x[i] =
        finish(partial[i], reduce[i], tp_size == 1 ? at::Tensor() : attention.linear_proj->bias, x[i], config, train);
    auto grad_reduce = pending();
    at::Tensor ln = chain.wait_for_grad_reduce_in_backward(layer.pre_mlp_layernorm(x[i]), grad_reduce);
    reduce[i] = pending();
    if (tp_size == 1) {
      partial[i] = mlp.forward(ln);
      continue;
    }
    at::Tensor activated = mlp.activation(column(*mlp.linear_fc1, ln, grad_reduce));
    partial[i] =
        tp::start_reduce_from_tensor_model_parallel_region(row_partial(*mlp.linear_fc2, activated), g, reduce[i]);
  }
  DominoHalves out;
  for (int i = 0; i < 2; ++i) {
    out[i] = DominoHalf{partial[i], reduce[i], x[i], tp_size == 1 ? at::Tensor() : mlp.linear_fc2->bias};
    if (i == 0 || config.domino_intra_layer_overlap()) out[i] = complete_half(out[i].resolve(config, train));
  }
  return out;
}

at::Tensor domino_block_forward(TransformerBlockImpl& block, const DominoHalves& halves_in,
                                const at::Tensor& attention_mask, const at::Tensor& rotary_pos_emb) {
  const auto& config = block.config;
  const bool train = block.is_training();
  TORCH_CHECK(!(train && config.recompute_granularity() == RecomputeGranularity::kFull),
              "[domino] --domino does not support --recompute-granularity full");
  DominoHalves halves = halves_in;
  std::array<at::Tensor, 2> masks{attention_mask, attention_mask};
  if (attention_mask.defined() && attention_mask.size(0) > 1) {
    auto m = attention_mask.chunk(2, 0);
    masks = {m[0], m[1]};
  }
  tp::GradWaitChain chain;
  for (int64_t i = 0; i < block.num_local_layers; ++i) {
    RECORD_USER_SCOPE("decoder.layers." + std::to_string(i));
    auto layer = block.layers->ptr<TransformerLayerImpl>(i);
    // Only the wait before the forward: sharded parameters (released after it) refuse --domino.
    if (layer->param_gather) layer->param_gather->before_forward();
    halves = domino_layer_forward(*layer, halves, masks, rotary_pos_emb, chain);
  }
  at::Tensor hidden = at::cat({halves[0].resolve(config, train), halves[1].resolve(config, train)}, 1);
  return block.post_process ? block.final_layernorm(hidden) : hidden;
}

}  // namespace megatron::transformer
