// Domino (DeepSpeed-Domino) beside the layers: each micro-batch runs as two halves along the
// batch, and each half's tensor-parallel all-reduces are launched as soon as their partial sums
// exist and waited only where the result is needed, so that they run under the other half's
// compute. The schedule is composed from the layers' own parts (their norms, the attention
// context, the MLP activation, and the weights of the tensor-parallel linears, whose GEMMs it runs
// with its own reduces), so that no layer's forward knows about it.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <array>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/transformer/domino_half.h"
#include "megatron/transformer/transformer_block.h"
#include "megatron/transformer/transformer_layer.h"

namespace megatron::transformer {

// One layer over the two halves (attention_masks: each half's, or undefined): in backward, the
// column-parallel layers' input-gradient all-reduces are waited just before the norm's backward,
// in `chain`'s order (one chain per forward pass of the block). Half 1 comes back pending unless
// domino_intra_layer_overlap.
MEGATRON_API DominoHalves domino_layer_forward(TransformerLayerImpl& layer, const DominoHalves& halves,
                                               const std::array<at::Tensor, 2>& attention_masks,
                                               const at::Tensor& rotary_pos_emb, tensor_parallel::GradWaitChain& chain);

// A block's layers over the halves (the embedding's, all-reduces possibly in flight, or
// split_in_halves of the stage's input), rejoined; the final norm on the last stage.
MEGATRON_API at::Tensor domino_block_forward(TransformerBlockImpl& block, const DominoHalves& halves,
                                             const at::Tensor& attention_mask, const at::Tensor& rotary_pos_emb);

}  // namespace megatron::transformer
