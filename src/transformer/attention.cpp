// Rotary embedding and self-attention.
#include "megatron/transformer/attention.h"

#include <torch/nn/module.h>

#include <cmath>

#include "megatron/tensor_parallel/mappings.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/transformer/norm.h"
#include "output_projection.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

at::Tensor apply_rotary_pos_emb(const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
  const int64_t rot_dim = freqs.size(-1);
  const int64_t d = t.size(-1);
  TORCH_CHECK(rot_dim <= d && rot_dim % 2 == 0, "[rotary] rotary dim (", rot_dim,
              ") must be even and at most the head dim (", d, ")");
  // Angles reach ~seq_len radians: cos/sin in fp32 first, as bf16 angles would be off by radians.
  at::Tensor f = freqs.to(at::kFloat);
  at::Tensor cos = f.cos().to(t.scalar_type()), sin = f.sin().to(t.scalar_type());
  at::Tensor rot = rot_dim == d ? t : t.narrow(-1, 0, rot_dim);
  at::Tensor rotated;
  if (interleaved) {  // pairs (2i, 2i+1) -> (-x_{2i+1}, x_{2i})
    const auto even = rot.slice(-1, 0, rot_dim, 2), odd = rot.slice(-1, 1, rot_dim, 2);
    rotated = at::stack({-odd, even}, -1).flatten(-2);
  } else {
    auto halves = rot.chunk(2, -1);
    rotated = at::cat({-halves[1], halves[0]}, -1);
  }
  at::Tensor out = rot * cos + rotated * sin;
  if (rot_dim == d) return out;
  return at::cat({out, t.narrow(-1, rot_dim, d - rot_dim)}, -1);
}

namespace {

// RMSNorm over the last dim of x [s, b, w] whose width is split over the TP ranks (each holds its
// heads' part, and the norm's weight for it): the sum of squares is summed over the ranks (its
// gradient too, as each rank's output depends on every rank's inputs through it).
at::Tensor across_heads_rms_norm(const at::Tensor& x, const NormImpl& norm, const tp::GroupPtr& group) {
  TORCH_CHECK(norm.normalization == Normalization::kRMSNorm,
              "[attention] query and key norms across heads are RMSNorms (--normalization RMSNorm)");
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor squares = xf.square().sum(-1, /*keepdim=*/true);
  squares =
      tp::copy_to_tensor_model_parallel_region(tp::reduce_from_tensor_model_parallel_region(squares, group), group);
  const int64_t width = x.size(-1) * norm.layout.size;
  const at::Tensor gamma = norm.zero_centered_gamma ? norm.weight + 1 : norm.weight;
  return (xf * at::rsqrt(squares / static_cast<double>(width) + norm.eps)).to(x.scalar_type()) *
         gamma.to(x.scalar_type());
}

}  // namespace

// --- SelfAttention ---------------------------------------------------------------------------

SelfAttentionImpl::SelfAttentionImpl(const TransformerConfig& config_, int64_t layer_number_)
    : config(config_.finalize()), cp_comm_type(config.cp_comm_type_of(layer_number_)) {
  reset();
}

void SelfAttentionImpl::reset() {
  const int64_t tp_size = config.tensor_model_parallel_size();
  heads_per_partition = config.num_attention_heads() / tp_size;
  groups_per_partition = config.query_groups() / tp_size;
  const int64_t hn = config.head_dim();
  const int64_t qkv_size = (config.num_attention_heads() + 2 * config.query_groups()) * hn;
  linear_qkv = register_module("linear_qkv",
                               tp::ColumnParallelLinear(tp::ColumnParallelLinearOptions(config.hidden_size(), qkv_size)
                                                            .bias(config.qkv_bias())
                                                            .sequence_parallel(config.sequence_parallel())
                                                            .init_method_std(config.init_method_std())
                                                            .perform_initialization(config.perform_initialization())
                                                            .tp_group(config.tp_group())
                                                            .fp8(config.fp8())));
  linear_proj = register_module("linear_proj", tp::RowParallelLinear(detail::output_projection_options(
                                                   config, config.num_attention_heads() * hn)));
  if (config.qk_layernorm() && config.qk_layernorm_across_heads()) {
    // This rank's heads' part of each norm's weight (the heads' order: a column-parallel split).
    const tp::ShardLayout split{0, 1, tp::group_rank(config.tp_group()), static_cast<int>(tp_size)};
    q_layernorm = register_module("q_layernorm", Norm(config, heads_per_partition * hn, split));
    k_layernorm = register_module("k_layernorm", Norm(config, groups_per_partition * hn, split));
  } else if (config.qk_layernorm()) {
    q_layernorm = register_module("q_layernorm", Norm(config, hn));
    k_layernorm = register_module("k_layernorm", Norm(config, hn));
  }
}

