// Self-attention (Megatron's SelfAttention): a fused column-parallel QKV projection, causal
// scaled-dot-product attention over this rank's heads, and a row-parallel output projection.
// linear_qkv's full weight is Megatron's grouped layout: for each query group g, the rows of its
// np/ng query heads, then its key head, then its value head; TP ranks hold whole groups.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "megatron/tensor_parallel/layers.h"
#include "megatron/transformer/norm.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

// t [s, b, n, d]; freqs [s, 1, 1, rot_dim] (rot_dim <= d). Rotates the first rot_dim channels
// (rotate-half convention, as Megatron-core and Llama; channel pairs (2i, 2i+1) when interleaved),
// passes the rest through.
MEGATRON_API at::Tensor apply_rotary_pos_emb(const at::Tensor& t, const at::Tensor& freqs, bool interleaved = false);

class MEGATRON_API SelfAttentionImpl : public torch::nn::Cloneable<SelfAttentionImpl> {
 public:
  // layer_number: the layer's 0-based index in the whole model (its cp_comm_type).
  explicit SelfAttentionImpl(const TransformerConfig& config, int64_t layer_number = 0);
  void reset() override;
  // hidden [s, b, h] ([s/tp, b, h] with sequence parallelism) -> same shape.
  // attention_mask: undefined (causal) or bool [b or 1, 1, s, s] with true = masked out. With
  // context parallelism s is this rank's two chunks and only the causal mask is allowed.
  // rotary_pos_emb: undefined or freqs [s, 1, 1, rot_dim].
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& attention_mask = {},
                     const at::Tensor& rotary_pos_emb = {});
  // q [s, b, np, hn], k/v [s, b, ng, hn] -> context [s, b, np * hn] (this rank's heads).
  at::Tensor core_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& attention_mask);

  // Between linear_qkv and linear_proj: from linear_qkv's output [s, b, ng * (np/ng + 2) * hn] the
  // context [s, b, np * hn] of this rank's heads (the q/k norms, RoPE, core attention, selective
  // recompute).
  at::Tensor context(const at::Tensor& mixed_qkv, const at::Tensor& attention_mask, const at::Tensor& rotary_pos_emb);

  TransformerConfig config;
  CPCommType cp_comm_type = CPCommType::kP2P;  // this layer's (context parallelism)
  int64_t heads_per_partition = 0, groups_per_partition = 0;
  tensor_parallel::ColumnParallelLinear linear_qkv{nullptr};
  tensor_parallel::RowParallelLinear linear_proj{nullptr};
  // With TransformerConfig::qk_layernorm: each head's query and key normalised over its
  // kv_channels before RoPE (one weight shared by the heads; its gradient is summed over TP), or
  // with qk_layernorm_across_heads all the queries over heads x kv_channels and the keys over
  // query groups x kv_channels (weights of that width, split over TP with the heads).
  Norm q_layernorm{nullptr}, k_layernorm{nullptr};
};
TORCH_MODULE(SelfAttention);

}  // namespace megatron::transformer
