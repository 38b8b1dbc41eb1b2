// Domino's start on the first stage: the embedding's halves, their all-reduces in flight.
#include <torch/nn/module.h>

#include <memory>

#include "megatron/models/common/embeddings.h"
#include "megatron/tensor_parallel/domino.h"
#include "megatron/tensor_parallel/layers.h"

namespace megatron::models::common {

namespace tp = megatron::tensor_parallel;

transformer::DominoHalves domino_embedding_forward(LanguageModelEmbeddingImpl& embedding, const at::Tensor& input_ids,
                                                   const at::Tensor& position_ids) {
  transformer::check_domino_micro_batch(input_ids.size(0));
  const auto& g = embedding.config.tp_group();
  // Nothing to overlap without TP; the norm needs the reduced rows; Domino refuses sequence parallelism.
  if (tp::group_size(g) == 1 || embedding.word_embeddings_norm || embedding.config.sequence_parallel())
    return transformer::split_in_halves(embedding.forward(input_ids, position_ids));
  // [b or 1, s, h]; ids [s] are one row for every sequence, as the plain path broadcasts them.
  const at::Tensor pos = embedding.position_rows(
      input_ids, position_ids.defined() && position_ids.dim() == 1 ? position_ids.unsqueeze(0) : position_ids);
  const auto ids = input_ids.chunk(2, 0);
  transformer::DominoHalves out;
  for (int i = 0; i < 2; ++i) {
    // [s, b/2, h] before the reduce, so that the reduced rows are the layer's layout with no copy.
    const auto& words = *embedding.word_embeddings;
    at::Tensor partial = tp::vocab_parallel_lookup(words.weight, ids[i], words.vocab_start_index, words.vocab_end_index,
                                                   words.options.sparse_grad())
                             .transpose(0, 1)
                             .contiguous();
    auto pending = std::make_shared<tp::PendingReduce>();
    partial = tp::start_reduce_from_tensor_model_parallel_region(partial, g, pending);
    at::Tensor pos_half;
    if (pos.defined()) pos_half = (pos.size(0) == 1 ? pos : pos.chunk(2, 0)[i]).transpose(0, 1);
    out[i] = transformer::DominoHalf{partial, pending, at::Tensor(), pos_half};
  }
  return out;
}

}  // namespace megatron::models::common