at::Tensor SelfAttentionImpl::core_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& attention_mask) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), hn = q.size(3);
  const int64_t ng = k.size(2);
  // [s, b, n, hn] -> [b, n, s, hn]
  at::Tensor query = q.permute({1, 2, 0, 3});
  at::Tensor key = k.permute({1, 2, 0, 3});
  at::Tensor value = v.permute({1, 2, 0, 3});
  if (config.context_parallel_size() > 1) {
    TORCH_CHECK(!attention_mask.defined(),
                "[attention] context parallelism supports the causal mask only (no --reset-attention-mask, no ALiBi)");
    at::Tensor context =
        context_parallel_attention(query, key, value, cp_comm_type, config.cp_group(), config.hierarchical_cp_groups());
    return context.permute({2, 0, 1, 3}).reshape({s, b, np * hn});
  }
  if (ng != np) {  // each key/value head serves np/ng consecutive query heads
    key = key.repeat_interleave(np / ng, 1);
    value = value.repeat_interleave(np / ng, 1);
  }
  const double p = is_training() ? config.attention_dropout() : 0.0;
  // A bool mask marks what is masked out (SDPA's marks what is kept); a floating one is an
  // additive bias that already holds the causal -inf (ALiBi).
  std::optional<at::Tensor> mask;
  if (attention_mask.defined())
    mask = attention_mask.is_floating_point() ? attention_mask.to(query.scalar_type()) : attention_mask.logical_not();
  const bool causal = !attention_mask.defined();
  at::Tensor context;
  auto run = [&] { context = at::scaled_dot_product_attention(query, key, value, mask, p, causal); };
  // Heads are split across TP ranks, so their dropout masks must differ between ranks.
  if (p > 0.0 && config.rng_tracker())
    config.rng_tracker()->fork(run);
  else
    run();
  // [b, np, s, hn] -> [s, b, np * hn]
  return context.permute({2, 0, 1, 3}).reshape({s, b, np * hn});
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& hidden, const at::Tensor& attention_mask,
                                      const at::Tensor& rotary_pos_emb) {
  return linear_proj(context(linear_qkv(hidden), attention_mask, rotary_pos_emb));
}

at::Tensor SelfAttentionImpl::context(const at::Tensor& mixed_qkv, const at::Tensor& attention_mask,
                                      const at::Tensor& rotary_pos_emb) {
  const int64_t hn = config.head_dim();
  const int64_t per_group = heads_per_partition / groups_per_partition;
  // [s, b, ng * (np/ng + 2) * hn] -> [s, b, ng, (np/ng + 2) * hn]
  at::Tensor mixed = mixed_qkv;
  const int64_t s = mixed.size(0), b = mixed.size(1);
  mixed = mixed.view({s, b, groups_per_partition, (per_group + 2) * hn});
  auto parts = mixed.split_with_sizes({per_group * hn, hn, hn}, -1);
  at::Tensor q = parts[0].reshape({s, b, heads_per_partition, hn});
  at::Tensor k = parts[1];
  at::Tensor v = parts[2];
  if (q_layernorm && config.qk_layernorm_across_heads()) {
    q = across_heads_rms_norm(q.reshape({s, b, -1}), *q_layernorm, config.tp_group()).view(q.sizes());
    k = across_heads_rms_norm(k.reshape({s, b, -1}), *k_layernorm, config.tp_group()).view(k.sizes());
  } else if (q_layernorm) {  // Megatron-Core's order: the norms, then RoPE
    q = q_layernorm(q);
    k = k_layernorm(k);
  }
  if (rotary_pos_emb.defined()) {
    q = apply_rotary_pos_emb(q, rotary_pos_emb, config.rotary_interleaved());
    k = apply_rotary_pos_emb(k, rotary_pos_emb, config.rotary_interleaved());
  }
  at::Tensor context;
  if (config.recomputes("core_attn") && is_training()) {
    auto outs = tp::checkpoint(
        [this](const std::vector<at::Tensor>& in) {
          return std::vector<at::Tensor>{core_attention(in[0], in[1], in[2], in[3])};
        },
        {q, k, v, attention_mask}, config.rng_tracker(), q.device());
    context = outs[0];
  } else {
    context = core_attention(q, k, v, attention_mask);
  }
  return context;
}

}  // namespace megatron::transformer
