// One transformer layer: norm, attention, residual; norm, MLP, residual. Also Domino's schedule
// of the same layer over two half-batches.
#include "megatron/transformer/transformer_layer.h"

#include <torch/nn/module.h>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/tensor_parallel/random.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

TransformerLayerImpl::TransformerLayerImpl(const TransformerConfig& config_) : config(config_.finalize()) {
  reset();
}

void TransformerLayerImpl::reset() {
  input_layernorm = register_module("input_layernorm", Norm(config));
  self_attention = register_module("self_attention", SelfAttention(config));
  pre_mlp_layernorm = register_module("pre_mlp_layernorm", Norm(config));
  mlp = register_module("mlp", MLP(config));
}

namespace {
// Dropout of a sequence-sharded tensor differs per TP rank (tracker state); of a replicated one
// it is the same on every rank (default generator).
at::Tensor hidden_dropout(const at::Tensor& x, const TransformerConfig& c, bool train) {
  const double p = c.hidden_dropout();
  if (!train || p == 0.0) return x;
  if (c.sequence_parallel() && c.rng_tracker()) {
    at::Tensor out;
    c.rng_tracker()->fork([&] { out = tp::dropout(x, p, true); });
    return out;
  }
  return tp::dropout(x, p, true);
}

// The end of an attention or MLP sub-block: residual + dropout(all-reduced partial + bias); of the
// embedding: dropout(all-reduced rows + position rows), with no residual.
at::Tensor finish(const at::Tensor& partial, const tp::PendingPtr& pending, const at::Tensor& bias,
                  const at::Tensor& residual, const TransformerConfig& c, bool train) {
  at::Tensor out = tp::wait_for_reduce(partial, pending);
  if (bias.defined()) out = out + bias;
  out = hidden_dropout(out, c, train);
  return residual.defined() ? residual + out : out;
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
  return {DominoHalf{halves[0].contiguous()}, DominoHalf{halves[1].contiguous()}};
}

at::Tensor TransformerLayerImpl::forward(const at::Tensor& hidden, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor attn = self_attention(input_layernorm(hidden), attention_mask, rotary_pos_emb);
  auto [x, normed] = pre_mlp_layernorm->forward_add(hidden, hidden_dropout(attn, config, is_training()));
  at::Tensor out = mlp(normed);
  return x + hidden_dropout(out, config, is_training());
}

DominoHalves TransformerLayerImpl::forward_domino(const DominoHalves& halves,
                                                  const std::array<at::Tensor, 2>& attention_masks,
                                                  const at::Tensor& rotary_pos_emb, tp::GradWaitChain& chain) {
  const auto& g = config.tp_group();
  // Without tensor parallelism there is nothing to overlap: the plain sub-blocks (their GEMMs add the biases).
  const int tp_size = tp::group_size(g);
  const bool train = is_training();
  auto pending = [] { return std::make_shared<tp::PendingReduce>(); };
  std::array<at::Tensor, 2> x, partial;
  std::array<tp::PendingPtr, 2> reduce;
  // Attention: half 1's input (its previous MLP all-reduce) is waited for only once half 0's
  // attention has been launched.
  for (int i = 0; i < 2; ++i) {
    x[i] = halves[i].resolve(config, train);
    auto grad_reduce = pending();
    at::Tensor ln = chain.wait_for_grad_reduce_in_backward(input_layernorm(x[i]), grad_reduce);
    reduce[i] = pending();
    partial[i] =
        tp_size == 1
            ? self_attention(ln, attention_masks[i], rotary_pos_emb)
            : tp::start_reduce_from_tensor_model_parallel_region(
                  self_attention->forward_partial(ln, attention_masks[i], rotary_pos_emb, grad_reduce), g, reduce[i]);
  }
  // MLP: half 0's runs while half 1's attention all-reduce is in flight, and the reverse.
  for (int i = 0; i < 2; ++i) {
    x[i] = finish(partial[i], reduce[i], tp_size == 1 ? at::Tensor() : self_attention->linear_proj->bias, x[i], config,
                  train);
    auto grad_reduce = pending();
    at::Tensor ln = chain.wait_for_grad_reduce_in_backward(pre_mlp_layernorm(x[i]), grad_reduce);
    reduce[i] = pending();
    partial[i] = tp_size == 1 ? mlp(ln)
                              : tp::start_reduce_from_tensor_model_parallel_region(
                                    mlp->forward_partial(ln, grad_reduce), g, reduce[i]);
  }
  DominoHalves out;
  for (int i = 0; i < 2; ++i) {
    out[i] = DominoHalf{partial[i], reduce[i], x[i], tp_size == 1 ? at::Tensor() : mlp->linear_fc2->bias};
    if (i == 0 || config.domino_intra_layer_overlap()) out[i] = DominoHalf{out[i].resolve(config, train)};
  }
  return out;
}

}  // namespace megatron::transformer
