// MLP, transformer layer and block.
#include "megatron/transformer/transformer_block.h"

#include <torch/nn/module.h>

#include "megatron/tensor_parallel/random.h"
#include "output_projection.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

// --- MLP -------------------------------------------------------------------------------------

MLPImpl::MLPImpl(const TransformerConfig& config_) : config(config_.finalize()) { reset(); }

void MLPImpl::reset() {
  const int64_t ffn = config.ffn_size();
  const int64_t chunks = config.gated_linear_unit() ? 2 : 1;
  linear_fc1 = register_module(
      "linear_fc1", tp::ColumnParallelLinear(tp::ColumnParallelLinearOptions(config.hidden_size(),
                                                                             ffn * chunks)
                                                 .bias(config.add_bias_linear())
                                                 .num_chunks(chunks)
                                                 .sequence_parallel(config.sequence_parallel())
                                                 .init_method_std(config.init_method_std())
                                                 .perform_initialization(config.perform_initialization())
                                                 .tp_group(config.tp_group())));
  linear_fc2 = register_module(
      "linear_fc2", tp::RowParallelLinear(detail::output_projection_options(config, ffn)));
}

namespace {
at::Tensor activate(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGelu: return at::gelu(x);
    case Activation::kGeluTanh: return at::gelu(x, "tanh");
    case Activation::kSilu: return at::silu(x);
  }
  TORCH_INTERNAL_ASSERT(false);
}
}  // namespace

at::Tensor MLPImpl::forward(const at::Tensor& hidden) {
  at::Tensor h = linear_fc1(hidden);  // [s, b, ffn/tp] or [s, b, 2 * ffn/tp] = [gate, up]
  if (config.gated_linear_unit()) {
    auto gu = h.chunk(2, -1);
    h = activate(gu[0], config.activation()) * gu[1];
  } else {
    h = activate(h, config.activation());
  }
  return linear_fc2(h);
}

// --- TransformerLayer ------------------------------------------------------------------------

TransformerLayerImpl::TransformerLayerImpl(const TransformerConfig& config_)
    : config(config_.finalize()) {
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
}  // namespace

at::Tensor TransformerLayerImpl::forward(const at::Tensor& hidden, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor attn = self_attention(input_layernorm(hidden), attention_mask, rotary_pos_emb);
  at::Tensor x = hidden + hidden_dropout(attn, config, is_training());
  at::Tensor out = mlp(pre_mlp_layernorm(x));
  return x + hidden_dropout(out, config, is_training());
}

// --- TransformerBlock ------------------------------------------------------------------------

TransformerBlockImpl::TransformerBlockImpl(const TransformerConfig& config_, bool pre_process_,
                                           bool post_process_, std::optional<int64_t> num_local)
    : config(config_.finalize()),
      pre_process(pre_process_),
      post_process(post_process_),
      num_local_layers(num_local.value_or(config.num_layers())) {
  TORCH_CHECK(num_local_layers >= 0 && num_local_layers <= config.num_layers(),
              "[transformer_block] num_local_layers (", num_local_layers, ") must be in [0, ",
              config.num_layers(), "]");
  reset();
}

void TransformerBlockImpl::reset() {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_local_layers; ++i) layers->push_back(TransformerLayer(config));
  if (post_process) final_layernorm = register_module("final_layernorm", Norm(config));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& hidden_in, const at::Tensor& attention_mask,
                                         const at::Tensor& rotary_pos_emb) {
  at::Tensor hidden = hidden_in;
  if (!pre_process) {
    TORCH_CHECK(input_tensor_.defined(), "[transformer_block] this stage has no embedding "
                "(pre_process=false): call set_input_tensor() before forward()");
    hidden = input_tensor_;
  }
  // Captures by value: a checkpointed chunk reruns in backward, after forward() has returned.
  auto run_layers = [this, attention_mask, rotary_pos_emb](at::Tensor h, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      h = layers->ptr<TransformerLayerImpl>(i)->forward(h, attention_mask, rotary_pos_emb);
    return h;
  };
  auto checkpointed = [&](const at::Tensor& h, int64_t begin, int64_t end) {
    auto outs = tensor_parallel::checkpoint(
        [run_layers, begin, end](const std::vector<at::Tensor>& in) {
          return std::vector<at::Tensor>{run_layers(in[0], begin, end)};
        },
        {h}, config.rng_tracker(), h.device());
    return outs[0];
  };
  const bool recompute = is_training() && config.recompute_granularity() == RecomputeGranularity::kFull;
  if (!recompute) {
    hidden = run_layers(hidden, 0, num_local_layers);
  } else if (config.recompute_method() == RecomputeMethod::kUniform) {
    // Checkpoint chunks of recompute_num_layers layers (Megatron's "uniform").
    for (int64_t l = 0; l < num_local_layers; l += config.recompute_num_layers())
      hidden = checkpointed(hidden, l, std::min(l + config.recompute_num_layers(), num_local_layers));
  } else {
    // Checkpoint the first recompute_num_layers layers one by one, run the rest ("block").
    for (int64_t l = 0; l < num_local_layers; ++l)
      hidden = l < config.recompute_num_layers() ? checkpointed(hidden, l, l + 1)
                                                 : run_layers(hidden, l, l + 1);
  }
  if (post_process) hidden = final_layernorm(hidden);
  return hidden;
}

}  // namespace megatron::transformer
